"""Tiny videos synthesized with PyAV, whose every frame and sample the tests know.

Frame i is one flat colour whose red channel is i * STEP, so a decoded frame says which source frame
it is; the audio is a sine tone of a known frequency, which the dominant FFT bin of a clip recovers.
"""

from __future__ import annotations

import fractions
from collections.abc import Sequence

import numpy as np

STEP = 4  # red per frame: up to 64 frames stay distinct through lossy codecs (errors of a level or two)
TONE = 440.0


def write_video(
    path: str,
    *,
    codec: str = "libx264",
    fps: int = 25,
    frames: int = 50,
    size: tuple[int, int] = (64, 48),
    audio: bool = True,
    audio_seconds: float | None = None,
    audio_rate: int = 44100,
    pts_ms: Sequence[int] | None = None,
) -> str:
    """Writes a video whose frame i is colour(i); `pts_ms` gives each frame's time in milliseconds (a
    variable frame rate), and audio_seconds the length of the tone (the video's length by default)."""
    import av

    webm = path.endswith(".webm")
    with av.open(path, "w") as container:
        video = container.add_stream(codec, rate=fps)
        video.width, video.height = size
        video.pix_fmt = "yuv420p"
        video.bit_rate = 4_000_000  # mpeg4's default rate smears a colour change over several frames
        video.gop_size = 10
        time_base = fractions.Fraction(1, 1000) if pts_ms is not None else fractions.Fraction(1, fps)
        video.time_base = video.codec_context.time_base = time_base
        stream = None
        if audio:
            codec_name, rate = ("libopus", 48000) if webm else ("aac", audio_rate)
            stream = container.add_stream(codec_name, rate=rate, layout="mono")
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.broadcast_to(colour(i), (size[1], size[0], 3)).copy(), format="rgb24")
            frame.pts = pts_ms[i] if pts_ms is not None else i
            frame.time_base = time_base
            for packet in video.encode(frame):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        if stream is not None:
            seconds = audio_seconds if audio_seconds is not None else frames / fps
            rate = stream.rate
            wave = tone(round(seconds * rate), rate)
            for first in range(0, len(wave), 1024):
                piece = av.AudioFrame.from_ndarray(wave[None, first : first + 1024], format="flt", layout="mono")
                piece.sample_rate, piece.pts = rate, first
                for packet in stream.encode(piece):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
    return path


def colour(i: int) -> np.ndarray:
    return np.array([(i * STEP) % 256] * 3, dtype=np.uint8)


def frame_indices(frames: np.ndarray) -> list[int]:
    """Which source frame each of [n, S, S, 3] frames shows, read from its centre pixel's red."""
    centre = frames.shape[1] // 2
    return [round(int(red) / STEP) for red in frames[:, centre, centre, 0]]


def tone(samples: int, rate: int, frequency: float = TONE) -> np.ndarray:
    return tone_at(np.arange(samples) / rate, frequency)


def tone_at(seconds: np.ndarray, frequency: float = TONE) -> np.ndarray:
    """The tone write_video encodes, at these times from the file's start."""
    return (0.5 * np.sin(2 * np.pi * frequency * seconds)).astype(np.float32)


def dominant_frequency(wave: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(wave * np.hanning(len(wave))))
    return float(np.argmax(spectrum) * rate / len(wave))
