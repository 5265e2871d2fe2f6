"""A real four-process jax cluster on 127.0.0.1 whose shares each have two readers (see four_process.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dew.data import DataPartition
from tests.jax import cluster
from tests.jax.cases import STEPS, dataset, described, share_dataset
from tests.jax.four_process import SIZES, UNEVEN
from tests.support import interleave, read_global

pytestmark = [pytest.mark.jax, pytest.mark.slow]

TIMEOUT = 240  # seconds for all four processes together; a bound, not an expectation
# One compute thread per process: four processes share the machine's cores.
ENV = {
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
# [index, count, readers, reader] of processes 0..3 under each mesh of cases.pair_meshes.
PARTITIONS = {
    "data_pipeline_pairs": [[0, 2, 2, 0], [0, 2, 2, 1], [1, 2, 2, 0], [1, 2, 2, 1]],
    "data_sequence_fsdp_pairs": [[0, 2, 2, 0], [0, 2, 2, 1], [1, 2, 2, 0], [1, 2, 2, 1]],
    "data_sequence_interleaved": [[0, 2, 2, 0], [1, 2, 2, 0], [0, 2, 2, 1], [1, 2, 2, 1]],
    "data_pipeline_reversed": [[1, 2, 2, 0], [0, 2, 2, 0], [1, 2, 2, 1], [0, 2, 2, 1]],
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("four_processes")
    return cluster.run("tests.jax.four_process", 4, out, timeout=TIMEOUT, env=ENV)


def _share_batches(lengths: tuple[tuple[int, ...], ...], index: int) -> list[dict]:
    with share_dataset(lengths).train(DataPartition(index=index, count=2)) as stream:
        return [described(b) for b in stream]


def test_each_pair_of_processes_reads_one_share(reports: list[dict]) -> None:
    for name, want in PARTITIONS.items():
        assert [r["partitions"][name] for r in reports] == want, name


def test_second_readers_get_their_first_readers_batches(reports: list[dict]) -> None:
    whole, _ = read_global(dataset().train, 1, STEPS)
    for name, parts in PARTITIONS.items():
        shares = [
            next(r["first_reader"][name] for r, p in zip(reports, parts, strict=True) if p[0] == i) for i in (0, 1)
        ]
        for report, part in zip(reports, parts, strict=True):
            assert report["first_reader"][name] == shares[part[0]], name
        for step in range(STEPS):
            np.testing.assert_array_equal(interleave([shares[0][step], shares[1][step]]), whole[step])
        assert [r["val_steps"][name] for r in reports] == [2] * 4, name
        for report, (index, _, _, reader) in zip(reports, parts, strict=True):
            why = "OSError: disk gone" if reader == 0 else "RuntimeError: the first reader of share"
            assert report["failure"][name].startswith(why), (name, report["failure"][name])
            assert reader == 0 or f"share {index} of 2 failed: OSError: disk gone" in report["failure"][name]


def test_global_arrays_over_four_processes_are_the_global_batch(reports: list[dict]) -> None:
    whole, _ = read_global(dataset().train, 1, STEPS)
    for name in PARTITIONS:
        for report in reports:  # each share's rows fill its half of the row blocks, share 0 first
            want = [np.concatenate([w[0::2], w[1::2]]).tolist() for w in whole]
            assert report["global_array"][name] == want, name


def test_shares_handing_over_payloads_of_different_sizes(reports: list[dict]) -> None:
    shares = [_share_batches(SIZES, i) for i in (0, 1)]
    assert [len(s) for s in shares] == [3, 3]
    for name, parts in PARTITIONS.items():
        for report, part in zip(reports, parts, strict=True):
            got, how = report["sizes"][name]
            assert how == "end", (name, how)
            assert got == shares[part[0]], name


def test_a_share_that_ends_early_ends_every_reader_together(reports: list[dict]) -> None:
    assert [len(_share_batches(UNEVEN, i)) for i in (0, 1)] == [3, 2]
    for name in PARTITIONS:
        assert [r["uneven"][name] for r in reports] == [[2, "end"]] * 4, name


def test_a_failing_share_stops_every_process(reports: list[dict]) -> None:
    for name, parts in PARTITIONS.items():
        for report, (index, _, _, reader) in zip(reports, parts, strict=True):
            steps, how = report["one_failed"][name]
            assert steps == 0, (name, report["one_failed"][name])
            if index == 1:
                want = "OSError: disk gone" if reader == 0 else "RuntimeError: the first reader of share 1 of 2 failed"
            else:
                want = "RuntimeError: the first reader of share 1 of 2 failed"
            assert how.startswith(want), (name, how)
