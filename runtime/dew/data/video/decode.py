"""One clip of a video file: its frames on a fixed-rate grid, square, and the audio that spans them.

Every video path of dew decodes through here (VideoDataset at read time, the offline clips job), so a
clip is cut, resized and given its audio the same way wherever it is made, and a file is refused for
the same reasons (REASONS) with an error naming it.

- Two paths, the same frames. Video.clip (VideoDataset at read time, one clip a record) seeks to the
  keyframe at or before the clip's start and decodes forward from there, never from the head of the
  file, and seeks its audio again. Video.clips (the offline job, many clips of a file) decodes clips
  close together in one pass from one seek, and their audio once; its frames are clip()'s exactly, its
  audio clip()'s but for where the resampler's grid starts within one input sample.
- Frames: PyAV with frame threading on (several times faster than one thread).
  Frame i of a clip shows what is on screen at start + i / frame_rate: the last frame whose
  presentation timestamp is not after that time. Picking by timestamp rather than by frame count is
  what makes a variable-frame-rate file read right, and what resamples a 30 fps file to 25 fps.
  Each picked frame is made square by dew.data.images.pixels.square, the images' own rule.
- Audio: decoded from its own seek a little ahead of the clip (a decoder's first frame after a seek
  is wrong, AAC's near silent; Opus takes longer to settle), mixed to mono and resampled to audio_rate
  by PyAV's AudioResampler (libswresample), spanning the clip plus audio_padding frames either side.
  Its first frame is placed where the stream decoded from its head puts it: by its timestamp where
  that is exact to a sample (MP4), and on the codec's fixed frame grid where the container rounds
  timestamps to the millisecond (Matroska, WebM). What the
  file does not cover (before its start, past its end, a missing audio stream) is silence, so every
  clip of a shape has the same number of samples.
- Memory: the container is a context manager and no frame outlives the step that reads it; decoding
  one clip after another holds no more descriptors or memory than decoding one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import numpy as np

from dew.data import remote, shard_cache
from dew.data.extras import require
from dew.data.images import pixels
from dew.data.video.audio_grid import AudioGrid
from dew.data.video.audio_track import AudioTrack, seconds
from dew.data.video.video_errors import CORRUPT, EMPTY, NO_VIDEO, TRUNCATED, UNSUPPORTED_CODEC, VideoError
from dew.data.video.video_errors import REASONS as REASONS
from dew.data.video.video_errors import TOO_SHORT as TOO_SHORT

# Bumped whenever a change here changes a byte of what a clip decodes to (version 2: audio decoded from
# a pre-roll before the clip, its resampler grid started on the clip's first sample; version 3: Matroska
# and WebM audio placed on its frames' sample grid rather than by millisecond timestamps, Opus decoded
# from a longer pre-roll, priming samples dropped; AAC in MP4 is as in version 2; version 4: a seek that
# lands past a clip at the stream's first timestamp, as MPEG-TS's does, reads from time 0; version 5: a
# picture turned as its display matrix says, as a player shows it). The clips job
# records it in its config, so a run resumed after an upgrade refuses to mix shards of two decoders.
DECODER_VERSION = 5


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipShape:
    """What every clip is, whatever file it comes from: `frames` frames of frame_size × frame_size RGB
    at frame_rate, and mono audio at audio_rate (None decodes none) spanning them plus audio_padding
    frames either side."""

    frames: int
    frame_size: int
    frame_rate: float
    audio_rate: int | None = None
    audio_padding: int = 0

    def __post_init__(self) -> None:
        for name in ("frames", "frame_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"clip {name} must be a positive int, got {value!r}")
        if not isinstance(self.frame_rate, int | float) or not self.frame_rate > 0:
            raise ValueError(f"clip frame_rate must be positive, got {self.frame_rate!r}")
        if self.audio_rate is not None and (not isinstance(self.audio_rate, int) or self.audio_rate < 1):
            raise ValueError(f"clip audio_rate must be a positive int or None, got {self.audio_rate!r}")
        if not isinstance(self.audio_padding, int) or self.audio_padding < 0:
            raise ValueError(f"clip audio_padding must be a non-negative int, got {self.audio_padding!r}")

    @property
    def seconds(self) -> float:
        """How long the frames of a clip last."""
        return self.frames / self.frame_rate

    @property
    def audio_samples(self) -> int:
        """The samples of a clip's audio: its frames and padding, at audio_rate."""
        if self.audio_rate is None:
            return 0
        return round((self.frames + 2 * self.audio_padding) / self.frame_rate * self.audio_rate)


@dataclasses.dataclass(frozen=True)
class Clip:
    """A decoded clip: frames uint8 [frames, S, S, 3], audio float32 [samples] (empty when the shape
    asks for none), the first frame's time in seconds, and whether the file had audio to give."""

    frames: np.ndarray
    audio: np.ndarray
    start: float
    has_audio: bool


class Video(AudioTrack):
    """An open video file, closed on exit; `clip` decodes as many clips of it as a caller wants.

    A gs:// path is read through the local cache (dew.data.shard_cache.fetch).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        # A gs:// file's cached copy stays on disk while this Video lives.
        local = shard_cache.fetch(path, holder=self) if remote.is_remote(path) else path
        if not os.path.exists(local):
            raise FileNotFoundError(f"{path} does not exist")
        if os.path.getsize(local) == 0:
            raise VideoError(path, EMPTY, "the file holds no bytes")
        self._av = require("av", for_what="decoding video")
        try:
            self._container = self._av.open(local)
        except (self._av.error.FFmpegError, UnicodeDecodeError) as error:
            raise VideoError(path, CORRUPT, f"FFmpeg cannot open it ({error})") from None
        try:
            if not self._container.streams.video:
                raise VideoError(path, NO_VIDEO, "the file has no video stream")
            self._video = self._container.streams.video[0]
            if self._video.codec_context is None:  # FFmpeg knows the container but has no decoder for the stream
                raise VideoError(path, UNSUPPORTED_CODEC, "FFmpeg has no decoder for its video codec")
            self._video.thread_type = "AUTO"
            audio = self._container.streams.audio
            self._audio = audio[0] if audio else None
            self.origin = seconds(self._video.start_time, self._video.time_base) or 0.0
            self.end = self.origin + self._duration()
            self._grid: AudioGrid | None = None  # the audio's frame grid, once read
            self._grid_read = False
        except BaseException:
            self._container.close()
            raise

    def __enter__(self) -> Video:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._container.close()

    @property
    def has_audio(self) -> bool:
        return self._audio is not None

    def _duration(self) -> float:
        own = seconds(self._video.duration, self._video.time_base)
        if own:
            return own
        # Matroska/WebM record no duration per stream, and the container's may be the audio's: the video's
        # last packet says. Seeking to the container's end first keeps this to the last keyframe's packets.
        declared = (self._container.duration or 0) / 1_000_000  # AV_TIME_BASE
        self._container.seek(self._container.duration or 0)
        video = stored = 0.0
        with contextlib.closing(self._container.demux()) as packets:
            for packet in packets:
                if packet.pts is not None:
                    ends = float((packet.pts + (packet.duration or 0)) * packet.time_base)
                    stored = max(stored, ends)
                    video = max(video, ends) if packet.stream is self._video else video
        # Every stream stopping well short of the length the header declares is a file cut off in transit.
        if declared - stored > _CUT_SECONDS:
            raise VideoError(
                self.path, TRUNCATED, f"its packets stop at {stored:.3f} s of the {declared:.3f} s its header declares"
            )
        return video - self.origin

    def starts(self, shape: ClipShape) -> int:
        """How many clips of `shape` the file holds on its frame_rate grid: start j is origin + j / rate."""
        room = (self.end - self.origin - shape.seconds) * shape.frame_rate
        if room < -_SLACK:
            length = self.end - self.origin
            raise VideoError(self.path, TOO_SHORT, f"{length:.3f} s is shorter than one clip of {shape.seconds:.3f} s")
        return math.floor(room + _SLACK) + 1

    def start(self, shape: ClipShape, index: int) -> float:
        """The time of clip `index`'s first frame."""
        if not 0 <= index < self.starts(shape):
            raise ValueError(f"{self.path}: clip {index} is outside its {self.starts(shape)} clips")
        return self.origin + index / shape.frame_rate

    def clip(self, shape: ClipShape, index: int) -> Clip:
        """Clip `index` of `shape`: its frames and, when the shape asks, its audio."""
        start = self.start(shape, index)
        frames = self._frames(shape, start)
        audio = np.zeros(shape.audio_samples, dtype=np.float32)
        if shape.audio_rate is not None and self._audio is not None:
            _, error = self._fill_audio(audio, shape, start - shape.audio_padding / shape.frame_rate)
            if error is not None:
                raise error
        return Clip(frames=frames, audio=audio, start=start, has_audio=self.has_audio)

    def clips(self, shape: ClipShape, indices: Iterable[int]) -> Iterator[Clip]:
        """The clips at `indices` of `shape`, each once, in ascending order: the frames clip() gives, from
        fewer decoding passes.

        Clips close together (each starting within _JOIN_SECONDS of the last frame of the one before) share
        one pass: one seek, every frame any of them shows picked on the way forward, and their audio
        decoded and resampled once and sliced. The audio differs from clip()'s only by where within an
        input sample the resampler's grid begins, since clip() starts a fresh one at each clip.
        """
        starts = [self.start(shape, index) for index in sorted(set(indices))]
        last_frame = (shape.frames - 1) / shape.frame_rate
        group: list[float] = []
        for start in starts:
            if group and (start - group[-1] - last_frame > _JOIN_SECONDS or start - group[0] > _GROUP_SECONDS):
                yield from self._group(shape, group)
                group = []
            group.append(start)
        if group:
            yield from self._group(shape, group)

    def _group(self, shape: ClipShape, starts: list[float]) -> Iterator[Clip]:
        """The clips at `starts` (ascending) from one pass over their frames and one over their audio."""
        audio, failed = self._group_audio(shape, starts)
        # Each clip's own target times, computed as clip() computes them, so that each is compared with the
        # frames' times exactly as there; times shared by overlapping clips are picked once.
        targets = [start + np.arange(shape.frames) / shape.frame_rate for start in starts]
        union, where = np.unique(np.concatenate(targets), return_inverse=True)
        where = where.reshape(len(starts), shape.frames)
        picked: dict[int, np.ndarray] = {}  # union position → its square frame, while a pending clip needs it
        done = filled = 0
        for position, square in enumerate(self._on_screen(union, shape.frame_size, seek=starts[0])):
            picked[position], filled = square, position + 1
            # A clip is complete once its last time is picked; clips end in the order they start.
            while done < len(starts) and where[done, -1] == position:
                if done == failed.clip and failed.error is not None:
                    raise failed.error  # after the frames, as clip() reads them: a file cut short is truncated
                frames = np.stack([picked[p] for p in where[done]])
                yield Clip(frames=frames, audio=audio[done], start=starts[done], has_audio=self.has_audio)
                done += 1
                needed = where[done, 0] if done < len(starts) else len(union)
                picked = {p: frame for p, frame in picked.items() if p >= needed}
        if done < len(starts):
            # The frames stopped early: report the first time the first incomplete clip misses, as clip() does.
            missing = np.searchsorted(where[done], filled)
            raise self._truncated(targets[done][missing])

    def _frames(self, shape: ClipShape, start: float) -> np.ndarray:
        targets = start + np.arange(shape.frames) / shape.frame_rate
        picked = list(self._on_screen(targets, shape.frame_size, seek=start))
        if len(picked) < shape.frames:
            raise self._truncated(targets[len(picked)])
        return np.stack(picked)

    def _truncated(self, missing: float) -> VideoError:
        return VideoError(
            self.path,
            TRUNCATED,
            f"the frames stop before {missing:.3f} s, inside the {self.end:.3f} s the file declares",
        )

    def _on_screen(self, targets: np.ndarray, size: int, *, seek: float) -> Iterator[np.ndarray]:
        """The square frame on screen at each of `targets` (ascending), decoding forward from the keyframe at
        or before `seek`; it stops short where the frames do."""
        try:
            yield from self._pick(targets, size, seek=seek)
        except _LandedPast:
            # The seek landed past the first target (a file whose index misplaces its keyframes, an MPEG-TS
            # whose seek by timestamp lands a keyframe late, even at its own first timestamp): read from the
            # head, time 0 or before. _pick raises this before it yields anything, so nothing is given twice.
            yield from self._pick(targets, size, seek=min(self.origin, 0.0))

    def _pick(self, targets: np.ndarray, size: int, *, seek: float) -> Iterator[np.ndarray]:
        """The frame on screen at each target time, made square, as they come; raises _LandedPast when the
        first frame after seeking to `seek` already comes after the first target.

        Repeated frames (a target grid finer than the file's) are one array given again, not copies."""
        # A timestamp is an integer count of the stream's time base, rounded: one within half a tick of a
        # grid time is on it. Capped, since a coarse time base (AVI's 1/fps) is exact and not rounded.
        slack = min(float(self._video.time_base) / 2, _MAX_ROUNDING)
        shown = _Shown(size)
        filled = 0
        with contextlib.closing(self._decoded(self._video, seek)) as frames:
            for frame in frames:
                time = frame.time
                if time is None:
                    raise VideoError(self.path, CORRUPT, "a video frame has no presentation timestamp")
                if shown.frame is None and time > targets[0] + slack:
                    if seek > min(self.origin, 0.0):
                        raise _LandedPast
                    shown.frame = frame  # the file starts after the clip's first instant: its first frame is shown
                while filled < len(targets) and time > targets[filled] + slack:
                    yield shown.square()
                    filled += 1
                if filled == len(targets):
                    return
                shown.frame = frame
        if shown.frame is None and seek > min(self.origin, 0.0):
            raise _LandedPast  # past the last keyframe (MPEG-TS seeking by timestamp): no frame at all
        # The stream has ended: its last frame stays on screen for its own duration, and no longer, so a
        # truncated file is found out rather than padded with its last frame.
        last = shown.frame
        until = last.time + self._lasts(last) if last is not None else -math.inf
        while filled < len(targets) and targets[filled] < until - slack:
            yield shown.square()
            filled += 1

    def _lasts(self, frame: Any) -> float:
        """How long `frame` is on screen: its own duration, or one frame at the stream's average rate."""
        own = seconds(frame.duration, frame.time_base)
        if own:
            return own
        rate = self._video.average_rate or self._video.guessed_rate
        return float(1 / rate) if rate else 0.0

    def _decoded(self, stream: Any, seek: float) -> Generator[Any, None, None]:
        """The frames of `stream` from the keyframe at or before `seek` on, errors named by the file.

        Audio may seek below time 0, where encoders put their priming packet."""
        av = self._av
        target = int(seek / stream.time_base)
        if stream is self._video:
            target = max(0, target)
        try:
            self._container.seek(target, stream=stream)
            with contextlib.closing(self._container.decode(stream)) as frames:
                yield from frames
        except av.error.FFmpegError as error:
            raise VideoError(self.path, CORRUPT, f"FFmpeg cannot decode it ({error})") from None


# How far past a file's end a clip may reach and still fit, in clip frames: a file's end is the sum of
# its last frame's time and duration, each rounded to its time base (Matroska's milliseconds).
_SLACK = 0.05
_MAX_ROUNDING = 1e-3
# clips() decodes the next clip in the same pass when it starts at most this long after the last frame of
# the one before: decoding the frames between costs about what a fresh seek costs, which decodes from the
# keyframe before the clip (up to a keyframe interval: ~2 s for most phone, streaming and web encoders)
# and refills the frame-threaded decoder and the audio resampler. A pass's audio is held whole until its
# last clip is out, so a pass stops after a minute of clips: a few MB of samples at any rate.
_JOIN_SECONDS = 2.0
_GROUP_SECONDS = 60.0
# How far short of its declared length a file's packets may stop before it counts as cut off: encoders
# round a stream's last packet and pad audio by a few milliseconds, never by a tenth of a second.
_CUT_SECONDS = 0.1


class _LandedPast(Exception):
    """A seek landed after the first frame asked for."""


class _Shown:
    """The frame on screen, made square once however many grid times it covers (a lower-rate file)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._frame: Any = None
        self._square: np.ndarray | None = None

    @property
    def frame(self) -> Any:
        return self._frame

    @frame.setter
    def frame(self, frame: Any) -> None:
        self._frame, self._square = frame, None

    def square(self) -> np.ndarray:
        if self._square is None:
            picture = self._frame.to_ndarray(format="rgb24")
            # Turned as a player shows it: the display matrix's rotation, counterclockwise degrees (a
            # portrait phone recording is stored landscape and turned -90). np.rot90 turns counterclockwise.
            turns = round((self._frame.rotation or 0) / 90) % 4
            self._square = pixels.square(np.rot90(picture, turns) if turns else picture, self.size)
        return self._square
