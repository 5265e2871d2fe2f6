"""ClipShards: the clips the decode-clips job committed, read back a batch at a time with no decoding.

Start-up reads meta.json alone: every shard's record count is there, so no shard is opened until a
batch needs it. The stream is an IndexedSpec's: one global record order, so a run resumes exactly from
a saved position on any process count that divides the batch.

A directory written before the job recorded `has_audio` cannot say which of its clips hold silence
standing in for a video without an audio stream (the job's default, --no_audio silence). Its batches
then hold no `has_audio` rather than a guess, except where its job dropped every such video
(--no_audio drop): there every clip's video has audio, and `has_audio` is all True.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats, validate
from dew.data.committed_records import CommittedRecords, Window, committed_split
from dew.data.dataset import Dataset
from dew.data.formats import Meta, Shard
from dew.data.registry import datasets
from dew.data.sections import ClipsSection
from dew.data.spec import IndexedSpec, Tokenize
from dew.data.video.clip_records import unpack_clips

_log = logging.getLogger(__name__)


class ClipRecords(CommittedRecords):
    """Every clip of one split's ArrayRecord shards, in order; a shard is opened on its first read, in
    the process that reads it, and checked against meta.json's checksum then (once per host and file,
    as every committed shard is; dew.data.record_shards): a gs:// one by block as a batch reads its
    records' ranges when it has a record index, else whole after its fetch into the local cache."""

    WHAT = "clips"

    def __init__(
        self,
        directory: str,
        section: ClipsSection,
        shards: Sequence[Shard],
        corpus: str,
        *,
        all_have_audio: bool,
    ) -> None:
        """all_have_audio: the directory guarantees every clip's video has an audio stream, though its
        records do not say so (an older layout): has_audio is then all True."""
        files = [f"{directory.rstrip('/')}/{s.name}" for s in shards]
        description = {"clips": "committed", "corpus": corpus}
        counts = [s.records for s in shards]
        labels = [s.name for s in shards]
        super().__init__(files, counts, description, directory=directory, shards=shards, labels=labels)
        self.section, self.all_have_audio = section, all_have_audio

    def decode(self, raw: list[bytes], where: list[str], verified: list[bool]) -> dict[str, Any]:
        batch = unpack_clips(self.section, raw, where)
        if self.all_have_audio:
            batch["has_audio"] = np.ones(len(raw), dtype=bool)
        return batch


@datasets("clip_shards")
@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipShards(IndexedSpec):
    """Decoded clips from a committed `dew.clips/1` directory (the decode-clips job's), no decoding.

    A batch holds `frames` uint8 [B, frames, S, S, 3], `audio` float32 [B, samples] when the clips
    carry audio (int16 storage is scaled back to [-1, 1]) and with it `has_audio` (bool [B], False
    where the video has no audio stream and its audio is silence, as VideoDataset gives it; absent for
    a directory written before the job recorded it, unless that job dropped such videos), `caption` and
    `source` (lists of str) and `span` (float64 [B, 2], the clip's start and end in seconds in its
    source). path may be gs://.
    val_batches whole batches off the end of the split are held out for validation; by default none,
    since the job writes one split.

    Args:
        path: The committed clips directory (local or gs://).
        split: The split to read.
        val_batches: Whole batches held out of the end of the split.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.ClipShards(path="clips", val_batches=2)
        >>> spec.split, spec.val_batches
        ('train', 2)
    """

    path: str
    split: str = "train"
    val_batches: int | None = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, optional=("val_batches",))

    def records(self) -> ClipRecords:
        """The records of the split, from meta.json alone."""
        meta = formats.read_meta(self.path, kind="clips")
        section = meta.section
        assert isinstance(section, ClipsSection)
        shards, _ = committed_split(meta, self.path, self.split, reader="ClipShards can", writer="decode-clips")
        return ClipRecords(
            self.path, section, shards, meta.fingerprint(), all_have_audio=_all_have_audio(meta, self.path)
        )

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        if tokenize is not None:
            raise ValueError(
                "ClipShards hands the captions over as text (batch['caption']); it takes no tokenize=. "
                "Tokenize them in the training step, or drop tokenize="
            )
        records = self.records()
        cut = self.held_out_tail(len(records), batch, path=self.path, what="clips")
        if cut is None:
            return self.global_dataset(batch, train=records, val=None)
        return self.global_dataset(batch, train=Window(records, 0, cut), val=Window(records, cut, len(records) - cut))


def _all_have_audio(meta: Meta, path: str) -> bool:
    """Whether a directory whose records hold audio but no has_audio still guarantees that every clip's
    video has an audio stream: only where its decode-clips job dropped every video without one."""
    section = meta.section
    assert isinstance(section, ClipsSection)
    if "audio" not in section.fields or "has_audio" in section.fields:
        return False
    if meta.config.get("job") == "decode-clips" and meta.config.get("no_audio") == "drop":
        return True
    _log.warning(
        "%s: its clips do not say whether their video has an audio stream (written before decode-clips "
        "recorded has_audio), and silence may stand in for a missing one, so its batches hold no has_audio. "
        "Rerun decode-clips with --overwrite to record it",
        path,
    )
    return False
