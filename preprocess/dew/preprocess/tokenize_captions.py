"""TokenizeCaptions: a committed images directory → a new one whose records also hold their caption's token ids.

    plan ranges of records → read a range, tokenize its captions in one call → repack → write shards → commit

The images are never decoded: every field of a record is copied through as bytes, and `input_ids` and
`attention_mask` are appended, each max_length little-endian int32 values (padded and truncated as the
text model expects, its special tokens included). Shard j of a split becomes shard j of the same split,
each record at the same place, so the new directory lines up with the old one record for record.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays
from dew.data.extras import require
from dew.data.formats import Meta, Shard
from dew.data.sections import ImagesSection
from dew.data.text import HFTokenizer
from dew.preprocess import progress
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import NAMESPACE
from dew.preprocess.pack import verified_copy
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import WriteShards
from dew.preprocess.writing import commit_shards

# The context of CLIP's text encoder: the length used when the tokenizer states none.
DEFAULT_LENGTH = 77
# transformers' model_max_length when the tokenizer's files state none (int(1e30)); anything this large is no limit.
_NO_LIMIT = 1 << 40
# The progress phase captions are tokenized in (the skeleton's write and commit follow).
TOKENIZE = "tokenize"
Range = tuple[str, int, str, int, int]  # (split, shard index, shard name, first record, end)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaptionPlan:
    """What decides the new directory's bytes: the input, the tokenizer (name and hash), the padded length."""

    input: str
    output: str
    tokenizer: str
    tokenizer_hash: str
    max_length: int
    pad_id: int
    batch_size: int = 256

    def __post_init__(self) -> None:
        if self.max_length < 1 or self.batch_size < 1:
            raise ValueError(f"max_length and batch_size must be positive, got {self.max_length}, {self.batch_size}")

    def config(self) -> dict[str, Any]:
        return {
            "job": "caption-tokenize",
            "tokenizer": self.tokenizer,
            "tokenizer_hash": self.tokenizer_hash,
            "max_length": self.max_length,
            "pad_id": self.pad_id,
        }


def describe(input: str, output: str, tokenizer: str, max_length: int | None, batch_size: int) -> CaptionPlan:
    """Loads the tokenizer once on the launcher: its hash, its context length and the id it pads with."""
    loaded = HFTokenizer(tokenizer)
    own = loaded.tokenizer
    pad = own.pad_token_id if own.pad_token_id is not None else own.eos_token_id
    if pad is None:
        raise ValueError(f"tokenizer {tokenizer!r} has neither a pad nor an eos token to pad captions with")
    if max_length is None:
        stated = own.model_max_length
        max_length = stated if isinstance(stated, int) and 0 < stated < _NO_LIMIT else DEFAULT_LENGTH
    return CaptionPlan(
        input=input.rstrip("/"),
        output=output.rstrip("/"),
        tokenizer=tokenizer,
        tokenizer_hash=loaded.fingerprint(),
        max_length=max_length,
        pad_id=pad,
        batch_size=batch_size,
    )


def tokenized_section(section: ImagesSection, plan: CaptionPlan) -> ImagesSection:
    if section.caption_length is not None:
        raise ValueError(
            f"{plan.input} already holds captions tokenized by {section.caption_tokenizer!r}; "
            "tokenize the directory the images job wrote"
        )
    return dataclasses.replace(
        section,
        fields=(*section.fields, "input_ids", "attention_mask"),
        caption_tokenizer=plan.tokenizer,
        caption_tokenizer_hash=plan.tokenizer_hash,
        caption_length=plan.max_length,
    )


def ranges(meta: Meta, batch_size: int) -> list[Range]:
    """Every shard of every split cut into runs of at most batch_size records: the unit of work."""
    return [
        (split, j, shard.name, start, min(start + batch_size, shard.records))
        for split, shards in sorted(meta.splits.items())
        for j, shard in enumerate(shards)
        for start in range(0, shard.records, batch_size)
    ]


def _read_range(path: str, fields: tuple[str, ...], start: int, end: int) -> list[bytes]:
    if path.endswith(".parquet"):
        pq = require("pyarrow.parquet", for_what="reading parquet shards")
        file = pq.ParquetFile(path)
        first, groups, offset = 0, list[int](), 0
        for group in range(file.num_row_groups):
            rows = file.metadata.row_group(group).num_rows
            if first < end and first + rows > start:
                offset = first if not groups else offset
                groups.append(group)
            first += rows
        table = file.read_row_groups(groups, columns=list(fields)).slice(start - offset, end - start)
        return [pack_dict_of_byte_arrays({f: row[f] for f in fields}) for row in table.to_pylist()]
    from array_record.python.array_record_module import ArrayRecordReader

    reader = ArrayRecordReader(path)
    try:
        return list(reader.read(start, end))
    finally:
        reader.close()


class _TokenizeRange(beam.DoFn):
    """Range → its records with their caption's ids. Each shard is checked against meta.json (size,
    checksum, record count) the first time this worker reads it, as the runtime's readers check theirs,
    so a damaged or swapped shard fails the job by name before anything is committed."""

    def __init__(self, plan: CaptionPlan, fields: tuple[str, ...], shards: Mapping[str, Shard]) -> None:
        self.plan = plan
        self.fields = fields
        self.shards = dict(shards)

    def setup(self) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one worker process per core already
        loaded = HFTokenizer(self.plan.tokenizer)
        if loaded.fingerprint() != self.plan.tokenizer_hash:
            raise RuntimeError(
                f"tokenizer {self.plan.tokenizer!r} on this worker hashes to {loaded.fingerprint()[:12]}, not "
                f"{self.plan.tokenizer_hash[:12]} as on the launcher; give workers the same tokenizer files"
            )
        self.tokenizer = loaded.tokenizer
        self.local = tempfile.mkdtemp(prefix="dew-captions-")
        self.verified: dict[str, str] = {}
        self.counter = beam.metrics.Metrics.counter(NAMESPACE, "captions_tokenized")
        self.progress = progress.Tally(TOKENIZE)

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "local", ""), ignore_errors=True)

    def _local(self, name: str) -> str:
        """The shard as a local file, checked: ArrayRecord reads local files only, so a gs:// shard is
        fetched (into a folder of its own, so a download cut short is never taken for the shard) once a worker.
        Its own footer must count meta.json's records (verified_copy): ranges are cut by meta.json's count,
        and must not run past or fall short."""
        if name not in self.verified:
            path = verified_copy(self.plan.input, self.shards[name], tempfile.mkdtemp(dir=self.local))
            self.verified[name] = path
        return self.verified[name]

    def process(self, unit: Range) -> Iterator[tuple[tuple[str, int], tuple[tuple[int], bytes]]]:
        split, j, name, start, end = unit
        raw = _read_range(self._local(name), self.fields, start, end)
        records = [unpack_dict_of_byte_arrays(r, f"{name} record {start + i}") for i, r in enumerate(raw)]
        # Truncated by the tokenizer (which keeps its closing special tokens), padded here with the plan's id.
        encoded = self.tokenizer(
            [record["caption"].decode("utf-8") for record in records],
            truncation=True,
            max_length=self.plan.max_length,
        )["input_ids"]
        ids = np.full((len(records), self.plan.max_length), self.plan.pad_id, dtype="<i4")
        mask = np.zeros_like(ids)
        for i, row in enumerate(encoded):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        for i, record in enumerate(records):
            packed = pack_dict_of_byte_arrays({**record, "input_ids": ids[i], "attention_mask": mask[i]})
            yield (split, j), ((start + i,), packed)
        self.counter.inc(len(records))
        self.progress.add(len(records))

    def finish_bundle(self) -> None:
        self.progress.publish()


class TokenizeCaptions(beam.PTransform):
    """PCollection[Range] of the input directory → the committed new directory; yields its Meta."""

    def __init__(self, plan: CaptionPlan, source: Meta, identity: JobIdentity, label: str | None = None) -> None:
        super().__init__(label)
        self.plan = plan
        self.source = source
        self.identity = identity

    def expand(self, units: beam.PCollection) -> beam.PCollection:
        plan = self.plan
        section = tokenized_section(self.source.section_as(ImagesSection), self.plan)
        ext = self.source.shards(next(iter(self.source.splits)))[0].name.rsplit(".", 1)[1]
        counts = {split: len(shards) for split, shards in self.source.splits.items()}
        shards_by_name = {shard.name: shard for shards in self.source.splits.values() for shard in shards}
        shard_counts = beam.pvalue.AsSingleton(units.pipeline | "ShardCounts" >> beam.Create([counts]))
        shards = (
            units
            | "SpreadRanges" >> beam.Reshuffle()
            | "Tokenize"
            >> beam.ParDo(_TokenizeRange(self.plan, self.source.section_as(ImagesSection).fields, shards_by_name))
            | "WriteShards"
            >> WriteShards(self.plan.output, ShardFormat(ext=ext, section=section), shard_counts, self.identity)
        )
        return (
            shards
            | "AllShards" >> beam.combiners.ToList()
            | "Commit"
            >> beam.Map(commit_shards, plan.output, section, counts, self.identity, _finish, plan, self.source)
        )


def _finish(meta: Meta, plan: CaptionPlan, source: Meta) -> dict[str, Any]:
    for split, shards_in in source.splits.items():
        # Nothing is dropped: every record of the input is in the output, at its place.
        if [s.records for s in shards_in] != [s.records for s in meta.splits[split]]:
            raise RuntimeError(
                f"split {split!r} of {plan.output} does not hold the records of {plan.input} shard for shard"
            )
    total = sum(s.records for shards_in in source.splits.values() for s in shards_in)
    return {
        "images_in": total,
        "images_written": total,
        "dropped": {},
        "source": source.fingerprint(),
        "fingerprint": meta.fingerprint(),
    }
