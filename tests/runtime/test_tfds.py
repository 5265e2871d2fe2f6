"""TFDS by index: a builder prepared here as array_record, read from its version directory or data_dir."""

from __future__ import annotations

import json
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import HFOptions, PreparedTFDS, Ramp, TFDSOptions, datasets
from tests.runtime.providers_support import SERIAL, decode_text, ns, prepare_tfds
from tests.support import assert_ramped_resume_exact, assert_resume_exact, read_global

pytest.importorskip("tensorflow_datasets")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data_dir holding dew_tiny/small at 1.0.0 and 1.1.0 (24 train, 12 test records) and dew_tiny/big."""
    data_dir = tmp_path_factory.mktemp("tfds")
    prepare_tfds(data_dir, version="1.0.0")
    prepare_tfds(data_dir, version="1.1.0", size=30)
    prepare_tfds(data_dir, version="1.0.0", config="big", size=6)
    return data_dir


def small(prepared: Path, **fields) -> PreparedTFDS:
    options = TFDSOptions(path=str(prepared), config="small", version=fields.pop("version", "1.0.0"))
    return PreparedTFDS(name="dew_tiny", options=options, loading=SERIAL, **fields)


def test_tfds_is_registered_and_round_trips_its_config(prepared: Path) -> None:
    spec = small(prepared, val_split="test", preprocess=decode_text)
    assert datasets["tfds"] is PreparedTFDS
    assert datasets.from_config(spec.to_config()) == spec


def test_an_epoch_reads_every_record_once_without_tensorflow(prepared: Path) -> None:
    data = small(prepared).load(batch=8)
    assert data.records == 24 and data.steps_per_epoch == 3
    batches, _ = read_global(data.train, 2, 6)
    seen = [n for b in batches for n in ns(b)]
    assert sorted(seen[:24]) == sorted(seen[24:]) == list(range(24)) and seen[:24] != seen[24:]
    first = batches[0]
    assert first["text"] == [f"doc {n}".encode() for n in ns(first)]  # TFDS decodes text to bytes
    np.testing.assert_array_equal(first["vec"][:, 2], first["n"] + 2)
    assert first["vec"].dtype == np.int32
    assert "tensorflow" not in sys.modules


@given(
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 8),
    seed=st.integers(0, 3),
)
@settings(max_examples=10, deadline=None)
def test_resume_from_a_global_position_on_any_share_count(
    prepared: Path, shares: int, new_shares: int, stop_at: int, seed: int
) -> None:
    data = PreparedTFDS(
        name="dew_tiny", options=TFDSOptions(path=str(prepared), config="small"), seed=seed, loading=SERIAL
    ).load(batch=4)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_the_version_directory_and_the_data_dir_read_alike(prepared: Path) -> None:
    version_dir = prepared / "dew_tiny" / "small" / "1.0.0"
    by_dir = PreparedTFDS(name="dew_tiny", options=TFDSOptions(path=str(version_dir)), loading=SERIAL)
    a, _ = read_global(by_dir.load(batch=4).train, 1, 3)
    b, _ = read_global(small(prepared).load(batch=4).train, 1, 3)
    assert [ns(x) for x in a] == [ns(x) for x in b]


def test_the_newest_prepared_version_is_the_default(prepared: Path) -> None:
    options = TFDSOptions(path=str(prepared), config="small")
    assert options.prepared("dew_tiny").endswith("1.1.0")
    assert PreparedTFDS(name="dew_tiny", options=options, loading=SERIAL).load(batch=5).records == 30


def test_validation_and_split_expressions(prepared: Path) -> None:
    data = small(prepared, split="train[:50%]", val_split="test", preprocess=decode_text).load(batch=4)
    assert data.records == 12
    batches, _ = read_global(data.val, 2, 3)
    held_out = sorted(n for b in batches for n in ns(b))
    assert held_out == list(range(1000, 1012)) and batches[0]["text"][0].startswith("doc 10")
    assert small(prepared, split="train+test").load(batch=4).records == 36


def test_decoders_reach_the_builder_unchanged(prepared: Path) -> None:
    import tensorflow_datasets as tfds

    plain = TFDSOptions(path=str(prepared), config="small").source("dew_tiny", "train")[0]
    assert plain["packed"].tolist() == [plain["n"], -plain["n"]]
    options = TFDSOptions(path=str(prepared), config="small", decoders={"packed": tfds.decode.SkipDecoding()})
    record = options.source("dew_tiny", "train")[0]
    assert isinstance(record["packed"], bytes)  # the zlib-compressed tensor as it is on disk
    assert np.frombuffer(zlib.decompress(record["packed"]), np.int64).tolist() == [record["n"], -record["n"]]


def test_bad_input_is_named(prepared: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"split 'validation' is not prepared in .*1\.0\.0; prepared splits: train, test"
    ):
        small(prepared, split="validation").load(batch=4)
    with pytest.raises(FileNotFoundError, match=r"no prepared config 'huge'.*prepared: big, small"):
        PreparedTFDS(name="dew_tiny", options=TFDSOptions(path=str(prepared), config="huge")).load(batch=4)
    with pytest.raises(FileNotFoundError, match=r"no prepared version 2\.0\.0; prepared: 1\.0\.0, 1\.1\.0"):
        small(prepared, version="2.0.0").load(batch=4)
    with pytest.raises(ValueError, match="several prepared configs: big, small; choose one"):
        PreparedTFDS(name="dew_tiny", options=TFDSOptions(path=str(prepared))).load(batch=4)
    with pytest.raises(FileNotFoundError, match=r"no prepared TFDS dataset 'mnist'.*it holds dew_tiny"):
        PreparedTFDS(name="mnist", options=TFDSOptions(path=str(prepared))).load(batch=4)
    version_dir = str(prepared / "dew_tiny" / "small" / "1.0.0")
    with pytest.raises(ValueError, match="was prepared as config 'small', not 'big'"):
        TFDSOptions(path=version_dir, config="big").prepared("dew_tiny")
    with pytest.raises(ValueError, match=r"holds version '1\.0\.0', not '1\.1\.0'"):
        TFDSOptions(path=version_dir, version="1.1.0").prepared("dew_tiny")
    with pytest.raises(ValueError, match="was prepared as builder 'dew_tiny', not 'other'"):
        TFDSOptions(path=version_dir).prepared("other")
    with pytest.raises(TypeError, match="HFOptions belong to the hf provider"):
        PreparedTFDS(name="dew_tiny", options=HFOptions())  # type: ignore[arg-type]


def test_an_unprepared_or_tfrecord_directory_is_refused(prepared: Path, tmp_path: Path) -> None:
    unprepared = tmp_path / "dew_tiny" / "small" / "1.0.0"
    unprepared.mkdir(parents=True)
    (tmp_path / "dew_tiny" / "small" / "incomplete.X_1.0.0").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no prepared version .*download_and_prepare"):
        TFDSOptions(path=str(tmp_path), config="small").prepared("dew_tiny")
    with pytest.raises(FileNotFoundError, match="is not a prepared TFDS version directory"):
        TFDSOptions(path=str(tmp_path / "dew_tiny" / "small" / "incomplete.X_1.0.0")).prepared("dew_tiny")
    copy = tmp_path / "copy"
    shutil.copytree(prepared / "dew_tiny" / "small" / "1.0.0", copy)
    info = json.loads((copy / "dataset_info.json").read_text())
    (copy / "dataset_info.json").write_text(json.dumps({**info, "fileFormat": "tfrecord"}))
    with pytest.raises(ValueError, match="prepared as tfrecord, which TFDS cannot read by index"):
        TFDSOptions(path=str(copy)).prepared("dew_tiny")


def test_a_source_pickles_as_its_directory(prepared: Path) -> None:
    import pickle

    source = TFDSOptions(path=str(prepared), config="small", version="1.0.0").source("dew_tiny", "train")
    first = source[3]
    blob = pickle.dumps(source)
    assert len(blob) < 1000
    again = pickle.loads(blob)
    assert again._source is None and again[3]["n"] == first["n"]
    assert again.describe() == source.describe()


def test_records_beyond_the_split_are_refused_at_load(prepared: Path) -> None:
    size = small(prepared).load(batch=4).records
    assert small(prepared, records=size).load(batch=4).records == size
    with pytest.raises(ValueError, match=f"records={size + 1} is more than the {size} records"):
        small(prepared, records=size + 1).load(batch=4)


@given(stop_at=st.integers(0, 6), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]), samples=st.integers(1, 16))
@settings(max_examples=4, deadline=None)
def test_a_ramped_run_and_its_validation_pass_resume_exactly(prepared: Path, stop_at, counts, samples) -> None:
    data = small(prepared, val_split="test", val_batches=None, preprocess=decode_text, seed=2).load(batch=4)
    assert_ramped_resume_exact(
        data, Ramp(start=2, increment=2, samples=samples), stop_at=stop_at, counts=counts, val_steps=3
    )
