"""Mixtures and phases: exact shares over every prefix, passes, resume, phase changes by name."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dew.data import Corpus, DataPartition, Loading, PackedTokens, Ramp, mixed_records, mixture, ramped
from dew.data.dataset import global_dataset
from dew.data.mixture import MixtureOrder, integer_weights
from dew.data.phases import DataPhase, PhasedOrder
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, assert_resume_exact, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


def corpora(sizes: list[int], weights: list[float]) -> list[Corpus]:
    return [
        Corpus(f"c{i}", np.arange(size) + 1000 * i, weight)
        for i, (size, weight) in enumerate(zip(sizes, weights, strict=True))
    ]


@given(weights=st.lists(st.integers(1, 9), min_size=1, max_size=5))
@example(weights=[1, 1, 1, 6, 6])  # "furthest behind" drifts exactly one record off here
@settings(max_examples=100, deadline=None)
def test_shares_stay_within_one_record_of_their_weights_over_every_prefix(weights: list[int]) -> None:
    order = MixtureOrder(corpora([7] * len(weights), weights), seed=0)
    ints = np.array(integer_weights(weights))
    records = np.arange(3 * order.period + 1)
    counts = np.stack([order.counts(int(r)) for r in records])
    ideal = records[:, None] * ints[None, :] / ints.sum()
    assert (np.abs(counts - ideal) < 1).all()
    corpus, _ = order.locate(records[:-1])
    np.testing.assert_array_equal(np.bincount(corpus, minlength=len(weights)), counts[-1])


@given(
    sizes=st.lists(st.integers(1, 30), min_size=2, max_size=3),
    weights=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=3, max_size=3),
)
@settings(max_examples=50, deadline=None)
def test_one_pass_stops_before_a_corpus_comes_round_and_mixed_records_reads_all(sizes, weights) -> None:
    parts = corpora(sizes, weights[: len(sizes)])
    one_pass = MixtureOrder(parts, seed=None)
    rows = one_pass.read(np.arange(len(one_pass)))
    counts = [int(np.sum(rows // 1000 == i)) for i in range(len(sizes))]
    assert all(c <= s for c, s in zip(counts, sizes, strict=True))
    assert any(c == s for c, s in zip(counts, sizes, strict=True))  # one more would repeat that corpus
    for i in range(len(sizes)):  # each corpus in its own order
        np.testing.assert_array_equal(rows[rows // 1000 == i], np.arange(counts[i]) + 1000 * i)
    total = mixed_records(parts)
    endless = MixtureOrder(parts, seed=4)
    assert all(n >= s for n, s in zip(endless.counts(total), sizes, strict=True))
    assert not all(n >= s for n, s in zip(endless.counts(total - 1), sizes, strict=True))


def test_each_corpus_cycles_its_own_shuffled_epochs() -> None:
    order = MixtureOrder(corpora([3, 50], [1, 1]), seed=7)
    rows = order.read(np.arange(12))
    small = rows[rows < 1000]
    assert sorted(small[:3]) == sorted(small[3:6]) == [0, 1, 2]


def test_mixture_is_a_picklable_grain_map_dataset() -> None:
    import grain

    ds = mixture(corpora([4, 4], [1, 1]), seed=None)
    assert isinstance(ds, grain.MapDataset) and len(ds) == 8
    assert [int(x) for x in ds] == [0, 1000, 1, 1001, 2, 1002, 3, 1003]
    assert [int(x) for x in pickle.loads(pickle.dumps(ds))] == [int(x) for x in ds]
    assert len(mixture(corpora([4, 4], [1, 1]), seed=1)) > 10**15


@given(
    weights=st.lists(st.sampled_from([1.0, 2.0, 0.5, 3.0]), min_size=2, max_size=3),
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 8),
    seed=st.integers(0, 100),
)
@settings(max_examples=10, deadline=None)
def test_a_mixture_stream_resumes_exactly(weights, shares, new_shares, stop_at, seed) -> None:
    order = MixtureOrder(corpora([11, 5, 23][: len(weights)], weights), seed)
    data = global_dataset(train=None, val=None, batch=8, seed=seed, loading=SERIAL, val_batches=None, order=order)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_restoring_record_10_to_the_9_is_arithmetic() -> None:
    order = MixtureOrder(corpora([1013, 77], [3, 1]), seed=2)
    data = global_dataset(train=None, val=None, batch=16, seed=2, loading=SERIAL, val_batches=None, order=order)
    stream = data.train(DataPartition())
    stream.set_state({**stream.get_state(), "records": 10**9})
    np.testing.assert_array_equal(next(stream), order.read(np.arange(10**9, 10**9 + 16)))
    assert stream.get_state()["tokens"] == {}  # plain arrays do not count tokens
    stream.close()


def test_a_changed_mixture_is_refused_by_corpus_name() -> None:
    saved = MixtureOrder(corpora([10, 10], [1, 1]), seed=0).describe()
    with pytest.raises(ValueError, match="corpus 'c1' weight 1 -> 2"):
        MixtureOrder(corpora([10, 10], [1, 2]), seed=0).check_resume(saved, 4)
    with pytest.raises(ValueError, match="corpus 'c1' was dropped"):
        MixtureOrder(corpora([10], [1]), seed=0).check_resume(saved, 4)


def test_bad_weights_are_refused() -> None:
    for weight in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="corpus 'a': weight must be a positive number"):
            Corpus("a", np.arange(3), weight)
    with pytest.raises(ValueError, match="corpus 'e' holds no records"):
        Corpus("e", np.arange(0), 1.0)


# Phases


def phased(untils: list[int | None], weights: list[list[float]], seed: int = 0) -> PhasedOrder:
    return PhasedOrder([(u, corpora([9, 13], w)) for u, w in zip(untils, weights, strict=True)], seed)


def test_each_phase_continues_every_corpus_where_the_last_left_it() -> None:
    order = phased([12, None], [[1, 1], [1, 3]])
    rows = order.read(np.arange(12 + 16 * 2))
    first = [int(r) for r in rows if r < 1000]
    assert sorted(first[:9]) == list(range(9))  # corpus 0's first epoch, unbroken across the boundary
    whole = MixtureOrder(corpora([9, 13], [1, 1]), seed=0)
    np.testing.assert_array_equal(rows[:12], whole.read(np.arange(12)))


@given(
    until=st.integers(1, 6),
    stop_at=st.integers(0, 10),
    shares=st.sampled_from([1, 2]),
    new_shares=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 20),
)
@settings(max_examples=8, deadline=None)
def test_a_phased_stream_resumes_exactly(until, stop_at, shares, new_shares, seed) -> None:
    order = phased([until * 4, None], [[1, 1], [1, 3]], seed)
    data = global_dataset(train=None, val=None, batch=4, seed=seed, loading=SERIAL, val_batches=None, order=order)
    assert_resume_exact(data.train, steps=10, stop_at=stop_at, count_before=shares, count_after=new_shares)
    run = ramped(data, Ramp(start=2, increment=2, samples=10))  # its first stage splits into at most 2 shares
    assert_resume_exact(run.train, steps=10, stop_at=stop_at, count_before=shares, count_after=min(new_shares, 2))


def test_a_resume_accepts_appended_and_moved_phases_and_refuses_the_rest_by_name() -> None:
    plain = MixtureOrder(corpora([9, 13], [1, 1]), seed=0).describe()
    phased([20, None], [[1, 1], [2, 1]]).check_resume(plain, 16)  # a run of one mixture continues into phases
    saved = phased([20, None], [[1, 1], [2, 1]]).describe()
    phased([20, 40, None], [[1, 1], [2, 1], [1, 5]]).check_resume(saved, 24)  # appended
    phased([28, None], [[1, 1], [2, 1]]).check_resume(saved, 16)  # the current phase moved past the step
    with pytest.raises(ValueError, match="phase 0 ended at record 20 in the checkpoint, and now ends at 28"):
        phased([28, None], [[1, 1], [2, 1]]).check_resume(saved, 24)
    with pytest.raises(ValueError, match="phase 0 now ends at record 12, before the checkpoint's record 16"):
        phased([12, None], [[1, 1], [2, 1]]).check_resume(saved, 16)
    with pytest.raises(ValueError, match="phase 1 of the checkpoint's data was changed: corpus 'c0' weight 2 -> 3"):
        phased([20, None], [[1, 1], [3, 1]]).check_resume(saved, 24)


def test_packed_tokens_phases_over_real_corpora_resume_and_count_tokens(tmp_path) -> None:
    a = write_corpus(str(tmp_path / "a"), {"train": documents(40)})
    b = write_corpus(str(tmp_path / "b"), {"train": documents(25, seed=3)})
    spec = PackedTokens(
        phases=(DataPhase({a: 1.0, b: 1.0}, until_step=3), DataPhase({a: 1.0, b: 3.0})),
        seq_len=15,
        loading=SERIAL,
        val_batches=1,
    )
    data = spec.load(batch=4)
    assert_resume_exact(data.train, steps=7, stop_at=4, count_before=2, count_after=4)
    batches, state = read_global(data.train, 1, 5)
    # phase 1 (3 steps): 6 windows each; phase 2 (2 steps): 2 of a, 6 of b. The counters hold the real
    # tokens of those windows, padding excluded: together, every non-padding slot read.
    assert sum(state["tokens"].values()) == sum(int((b["text_segment_ids"] > 0).sum()) for b in batches)
    assert 0 < state["tokens"][a] <= 8 * 16 and 0 < state["tokens"][b] <= 12 * 16
    assert len(list(data.val(DataPartition()))) == 1


def test_a_mixture_resumes_after_its_corpora_move_and_refuses_one_that_changed(tmp_path) -> None:
    """A corpus is what it reads, not where it lies: copied to another path, bucket or mount, a saved
    position resumes there, token counters included; a corpus whose content changed is still refused."""
    import shutil

    a = write_corpus(str(tmp_path / "a"), {"train": documents(50, seed=1)})
    b = write_corpus(str(tmp_path / "b"), {"train": documents(50, seed=2, base=500)})

    def reader(paths: dict[str, float]):
        return PackedTokens(path=paths, seq_len=16, seed=4, loading=SERIAL).load(batch=4).train

    full, full_state = read_global(reader({a: 1.0, b: 2.0}), 1, 6)
    _, state = read_global(reader({a: 1.0, b: 2.0}), 2, 3)
    moved_a, moved_b = shutil.copytree(a, tmp_path / "elsewhere" / "a"), shutil.copytree(b, tmp_path / "b2")
    tail, tail_state = read_global(reader({str(moved_a): 1.0, str(moved_b): 2.0}), 1, 3, state)
    assert_batches_equal(full[3:], tail)
    assert tail_state["tokens"] == {str(moved_a): full_state["tokens"][a], str(moved_b): full_state["tokens"][b]}

    other = write_corpus(str(tmp_path / "other"), {"train": documents(50, seed=3)})
    stream = reader({str(moved_a): 1.0, other: 2.0})(DataPartition())
    with pytest.raises(ValueError, match=f"corpus '{b}' was dropped.*corpus '{other}' was added"):
        stream.set_state(state)
    stream.close()


@given(stop_at=st.integers(0, 9), shares=st.sampled_from([1, 2]), new_shares=st.sampled_from([1, 2]))
@settings(max_examples=6, deadline=None)
def test_ramped_packed_phases_over_real_corpora_resume_exactly(tmp_path_factory, stop_at, shares, new_shares) -> None:
    root = tmp_path_factory.mktemp("ramped")
    a = write_corpus(str(root / "a"), {"train": documents(40)})
    b = write_corpus(str(root / "b"), {"train": documents(25, seed=3)})
    spec = PackedTokens(
        phases=(DataPhase({a: 1.0, b: 1.0}, until_step=3), DataPhase({a: 1.0, b: 3.0})),
        seq_len=15,
        loading=SERIAL,
        val_batches=0,
    )
    run = ramped(spec.load(batch=4), Ramp(start=2, increment=2, samples=6))
    assert_resume_exact(run.train, steps=9, stop_at=stop_at, count_before=shares, count_after=new_shares)


@pytest.mark.parametrize("weights", [[1.0, 1e-320], [1e308, 1e-308], [1.0, 5e-7]])
def test_weights_too_far_apart_for_a_period_are_refused_by_name(weights) -> None:
    """A subnormal weight passed validation (finite, above zero) and then overflowed rounding the weights
    to integers: an OverflowError naming nothing. Weights more than a period apart are refused saying so."""
    with pytest.raises(ValueError, match=r"mixture weights .* are more than 1048576 apart"):
        MixtureOrder(corpora([3, 3], weights), seed=0)
