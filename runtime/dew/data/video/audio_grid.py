"""Where a fixed-size audio codec's frames start, for containers that round their timestamps.

Matroska and WebM store times in whole milliseconds, so an audio frame's timestamp can be up to half a
millisecond from where the file's samples put it, and a clip's audio placed by the timestamp of the
first frame after a seek is shifted by as much (0.7 on a 0.5-amplitude 440 Hz tone). A codec with
frames of one size (AAC, Opus, MP3) puts frame k at the head frame's time plus the samples before it,
so the stream decoded from its head gives the grid every later frame sits on; dew.data.video.decode
reads it once per file and places the first frame after each seek on it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

# Audio decoders whose frames change size with the signal: no grid, however alike a stream's first frames.
VARIABLE_FRAMES = ("vorbis", "libvorbis")

# How many frames after its first the head of an audio stream must show of one size, and at the times that
# size gives them, for its frames' times to be taken from that grid rather than from their timestamps.
GRID_FRAMES = 8


@dataclasses.dataclass(frozen=True)
class AudioGrid:
    """The times at which a fixed-size audio codec's frames start: the head frame's (`first`, of
    `first_samples`), and every `samples` samples on from there, at `rate`; a timestamp is rounded to
    within `slack` of its frame's."""

    first: float
    first_samples: int
    samples: int
    rate: int
    slack: float

    @classmethod
    def read(cls, head: list[Any], tick: float, origin: float) -> AudioGrid | None:
        """The grid of the stream starting at `origin` whose first decoded frames are `head`, its time base
        `tick`; None when they do not sit on one (frames of more than one size, a gap, a missing timestamp,
        priming samples not dropped)."""
        if len(head) < 2 or any(frame.time is None for frame in head) or head[0].time < origin - tick:
            return None
        rate, sizes = head[0].sample_rate, {frame.samples for frame in head[1:-1]} or {head[1].samples}
        if len(sizes) != 1 or any(frame.sample_rate != rate for frame in head):
            return None
        # Half a tick for the rounding, and a little for the float arithmetic.
        grid = cls(float(head[0].time), head[0].samples, sizes.pop(), rate, tick / 2 + 0.1 / rate)
        ends = grid.first + np.cumsum([frame.samples for frame in head[:-1]]) / rate  # where each next one starts
        if any(abs(end - float(f.time)) > grid.slack for end, f in zip(ends, head[1:], strict=True)):
            return None
        return grid

    def place(self, frame: Any) -> float:
        """When `frame` starts: the grid time its timestamp rounds, or the timestamp where none is near
        (a frame of another size, a stream with a gap)."""
        time = float(frame.time)
        if frame.sample_rate != self.rate:
            return time
        if frame.samples == self.first_samples and abs(time - self.first) <= self.slack:
            return self.first
        if frame.samples != self.samples:
            return time
        # Frame k starts `first_samples + k * samples` after the head's; a k below 0 is the encoder's priming
        # (Opus's frame before its pre-skip, AAC's frame before its first), decoded when a seek lands on it.
        k = round(((time - self.first) * self.rate - self.first_samples) / self.samples)
        on = self.first + (self.first_samples + k * self.samples) / self.rate
        return on if abs(on - time) <= self.slack else time
