"""PackCorpus: the document index and packing plans of a committed corpus, written ahead of training.

The runtime can compute both itself (dew.data.packing); writing them offline makes its startup O(1).
They are the runtime's own functions applied to the same data, so the files equal what it would compute:
the document ends are found shard by shard in parallel (eos positions, offset by the tokens before the
shard), and the plan, a sequential first-fit, runs once per split on one worker over the lengths alone.
Each file is stamped with the corpus fingerprint, so a file left from another corpus is never used.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data import committed, formats, integrity, packing, remote
from dew.data.extras import require
from dew.data.formats import DamagedError, Meta
from dew.data.sections import TokensSection
from dew.data.tokens.bin_documents import Counted
from dew.preprocess import files, progress
from dew.preprocess.constants import NAMESPACE
from dew.preprocess.progress import Phase
from dew.preprocess.quiet import user_error

_RECORDS = 4096


def shard_tokens(path: str, ext: str, dtype: np.dtype) -> Iterator[np.ndarray]:
    """A local shard's ids in order, in bounded chunks, whatever its file kind."""
    if ext == "bin":
        data = np.memmap(path, dtype=dtype, mode="r") if os.path.getsize(path) else np.zeros(0, dtype)
        for start in range(0, len(data), 1 << 24):
            yield np.asarray(data[start : start + (1 << 24)])
    elif ext == "array_record":
        from array_record.python.array_record_module import ArrayRecordReader

        reader = ArrayRecordReader(path, "readahead_buffer_size:0")
        try:
            count = reader.num_records()
            for start in range(0, count, _RECORDS):
                records = reader.read(start, min(start + _RECORDS, count))
                yield np.frombuffer(b"".join(records), dtype=dtype)
        finally:
            reader.close()
    else:
        pq = require("pyarrow.parquet", for_what=f"reading parquet shard {path}")
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_RECORDS):
            yield batch.column(0).flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def verified_copy(directory: str, shard: formats.Shard, work: str) -> str:
    """A local copy of a committed shard (the file itself when local) holding the bytes meta.json records,
    its own footer counting meta.json's records (dew.data.committed.check_own_records): a truncated,
    damaged or recounted shard is refused by name, as a user error, before a reader meets its bytes."""
    where = files.join(directory, shard.name)
    try:
        if files.is_local(directory):
            path = formats.verify_shard(directory, shard, checksum=True)
        else:
            path = files.download(where, work)
            formats.check_size(path, shard, where=where)
            if integrity.enabled() and integrity.digest_file(path, "sha256") != shard.sha256:
                raise DamagedError(f"{where} fails its sha256 check against {formats.META}; {remote.OVERWRITE}")
        committed.check_own_records(path, shard, where=where)
        return path
    except DamagedError as error:
        raise user_error(error) from None


def shard_document_ends(path: str, ext: str, tokens: TokensSection) -> tuple[int, np.ndarray]:
    """(ids in a local shard, the position after each eos in it): where its documents end, locally."""
    found, seen = [], 0
    for chunk in shard_tokens(path, ext, np.dtype(tokens.dtype)):
        if tokens.eos_id is not None:
            found.append(np.flatnonzero(chunk == tokens.eos_id).astype(np.int64) + (seen + 1))
        seen += len(chunk)
    return seen, np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def committed_document_ends(
    directory: str, split: str, shard: formats.Shard, tokens: TokensSection, work: str
) -> tuple[int, np.ndarray]:
    """shard_document_ends of a committed shard, checked against meta.json as the runtime checks it when
    it first opens the shard: size, checksum, and its record count against its own (an ArrayRecord or
    parquet footer, in verified_copy; a `.bin` shard's documents by its eos ids, counted here for free)."""
    path = verified_copy(directory, shard, work)
    ext = formats.shard_extension(shard.name)
    seen, ends = shard_document_ends(path, ext, tokens)
    if ext == "bin" and tokens.eos_id is not None:
        documents = len(ends) + int(seen > 0 and (ends.size == 0 or int(ends[-1]) != seen))
        try:
            Counted(directory, split, shard, tokens.eos_id, tokens.tokenizer).held(documents)
        except DamagedError as error:
            raise user_error(error) from None
    return seen, ends


# The progress phases of packing: every shard's document ends found, then each split's index and plans.
INDEX, PLAN = "index", "plan"


class _ShardEnds(beam.DoFn):
    """(split, index, shard) → (split, (index, tokens, eos positions + 1 within the shard))."""

    def __init__(self, output: str) -> None:
        self.output = output

    def setup(self) -> None:
        self.progress = progress.Tally(INDEX)

    def process(self, element: tuple[str, int, formats.Shard], meta: Meta) -> Iterator[Any]:
        split, index, shard = element
        work = tempfile.mkdtemp(prefix="dew-pack-")
        try:
            seen, ends = committed_document_ends(self.output, split, shard, meta.tokens, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if seen != shard.units:
            raise ValueError(
                f"{shard.name} holds {seen} tokens, but this run's documents for it come to {shard.units}: the "
                "shard was committed by an earlier run and is damaged or was written from other inputs; delete it, "
                "or rerun with --overwrite"
            )
        self.progress.add()
        self.progress.publish()  # a shard is a long step: every one shows
        yield split, (index, seen, ends)


def split_ends(pieces: Sequence[tuple[int, int, np.ndarray]]) -> np.ndarray:
    """A split's document ends from its shards' local eos positions: packing.document_ends, assembled."""
    out, offset = [], 0
    for _, tokens, ends in sorted(pieces, key=lambda p: p[0]):
        out.append(ends + offset)
        offset += tokens
    ends = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    if offset and (ends.size == 0 or ends[-1] != offset):
        ends = np.append(ends, np.int64(offset))  # the tail after the last eos is a document too
    return ends.astype(np.int64)


def _save(output: str, name: str, save: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="dew-derived-") as local:
        path = os.path.join(local, os.path.basename(name))
        save(path)
        files.upload(path, name, output, replace=True)


class _PlanSplit(beam.DoFn):
    def __init__(self, output: str, windows: Sequence[tuple[int, int]]) -> None:
        self.output = output
        self.windows = tuple(windows)

    def process(self, element: tuple[str, Any], meta: Meta) -> Iterator[dict[str, Any]]:
        split, pieces = element
        fingerprint = meta.fingerprint()
        ends = split_ends(list(pieces))
        where = formats.derived_path(self.output, split, packing.DOCUMENTS)
        _save(self.output, where, lambda p: packing.save_document_ends(p, fingerprint, ends))
        lengths = packing.lengths_of(ends)
        for seq_len, bins in self.windows:
            plan = packing.plan_packing(lengths, seq_len + 1, bins)
            name = formats.derived_path(self.output, split, packing.packing_name(seq_len + 1, bins))
            _save(self.output, name, lambda p, plan=plan: plan.save(p, fingerprint))
            beam.metrics.Metrics.counter(NAMESPACE, f"packed_windows_{split}").inc(len(plan))
            yield {
                "split": split,
                "seq_len": seq_len,
                "bins": bins,
                "documents": len(ends),
                "windows": len(plan),
                "padding": round(plan.padding, 6),
            }
        done = progress.Tally(PLAN)  # the split's index and every plan of it written
        done.add()
        done.publish()


class PackCorpus(beam.PTransform):
    """A PCollection holding one Meta → derived files in `output`; yields one summary per split and window.

    windows: (seq_len, packing_bins) pairs; each writes `<split>.packing-<seq_len + 1>-<bins>.npz`.
    The document index `<split>.documents.npz` is written whatever the windows.
    """

    def __init__(self, output: str, windows: Sequence[tuple[int, int]], label: str | None = None) -> None:
        super().__init__(label)
        for seq_len, bins in windows:
            if seq_len < 1 or bins < 1:
                raise ValueError(f"packing needs seq_len >= 1 and bins >= 1, got {seq_len} and {bins}")
        self.output = output
        self.windows = tuple(windows)

    def phases(self, shards: int, splits: int) -> tuple[Phase, Phase]:
        """Its progress phases, for a corpus of `shards` shards in `splits` splits."""
        return (
            Phase(name=INDEX, unit="shards", total=shards),
            Phase(name=PLAN, unit="splits", total=splits),
        )

    def expand(self, meta: beam.PCollection) -> beam.PCollection:
        single = beam.pvalue.AsSingleton(meta)
        return (
            meta
            | "Shards" >> beam.FlatMap(lambda m: [(s, i, x) for s in m.splits for i, x in enumerate(m.splits[s])])
            | "Spread" >> beam.Reshuffle()
            | "ShardEnds" >> beam.ParDo(_ShardEnds(self.output), single)
            | "BySplit" >> beam.GroupByKey()
            | "Plan" >> beam.ParDo(_PlanSplit(self.output, self.windows), single)
        )
