"""dew.data.load: provider addresses, options checked by type, mixtures, and splits held in memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import datasets as hf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, HFOptions, HubDataset, PreparedTFDS, TFDSOptions, datasets, load
from tests.runtime.providers_support import SERIAL, ns, prepare_tfds, rows, share_batches, write_jsonl
from tests.support import assert_batches_equal, assert_resume_exact, read_global


@pytest.fixture(scope="module")
def hf_options(tmp_path_factory: pytest.TempPathFactory) -> HFOptions:
    data_dir = tmp_path_factory.mktemp("load_hf")
    return HFOptions(data_files=write_jsonl(data_dir, "train", rows(20)), cache_dir=str(data_dir / "cache"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two save_to_disk datasets with train and validation splits: a (n 0..) and b (n 500..)."""
    out = {}
    for name, start in (("a", 0), ("b", 500)):
        path = tmp_path_factory.mktemp(f"saved_{name}")
        splits = {"train": rows(12 if name == "a" else 30, start), "validation": rows(8, start + 100)}
        hf.DatasetDict({k: hf.Dataset.from_list(v) for k, v in splits.items()}).save_to_disk(str(path))
        out[name] = str(path)
    return out


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("tensorflow_datasets")
    data_dir = tmp_path_factory.mktemp("load_tfds")
    prepare_tfds(data_dir, size=16)
    return str(data_dir)


def first_batches(data, steps: int = 4) -> list:
    return read_global(data.train, 1, steps)[0]


def test_load_is_the_registered_spec(hf_options: HFOptions, tfds_dir: str) -> None:
    by_load = load("hf/json", batch=4, options=hf_options, seed=5, loading=SERIAL)
    by_spec = datasets["hf"](name="json", options=hf_options, seed=5, loading=SERIAL).load(batch=4)
    assert_batches_equal(first_batches(by_spec), first_batches(by_load))
    options = TFDSOptions(path=tfds_dir, config="small")
    by_load = load("tfds/dew_tiny", batch=4, options=options, val_split="test", loading=SERIAL)
    by_spec = PreparedTFDS(name="dew_tiny", options=options, val_split="test", loading=SERIAL).load(batch=4)
    assert_batches_equal(first_batches(by_spec), first_batches(by_load))
    assert_batches_equal(read_global(by_spec.val, 1, 2)[0], read_global(by_load.val, 1, 2)[0])


def test_options_are_checked_by_provider(hf_options: HFOptions) -> None:
    with pytest.raises(TypeError, match="tfds sources take TFDSOptions as options, got HFOptions"):
        load("tfds/dew_tiny", batch=4, options=hf_options)
    with pytest.raises(TypeError, match="hf sources take HFOptions as options, got TFDSOptions"):
        load("hf/json", batch=4, options=TFDSOptions())
    with pytest.raises(ValueError, match="streaming= and shuffle_buffer= are for hf sources"):
        load("tfds/dew_tiny", batch=4, streaming=True)
    with pytest.raises(TypeError, match="a tfds source reads its prepared files"):
        load("tfds/dew_tiny", batch=4, dataset=hf.Dataset.from_list(rows(4)))
    for bad in ("json", "s3/json", "hf/", {}):
        with pytest.raises((ValueError, TypeError), match="source"):
            load(bad, batch=4)
    with pytest.raises(ValueError, match="mixes hf and tfds"):
        load({"hf/a": 1.0, "tfds/b": 1.0}, batch=4)


def test_dataset_takes_a_split_in_memory(hf_options: HFOptions) -> None:
    table = hf.Dataset.from_list(rows(20))
    held = load("hf/json", batch=4, dataset=table, loading=SERIAL)
    named = load("hf/json", batch=4, options=hf_options, loading=SERIAL)
    assert_batches_equal(first_batches(named), first_batches(held))
    streamed = load("hf/json", batch=4, dataset=table.to_iterable_dataset(), loading=SERIAL)
    batches, state = share_batches(streamed.train, DataPartition(), 2)
    assert [ns(b) for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]] and state["kind"] == "dew.share/1"


def test_a_mixture_reads_each_source_at_its_weight(saved: dict[str, str]) -> None:
    data = load(
        {f"hf/{saved['a']}": 1.0, f"hf/{saved['b']}": 3.0},
        batch=8,
        val_split="validation",
        seed=2,
        loading=SERIAL,
    )
    batches = first_batches(data, 6)
    from_a = [sum(n < 500 for n in ns(b)) for b in batches]
    assert from_a == [2] * 6  # a quarter of every global batch, whatever the corpora's lengths
    seen_a = sorted(n for b in batches for n in ns(b) if n < 500)
    assert seen_a == list(range(12))  # 48 records hold a's 12 rows exactly once
    assert data.records == 47  # the fewest records in which each corpus is read once: a's twelfth is record 46
    val = [n for b in read_global(data.val, 2, 1)[0] for n in ns(b)]
    assert val == [600, 601, 100, 602, 603, 604, 101, 605]  # each split in its own order, at the weights
    spec = HubDataset(name={saved["a"]: 1.0, saved["b"]: 3.0}, val_split="validation", seed=2, loading=SERIAL)
    assert datasets.from_config(spec.to_config()) == spec
    assert_batches_equal(batches, first_batches(spec.load(batch=8), 6))


@given(shares=st.sampled_from([1, 2, 4]), new_shares=st.sampled_from([1, 2, 4]), stop_at=st.integers(0, 8))
@settings(max_examples=8, deadline=None)
def test_a_mixture_resumes_from_its_global_position(saved: dict[str, str], shares, new_shares, stop_at) -> None:
    data = load({f"hf/{saved['a']}": 1.0, f"hf/{saved['b']}": 3.0}, batch=8, seed=2, loading=SERIAL)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_a_tfds_mixture_and_the_hook(tfds_dir: str) -> None:
    data = load(
        {"tfds/dew_tiny": 1.0},
        batch=4,
        options=TFDSOptions(path=tfds_dir, config="small"),
        preprocess="tests.runtime.providers_support:decode_text",
        loading=SERIAL,
    )
    batch = first_batches(data, 1)[0]
    assert batch["text"] == [f"doc {n}" for n in ns(batch)] and set(batch) == {"text", "n"}
    with pytest.raises(FileNotFoundError, match=r"no prepared TFDS dataset 'dew_tiny' under .*nothing"):
        load("tfds/dew_tiny", batch=4, options=TFDSOptions(path=str(Path(tfds_dir) / "nothing")))


def test_importing_dew_data_loads_neither_provider_library() -> None:
    code = (
        "import sys, dew.data; dew.data.load; dew.data.HubDataset; dew.data.PreparedTFDS;"
        "heavy = [m for m in ('datasets', 'tensorflow_datasets', 'tensorflow', 'grain', 'jax') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_record_shapes_that_do_not_stack_are_named() -> None:
    table = hf.Dataset.from_list([{"ids": list(range(i + 1))} for i in range(8)])
    data = load("hf/ragged", batch=4, dataset=table, loading=SERIAL)
    with pytest.raises(ValueError, match=r"column 'ids' of the dataset handed over .* does not stack"):
        first_batches(data, 1)
    assert np.asarray(table[0]["ids"]).shape == (1,)
