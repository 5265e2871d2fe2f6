"""What verifying shards against meta.json costs: one first epoch of TokenWindows over a local .bin corpus.

Readers check each local shard's checksum the first time a host opens it and cache the verdict
(dew.data.integrity), so the cost is one read of each shard per host, then nothing. Four runs of the
same epoch: verification off (DEW_VERIFY=0, the baseline); on with an empty verification cache (cold:
each shard hashed once, by crc32c as the writers record it); on with the cache filled (warm); and cold
again over a meta.json without crc32c (older writers), which falls back to sha256. Target: cold crc32c
<= 1.10x the baseline, warm ~1.00x. The shards sit in the page cache for every run, so the hash reads
memory, not disk: the least favourable case for the check, since a disk read would cost both sides alike.

Run: .venv/bin/python benchmarks/bench_verify.py
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time

import numpy as np

BASELINE = "the same first epoch (load + every batch) of TokenWindows with DEW_VERIFY=0: sizes checked, no checksums"
SHARDS, TOKENS = 8, 64_000_000
SEQ, BATCH, ROUNDS = 1024, 32, 5


def write_corpus(directory: str) -> None:
    from dew.data import formats, integrity
    from dew.data.sections import TokensSection

    os.makedirs(directory)
    rng = np.random.default_rng(0)
    entries = []
    for index in range(SHARDS):
        name = formats.shard_name("train", index, SHARDS, "bin")
        path = os.path.join(directory, name)
        rng.integers(1, 50000, size=TOKENS // SHARDS, dtype=np.uint16).tofile(path)
        sha256, crc32c = integrity.digests(path)
        entries.append(
            formats.Shard(
                name=name, records=1, units=TOKENS // SHARDS, bytes=os.path.getsize(path), sha256=sha256, crc32c=crc32c
            )
        )
    section = TokensSection(tokenizer="bench", tokenizer_hash="b" * 8, vocab_size=50000, dtype="uint16", eos_id=0)
    formats.write_meta(directory, formats.Meta(section=section, splits={"train": tuple(entries)}))


def without_crc32c(directory: str, copy: str) -> None:
    """The same shards (hard links) under a meta.json an older writer wrote: sha256 only."""
    from dew.data import formats

    os.makedirs(copy)
    meta = formats.read_meta(directory)
    shards = tuple(dataclasses.replace(s, crc32c="") for s in meta.shards("train"))
    for shard in shards:
        os.link(os.path.join(directory, shard.name), os.path.join(copy, shard.name))
    formats.write_meta(copy, dataclasses.replace(meta, splits={"train": shards}))


def epoch_seconds(directory: str) -> float:
    from dew.data import DataPartition, Loading, TokenWindows

    start = time.perf_counter()
    data = TokenWindows(path=directory, seq_len=SEQ, val_batches=0, loading=Loading(workers=0, threads=2))
    data = data.load(batch=BATCH)
    with data.train(DataPartition()) as stream:
        for _ in range(data.records // BATCH):
            next(stream)
    return time.perf_counter() - start


def hash_seconds(directory: str) -> float:
    """Verifying every shard alone, with an empty cache: the whole cold cost, without the epoch's noise."""
    from dew.data import formats

    start = time.perf_counter()
    for shard in formats.read_meta(directory).shards("train"):
        formats.verify_shard(directory, shard, checksum=True)
    return time.perf_counter() - start


def main() -> None:
    print(f"baseline: {BASELINE}")
    with tempfile.TemporaryDirectory(prefix="dew-bench-verify-") as root:
        directory, legacy = os.path.join(root, "corpus"), os.path.join(root, "legacy")
        write_corpus(directory)
        without_crc32c(directory, legacy)
        os.environ["DEW_VERIFY"] = "0"
        epoch_seconds(directory)  # page cache and imports warm for every run below
        runs: dict[str, list[float]] = {}
        # Modes interleave within each round, so load from other processes falls on all of them alike.
        for round_ in range(ROUNDS):
            cache = os.path.join(root, f"cache-{round_}")
            for mode, path, env in (
                ("off", directory, {"DEW_VERIFY": "0"}),
                ("cold", directory, {"DEW_VERIFY": "1", "DEW_CACHE_DIR": cache}),
                ("warm", directory, {"DEW_VERIFY": "1", "DEW_CACHE_DIR": cache}),
                ("sha256", legacy, {"DEW_VERIFY": "1", "DEW_CACHE_DIR": cache}),
                ("hash crc32c", directory, {"DEW_VERIFY": "1", "DEW_CACHE_DIR": cache + "-hash"}),
                ("hash sha256", legacy, {"DEW_VERIFY": "1", "DEW_CACHE_DIR": cache + "-hash"}),
            ):
                os.environ.update(env)
                timed = hash_seconds if mode.startswith("hash") else epoch_seconds
                runs.setdefault(mode, []).append(timed(path))
        best = {mode: min(times) for mode, times in runs.items()}
        size = SHARDS * (TOKENS // SHARDS) * 2 / 1e6
        print(f"corpus: {SHARDS} .bin shards, {size:.0f} MB; epoch = {TOKENS // (SEQ + 1) // BATCH} batches of {BATCH}")
        print(f"fastest of {ROUNDS} rounds each:")
        print(f"  verification off (baseline)               {best['off']:6.3f} s")
        for label, mode in (
            ("on, cold cache (crc32c)", "cold"),
            ("on, warm cache", "warm"),
            ("on, cold cache, sha256 only", "sha256"),
            ("hashing alone, crc32c", "hash crc32c"),
            ("hashing alone, sha256", "hash sha256"),
        ):
            print(f"  {label:<41} {best[mode]:6.3f} s  {best[mode] / best['off']:5.2f}x baseline")
        print(
            f"cold crc32c / baseline: {best['cold'] / best['off']:.2f}x (target <= 1.10; the hash alone is "
            f"{best['hash crc32c'] / best['off']:.2f}x); warm: {best['warm'] / best['off']:.2f}x"
        )


if __name__ == "__main__":
    main()
