"""WritePairs: text files of `left<TAB>right` lines → a committed `dew.pairs/1` directory, on the writer
skeleton (dew.preprocess.writing). A line is the unit of the books: lines in = written + dropped."""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from dew.data.formats import Meta
from dew.data.pairs.records import pack_pair
from dew.data.sections import PairsSection

NO_TAB = "no_tab"


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
    from dew.preprocess.drops import check_books
    from dew.preprocess.job_errors import TooManyDropsError

    lines_in = sum(n for _, n in lines)
    dropped = dict(collections.Counter(drops))
    written = meta.record_count
    check_books("line", lines_in, written, dropped)
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
