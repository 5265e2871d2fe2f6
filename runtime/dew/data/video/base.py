"""VideoDataset: the spec every video kind builds on, from its records to batches of clips."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from dew.data import validate
from dew.data.captions import Captions
from dew.data.dataset import Dataset
from dew.data.order import Order
from dew.data.spec import VAL_BATCHES, IndexedSpec, Tokenize
from dew.data.video.audio import AutoAudioProcessor
from dew.data.video.clips import ClipOrder, Clips, VideoRecords

FRAME_RATE = 25.0
"""The rate clips are cut at unless a spec says otherwise: VoxCeleb2's own, and PAL video's."""


@dataclasses.dataclass(frozen=True)
class VideoDataset(IndexedSpec):
    """Reads clips of `frames` frames at frame_size, with their audio.

    A batch holds `frames`, uint8 [B, frames, frame_size, frame_size, 3]: frames at frame_rate,
    each picked by presentation timestamp (so any file rate, variable ones too, reads on one grid)
    and made square as images are. `audio` is what audio_model's feature extractor makes of the mono
    waveform spanning the clip plus audio_padding frames either side, at the extractor's rate
    (AutoAudioProcessor); `has_audio` is False for a video without an audio stream, whose waveform is
    silence. `caption` holds the captions, and `text` their token ids when load is given tokenize=.

    A training clip starts at a place drawn per record from (seed, the record's global index), so a
    resumed run decodes the same clips; a validation clip is the middle one of its video. val_batches
    whole batches are held out of the head of source() in its own order (0 or None holds nothing
    out), and count keeps that many records from its head.

    Args:
        frame_size: The side of the square frames, in pixels.
        frames: Frames a clip holds.
        audio_padding: Frames of audio taken on either side of the clip.
        audio_model: The HF model whose feature extractor makes `audio`.
        val_batches: Whole batches held out of the head of the videos.
        count: Keep only this many videos from the head.
        frame_rate: The grid frames are picked on, per second.
    """

    decodes: ClassVar[bool] = True

    frame_size: int = 256
    frames: int = 16
    audio_padding: int = 3
    audio_model: str = "facebook/wav2vec2-base-960h"
    val_batches: int | None = VAL_BATCHES
    count: int | None = None
    frame_rate: float = dataclasses.field(default=FRAME_RATE, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("frame_size", "frames"), non_negative=("audio_padding",))
        validate.positive_int(f"{type(self).__name__}.count", self.count, optional=True)
        if not isinstance(self.frame_rate, int | float) or not self.frame_rate > 0:
            raise ValueError(f"{type(self).__name__}.frame_rate must be positive, got {self.frame_rate!r}")
        if not isinstance(self.audio_model, str) or not self.audio_model:
            raise ValueError(f"{type(self).__name__}.audio_model must name an HF audio model")

    def source(self) -> list[dict[str, str]]:
        """One {"video_path", "caption"} record per video, in a fixed order."""
        raise NotImplementedError(f"{type(self).__name__} does not say which videos it reads")

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        records = self.source()
        if self.count is not None:
            records = records[: self.count]
        held = (self.val_batches or 0) * batch
        if len(records) <= held:
            raise ValueError(
                f"{type(self).__name__}: {len(records)} videos cannot spare {held} for validation "
                f"({self.val_batches} batches of {batch}); lower val_batches or the batch"
            )
        train, val = VideoRecords(records[held:]), VideoRecords(records[:held]) if held else None
        clips = Clips(
            frames=self.frames,
            frame_size=self.frame_size,
            frame_rate=float(self.frame_rate),
            audio_padding=self.audio_padding,
            audio=AutoAudioProcessor(modelname=self.audio_model),
            captions=Captions(tokenize=tokenize),
        )

        def decode(order: Order, training: bool) -> Order:
            return ClipOrder(order, clips, seed=self.seed, random=training)

        return self.global_dataset(batch, train=train, val=val, decode=decode)
