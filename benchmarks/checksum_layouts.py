"""bench_gcs_ranges' checksum-layout rows: the same documents in .bin shards written with the flat
`.blocks` (version 1, the baseline) and the two-level one (dew.data.block_sums), read over the emulator."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from dew.data import block_sums, ranges
from tests.runtime.token_support import write_corpus

SUMS_SHARDS, SUMS_IDS, SUMS_STEPS = 4, 4 << 20, 40


def checksum_layouts(
    scratch: str, upload: Callable[[str, str], None], fresh: Callable[[str, int], None], stream: Any, batch_bytes: int
) -> list[str]:
    """Checksum bytes and requests of a first batch and of the SUMS_STEPS after it, and the checksum
    memory the process holds then, for larger shards written with each `.blocks` layout; `upload`,
    `fresh` (its _fresh_cache) and `stream` are bench_gcs_ranges' own, `batch_bytes` a batch's windows' bytes."""
    rng = np.random.default_rng(1)
    docs = [np.append(rng.integers(1, 60000, 2047), 0) for _ in range(SUMS_SHARDS * SUMS_IDS // 2048)]
    rows, base = [], (0, 0, 0)
    for version, budget in ((1, 0), (block_sums.BLOCKS_VERSION, 0), (block_sums.BLOCKS_VERSION, 256 << 10)):
        name = f"sums-{version}-{budget}"
        local = write_corpus(
            os.path.join(scratch, name), {"train": docs}, shards=SUMS_SHARDS, block_bytes=256, blocks_version=version
        )
        upload(local, f"gs://dew-bench/{name}")
        fresh(scratch, 64 << 30)
        os.environ[block_sums.CHECKSUM_BYTES_ENV] = str(budget or 32 << 20)
        block_sums.forget()
        counted: list[tuple[int, int]] = []
        with stream(f"gs://dew-bench/{name}", read_buffer=1).train() as batches:
            for steps in (1, SUMS_STEPS):
                before = dataclasses.replace(ranges.FETCHED)
                for _ in range(steps):
                    next(batches)
                f = ranges.FETCHED
                counted.append(
                    (
                        f.index_bytes + f.sums_bytes - before.index_bytes - before.sums_bytes,
                        f.index_reads + f.sums_reads - before.index_reads - before.sums_reads,
                    )
                )
        held = sum(s.nbytes for s in ranges._SUMS.values()) + block_sums.held()[1]
        (first, first_requests), (later, later_requests) = counted
        base = (first, later, held) if version == 1 else base
        label = "flat (v1)" if version == 1 else f"two-level (v2), {(budget or 32 << 20) >> 10} KiB budget"
        rows.append(
            f"{label}: first batch {first / 1e3:.1f} kB of checksums = {first / batch_bytes:.3f}x its windows' bytes "
            f"({first / base[0]:.3f}x v1's), {first_requests} requests | next {SUMS_STEPS} steps "
            f"{later / (SUMS_STEPS * batch_bytes):.3f}x their bytes in checksums, {later_requests} requests | "
            f"held {held / 1e3:.1f} kB ({held / base[2]:.3f}x v1's) = {held / (SUMS_SHARDS * SUMS_IDS * 2):.4f}x "
            "the shards touched"
        )
    return rows
