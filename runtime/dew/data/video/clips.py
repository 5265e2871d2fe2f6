"""From video records to the batch a model reads: clips decoded, their audio made model inputs.

The records are {"video_path", "caption"} rows read through the global order every spec trains on.
ClipOrder knows the global record index of every row, which keys the clip's start within its video,
so a run resumed at any record count, on any number of processes, decodes the same clips.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data.captions import Captions
from dew.data.order import DecodedOrder, Order, record_rng
from dew.data.records import BatchRecords
from dew.data.video.audio import AutoAudioProcessor
from dew.data.video.decode import ClipShape, Video


class VideoRecords(BatchRecords):
    """{"video_path", "caption"} records by index, described by their content for resume checks."""

    def __init__(self, records: Sequence[Mapping[str, str]]) -> None:
        self.records = [{"video_path": r["video_path"], "caption": r["caption"]} for r in records]

    def __len__(self) -> int:
        return len(self.records)

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        rows = [self.records[int(i)] for i in indices]
        return {"video_path": [r["video_path"] for r in rows], "caption": [r["caption"] for r in rows]}

    def describe(self) -> dict[str, Any]:
        text = json.dumps(self.records, sort_keys=True)
        return {"type": "videos", "records": len(self.records), "sha256": hashlib.sha256(text.encode()).hexdigest()}


@dataclasses.dataclass(frozen=True)
class Clips:
    """How a record becomes a clip: its shape (frames, size, rate, padding), the audio model's
    processor, which also sets the audio rate, and what becomes of the captions."""

    frames: int
    frame_size: int
    frame_rate: float
    audio_padding: int
    audio: AutoAudioProcessor
    captions: Captions

    def shape(self) -> ClipShape:
        return ClipShape(
            frames=self.frames,
            frame_size=self.frame_size,
            frame_rate=self.frame_rate,
            audio_rate=self.audio.rate,
            audio_padding=self.audio_padding,
        )

    def read(self, records: Mapping[str, Any], keys: Sequence[int] | np.ndarray | None, seed: int) -> dict[str, Any]:
        """The batch of `records`: a clip drawn per record from (seed, key), or each video's middle clip
        when `keys` is None (validation)."""
        shape = self.shape()
        paths = list(records["video_path"])
        frames = np.empty((len(paths), shape.frames, shape.frame_size, shape.frame_size, 3), dtype=np.uint8)
        audio = np.empty((len(paths), shape.audio_samples), dtype=np.float32)
        has_audio = np.empty(len(paths), dtype=bool)
        for row, path in enumerate(paths):
            with Video(path) as video:
                starts = video.starts(shape)
                index = starts // 2 if keys is None else int(record_rng(seed, int(keys[row])).integers(starts))
                clip = video.clip(shape, index)
            frames[row], audio[row], has_audio[row] = clip.frames, clip.audio, clip.has_audio
        out: dict[str, Any] = {
            "frames": frames,
            "audio": self.audio(audio),
            "has_audio": has_audio,
            "caption": list(records["caption"]),
        }
        text = self.captions.text(records)
        if text is not None:
            out["text"] = text
        return out


class ClipOrder(DecodedOrder):
    """An order whose batches leave as clips: `inner` reads the records, `clips` decodes them."""

    def __init__(self, inner: Order, clips: Clips, *, seed: int, random: bool) -> None:
        self.inner, self.clips, self.seed, self.random = inner, clips, seed, random

    def read(self, ks: np.ndarray) -> dict[str, Any]:
        ks = np.asarray(ks, dtype=np.int64)
        return self.clips.read(self.inner.read(ks), ks if self.random else None, self.seed)
