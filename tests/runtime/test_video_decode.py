"""dew.data.video.decode over videos made here: frames by timestamp, audio by tone, bad files by reason."""

from __future__ import annotations

import fractions
import math

import numpy as np
import pytest

from dew.data.video import audio_track, decode
from dew.data.video.decode import ClipShape, Video, VideoError
from tests.runtime import video_support as support

av = pytest.importorskip("av")

SHAPE = ClipShape(frames=8, frame_size=32, frame_rate=25, audio_rate=16000, audio_padding=2)


def _encodes(codec: str) -> bool:
    try:
        av.codec.Codec(codec, "w")
    except Exception:
        return False
    return True


H264 = "libx264" if _encodes("libx264") else "mpeg4"
FILES = [
    pytest.param("a.mp4", {"codec": H264, "fps": 25, "size": (64, 48)}, id="h264-25fps-audio"),
    pytest.param("b.mp4", {"codec": H264, "fps": 30, "size": (48, 64), "audio": False}, id="h264-30fps-portrait"),
    # AVI keeps no presentation times, and PyAV's AVI muxer shifts them once an audio stream is beside.
    pytest.param("c.avi", {"codec": "mpeg4", "fps": 24, "size": (64, 64), "audio": False}, id="mpeg4-24fps-avi"),
    pytest.param("e.mkv", {"codec": "mpeg4", "fps": 24, "size": (64, 40), "frames": 48}, id="mpeg4-24fps-mkv"),
    pytest.param(
        "d.webm",
        {"codec": "libvpx-vp9", "fps": 25, "size": (80, 48)},
        id="vp9-webm",
        marks=pytest.mark.skipif(not _encodes("libvpx-vp9"), reason="this PyAV build has no vp9 encoder"),
    ),
]


@pytest.mark.parametrize(("name", "options"), FILES)
def test_frames_are_on_the_clip_grid_and_the_audio_is_the_tone(tmp_path, name, options) -> None:
    path = support.write_video(str(tmp_path / name), **options)
    fps, audio = options["fps"], options.get("audio", True)
    with Video(path) as video:
        count = video.starts(SHAPE)
        seconds = options.get("frames", 50) / fps
        assert count == math.floor((seconds - SHAPE.seconds) * SHAPE.frame_rate + 0.01) + 1
        for index in (0, count // 2, count - 1):
            clip = video.clip(SHAPE, index)
            assert clip.frames.dtype == np.uint8 and clip.frames.shape == (8, 32, 32, 3)
            times = clip.start + np.arange(8) / 25
            # The frame on screen at each grid time: the last one that started at or before it.
            assert support.frame_indices(clip.frames) == [math.floor(t * fps + 1e-6) for t in times]
            assert clip.audio.dtype == np.float32 and clip.audio.shape == (SHAPE.audio_samples,)
            assert clip.has_audio == audio
            if audio:
                assert abs(support.dominant_frequency(clip.audio, 16000) - support.TONE) < 5
            else:
                assert not clip.audio.any()


def test_a_variable_frame_rate_file_is_read_by_its_timestamps(tmp_path) -> None:
    pts = [0]
    for i in range(1, 50):
        pts.append(pts[-1] + (30 if i % 2 else 50))  # 50 ms and 30 ms in turn: 25 fps on average
    path = support.write_video(str(tmp_path / "vfr.mp4"), codec=H264, pts_ms=pts)
    with Video(path) as video:
        for index in (0, 7, video.starts(SHAPE) - 1):
            clip = video.clip(SHAPE, index)
            times_ms = [round((clip.start + i / 25) * 1000) for i in range(8)]
            expected = [max(j for j, p in enumerate(pts) if p <= t) for t in times_ms]
            assert support.frame_indices(clip.frames) == expected
            assert abs(support.dominant_frequency(clip.audio, 16000) - support.TONE) < 5


def test_an_mpeg_ts_clip_in_its_first_gop_shows_its_own_frames(tmp_path) -> None:
    # MPEG-TS seeks by timestamp, and a seek to the stream's own first timestamp lands on the second
    # keyframe: its first clips were all that keyframe's frame, taken for a file starting late.
    path = support.write_video(str(tmp_path / "broadcast.ts"), codec=H264, audio=False)
    with av.open(path) as container:
        times = [frame.time for frame in container.decode(video=0)]  # the file's own, from its head
    with Video(path) as video:
        indices = list(range(video.starts(SHAPE)))
        # The last clip's seek lands past the last keyframe, on no frame: it was refused as truncated.
        last = video.clip(SHAPE, indices[-1])
        for clip in [video.clip(SHAPE, 0), video.clip(SHAPE, 3), last, *video.clips(SHAPE, indices)]:
            grid = clip.start + np.arange(8) / 25
            expected = [max(j for j, t in enumerate(times) if t <= g + 1e-4) for g in grid]
            assert support.frame_indices(clip.frames) == expected, clip.start


def test_a_clip_decodes_forward_from_the_keyframe_before_it(tmp_path, monkeypatch) -> None:
    path = support.write_video(str(tmp_path / "long.mp4"), codec=H264, frames=60, audio=False)
    decoded = []
    original = Video._decoded

    def counting(self, stream, seek):
        for frame in original(self, stream, seek):
            decoded.append(frame.time)
            yield frame

    monkeypatch.setattr(Video, "_decoded", counting)
    with Video(path) as video:
        clip = video.clip(SHAPE, video.starts(SHAPE) - 1)
    assert support.frame_indices(clip.frames) == list(range(52, 60))
    # A keyframe every 10 frames: at most the 9 frames before the clip, never the file's head.
    assert min(decoded) >= 50 / 25 - 1e-6 and len(decoded) <= 8 + 9


def test_audio_past_the_end_of_its_stream_is_silence(tmp_path) -> None:
    path = support.write_video(str(tmp_path / "short-audio.mp4"), codec=H264, audio_seconds=1.0)
    with Video(path) as video:
        head = video.clip(SHAPE, 5)
        tail = video.clip(SHAPE, video.starts(SHAPE) - 1)  # 1.68 s on: the tone stopped at 1.0 s
    assert abs(support.dominant_frequency(head.audio, 16000) - support.TONE) < 5
    assert head.has_audio and tail.has_audio and np.abs(tail.audio).max() < 1e-3
    # The padding before a file's first instant is silence too: 2 frames at 25 fps of 16 kHz.
    with Video(path) as video:
        first = video.clip(SHAPE, 0)
    assert not first.audio[: 2 * 16000 // 25 - 1].any() and np.abs(first.audio[2000:]).max() > 0.3


VP9 = pytest.mark.skipif(not _encodes("libvpx-vp9"), reason="this PyAV build has no vp9 encoder")
# AAC in MP4 at two rates; AAC in Matroska and Opus in WebM, whose timestamps are whole milliseconds.
TONE_FILES = [
    pytest.param("tone.mp4", {"codec": H264, "audio_rate": 44100}, id="aac44k-mp4"),
    pytest.param("tone.mp4", {"codec": H264, "audio_rate": 48000}, id="aac48k-mp4"),
    pytest.param("tone.mkv", {"codec": "mpeg4", "audio_rate": 44100}, id="aac44k-mpeg4-mkv"),
    pytest.param("tone.mkv", {"codec": H264, "audio_rate": 48000}, id="aac48k-mkv"),
    pytest.param("tone.webm", {"codec": "libvpx-vp9"}, id="opus-vp9-webm", marks=VP9),
]


@pytest.mark.parametrize(("name", "options"), TONE_FILES)
@pytest.mark.parametrize("padding", [0, 2])
def test_a_clip_cut_mid_video_has_the_tone_from_its_first_sample(tmp_path, name, options, padding) -> None:
    # After a seek the decoder has no frame before to overlap with (AAC's MDCT), and at time 0 it needs
    # the priming packet before it: either way the first codec frame came out near silent. And Matroska
    # rounds a packet's time to the millisecond, up to half a millisecond off where its samples are
    # (Opus's 6.5 ms pre-skip puts every one half a millisecond off): 0.7 on this tone, placed by it.
    # The clip's first samples must be the tone the file was made from, within the codec's own error (~0.03).
    path = support.write_video(str(tmp_path / name), frames=100, **options)
    shape = ClipShape(frames=8, frame_size=32, frame_rate=25, audio_rate=16000, audio_padding=padding)
    with Video(path) as video:
        clips = {index: video.clip(shape, index) for index in (0, 13, 37, 50, 80)}  # of 93, all in the tone (4 s)
        # Seeking to the head again decodes the encoder's priming samples, which the first decode drops (up
        # to 0.65 off when placed by their rounded timestamps); AAC's decoder differs by 0.001 after a seek.
        assert np.abs(video.clip(shape, 0).audio - clips[0].audio).max() < 0.005
        for index, clip in clips.items():
            times = clip.start - padding / 25 + np.arange(shape.audio_samples) / 16000
            want = np.where(times >= 0, support.tone_at(times), 0.0)  # the padding before 0 s is silence
            # The first 32 ms: a codec frame and a half. (Further on, the encoder's own error reaches 0.2
            # in places at 48 kHz, whether decoded after a seek or from the head.)
            head = np.abs(clip.audio[:512] - want[:512])
            assert head.max() < 0.05, (index, int(head.argmax()), float(head.max()))


def test_bad_files_are_refused_naming_the_file_and_the_reason(tmp_path) -> None:
    support.write_video(str(tmp_path / "good.mp4"), codec=H264)
    data = (tmp_path / "good.mp4").read_bytes()
    cases = {"empty.mp4": b"", "cut.mp4": data[: len(data) // 2], "noise.mp4": b"not a video" * 50}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    with pytest.raises(VideoError, match=r"empty\.mp4: empty") as caught:
        Video(str(tmp_path / "empty.mp4"))
    assert caught.value.reason == decode.EMPTY
    for name in ("cut.mp4", "noise.mp4"):
        with pytest.raises(VideoError, match=rf"{name}: corrupt") as caught:
            Video(str(tmp_path / name))
    short = support.write_video(str(tmp_path / "short.mp4"), codec=H264, frames=5)
    with Video(short) as video, pytest.raises(VideoError, match=r"short\.mp4: too_short: 0\.200 s"):
        video.starts(SHAPE)
    with pytest.raises(FileNotFoundError, match=r"missing\.mp4"):
        Video(str(tmp_path / "missing.mp4"))


def test_an_audio_stream_ffmpeg_cannot_decode_is_refused_by_reason(tmp_path) -> None:
    # Matroska names its codec in words: an unknown one leaves the stream without a decoder, which
    # crashed the clips job (an AttributeError, not a VideoError it counts) rather than dropping one video.
    path = tmp_path / "odd-audio.mkv"
    support.write_video(str(path), codec=H264)
    path.write_bytes(path.read_bytes().replace(b"A_AAC", b"A_ZZZ"))
    with Video(str(path)) as video:
        assert video.clip(ClipShape(frames=8, frame_size=32, frame_rate=25), 0).frames.shape == (8, 32, 32, 3)
        for cut in (lambda: video.clip(SHAPE, 0), lambda: list(video.clips(SHAPE, [0, 1]))):
            with pytest.raises(VideoError, match="no decoder for its audio codec") as refused:
                cut()
            assert refused.value.reason == "unsupported_codec"


def _adts_tone(path, rate: int, layout: str, seconds: float) -> bytes:
    with av.open(str(path), "w", format="adts") as container:
        stream = container.add_stream("aac", rate=rate, layout=layout)
        samples, channels = round(seconds * rate), len(stream.layout.channels)
        for first in range(0, samples, 1024):
            wave = support.tone_at(np.arange(first, min(samples, first + 1024)) / rate)
            frame = av.AudioFrame.from_ndarray(np.repeat(wave[None], channels, 0), format="fltp", layout=layout)
            frame.sample_rate, frame.pts = rate, first
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path.read_bytes()


def test_audio_that_changes_rate_and_channels_mid_stream_is_resampled_on(tmp_path) -> None:
    # One tone, its first second 44.1 kHz mono and its second 48 kHz stereo, as a broadcast switches
    # layouts: the resampler refused the first frame of the second kind (a ValueError that crashed the job).
    audio = tmp_path / "switch.aac"
    audio.write_bytes(
        _adts_tone(tmp_path / "a.aac", 44100, "mono", 1.0) + _adts_tone(tmp_path / "b.aac", 48000, "stereo", 1.0)
    )
    video = support.write_video(str(tmp_path / "v.ts"), codec=H264, audio=False)
    path = str(tmp_path / "switch.ts")
    with av.open(video) as vin, av.open(str(audio)) as ain, av.open(path, "w", format="mpegts") as out:
        streams = {"video": out.add_stream_from_template(vin.streams.video[0])}
        streams["audio"] = out.add_stream_from_template(ain.streams.audio[0])
        packets = [(float(p.dts * p.time_base), "video", p) for p in vin.demux(video=0) if p.dts is not None]
        for k, packet in enumerate(p for p in ain.demux(audio=0) if p.size):
            packet.time_base = fractions.Fraction(1, 90000)
            packet.pts = packet.dts = round(k * 0.0225 * 90000)  # about a 1024-sample frame apart
            packets.append((k * 0.0225, "audio", packet))
        for _, kind, packet in sorted(packets, key=lambda t: t[0]):
            packet.stream = streams[kind]
            out.mux(packet)
    shape = ClipShape(frames=8, frame_size=32, frame_rate=25, audio_rate=16000)
    with Video(path) as video:
        clips = list(video.clips(shape, range(video.starts(shape))))
        assert clips[-1].start > 1.5
    for clip in clips[2:-2]:  # both sides of the switch; the file's own ends aside
        assert abs(support.dominant_frequency(clip.audio, 16000) - support.TONE) < 5, clip.start
        assert np.sqrt(np.mean(clip.audio**2)) > 0.3, clip.start  # the tone's 0.35: nowhere silent


def test_a_file_without_video_is_refused(tmp_path) -> None:
    path = str(tmp_path / "sound.m4a")
    with av.open(path, "w") as container:
        stream = container.add_stream("aac", rate=16000, layout="mono")
        frame = av.AudioFrame.from_ndarray(support.tone(16000, 16000)[None], format="flt", layout="mono")
        frame.sample_rate, frame.pts = 16000, 0
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    with pytest.raises(VideoError, match=r"sound\.m4a: no_video"):
        Video(path)


@pytest.mark.skipif(not _encodes("libvpx-vp9"), reason="this PyAV build has no vp9 encoder")
def test_a_truncated_stream_is_refused(tmp_path) -> None:
    # WebM keeps its header at the head, so a cut file still opens; its packets stop short of what it declares.
    path = support.write_video(str(tmp_path / "cut.webm"), codec="libvpx-vp9")
    data = (tmp_path / "cut.webm").read_bytes()
    (tmp_path / "cut.webm").write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError, match=r"cut\.webm: truncated: its packets stop at") as caught:
        Video(path)
    assert caught.value.reason == decode.TRUNCATED


def test_resample_keeps_a_tone_at_its_frequency() -> None:
    wave = audio_track.resample(support.tone(44100, 44100), 44100, 16000)
    assert abs(len(wave) - 16000) <= 1
    assert abs(support.dominant_frequency(wave, 16000) - support.TONE) < 2


SHAPES = [
    SHAPE,
    ClipShape(frames=5, frame_size=16, frame_rate=10, audio_rate=22050),  # coarser than the file: frames skipped
    ClipShape(frames=3, frame_size=24, frame_rate=30.0),  # finer than a 25 fps file: frames repeated; no audio
]
PASS_FILES = [
    pytest.param("a.mp4", {"codec": H264}, id="h264-25fps-audio"),
    pytest.param("b.mp4", {"codec": H264, "fps": 30, "size": (48, 64), "audio": False}, id="h264-30fps-portrait"),
    pytest.param("c.avi", {"codec": "mpeg4", "fps": 24, "size": (64, 64), "audio": False}, id="mpeg4-24fps-avi"),
    pytest.param("e.mkv", {"codec": "mpeg4", "fps": 24, "size": (64, 40), "frames": 48}, id="mpeg4-24fps-mkv"),
    pytest.param(
        "vfr.mp4", {"codec": H264, "pts_ms": [sum((30, 50)[k % 2] for k in range(i)) for i in range(50)]}, id="vfr"
    ),
]


@pytest.mark.parametrize(("name", "options"), PASS_FILES)
def test_clips_in_one_pass_are_the_clips_one_by_one(tmp_path, name, options) -> None:
    path = support.write_video(str(tmp_path / name), **options)
    with Video(path) as video:
        for shape in SHAPES:
            count = video.starts(shape)
            # Every start: clips overlapping all but one frame, asked for out of order and twice.
            indices = [*range(count - 1, -1, -1), 0, count // 2]
            clips = list(video.clips(shape, indices))
            assert len(clips) == count
            for index, clip in enumerate(clips):
                one = video.clip(shape, index)
                assert clip.start == one.start and clip.has_audio == one.has_audio
                assert np.array_equal(clip.frames, one.frames), (shape, index)
                assert clip.audio.shape == one.audio.shape and clip.audio.dtype == np.float32
                if not one.has_audio or shape.audio_rate is None:
                    assert not clip.audio.any()


@pytest.mark.parametrize(("name", "options"), [TONE_FILES[0], TONE_FILES[2], TONE_FILES[4]])
def test_clips_audio_is_clip_audio_from_the_first_sample(tmp_path, name, options) -> None:
    path = support.write_video(str(tmp_path / name), **options)
    rate = SHAPE.audio_rate
    # clip() seeks its audio for each clip, clips() once for a pass; both decode from a little before
    # the first sample wanted and start the resampler's grid on it, so they differ only by where that
    # grid starts within an input sample (under 11 µs at 44.1 kHz: 0.015 on this tone), also where the
    # tone stops (2 s) and the encoder rings louder than it.
    with Video(path) as video:
        clips = list(video.clips(SHAPE, range(video.starts(SHAPE))))
        for index, clip in enumerate(clips):
            one = video.clip(SHAPE, index)
            assert np.abs(clip.audio - one.audio).max() < 0.02, index
            assert abs(support.dominant_frequency(clip.audio, rate) - support.TONE) < 5


def test_clips_close_together_share_a_pass_and_far_apart_do_not(tmp_path, monkeypatch) -> None:
    path = support.write_video(str(tmp_path / "long.mp4"), codec=H264, frames=150)  # 6 s
    seeks: list[tuple[str, float]] = []
    original = Video._decoded

    def counting(self, stream, seek):
        seeks.append((stream.type, seek))
        yield from original(self, stream, seek)

    monkeypatch.setattr(Video, "_decoded", counting)
    with Video(path) as video:
        # Back to back over 2 s, then one 3 s on: two passes, each one video and one audio seek.
        starts = [clip.start for clip in video.clips(SHAPE, [0, 8, 16, 24, 32, 40, 125])]
        assert starts == [video.start(SHAPE, i) for i in (0, 8, 16, 24, 32, 40, 125)]
    assert sorted(kind for kind, _ in seeks) == ["audio", "audio", "video", "video"]
    assert sorted(seek for kind, seek in seeks if kind == "video") == [0.0, 5.0]


def _marked(path: str, degrees: int) -> str:
    """A landscape video (64 x 48) whose top third is white and the rest black, its display matrix
    rotating it `degrees` counterclockwise, as a phone's portrait recording is stored (-90)."""
    with av.open(path, "w") as container:
        stream = container.add_stream(H264, rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        if degrees:
            stream.set_display_rotation(degrees)
        picture = np.zeros((48, 64, 3), np.uint8)
        picture[:16] = 255
        for i in range(12):
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.mark.parametrize(("degrees", "white"), [(0, "top"), (-90, "right"), (90, "left"), (180, "bottom")])
def test_a_rotated_video_is_decoded_as_it_is_shown(tmp_path, degrees: int, white: str) -> None:
    """A display matrix says how a player turns the stored picture (counterclockwise degrees): a portrait
    phone recording is stored landscape and turned -90, clockwise, so the stored top shows on the right.
    Its clips were the stored picture, on its side."""
    path = _marked(str(tmp_path / f"turned{degrees}.mp4"), degrees)
    with av.open(path) as container:
        assert next(container.decode(video=0)).rotation % 360 == degrees % 360  # what the file says, read back
    with Video(path) as video:
        frames = video.clip(ClipShape(frames=4, frame_size=30, frame_rate=25), 0).frames
    grey = frames.astype(float).mean(axis=(0, 3))  # 30 x 30: rows, columns
    edges = {
        "top": grey[:8].mean(),
        "bottom": grey[-8:].mean(),
        "left": grey[:, :8].mean(),
        "right": grey[:, -8:].mean(),
    }
    assert edges[white] > 200, edges
    assert min(edges.values()) < 40, edges
    assert max(edges, key=edges.get) == white, edges
