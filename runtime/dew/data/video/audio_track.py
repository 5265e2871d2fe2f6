"""The audio half of decoding a clip: a video's audio stream read from a pre-roll, placed on its sample
grid and resampled to mono at the clip's rate (dew.data.video.decode's Video takes it as AudioTrack).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data.extras import require
from dew.data.video.audio_grid import GRID_FRAMES, VARIABLE_FRAMES, AudioGrid
from dew.data.video.video_errors import UNSUPPORTED_CODEC, VideoError

if TYPE_CHECKING:
    from collections.abc import Generator

    from dew.data.video.decode import ClipShape

# How far before a clip's first sample its audio is decoded from: enough for the codec frames a decoder
# needs before its output is right (AAC: one frame of 1024 samples, 23 ms at 44.1 kHz; Opus: 80 ms of
# pre-roll) and for the resampler's filter to fill. Opus's 80 ms is the least its format asks, not where
# FFmpeg's decoder converges: on a 440 Hz tone it is still 0.04 off a decode from the head 100 ms after a
# seek, 0.001 at 200 ms and under 1e-4 at 300 ms (AAC is exact from its second frame on).
_AUDIO_PREROLL = 0.1
_OPUS_PREROLL = 0.3
_OPUS = ("opus", "libopus")


@dataclasses.dataclass(frozen=True)
class AudioFailed:
    """Where a pass's audio stopped short: the first clip it does not cover (-1 when none), and why."""

    clip: int = -1
    error: VideoError | None = None


class AudioTrack:
    """A Video's audio: the stream (None without one), the PyAV module, and its frame grid once read."""

    path: str
    _av: Any
    _audio: Any
    _grid: AudioGrid | None
    _grid_read: bool

    def _decoded(self, stream: Any, seek: float) -> Generator[Any, None, None]:
        raise NotImplementedError  # Video's: the frames of a stream from a seek on

    def _group_audio(self, shape: ClipShape, starts: list[float]) -> tuple[list[np.ndarray], AudioFailed]:
        """Each clip's audio, cut from one resampled span from the first clip's padding to the last's, and
        the first clip the audio failed to reach, if it failed."""
        silent = [np.zeros(shape.audio_samples, dtype=np.float32) for _ in starts]
        if shape.audio_rate is None or self._audio is None:
            return silent, AudioFailed()
        rate = shape.audio_rate
        span = np.zeros(round((starts[-1] - starts[0]) * rate) + shape.audio_samples, dtype=np.float32)
        reached, error = self._fill_audio(span, shape, starts[0] - shape.audio_padding / shape.frame_rate)
        # The offset rounds as clip() rounds where its first decoded sample goes; copies, so that a clip
        # does not keep the whole span alive.
        offsets = [round((start - starts[0]) * rate) for start in starts]
        audio = [span[at : at + shape.audio_samples].copy() for at in offsets]
        if error is None:
            return audio, AudioFailed()
        # clip() would fail on the first clip whose audio reaches the damage; those before it are whole.
        first = next(i for i, at in enumerate(offsets) if at + shape.audio_samples > reached)
        return audio, AudioFailed(clip=first, error=error)

    def _fill_audio(self, out: np.ndarray, shape: ClipShape, start: float) -> tuple[int, VideoError | None]:
        """Writes the audio from `start` on into `out`, resampled to mono at shape.audio_rate: how many
        leading samples are written, and the error that stopped it short, for the caller to raise when
        it needs those samples.

        Decoding starts _AUDIO_PREROLL (Opus: _OPUS_PREROLL) before `start` and what comes before it is
        thrown away: the first frame after a seek decodes without the frame before it (AAC's MDCT overlap,
        Opus's pre-roll), so it comes out near silent or wrong, and the file's first frame needs the
        encoder's priming packet, which sits before time 0. The resampler warms up on the same lead-in, so
        the clip's first sample is as good as any other."""
        rate = shape.audio_rate
        assert rate is not None, "audio is filled only when the shape asks for it"
        if self._audio.codec_context is None:  # FFmpeg knows the container but has no decoder for the stream
            return 0, VideoError(self.path, UNSUPPORTED_CODEC, "FFmpeg has no decoder for its audio codec")
        resampler = self._av.AudioResampler(format="flt", layout="mono", rate=rate)
        at: int | None = None  # where the next resampled sample goes in `out`
        made: tuple[str, str, int] | None = None  # the kind of frame the resampler takes
        origin = seconds(self._audio.start_time, self._audio.time_base) or 0.0
        preroll = _OPUS_PREROLL if self._audio.codec_context.name in _OPUS else _AUDIO_PREROLL
        try:
            grid = self._audio_grid(origin)  # before the seek below: it reads the stream's head
            for frame in self._decoded(self._audio, max(start, origin) - preroll):
                if at is None:
                    first = self._first_audio(frame, start, rate, grid=grid, fallback=max(start, origin))
                    if first is None:
                        continue
                    frame, at = first
                kind = (frame.format.name, frame.layout.name, frame.sample_rate)
                if made is not None and kind != made:
                    # The stream changes its rate or channels (a broadcast switching to 5.1 for a film): a
                    # resampler takes one kind of frame, so the last one's tail is placed and a fresh one
                    # goes on where it stopped.
                    for piece in resampler.resample(None):
                        at = _place(out, piece, at)
                    resampler = self._av.AudioResampler(format="flt", layout="mono", rate=rate)
                made = kind
                for piece in resampler.resample(frame):
                    at = _place(out, piece, at)
                if at >= len(out):
                    return len(out), None
        except VideoError as error:
            return max(at or 0, 0), error
        if at is not None:
            for piece in resampler.resample(None):
                at = _place(out, piece, at)
        return len(out), None

    def _first_audio(
        self, frame: Any, start: float, rate: int, *, grid: AudioGrid | None, fallback: float
    ) -> tuple[Any, int] | None:
        """The first decoded audio frame, cut to begin a whole number of output samples before `start`, and
        where its first resampled sample goes in the output (negative: before `start`, thrown away); None
        for a frame the stream decoded from its head does not hold, to be passed over.

        The resampler puts its output samples 1 / rate apart from the first input sample, so beginning
        the input on that grid puts `start` on a sample, instead of rounding it by up to half a sample
        (a visible phase error on high tones); what is left is under half an input sample. The frame's
        time is its timestamp, or where `grid` puts it when the timestamp is rounded (Matroska)."""
        if frame.time is None:
            return frame, round((fallback - start) * rate)
        time = float(frame.time)
        if grid is not None:
            time = grid.place(frame)
            # A seek that lands on a Matroska stream's head, but not before it, as a second seek there does,
            # decodes the encoder's priming samples (AAC's whole first frame, Opus's 312-sample pre-skip),
            # which a decode from the head drops: dropped here too.
            if time < grid.first - grid.slack:
                head = round((grid.first - time) * frame.sample_rate)
                if head >= frame.samples:
                    return None
                frame, time = self._cut(frame, head), grid.first
        ahead = math.floor((start - time) * rate)  # output samples from the frame's head to `start`
        if ahead <= 0:
            return frame, round((time - start) * rate)
        skip = round((start - ahead / rate - time) * frame.sample_rate)
        if skip <= 0 or skip >= frame.samples:
            return frame, round((time - start) * rate)
        return self._cut(frame, skip), -ahead

    def _cut(self, frame: Any, skip: int) -> Any:
        """An audio frame less its first `skip` samples."""
        samples = frame.to_ndarray()
        cut = samples[:, skip:] if frame.format.is_planar else samples[:, skip * len(frame.layout.channels) :]
        trimmed = self._av.AudioFrame.from_ndarray(
            np.ascontiguousarray(cut), format=frame.format.name, layout=frame.layout.name
        )
        trimmed.sample_rate = frame.sample_rate
        return trimmed

    def _audio_grid(self, origin: float) -> AudioGrid | None:
        """Where the audio's frames start, read once from the stream's head, when its timestamps are too
        coarse to say to the sample (None when they are fine enough, or the frames are not all one size).

        Matroska and WebM store times in whole milliseconds, so a frame's timestamp is up to half a
        millisecond off where the file's samples put it (Opus's 6.5 ms pre-skip puts every packet after
        the first exactly half a millisecond off), and an audio clip placed by its first frame's timestamp
        was shifted by as much: 0.7 on a 0.5-amplitude 440 Hz tone. A fixed-size codec (AAC, Opus, MP3)
        puts frame k at the head frame's time plus the samples before it, so the decoded stream from its
        head is the reference: its first frame, then frames of one size."""
        if not self._grid_read:
            self._grid_read = True
            stream = self._audio
            rate = stream.codec_context.sample_rate
            fixed = stream.codec_context.name not in VARIABLE_FRAMES
            if fixed and rate and stream.time_base is not None and float(stream.time_base) * rate > 1:
                # Called before any other audio decode of the file: the decoder drops the encoder's priming
                # samples from the first frames it decodes only, so later seeks to the head decode them.
                try:
                    with contextlib.closing(self._decoded(stream, origin - _AUDIO_PREROLL)) as frames:
                        head = list(itertools.islice(frames, GRID_FRAMES + 1))
                except VideoError:
                    return None  # a head that does not decode leaves the timestamps; a clip there fails on its own
                self._grid = AudioGrid.read(head, float(stream.time_base), origin)
        return self._grid


def seconds(value: int | None, time_base: Any) -> float | None:
    return None if value is None or time_base is None else float(value * time_base)


def _place(out: np.ndarray, piece: Any, at: int) -> int:
    """Copies a resampled frame into `out` at sample `at` (clipped to it); where the next one goes."""
    samples = piece.to_ndarray().reshape(-1)
    lo, hi = max(at, 0), min(at + len(samples), len(out))
    if lo < hi:
        out[lo:hi] = samples[lo - at : hi - at]
    return at + len(samples)


def resample(waveform: np.ndarray, rate: int, to_rate: int) -> np.ndarray:
    """A mono float waveform at `rate` as float32 at `to_rate`, through the resampler clips use."""
    if rate == to_rate:
        return np.asarray(waveform, dtype=np.float32)
    av = require("av", for_what="resampling audio")
    mono = np.asarray(waveform, dtype=np.float32).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(mono, format="flt", layout="mono")
    frame.sample_rate = rate
    resampler = av.AudioResampler(format="flt", layout="mono", rate=to_rate)
    pieces = [p.to_ndarray().reshape(-1) for p in (*resampler.resample(frame), *resampler.resample(None))]
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
