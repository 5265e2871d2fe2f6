"""HF by index: HFOptions, HFDatasetSource and HubDataset over local json, parquet and save_to_disk splits."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import datasets as hf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, HFDatasetSource, HFOptions, HubDataset, Loading, TFDSOptions, datasets, ramped
from dew.data.ramp import Ramp
from tests.runtime.providers_support import SERIAL, ns, rows, shout, write_jsonl, write_parquet
from tests.support import assert_batches_equal, assert_ramped_resume_exact, assert_resume_exact, read_global


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf")


@pytest.fixture(scope="module")
def options(data_dir: Path) -> HFOptions:
    files = {
        "train": write_jsonl(data_dir / "json", "train", rows(30), files=3),
        "validation": write_jsonl(data_dir / "json", "val", rows(24, start=100)),
    }
    return HFOptions(data_files=files, cache_dir=str(data_dir / "cache"))


@pytest.fixture(scope="module")
def spec(options: HFOptions) -> HubDataset:
    return HubDataset(name="json", val_split="validation", options=options, seed=7, loading=SERIAL)


@pytest.fixture(scope="module")
def loaded(spec: HubDataset):
    return spec.load(batch=12)


def test_hf_is_registered_and_round_trips_its_config(spec: HubDataset) -> None:
    assert datasets["hf"] is HubDataset
    config = spec.to_config()
    assert config["kind"] == "hf" and config["options"]["config"] is None
    assert datasets.from_config(config) == spec
    hooked = HubDataset(name="json", options=spec.options, preprocess=shout)
    assert hooked.preprocess == "tests.runtime.providers_support:shout"
    assert datasets.from_config(hooked.to_config()) == hooked


def test_options_normalise_to_one_json_form() -> None:
    a = HFOptions(data_files=["a.jsonl", "b.jsonl"], download_mode=hf.DownloadMode.REUSE_CACHE_IF_EXISTS)
    b = HFOptions(data_files=("a.jsonl", "b.jsonl"), download_mode="reuse_cache_if_exists")
    assert a == b
    assert HFOptions(data_files={"train": ["x"]}).data_files == {"train": ("x",)}
    with pytest.raises(ValueError, match="num_proc"):
        HFOptions(num_proc=0)


def test_an_epoch_reads_every_record_once_shuffled(loaded) -> None:
    assert loaded.records == 30 and loaded.steps_per_epoch == 3
    batches, state = read_global(loaded.train, 1, 5)  # 60 records: two whole epochs
    seen = [n for b in batches for n in ns(b)]
    assert sorted(seen[:30]) == sorted(seen[30:]) == list(range(30))
    assert seen[:30] != list(range(30)) and seen[:30] != seen[30:]
    assert state["records"] == 60
    first = batches[0]
    assert isinstance(first["text"], list) and first["text"][0] == f"doc {first['n'][0]}"
    np.testing.assert_array_equal(first["vec"][:, 0], first["n"])


@given(
    shares=st.sampled_from([1, 2, 3, 4, 6]),
    new_shares=st.sampled_from([1, 2, 3, 4, 6]),
    stop_at=st.integers(0, 7),
)
@settings(max_examples=12, deadline=None)
def test_resume_from_a_global_position_on_any_share_count(loaded, shares: int, new_shares: int, stop_at: int) -> None:
    assert_resume_exact(loaded.train, steps=7, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_validation_is_one_unshuffled_pass(spec: HubDataset, loaded) -> None:
    batches, _ = read_global(loaded.val, 2, 2)
    assert [ns(b) for b in batches] == [list(range(100, 112)), list(range(112, 124))]
    stream = loaded.val(DataPartition())
    try:
        assert len(list(stream)) == 2  # and then it ends by itself
    finally:
        stream.close()
    bounded = dataclasses.replace(spec, val_batches=1).load(batch=12)
    batches, _ = read_global(bounded.val, 3, 1)
    assert [ns(b) for b in batches] == [list(range(100, 112))]
    assert dataclasses.replace(spec, val_batches=0).load(batch=12).val is None


def test_the_preprocess_hook_runs_on_every_record(options: HFOptions) -> None:
    data = HubDataset(name="json", options=options, preprocess=shout, loading=SERIAL).load(batch=6)
    batch, _ = read_global(data.train, 2, 1)
    assert set(batch[0]) == {"text", "n"}
    assert batch[0]["text"] == [f"DOC {n}" for n in ns(batch[0])]


def test_a_column_the_hook_does_not_find_is_named(options: HFOptions) -> None:
    data = HubDataset(
        name="json", options=options, preprocess="tests.runtime.providers_support:needs_title", loading=SERIAL
    ).load(batch=6)
    with pytest.raises(KeyError, match=r"needs_title looked for column 'title'.*split 'train'.*'text', 'n', 'vec'"):
        read_global(data.train, 1, 1)


def test_bad_hook_names_and_splits_are_refused(options: HFOptions) -> None:
    with pytest.raises(AttributeError, match="has no 'nothing_here'"):
        HubDataset(name="json", preprocess="tests.runtime.providers_support:nothing_here")
    with pytest.raises(ValueError, match=r"'package\.module:function'"):
        HubDataset(name="json", preprocess="no_colon")
    with pytest.raises(ValueError, match="no split 'test'"):
        HubDataset(name="json", split="test", options=options, loading=SERIAL).load(batch=4)
    with pytest.raises(TypeError, match="TFDSOptions belong to the tfds provider"):
        HubDataset(name="json", options=TFDSOptions())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="streaming=True"):
        HubDataset(name="json", shuffle_buffer=10)
    lambda_spec = HubDataset(name="json", options=options, preprocess=lambda r: r)
    with pytest.raises(TypeError, match="no name to import it by"):
        lambda_spec.to_config()


def test_parquet_and_save_to_disk_read_alike(data_dir: Path) -> None:
    path = write_parquet(data_dir / "parquet", "train", rows(16))
    cache = str(data_dir / "cache")
    parquet = HubDataset(name="parquet", options=HFOptions(data_files=path, cache_dir=cache), loading=SERIAL)
    saved = data_dir / "saved"
    hf.DatasetDict({"train": hf.Dataset.from_list(rows(16))}).save_to_disk(str(saved))
    single = data_dir / "single"
    hf.Dataset.from_list(rows(16)).save_to_disk(str(single))
    a, _ = read_global(parquet.load(batch=4).train, 1, 4)
    b, _ = read_global(HubDataset(name=str(saved), loading=SERIAL).load(batch=4).train, 2, 4)
    c, _ = read_global(HubDataset(name=str(single), loading=SERIAL).load(batch=4).train, 4, 4)
    assert [ns(x) for x in a] == [ns(x) for x in b] == [ns(x) for x in c]
    with pytest.raises(ValueError, match=r"has no split 'validation'; its splits: train"):
        HubDataset(name=str(saved), split="validation", loading=SERIAL).load(batch=4)
    sliced = HubDataset(name=str(saved), split="train[:50%]", loading=SERIAL).load(batch=4)
    assert sliced.records == 8


def test_a_named_source_pickles_without_its_table(options: HFOptions) -> None:
    source = HFDatasetSource("json", "train", options=options)
    assert len(source) == 30
    blob = pickle.dumps(source)
    assert len(blob) < 2000
    again = pickle.loads(blob)
    assert again._dataset is None  # loads from its name on first use, in the process that unpickled it
    assert again.rows([4, 2]) == source.rows([4, 2])
    assert again.describe() == source.describe()


def test_a_dataset_in_memory_is_written_out_once_and_reopened() -> None:
    table = hf.Dataset.from_dict({"n": np.arange(20_000), "text": [f"row {i}" for i in range(20_000)]})
    source = HFDatasetSource(dataset=table)
    blob = pickle.dumps(source)
    assert len(blob) < 4000 < table.data.nbytes
    assert pickle.dumps(source) == blob  # written once: the second pickle points at the same copy
    again = pickle.loads(blob)
    assert again.rows([19_999, 3]) == [{"n": 19_999, "text": "row 19999"}, {"n": 3, "text": "row 3"}]
    assert again.describe()["fingerprint"] == table._fingerprint


def test_a_file_backed_dataset_travels_as_its_files(data_dir: Path, options: HFOptions) -> None:
    table = options.load("json", "train", streaming=False)
    source = HFDatasetSource(dataset=table)
    assert len(pickle.dumps(source)) < 4000
    assert source._saved is None  # nothing was written: the Arrow cache files are the copy
    again = pickle.loads(pickle.dumps(source)).read_batch(np.arange(5))
    assert again["n"].tolist() == table[:5]["n"] == [0, 3, 6, 9, 12]  # three files, read in file order


def test_rows_reads_a_split_the_caller_holds(spec: HubDataset, options: HFOptions) -> None:
    table = options.load("json", "train", streaming=False)
    held = spec.rows(batch=12, dataset=table)
    named = spec.load(batch=12)
    assert [ns(b) for b in read_global(held.train, 1, 4)[0]] == [ns(b) for b in read_global(named.train, 1, 4)[0]]
    with pytest.raises(TypeError, match="DatasetDict"):
        HFDatasetSource(dataset=hf.DatasetDict({"train": table}))


def test_a_ramp_grows_the_indexed_stream(loaded) -> None:
    run = ramped(loaded, Ramp(start=6, increment=6, samples=12))
    batches, state = read_global(run.train, 2, 4)
    assert [len(b["n"]) for b in batches] == [6, 6, 12, 12] and state["records"] == 36


@pytest.mark.slow
def test_worker_processes_reopen_a_table_handed_over_in_memory() -> None:
    table = hf.Dataset.from_dict({"n": np.arange(24), "text": [f"row {i}" for i in range(24)]})
    spec = HubDataset(name="held", seed=3, loading=SERIAL)
    in_process = spec.rows(batch=6, dataset=table)
    in_workers = dataclasses.replace(spec, loading=Loading(workers=1, threads=2, read_buffer=8)).rows(
        batch=6, dataset=table
    )
    assert_batches_equal(read_global(in_process.train, 1, 5)[0], read_global(in_workers.train, 1, 5)[0])


@given(stop_at=st.integers(0, 6), counts=st.sampled_from([(1, 2), (2, 3), (6, 1)]), samples=st.integers(1, 40))
@settings(max_examples=6, deadline=None)
def test_a_ramped_hooked_stream_and_its_validation_pass_resume_exactly(spec, stop_at, counts, samples) -> None:
    data = dataclasses.replace(spec, preprocess=shout).load(batch=12)
    assert_ramped_resume_exact(
        data, Ramp(start=6, increment=6, samples=samples), stop_at=stop_at, counts=counts, val_steps=2
    )
