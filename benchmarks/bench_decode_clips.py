"""The decode-clips job's frames/s against a plain PyAV loop on the same 2 cores, and its shards read back
against decoding the same clips.

The baselines are stated in one line each in BASELINES below and printed first.

Both sides of the first ratio cut the same clips (16 frames of 64 × 64 at 25 fps, back to back, with
16 kHz mono audio) from the same h264 + AAC videos made here. The job also packs, shards, writes
ArrayRecord and commits; the plain loop writes nothing. Two job ratios, as in bench_images_job:
- steady state (the goal, >= 0.7): the job's wall clock less its start-up, measured as the same job over
  one video, run twice before it (the faster counts: on a shared machine start-up varies by seconds,
  and only ever upward), so all runs find the same warm file cache;
- wall clock: everything a user waits for, Beam's fixed start-up included.
The second ratio (the goal, >= 10): ClipShards batches of 16 clips read in one process, against
dew.data.video.decode cutting the same clips in one process. The machine is shared, so the plain loop
is timed before and after the job.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import time
from typing import Any

BASELINES = (
    "baseline 1: multiprocessing.Pool(2) of a plain PyAV loop: open each video, decode every frame (frame "
    "threading on), keep the one on screen at each clip time, resize it square (cv2 INTER_AREA), resample the "
    "audio to 16 kHz mono; nothing written",
    "baseline 2: one process cutting the same clips with dew.data.video.decode (a keyframe seek per clip)",
)
VIDEOS = 576  # enough work that Beam's start-up, subtracted, is a small part of the job's time
VIDEO_FRAMES = 60  # 2.4 s: the test videos' colour code runs out at 64 frames
SIZE = 64
FRAMES = 16
RATE = 25
AUDIO = 16000
TWO = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
CLIP = ("--frames", str(FRAMES), "--frame_size", str(SIZE), "--frame_rate", str(RATE), "--audio_rate", str(AUDIO))


def write_videos(root: str) -> list[str]:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tests.runtime.video_support import write_video

    os.makedirs(root)
    return [
        write_video(os.path.join(root, f"{i:03d}.mp4"), frames=VIDEO_FRAMES, size=(160, 120)) for i in range(VIDEOS)
    ]


def plain_clips(path: str) -> int:
    """Every back-to-back clip of one video the plain way: decode from the head, keep the grid's frames."""
    import av
    import cv2
    import numpy as np

    kept = 0
    with av.open(path) as container:
        video = container.streams.video[0]
        video.thread_type = "AUTO"
        step, next_time = 1 / RATE, 0.0
        for frame in container.decode(video):
            while frame.time is not None and frame.time + 1e-6 >= next_time:
                rgb = frame.to_ndarray(format="rgb24")
                side = min(rgb.shape[:2])
                top, left = (rgb.shape[0] - side) // 2, (rgb.shape[1] - side) // 2
                cv2.resize(
                    np.ascontiguousarray(rgb[top : top + side, left : left + side]),
                    (SIZE, SIZE),
                    interpolation=cv2.INTER_AREA,
                )
                kept += 1
                next_time += step
        container.seek(0)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=AUDIO)
        for frame in container.decode(container.streams.audio[0]):
            resampler.resample(frame)
    return kept // FRAMES * FRAMES


def plain(pool: Any, paths: list[str]) -> float:
    pool.map(plain_clips, paths[:2])
    start = time.perf_counter()
    frames = sum(pool.map(plain_clips, paths, chunksize=1))
    return frames / (time.perf_counter() - start)


def run_job(inputs: str, output: str) -> tuple[float, int]:
    from dew.pipelines import decode_clips_job

    start = time.perf_counter()
    found = decode_clips_job.main(["--input", inputs, "--output", output, *CLIP, *TWO])
    return time.perf_counter() - start, found["frames_decoded"]


def read_back(output: str, paths: list[str]) -> tuple[float, float]:
    """(clips/s decoding the clips the shards hold, one process; clips/s reading them as ClipShards batches)."""
    import numpy as np

    from dew.data.video.clip_shards import ClipShards
    from dew.data.video.decode import ClipShape, Video

    shape = ClipShape(frames=FRAMES, frame_size=SIZE, frame_rate=float(RATE), audio_rate=AUDIO)
    start, decoded = time.perf_counter(), 0
    for path in paths[:6]:
        with Video(path) as video:
            for index in range(0, video.starts(shape), FRAMES):
                video.clip(shape, index)
                decoded += 1
    decoding = decoded / (time.perf_counter() - start)
    records = ClipShards(path=output).records()
    order = np.random.default_rng(0).permutation(len(records))
    start = time.perf_counter()
    for first in range(0, len(order), 16):
        records.read_batch(order[first : first + 16])
    return decoding, len(order) / (time.perf_counter() - start)


def main() -> None:
    for line in BASELINES:
        print(line)
    with tempfile.TemporaryDirectory() as work:
        paths = write_videos(os.path.join(work, "videos"))
        one = os.path.join(work, "one")
        os.makedirs(one)
        os.link(paths[0], os.path.join(one, "000.mp4"))
        with mp.get_context("spawn").Pool(2) as pool:
            before = plain(pool, paths)
            startup, startup_frames = min(run_job(one, os.path.join(work, f"out-one-{i}")) for i in range(2))
            seconds, frames = run_job(os.path.join(work, "videos"), os.path.join(work, "out"))
            after = plain(pool, paths)
        decoding, reading = read_back(os.path.join(work, "out"), paths)
    baseline = (before + after) / 2
    steady = (frames - startup_frames) / max(seconds - startup, 1e-9)
    print(f"plain loop (2 processes): {before:,.0f} before, {after:,.0f} after the job frames/s")
    print(f"job: {seconds:.1f} s wall for {frames} frames ({frames // FRAMES} clips), start-up run {startup:.1f} s")
    print(f"job steady state: {steady:,.0f} frames/s, ratio {steady / baseline:.2f} (goal >= 0.7)")
    print(f"job wall clock:   {frames / seconds:,.0f} frames/s, ratio {frames / seconds / baseline:.2f}")
    ratio = reading / decoding
    print(
        f"read back: ClipShards {reading:,.0f} clips/s, decoded {decoding:,.1f} clips/s, ratio {ratio:.1f} (goal >= 10)"
    )


if __name__ == "__main__":
    sys.exit(main())
