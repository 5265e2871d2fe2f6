"""The global training stream: shares, resume on another share count, ramps, closing."""

from __future__ import annotations

import grain
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, Dataset, Loading, Ramp, ramped
from dew.data.dataset import global_dataset
from dew.data.order import ShuffledEpochs, permute
from tests.support import assert_resume_exact, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


def numbers(n: int) -> grain.MapDataset:
    return grain.MapDataset.source(np.arange(n, dtype=np.int64))


@given(size=st.integers(1, 3000), seed=st.integers(0, 2**31), epoch=st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_permute_is_a_permutation(size: int, seed: int, epoch: int) -> None:
    out = permute(np.arange(size), size, seed, epoch)
    assert sorted(out.tolist()) == list(range(size))


def test_each_epoch_is_a_fresh_shuffle_of_every_record() -> None:
    order = ShuffledEpochs(np.arange(50), seed=3)
    first, second = order.indices(np.arange(50)), order.indices(np.arange(50, 100))
    assert sorted(first) == sorted(second) == list(range(50))
    assert first.tolist() != second.tolist()


@given(
    size=st.integers(1, 5000),
    first=st.integers(0, 20_000),
    stride=st.integers(1, 4),
    rows=st.integers(1, 64),
    steps=st.integers(1, 40),
)
@settings(max_examples=60, deadline=None)
def test_a_shuffled_order_equals_permute_step_after_step(size, first, stride, rows, steps) -> None:
    # Positions computed ahead for later steps must be the ones permute gives for each step alone.
    order = ShuffledEpochs(np.arange(size), seed=7, offset=3)
    for step in range(steps):
        ks = first + stride * (step * rows + np.arange(rows))
        epochs, within = np.divmod(ks + 3, size)
        expected = [permute(np.array([w]), size, 7, int(e))[0] for e, w in zip(epochs, within, strict=True)]
        np.testing.assert_array_equal(order.indices(ks), expected)


@given(
    shares=st.sampled_from([1, 2, 3, 4, 6]),
    new_shares=st.sampled_from([1, 2, 3, 4, 6]),
    multiple=st.integers(1, 4),
    stop_at=st.integers(0, 7),
    size=st.integers(5, 40),
    seed=st.integers(0, 1000),
)
@settings(max_examples=25, deadline=None)
def test_shares_make_the_global_batch_and_resume_is_exact(
    shares: int, new_shares: int, multiple: int, stop_at: int, size: int, seed: int
) -> None:
    batch = 12 * multiple  # divisible by every share count drawn
    data = global_dataset(train=np.arange(size), val=None, batch=batch, seed=seed, loading=SERIAL, val_batches=None)
    single, _ = read_global(data.train, 1, 8)
    split, _ = read_global(data.train, shares, 8)
    for want, got in zip(single, split, strict=True):
        np.testing.assert_array_equal(got, want)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=shares, count_after=new_shares)


@given(
    start=st.sampled_from([2, 4]),
    increments=st.integers(1, 3),
    samples=st.integers(1, 200),
    stop_at=st.integers(0, 12),
    shares=st.sampled_from([1, 2]),
    new_shares=st.sampled_from([1, 2]),
)
@settings(max_examples=20, deadline=None)
def test_a_ramped_stream_resumes_mid_ramp(
    start: int, increments: int, samples: int, stop_at: int, shares: int, new_shares: int
) -> None:
    final = start + 2 * increments
    data = global_dataset(train=np.arange(37), val=None, batch=final, seed=1, loading=SERIAL, val_batches=None)
    ramp = Ramp(start=start, increment=2, samples=samples)
    run = ramped(data, ramp)
    batches, state = read_global(run.train, 1, 12)
    stages = ramp.stages(final)
    sizes = [len(b) for b in batches]
    assert sizes[0] == start and sizes[-1] <= final
    assert state["records"] == sum(sizes)
    assert [s.batch for s in stages] == sorted({*(s.batch for s in stages)})
    assert_resume_exact(run.train, steps=12, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_ramp_stages_follow_integer_arithmetic() -> None:
    ramp = Ramp(start=8, increment=8, samples=100)
    stages = ramp.stages(32)
    # three increments; each stage lasts ceil(100 / 3 / batch) steps
    assert [(s.batch, s.records) for s in stages] == [(8, 0), (16, 40), (24, 88), (32, 136)]
    assert ramp.steps_for(136, 32) == 5 + 3 + 2
    assert ramp.steps_for(136 + 64, 32) == 12
    assert ramp.steps_for(41, 32) == 6
    with pytest.raises(ValueError, match="whole number"):
        Ramp(start=8, increment=5, samples=10).stages(32)


def test_epoch_steps_under_a_ramp_are_longer_than_flat() -> None:
    data = global_dataset(train=np.arange(1000), val=None, batch=32, seed=0, loading=SERIAL, val_batches=None)
    assert data.steps_per_epoch == 32
    assert ramped(data, Ramp(start=8, increment=8, samples=400)).steps_per_epoch > 32


def test_restoring_a_far_position_is_index_arithmetic() -> None:
    data = global_dataset(train=np.arange(10_007), val=None, batch=16, seed=5, loading=SERIAL, val_batches=None)
    stream = data.train(DataPartition())
    stream.set_state({**stream.get_state(), "records": 10**12})
    batch = next(stream)
    expected = ShuffledEpochs(np.arange(10_007), seed=5).indices(np.arange(10**12, 10**12 + 16))
    np.testing.assert_array_equal(batch, expected)
    last = 2**62 - 16  # the last step a position can name: read like any other
    stream.set_state({**stream.get_state(), "records": last})
    np.testing.assert_array_equal(next(stream), ShuffledEpochs(np.arange(10_007), seed=5).indices(last + np.arange(16)))
    for far in (2**62, 2**64):  # an endless stream used to end there at once, or fail deep in numpy
        with pytest.raises(ValueError, match=f"records {far} is past the 2\\*\\*62 records any stream reads"):
            stream.set_state({**stream.get_state(), "records": far})
    stream.close()


def test_validation_is_one_fixed_pass_of_whole_batches() -> None:
    data = global_dataset(
        train=np.arange(100), val=np.arange(1000, 1030), batch=8, seed=0, loading=SERIAL, val_batches=None
    )
    rows = [b.tolist() for b in data.val(DataPartition())]
    assert rows == [list(range(1000 + 8 * i, 1008 + 8 * i)) for i in range(3)]
    bounded = global_dataset(train=np.arange(100), val=np.arange(30), batch=8, seed=0, loading=SERIAL, val_batches=2)
    assert len(list(bounded.val(DataPartition()))) == 2


def test_from_grain_map_dataset_is_a_global_stream() -> None:
    ds = numbers(30).map(lambda i: {"x": np.array([i])})
    data = Dataset.from_grain(ds, batch=6, loading=SERIAL)
    assert data.records == 30 and data.steps_per_epoch == 5
    # A dataset repeated before it was handed over has no pass of its own to count: records is the
    # caller's to give, and without it the run has no epoch rather than one of 2**63 - 1 records.
    endless = Dataset.from_grain(ds.repeat(), batch=6, loading=SERIAL)
    assert endless.records is None
    with pytest.raises(ValueError, match="no record count"):
        endless.epoch_steps()
    assert Dataset.from_grain(ds.repeat(), batch=6, loading=SERIAL, records=30).steps_per_epoch == 5


@given(
    size=st.integers(6, 40),
    stop_at=st.integers(0, 9),
    counts=st.sampled_from([(1, 2), (2, 3), (3, 6), (6, 1), (2, 2)]),
    ramp=st.booleans(),
)
@settings(max_examples=10, deadline=None)
def test_a_grain_map_dataset_resumes_exactly_on_another_share_count(size, stop_at, counts, ramp) -> None:
    data = Dataset.from_grain(numbers(size).map(lambda i: {"x": np.array([i])}), batch=6, loading=SERIAL)
    before, after = counts
    if ramp:  # one step of 3, then 6: a run resumed after the first step may move to any count that divides 6
        data = ramped(data, Ramp(start=3, increment=3, samples=3))
        dividing_3 = {1: 1, 2: 1, 3: 3, 6: 3}
        before, after = dividing_3[before], after if stop_at else dividing_3[after]
    assert_resume_exact(data.train, steps=9, stop_at=stop_at, count_before=before, count_after=after)


def test_from_grain_share_pipeline_keeps_its_share_state() -> None:
    def share(partition: DataPartition) -> grain.IterDataset:
        return numbers(64)[partition.index :: partition.count].to_iter_dataset()

    data = Dataset.from_grain(share, batch=8, loading=SERIAL, records=64)
    stream = data.train(DataPartition(index=1, count=2))
    next(stream)
    state = stream.get_state()
    expected = next(stream)
    again = data.train(DataPartition(index=1, count=2))
    again.set_state(state)
    np.testing.assert_array_equal(next(again), expected)
    with pytest.raises(ValueError, match="share 1 of 2"):
        data.train(DataPartition(index=0, count=2)).set_state(state)
    with pytest.raises(TypeError, match="global record count"):
        ramped(data, Ramp(start=4, increment=4, samples=8))
    stream.close()
    again.close()


def test_from_grain_a_share_training_pipeline_that_ends_is_named_and_its_validation_pass_just_ends() -> None:
    # A share pipeline that runs dry ends the stream (a pod's readers all stop at that step: the four-process
    # tests), but not with grain's bare StopIteration: a trainer's next() is told which share ended and why.
    def share(partition: DataPartition) -> grain.IterDataset:
        return numbers(20)[partition.index :: partition.count].to_iter_dataset()

    data = Dataset.from_grain(share, batch=4, validation=share, loading=SERIAL)
    with data.train(DataPartition(index=1, count=2)) as stream:
        assert [next(stream).tolist() for _ in range(5)] == [[1, 3], [5, 7], [9, 11], [13, 15], [17, 19]]
        with pytest.raises(StopIteration, match=r"training pipeline of share 1 of 2 ended after 5 batches.*repeat"):
            next(stream)
    with data.val(DataPartition(index=1, count=2)) as stream:
        assert len(list(stream)) == 5  # a validation pass is one pass, which ends by itself


def test_a_foreign_position_is_refused_naming_what_changed() -> None:
    one = global_dataset(train=np.arange(10), val=None, batch=2, seed=0, loading=SERIAL, val_batches=None)
    other = global_dataset(train=np.arange(11), val=None, batch=2, seed=0, loading=SERIAL, val_batches=None)
    state = one.train(DataPartition()).get_state()
    with pytest.raises(ValueError, match=r"reads something else than this stream \(source\.records 10 -> 11\)"):
        other.train(DataPartition()).set_state(state)
    with pytest.raises(ValueError, match="not a dew data position"):
        one.train(DataPartition()).set_state({"kind": "something"})


@pytest.mark.parametrize(
    ("partition", "batch", "message"),
    [
        (dict(index=0, count=3), 8, "does not split into 3"),
        (dict(index=0, count=16), 8, "smaller than the 16 shares"),
    ],
)
def test_a_partition_that_does_not_divide_the_batch_is_refused(partition, batch, message) -> None:
    data = global_dataset(train=np.arange(10), val=None, batch=batch, seed=0, loading=SERIAL, val_batches=None)
    with pytest.raises(ValueError, match=message):
        data.train(DataPartition(**partition))


def test_partition_fields_are_checked() -> None:
    with pytest.raises(ValueError, match="index 4 is outside"):
        DataPartition(index=4, count=4)
    with pytest.raises(ValueError, match="reader 2 is outside"):
        DataPartition(readers=2, reader=2)
    with pytest.raises(ValueError, match="count must be at least 1"):
        DataPartition(count=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reads": None}, "data position reads must be a JSON object, got NoneType"),
        ({"tokens": "abc"}, "data position tokens must be a JSON object, got str"),
        ({"tokens": {"c": "x"}}, r"data position tokens\['c'\] must be a non-negative int"),
        ({"records": True}, "data position records must be a non-negative int"),
        ({"records": 2**64}, r"records 18446744073709551616 is past the 2\*\*62 records any stream reads"),
        ({"kind": "dew.share/1", "index": 2, "count": 2, "state": {}}, "index 2 is not below its count 2"),
        ({"kind": "dew.share/1", "index": 0, "count": 1, "state": []}, "data position state must be a JSON object"),
    ],
)
def test_a_malformed_position_is_refused_by_field(change, message) -> None:
    from dew.data import position

    state = {"kind": position.GLOBAL, "records": 4, "reads": {"order": "x"}, "tokens": {}, **change}
    with pytest.raises(ValueError, match=message):
        position.parse(state)


def test_from_grain_refuses_a_batch_of_zero_by_name() -> None:
    """With a validation pipeline, batch=0 used to reach `len(ds) // batch` as a ZeroDivisionError."""
    with pytest.raises(ValueError, match=r"from_grain\(batch=\) must be a positive int"):
        Dataset.from_grain(numbers(30), batch=0, validation=numbers(12), loading=SERIAL)


def test_a_resume_onto_another_batch_continues_at_the_record_count_or_is_refused_naming_the_batch() -> None:
    """A position is a global record count: a run whose batch changed continues at that record when it
    is a step of the new batch, and is refused, saying the batch or ramp changed, when it falls inside one."""

    def train(batch: int):
        return global_dataset(
            train=np.arange(100), val=None, batch=batch, seed=3, loading=SERIAL, val_batches=None
        ).train

    _, state = read_global(train(4), 2, 3)
    tail, _ = read_global(train(6), 3, 2, state)
    np.testing.assert_array_equal(
        np.concatenate(tail), ShuffledEpochs(np.arange(100), seed=3).indices(np.arange(12, 24))
    )
    stream = train(8)(DataPartition())
    with pytest.raises(
        ValueError, match=r"record 12 falls inside a step of 8 records.*batch or ramp is not the checkpoint's"
    ):
        stream.set_state(state)
    stream.close()
