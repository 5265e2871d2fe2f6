"""Beam's own memory cost of shuffling a corpus: bench_clean_memory.py's baseline (not a benchmark itself).

    python benchmarks/shuffle_baseline.py 'in/*.jsonl' OUT SHARD_MIB [beam flags]

The clean job's two kinds of grouping of every document, with nothing of dew's around them: read the
lines, group them by a hash of the line (a key a document, as exact dedup's and each band's grouping),
then by shard (the shard writer's), and write each shard's lines to a file as they come. The baseline
shuffles the text both times; the clean job shuffles only ids and hashes in the first kind.
It runs as the dew-preprocess program runs a job (its own process,
the same local runner with workers forked from it), so what a process's peak memory does as the corpus
grows here is the runner's share of the clean job's.
"""

from __future__ import annotations

import glob
import hashlib
import math
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _by_text(line: str) -> tuple[bytes, str]:
    return hashlib.blake2b(line.encode(), digest_size=8).digest(), line


def _by_shard(element: tuple[bytes, Iterable[str]], shards: int) -> Iterator[tuple[int, str]]:
    key, lines = element
    for line in lines:
        yield int.from_bytes(key, "big") % shards, line


def _write(element: tuple[int, Iterable[str]], output: str) -> Iterator[int]:
    shard, lines = element
    written = 0
    with open(os.path.join(output, f"shard-{shard:05d}.txt"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
            written += 1
    yield written


def main(argv: list[str]) -> int:
    from dew.pipelines import zygotes

    zygotes.allow()  # a launcher in a fresh process, as the dew-preprocess program is
    zygotes.bound_malloc()
    import apache_beam as beam

    from dew.pipelines import common

    pattern, output, shard_mib, rest = argv[0], argv[1], float(argv[2]), argv[3:]
    size = sum(os.path.getsize(path) for path in glob.glob(pattern))
    shards = max(1, math.ceil(size / (shard_mib * (1 << 20))))
    os.makedirs(output, exist_ok=True)
    options = common.pipeline_options(rest)
    pipeline = common.make_pipeline(options)
    _ = (
        pipeline
        | "Read" >> beam.io.ReadFromText(pattern)
        | "KeyByText" >> beam.Map(_by_text)
        | "ByText" >> beam.GroupByKey()
        | "KeyByShard" >> beam.FlatMap(_by_shard, shards)
        | "ByShard" >> beam.GroupByKey()
        | "Write" >> beam.FlatMap(_write, output)
    )
    pipeline.run().wait_until_finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
