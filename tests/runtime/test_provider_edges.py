"""Provider edges that used to give wrong data quietly: split expressions of a saved dataset, a streamed
resume over other files, train and validation splits that overlap, empty cells, short grain passes."""

from __future__ import annotations

from pathlib import Path

import datasets as hf
import numpy as np
import pytest

from dew.data import DataPartition, Dataset, HFDatasetSource, HFImages, HFOptions, load
from tests.runtime.providers_support import SERIAL, ns, rows, share_batches, write_jsonl


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A save_to_disk DatasetDict: train holds n 0..29, test n 100..109."""
    directory = tmp_path_factory.mktemp("saved")
    splits = {"train": hf.Dataset.from_list(rows(30)), "test": hf.Dataset.from_list(rows(10, start=100))}
    hf.DatasetDict(splits).save_to_disk(str(directory))
    return str(directory)


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        ("train[:10]+test", [*range(10), *range(100, 110)]),
        ("train[:5]+test[:3]", [0, 1, 2, 3, 4, 100, 101, 102]),
        ("test+train[-2:]", [*range(100, 110), 28, 29]),
        ("train[10%:20%]", [3, 4, 5]),
        ("train[:-27]", [0, 1, 2]),
    ],
)
def test_a_saved_dataset_reads_split_expressions_as_load_dataset_does(saved: str, split: str, expected) -> None:
    source = HFDatasetSource(saved, split)
    assert [row["n"] for row in source.rows(range(len(source)))] == expected


def test_a_bad_split_expression_of_a_saved_dataset_is_named(saved: str) -> None:
    with pytest.raises(ValueError, match=r"has no split 'train\[:5\]\+validation'; its splits: train, test"):
        len(HFDatasetSource(saved, "train[:5]+validation"))
    with pytest.raises(ValueError, match="pct1_dropremainder"):
        len(HFDatasetSource(saved, "train[:50%](pct1_dropremainder)"))


def test_a_streamed_position_is_refused_over_other_files_or_another_revision(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a", "a", rows(12), files=3)
    other = write_jsonl(tmp_path / "b", "b", rows(12, start=100), files=3)

    def train(**options):
        return load("hf/json", batch=4, options=HFOptions(**options), streaming=True, loading=SERIAL).train

    _, state = share_batches(train(data_files=first), DataPartition(), 2)
    assert state["reads"]["data_files"] == first
    for changed in ({"data_files": other}, {"data_files": first, "revision": "v2"}, {"data_files": first[:2]}):
        with pytest.raises(ValueError, match="the saved position reads"):
            share_batches(train(**changed), DataPartition(), 1, state)
    resumed, _ = share_batches(train(data_files=list(first)), DataPartition(), 1, state)
    assert ns(resumed[0]) == ns(share_batches(train(data_files=first), DataPartition(), 3)[0][2])


@pytest.mark.parametrize(
    ("split", "val_split"),
    [
        ("train", "train"),
        ("train", "train[90%:]"),
        ("train[:60%]", "train[50%:]"),
        ("train[:20]", "train[10:15]"),
        ("train[:10]+test", "test[:2]"),
    ],
)
def test_a_validation_split_overlapping_the_training_split_is_refused(saved: str, split: str, val_split: str) -> None:
    with pytest.raises(ValueError, match="overlap"):
        load(f"hf/{saved}", batch=2, split=split, val_split=val_split, loading=SERIAL)
    with pytest.raises(ValueError, match="overlap"):
        HFImages(name=saved, split=split, val_split=val_split)


@pytest.mark.parametrize(
    ("split", "val_split"),
    [("train", "test"), ("train[:60%]", "train[60%:]"), ("train[:20]", "train[20:]"), ("train[:90%]", "train[-3:]")],
)
def test_disjoint_splits_hold_out_what_training_does_not_read(saved: str, split: str, val_split: str) -> None:
    data = load(f"hf/{saved}", batch=2, split=split, val_split=val_split, loading=SERIAL)
    trained, _ = share_batches(data.train, DataPartition(), data.steps_per_epoch)
    held = [n for batch in data.val(DataPartition()) for n in ns(batch)]
    assert held and not set(held) & {n for batch in trained for n in ns(batch)}


@pytest.mark.parametrize("column", [[0, 1, None, 3], [None, "b", "c", "d"], ["a", "b", None, "d"]])
def test_an_empty_cell_is_named_not_batched_as_an_object_array(column) -> None:
    table = hf.Dataset.from_dict({"x": column, "n": [0, 1, 2, 3]})
    empty = column.index(None)
    with pytest.raises(ValueError, match=rf"column 'x' of .* is empty \(None\) in record {empty}; a preprocess hook"):
        HFDatasetSource(dataset=table).read_batch(np.arange(4))
    with pytest.raises(ValueError, match=rf"column 'x' of .* is empty \(None\) in record {empty}"):
        HFDatasetSource(dataset=table, preprocess=same).read_batch(np.arange(4))


def test_a_hook_fills_an_empty_cell() -> None:
    table = hf.Dataset.from_dict({"x": [0, 1, None, 3], "n": [0, 1, 2, 3]})
    batch = HFDatasetSource(dataset=table, preprocess=fill).read_batch(np.arange(4))
    assert batch["x"].tolist() == [0, 1, -1, 3] and batch["x"].dtype == np.int64


def same(record):
    return record


def fill(record):
    return {**record, "x": -1 if record["x"] is None else record["x"]}


def test_a_grain_validation_pass_shorter_than_a_batch_or_endless_is_refused() -> None:
    import grain

    rows_of = grain.MapDataset.range(12).map(lambda i: {"n": i})
    with pytest.raises(ValueError, match="validation pipeline holds 3 records, fewer than one global batch of 4"):
        Dataset.from_grain(rows_of, batch=4, validation=rows_of.slice(slice(0, 3)), loading=SERIAL)
    with pytest.raises(ValueError, match="validation pipeline repeats for ever"):
        Dataset.from_grain(rows_of, batch=4, validation=rows_of.repeat(), loading=SERIAL)
    data = Dataset.from_grain(rows_of, batch=4, validation=rows_of.slice(slice(0, 9)), loading=SERIAL)
    assert [ns(batch) for batch in data.val(DataPartition())] == [[0, 1, 2, 3], [4, 5, 6, 7]]
