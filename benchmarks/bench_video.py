"""VideoDataset clips/s against a plain PyAV loop decoding the same clips.

Baseline: a plain PyAV loop over the same clips (threaded decode from the keyframe, cv2 square, 16 kHz audio, wav2vec2).
Prints clips/s and frames/s for both and their ratio (goal ≥ 0.9). For scale: torchcodec publishes its CPU
decoding figures as a chart in its README (benchmarks/decoders/benchmark_readme_chart.png: libx264 1280×720
60 fps and 960×540 30 fps, on a 22-core machine); they are not restated here, compare the order of magnitude.
Run: .venv/bin/python benchmarks/bench_video.py
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

FRAMES, SIZE, RATE, PADDING, BATCH, STEPS, VIDEOS = 16, 128, 25, 3, 8, 6, 6


def synthesize(directory: str) -> None:
    """Six 8 s 320×240 h264 videos at 25 fps with a keyframe every 2 s (a common encoder default), textured
    and moving so the decoder has real work, with a 44.1 kHz AAC tone."""
    import av

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    for i in range(VIDEOS):
        with av.open(f"{directory}/v{i}.mp4", "w") as container:
            video = container.add_stream("libx264", rate=RATE, options={"g": "50"})
            video.width, video.height, video.pix_fmt = 320, 240, "yuv420p"
            audio = container.add_stream("aac", rate=44100, layout="mono")
            for n in range(8 * RATE):
                pixels = np.ascontiguousarray(texture[n % 240 : n % 240 + 240, (3 * n) % 320 : (3 * n) % 320 + 320])
                for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                    container.mux(packet)
            for packet in video.encode():
                container.mux(packet)
            wave = (0.3 * np.sin(2 * np.pi * 440 * np.arange(8 * 44100) / 44100)).astype(np.float32)
            for first in range(0, len(wave), 1024):
                piece = av.AudioFrame.from_ndarray(wave[None, first : first + 1024], format="flt", layout="mono")
                piece.sample_rate, piece.pts = 44100, first
                for packet in audio.encode(piece):
                    container.mux(packet)
            for packet in audio.encode():
                container.mux(packet)


def dew_rate(spec) -> float:
    from dew.data import DataPartition

    stream = spec.load(batch=BATCH).train(DataPartition())
    try:
        next(stream)  # warm: the extractor loads, the readers start
        start = time.perf_counter()
        for _ in range(STEPS):
            next(stream)
        return STEPS * BATCH / (time.perf_counter() - start)
    finally:
        stream.close()


def clips_read(spec) -> list[tuple[str, int]]:
    """(path, clip start index) of the clips the dew stream reads in steps 1..STEPS: the same clips."""
    from dew.data.order import ShuffledEpochs, record_rng
    from dew.data.video.clips import VideoRecords
    from dew.data.video.decode import ClipShape, Video

    records = VideoRecords(spec.source())
    order = ShuffledEpochs(records, spec.seed)
    shape = ClipShape(frames=FRAMES, frame_size=SIZE, frame_rate=RATE, audio_rate=16000, audio_padding=PADDING)
    out = []
    for k in range(BATCH, BATCH * (STEPS + 1)):
        path = records.records[int(order.indices(np.array([k]))[0])]["video_path"]
        with Video(path) as video:
            out.append((path, int(record_rng(spec.seed, k).integers(video.starts(shape)))))
    return out


def plain_rate(clips: list[tuple[str, int]], extractor) -> float:
    import av
    import cv2

    seconds = (FRAMES + 2 * PADDING) / RATE
    samples = round(seconds * 16000)

    def square(pixels: np.ndarray) -> np.ndarray:
        height, width = pixels.shape[:2]
        scale = SIZE / min(height, width)
        scaled = cv2.resize(pixels, (max(SIZE, round(width * scale)), max(SIZE, round(height * scale))),
                            interpolation=cv2.INTER_AREA)  # fmt: skip
        top, left = (scaled.shape[0] - SIZE) // 2, (scaled.shape[1] - SIZE) // 2
        return scaled[top : top + SIZE, left : left + SIZE]

    def clip(path: str, index: int) -> tuple[np.ndarray, np.ndarray]:
        with av.open(path) as container:
            video, audio = container.streams.video[0], container.streams.audio[0]
            video.thread_type = "AUTO"
            first = index  # the file is at the clip rate: clip frame i is source frame index + i
            container.seek(int(first / RATE / video.time_base), stream=video)
            frames = []
            for frame in container.decode(video):
                at = round(frame.time * RATE)
                if at >= first:
                    frames.append(square(frame.to_ndarray(format="rgb24")))
                if len(frames) == FRAMES:
                    break
            begin = first / RATE - PADDING / RATE
            container.seek(max(0, int(begin / audio.time_base)), stream=audio)
            resampler = av.AudioResampler(format="flt", layout="mono", rate=16000)
            wave = np.zeros(samples, dtype=np.float32)
            at = None
            for frame in container.decode(audio):
                at = round((frame.time - begin) * 16000) if at is None else at
                for piece in resampler.resample(frame):
                    data = piece.to_ndarray().reshape(-1)
                    lo, hi = max(at, 0), min(at + len(data), samples)
                    if lo < hi:
                        wave[lo:hi] = data[lo - at : hi - at]
                    at += len(data)
                if at >= samples:
                    break
        return np.stack(frames), wave

    start = time.perf_counter()
    for first in range(0, len(clips), BATCH):
        decoded = [clip(path, index) for path, index in clips[first : first + BATCH]]
        np.stack([f for f, _ in decoded])
        extractor([w for _, w in decoded], sampling_rate=16000, return_tensors="np")
    return len(clips) / (time.perf_counter() - start)


def main() -> None:
    import transformers

    from dew.data import Loading, LocalVideos

    with tempfile.TemporaryDirectory() as directory:
        synthesize(directory)
        model = f"{directory}/wav2vec2"
        extractor = transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000)
        extractor.save_pretrained(model)
        spec = LocalVideos(path=directory, frames=FRAMES, frame_size=SIZE, audio_padding=PADDING, audio_model=model,
                           val_batches=0, loading=Loading(workers=0, threads=1, read_buffer=BATCH))  # fmt: skip
        clips = clips_read(spec)
        plain = plain_rate(clips, extractor)
        dew = dew_rate(spec)
    print(f"baseline: plain PyAV loop, same {len(clips)} clips: {plain:.1f} clips/s, {plain * FRAMES:.0f} frames/s")
    print(f"VideoDataset (LocalVideos, one reader thread): {dew:.1f} clips/s, {dew * FRAMES:.0f} frames/s")
    print(f"ratio VideoDataset / plain: {dew / plain:.2f}  (goal >= 0.9)")
    print(
        "for scale: torchcodec publishes its CPU figures as a chart in its README (libx264 720p60 and 540p30, 22 cores)"
    )


if __name__ == "__main__":
    main()
