"""A toy kind of record, added the way docs/contributing.md says a new kind is added, and nothing more.

"pairs": each input line `left<TAB>right` becomes a record {"left", "right"}; a line without a tab is
dropped as no_tab. The kind brings its own section, its record codec, its reader spec, its writer and
its job; splitting, shard counts, routing, shard writing, stats, commit, progress, the committed-split
check, batch reads and the held-out split all come from the skeletons. In dew itself these pieces go
into the files contributing.md names; test_toy_kind.py runs them end to end.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from dew.data import formats
from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays
from dew.data.committed_records import CommittedRecords, committed_split
from dew.data.dataset import Dataset
from dew.data.formats import Meta
from dew.data.registry import datasets
from dew.data.sections import Section
from dew.data.spec import IndexedSpec, Tokenize

NO_TAB = "no_tab"


# 1. The section (dew/data/sections.py): what meta.json says the records are. It registers itself.
@dataclasses.dataclass(frozen=True, kw_only=True)
class PairsSection(Section):
    KIND: ClassVar[str] = "pairs"
    READERS: ClassVar[str] = "ToyPairs"
    WRITER: ClassVar[str] = "the toy pairs job"
    fields: tuple[str, ...] = ("left", "right")


# 2. The record codec (dew/data/<kind>/records.py): one packed dict a record, both ways.
def pack_pair(left: str, right: str) -> bytes:
    return pack_dict_of_byte_arrays({"left": left.encode(), "right": right.encode()})


def unpack_pairs(raw: Sequence[bytes], where: Sequence[str]) -> dict[str, Any]:
    records = [unpack_dict_of_byte_arrays(r, w) for r, w in zip(raw, where, strict=True)]
    return {name: [r[name].decode() for r in records] for name in ("left", "right")}


# 3. The reader (dew/data/<kind>/<kind>.py): a CommittedRecords with its decode hook, and the spec.
class PairRecords(CommittedRecords):
    WHAT = "pairs"

    def decode(self, raw: list[bytes], where: list[str], verified: list[bool]) -> dict[str, Any]:
        return unpack_pairs(raw, where)


def _records(meta: Meta, path: str, split: str) -> PairRecords:
    shards, files = committed_split(meta, path, split, reader="ToyPairs", writer="the toy pairs job")
    description = {"pairs": "committed", "corpus": meta.fingerprint(), "split": split}
    return PairRecords(files, [s.records for s in shards], description, directory=path, shards=shards)


@datasets("toy_pairs")
@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyPairs(IndexedSpec):
    """Pairs of strings from a committed `dew.pairs/1` directory; its val split is the validation pass."""

    path: str
    split: str = "train"
    val_batches: int | None = 0

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        meta = formats.read_meta(self.path, kind=PairsSection.KIND)  # once a load
        held = self.held_out_split(meta, path=self.path, other_than=self.split)
        val = _records(meta, self.path, held) if held is not None else None
        return self.global_dataset(batch, train=_records(meta, self.path, self.split), val=val)


# 4. The writer (dew/preprocess/<kind>.py): keyed, drawn records into the writer skeleton.
def _draw(name: str, row: int) -> int:
    """The record's draw: a hash of where it came from, so its split and shard depend on nothing else."""
    return int.from_bytes(hashlib.blake2b(f"{name}\0{row}".encode(), digest_size=8).digest(), "little")


def _pairs(element: tuple[int, str]) -> Iterator[Any]:
    import apache_beam as beam

    from dew.preprocess import progress

    index, path = element
    tally = progress.Tally("read")
    with open(path, encoding="utf-8") as lines:
        for row, line in enumerate(lines):
            tally.add()
            left, tab, right = line.rstrip("\n").partition("\t")
            if not tab:
                yield beam.pvalue.TaggedOutput("drops", NO_TAB)
                continue
            yield (index, row), (pack_pair(left, right), _draw(path, row))
    tally.publish()
    yield beam.pvalue.TaggedOutput("lines", (index, tally.done))


def pairs_stats(meta: Meta, lines: Iterable[tuple[int, int]], drops: Iterable[str]) -> dict[str, Any]:
    """stats.json: lines in, written and dropped by reason; refuses unbalanced books, commits nothing
    when nothing was written."""
    from dew.preprocess.job_errors import TooManyDropsError

    lines_in = sum(n for _, n in lines)
    dropped = dict(collections.Counter(drops))
    written = sum(s.records for shards in meta.splits.values() for s in shards)
    if lines_in != written + sum(dropped.values()):
        raise RuntimeError(f"pair accounting is off: {lines_in} in, {written} written, {dropped} dropped")
    if not written:
        raise TooManyDropsError(f"the job wrote none of {lines_in} lines: {dropped}")
    return {"lines_in": lines_in, "lines_written": written, "dropped": dropped, "fingerprint": meta.fingerprint()}


def write_pairs(paths: Any, output: str, identity: Any, *, val_fraction: float, shard_bytes: int) -> Any:
    """PCollection[(file index, path)] → the committed pairs directory; yields its Meta."""
    import apache_beam as beam

    from dew.preprocess.shard_files import ShardFormat
    from dew.preprocess.writing import Sharding, WriteDrawn

    read = paths | "ReadPairs" >> beam.FlatMap(_pairs).with_outputs("drops", "lines", main="records")
    return read.records | "WritePairs" >> WriteDrawn(
        output,
        ShardFormat(ext="array_record", section=PairsSection()),
        identity,
        sharding=Sharding(val_fraction=val_fraction, per_shard=shard_bytes),
        amount=len,
        finish=pairs_stats,
        side=(beam.pvalue.AsList(read.lines), beam.pvalue.AsList(read.drops)),
    )


# 5. The job (dew/pipelines/<kind>_job.py, which also declares itself there with `JOB = Job(...)`; this
# toy one lives in tests/, so dew-preprocess does not offer it).
def parser() -> argparse.ArgumentParser:
    from dew.pipelines import flags

    p = flags.parser("dew-preprocess toy-pairs", "tab-separated lines → committed pairs")
    p.add_argument("--input", action="append", required=True, help="text files of left<TAB>right lines")
    p.add_argument("--output", required=True, help="pairs directory")
    p.add_argument("--val_fraction", type=float, default=0.0, help="share of lines, drawn by a hash, held out")
    p.add_argument("--shard_size_mb", type=flags.positive_number, default=256.0, help="target shard size")
    flags.switch(p, "--overwrite", "replace an output written by another config")
    return p


def main(argv: Sequence[str] | None = None) -> Mapping[str, int]:
    from dew.pipelines import common
    from dew.preprocess.commit import JobIdentity
    from dew.preprocess.files import expand_inputs, manifest_fingerprint
    from dew.preprocess.progress import Phase
    from dew.preprocess.writing import COMMIT, WRITE

    args, options = common.start(parser(), argv)
    inputs = expand_inputs(args.input)
    shard_bytes = max(1, int(args.shard_size_mb * (1 << 20)))
    config = {"job": "toy-pairs", "val_fraction": args.val_fraction, "shard_bytes": shard_bytes}
    identity = JobIdentity(config=config, inputs=manifest_fingerprint(inputs))
    output = args.output.rstrip("/")
    build = functools.partial(
        _build, [i.path for i in inputs], output, identity, val_fraction=args.val_fraction, shard_bytes=shard_bytes
    )
    phases = (Phase(name="read", unit="lines"), Phase(name=WRITE, unit="pairs"), Phase(name=COMMIT))
    return common.run_committed(output, identity, options, build, overwrite=args.overwrite, phases=phases)


def _build(paths: list[str], output: str, identity: Any, pipeline: Any, **sizing: Any) -> Any:
    import apache_beam as beam

    return write_pairs(pipeline | "Inputs" >> beam.Create(list(enumerate(paths))), output, identity, **sizing)


def every_pair(records: PairRecords) -> dict[str, Any]:
    return records.read_batch(np.arange(len(records)))
