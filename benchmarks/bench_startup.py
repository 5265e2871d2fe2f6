"""Time to first batch of TokenWindows over ArrayRecord corpora of 1× and 10× the size, with and without the
offline piece index (`<split>.pieces.npz`) the tokenize job writes.

With the index, startup reads the index and the records of the first batch, so 10× the corpus should cost
about the same (target: ratio <= 1.2). Without it, the source reads every record once to learn the lengths.
Shards have a fixed size, as a job with --shard_bytes writes them, so 10× the corpus is 10× the shards. The
first batch's windows land in up to BATCH shards, and opening an ArrayRecord shard reads its record index
(O(records in the shard)), so both corpora hold at least BATCH shards: the cost measured is the corpus's
size, not the difference between opening one shard and eight.

Run: .venv/bin/python benchmarks/bench_startup.py
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

BASELINE = (
    "the same start over the 1x corpus (8 shards of 2,500 records); the scan line: the same starts without the "
    "piece index"
)
RECORDS_PER_SHARD = 2_500
SEQ_LEN, BATCH = 1024, 8


def write_corpus(directory: str, shards: int, seed: int = 0) -> None:
    """`shards` ArrayRecord shards of web-like documents (log-normal lengths, eos 0), plus meta.json."""
    from array_record.python.array_record_module import ArrayRecordWriter

    from dew.data import formats
    from dew.data.sections import TokensSection

    os.makedirs(directory)
    rng = np.random.default_rng(seed)
    entries = []
    for index in range(shards):
        name = formats.shard_name("train", index, shards, "array_record")
        path = os.path.join(directory, name)
        lengths = np.minimum(rng.lognormal(4.5, 1.0, size=RECORDS_PER_SHARD).astype(np.int64) + 1, 4096)
        ids = rng.integers(1, 50000, size=int(lengths.sum()), dtype=np.uint16)
        writer = ArrayRecordWriter(path, "group_size:1")
        for doc in np.split(ids, np.cumsum(lengths)[:-1]):
            doc[-1] = 0
            writer.write(doc.tobytes())
        writer.close()
        entries.append(
            formats.Shard(
                name=name,
                records=len(lengths),
                units=int(lengths.sum()),
                bytes=os.path.getsize(path),
                sha256=formats.sha256_file(path),
            )
        )
    section = TokensSection(tokenizer="bench", tokenizer_hash="0" * 64, vocab_size=50000, dtype="uint16", eos_id=0)
    meta = formats.Meta(section=section, splits={"train": tuple(entries)})
    formats.write_meta(directory, meta)


def write_index(directory: str) -> None:
    """What the tokenize job leaves beside the shards (here computed by the runtime's own scan)."""
    from dew.data import formats
    from dew.data.pieces import PIECES
    from dew.data.tokens.token_records import TokenRecords

    meta = formats.read_meta(directory)
    files = [os.path.join(directory, s.name) for s in meta.shards("train")]
    index = TokenRecords(files).pieces
    index.save(formats.derived_path(directory, "train", PIECES), meta.fingerprint())


def first_batch_seconds(directory: str, repeats: int = 3) -> float:
    from dew.data import DataPartition, Loading, TokenWindows

    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        spec = TokenWindows(path=directory, seq_len=SEQ_LEN, val_batches=0, loading=Loading(workers=0, threads=2))
        with spec.load(batch=BATCH).train(DataPartition()) as stream:
            next(stream)
            best = min(best, time.perf_counter() - start)  # up to the batch in hand; close is not start-up
    return best


def main() -> None:
    print(f"baseline: {BASELINE}")
    from dew.data import formats
    from dew.data.pieces import PIECES

    with tempfile.TemporaryDirectory(prefix="dew-bench-startup-") as root:
        sizes = {"1x": BATCH, "10x": 10 * BATCH}
        timings: dict[tuple[str, bool], float] = {}
        for label, shards in sizes.items():
            directory = os.path.join(root, label)
            write_corpus(directory, shards)
            first_batch_seconds(directory, repeats=1)  # warm the page cache, so both runs read from memory
            timings[label, False] = first_batch_seconds(directory, repeats=2)
            write_index(directory)
            timings[label, True] = first_batch_seconds(directory)
            records = shards * RECORDS_PER_SHARD
            size = sum(s.bytes for s in formats.read_meta(directory).shards("train")) / 1e6
            print(
                f"{label:>3}: {records:>7} records, {size:6.1f} MB: first batch {timings[label, True] * 1e3:7.1f} ms "
                f"with {PIECES}.npz, {timings[label, False] * 1e3:7.1f} ms scanning every record"
            )
        with_index = timings["10x", True] / timings["1x", True]
        without = timings["10x", False] / timings["1x", False]
        print(f"10x corpus / 1x corpus, time to first batch: {with_index:.2f}x with the piece index (target <= 1.2)")
        print(f"10x corpus / 1x corpus, time to first batch: {without:.2f}x without it (the scan is O(corpus))")
        print(f"10x corpus: the piece index starts {timings['10x', False] / timings['10x', True]:.1f}x faster")


if __name__ == "__main__":
    main()
