"""A streamed HF split: per-share pipelines whose position is the share's own, resumed exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import datasets as hf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, HFOptions, HubDataset, ramped
from dew.data.ramp import Ramp
from tests.runtime.providers_support import SERIAL, ns, rows, share_batches, write_jsonl


@pytest.fixture(scope="module")
def options(tmp_path_factory: pytest.TempPathFactory) -> HFOptions:
    data_dir = tmp_path_factory.mktemp("hf_stream")
    files = {
        "train": write_jsonl(data_dir, "train", rows(21), files=3),
        "validation": write_jsonl(data_dir, "val", rows(10, start=100)),
    }
    return HFOptions(data_files=files, cache_dir=str(data_dir / "cache"))


def streamed(options: HFOptions, **fields) -> HubDataset:
    return HubDataset(name="json", streaming=True, options=options, loading=SERIAL, **fields)


def test_file_order_at_zero_repeats_for_ever(options: HFOptions) -> None:
    data = streamed(options).load(batch=5)
    assert data.records is None
    batches, _ = share_batches(data.train, DataPartition(), 9)  # 45 rows: past two passes of 21
    seen = [n for b in batches for n in ns(b)]
    file_order = [n for f in range(3) for n in range(f, 21, 3)]
    assert seen == (file_order * 3)[:45]
    assert streamed(options, records=21).load(batch=5).records == 21  # what the caller knows


def test_shares_split_the_rows_between_them(options: HFOptions) -> None:
    data = streamed(options).load(batch=21)
    one_pass = []
    for index in range(3):
        batches, _ = share_batches(data.train, DataPartition(index=index, count=3), 1)
        one_pass += ns(batches[0])  # each of the three files is one share's
    assert sorted(one_pass) == list(range(21))


def test_a_shuffle_buffer_shuffles_by_seed_and_epoch(options: HFOptions) -> None:
    def first(seed: int) -> list[int]:
        batches, _ = share_batches(
            streamed(options, shuffle_buffer=8, seed=seed).load(batch=7).train, DataPartition(), 6
        )
        return [n for b in batches for n in ns(b)]

    a, b = first(0), first(1)
    assert sorted(a[:21]) == sorted(a[21:]) == list(range(21))
    assert a[:21] != a[21:] and a != b and a == first(0)


@given(
    count=st.sampled_from([1, 2, 3]),
    index=st.integers(0, 2),
    shuffle_buffer=st.sampled_from([0, 5]),
    stop_at=st.integers(0, 9),
)
@settings(max_examples=14, deadline=None)
def test_a_share_resumes_exactly_from_its_own_position(
    options: HFOptions, count: int, index: int, shuffle_buffer: int, stop_at: int
) -> None:
    partition = DataPartition(index=index % count, count=count)
    data = streamed(options, shuffle_buffer=shuffle_buffer, seed=3).load(batch=2 * count)
    full, _ = share_batches(data.train, partition, 9)
    head, state = share_batches(data.train, partition, stop_at)
    tail, _ = share_batches(data.train, partition, 9 - stop_at, state)
    assert [ns(b) for b in head + tail] == [ns(b) for b in full]
    assert [b["text"] for b in head + tail] == [b["text"] for b in full]


def test_the_position_says_whose_it_is_and_where_it_resumes(options: HFOptions) -> None:
    data = streamed(options, shuffle_buffer=4).load(batch=4)
    _, state = share_batches(data.train, DataPartition(index=1, count=2), 3)
    assert state["kind"] == "dew.share/1" and (state["index"], state["count"]) == (1, 2)
    assert state["reads"] == {
        "hf": "json",
        "config": None,
        "split": "train",
        "streaming": True,
        "shuffle_buffer": 4,
        "seed": 0,
        "preprocess": None,
        "data_files": {split: list(files) for split, files in options.data_files.items()},
    }
    with pytest.raises(ValueError, match="belongs to share 1 of 2, this reader is share 0 of 2"):
        share_batches(data.train, DataPartition(index=0, count=2), 1, state)
    with pytest.raises(TypeError, match="HubStreamReader batches its own share"):
        ramped(data, Ramp(start=2, increment=2, samples=8))


def test_validation_is_never_shuffled_and_ends(options: HFOptions) -> None:
    data = streamed(options, shuffle_buffer=8, val_split="validation").load(batch=4)
    stream = data.val(DataPartition())
    try:
        assert [ns(b) for b in stream] == [[100, 101, 102, 103], [104, 105, 106, 107]]  # the rest is no whole batch
    finally:
        stream.close()
    bounded = streamed(options, val_split="validation", val_batches=1).load(batch=4)
    assert [ns(b) for b in share_batches(bounded.val, DataPartition(), 1)[0]] == [[100, 101, 102, 103]]
    stream = bounded.val(DataPartition())
    assert len(list(stream)) == 1
    stream.close()


def test_the_hook_and_an_iterable_the_caller_holds(options: HFOptions) -> None:
    spec = streamed(options, preprocess="tests.runtime.providers_support:shout")
    batches, _ = share_batches(spec.load(batch=3).train, DataPartition(), 1)
    assert batches[0] == {"text": ["DOC 0", "DOC 3", "DOC 6"], "n": batches[0]["n"]}
    held = options.load("json", "train", streaming=True)
    assert isinstance(held, hf.IterableDataset)
    from_held, _ = share_batches(spec.rows(batch=3, dataset=held).train, DataPartition(), 4)
    from_name, _ = share_batches(spec.load(batch=3).train, DataPartition(), 4)
    assert [ns(b) for b in from_held] == [ns(b) for b in from_name]
    missing = dataclasses.replace(spec, preprocess="tests.runtime.providers_support:needs_title")
    with pytest.raises(KeyError, match=r"looked for column 'title', which record 0 of epoch 0 of share 0"):
        share_batches(missing.load(batch=3).train, DataPartition(), 1)


def test_bad_streams_are_named(options: HFOptions, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no split 'test'"):
        share_batches(streamed(options, split="test").load(batch=2).train, DataPartition(), 1)
    empty = HFOptions(data_files=write_jsonl(tmp_path, "empty", []), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="ran out of rows while opening hf 'json' split 'train'"):
        share_batches(streamed(empty).load(batch=2).train, DataPartition(), 1)
    one = HFOptions(data_files=write_jsonl(tmp_path, "one", rows(1)), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"share 1 of 2 of hf 'json' .* holds no rows, so it cannot repeat for ever"):
        share_batches(streamed(one).load(batch=2).train, DataPartition(index=1, count=2), 1)
    with pytest.raises(ValueError, match="a weighted mixture is read by index"):
        HubDataset(name={"a": 1.0, "b": 1.0}, streaming=True).load(batch=2)
