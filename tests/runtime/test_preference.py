"""PreferencePairs: pair layout, parquet and JSON rows alike, exact resume, and refusals by row."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import IDS_KEY, MASK_KEY, DataPartition, Loading, PreferencePairs, Ramp, datasets
from tests.support import assert_ramped_resume_exact, assert_resume_exact, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


def pair_rows(n: int, seed: int = 0) -> list[dict[str, list[int]]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "prompt": rng.integers(1, 500, rng.integers(0, 5)).tolist(),
            "chosen": rng.integers(1, 500, rng.integers(1, 4)).tolist(),
            "rejected": rng.integers(1, 500, rng.integers(1, 4)).tolist(),
        }
        for _ in range(n)
    ]


def as_records(rows: list[dict]) -> tuple[str, ...]:
    return tuple(json.dumps(row) for row in rows)


def write_parquet(path, rows: list[dict]) -> str:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def test_a_pair_is_prompt_plus_completion_with_chosen_first() -> None:
    rows = [{"prompt": [5, 6], "chosen": [7, 8, 9], "rejected": [10]}]
    data = PreferencePairs(records=as_records(rows), seq_len=6, pad_id=3, loading=SERIAL).load(batch=1)
    with data.train(DataPartition()) as stream:
        batch = next(stream)
    np.testing.assert_array_equal(batch[IDS_KEY], [[[5, 6, 7, 8, 9, 3], [5, 6, 10, 3, 3, 3]]])
    np.testing.assert_array_equal(batch[MASK_KEY], [[[0, 0, 1, 1, 1, 0], [0, 0, 1, 0, 0, 0]]])
    assert batch[IDS_KEY].dtype == np.int32 and batch[MASK_KEY].shape == (1, 2, 6)
    assert data.records == 1


def test_parquet_and_json_rows_read_the_same_pairs(tmp_path) -> None:
    rows = pair_rows(24)
    path = write_parquet(tmp_path / "pairs.parquet", rows)
    by_file = PreferencePairs(path=path, seq_len=8, seed=4, loading=SERIAL).load(batch=6)
    by_json = PreferencePairs(records=as_records(rows), seq_len=8, seed=4, loading=SERIAL).load(batch=6)
    from_file, _ = read_global(by_file.train, 1, 5)
    from_json, _ = read_global(by_json.train, 1, 5)
    for a, b in zip(from_file, from_json, strict=True):
        np.testing.assert_array_equal(a[IDS_KEY], b[IDS_KEY])
        np.testing.assert_array_equal(a[MASK_KEY], b[MASK_KEY])
    # every row comes back exactly once in the first epoch
    first_epoch, _ = read_global(by_file.train, 1, 4)
    seen = {
        tuple(pair[0][mask[0] == 1]) for b in first_epoch for pair, mask in zip(b[IDS_KEY], b[MASK_KEY], strict=True)
    }
    assert seen == {tuple(row["chosen"]) for row in rows}


@given(
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 6),
    size=st.integers(3, 30),
    seed=st.integers(0, 100),
)
@settings(max_examples=15, deadline=None)
def test_resume_is_exact_on_another_share_count(shares: int, new_shares: int, stop_at: int, size: int, seed: int):
    spec = PreferencePairs(records=as_records(pair_rows(size, seed)), seq_len=8, seed=seed, loading=SERIAL)
    data = spec.load(batch=4)
    assert_resume_exact(data.train, steps=6, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_validation_is_one_pass_in_file_order(tmp_path) -> None:
    val_rows = pair_rows(10, seed=9)
    val = write_parquet(tmp_path / "val.parquet", val_rows)
    spec = PreferencePairs(records=as_records(pair_rows(8)), val_path=val, seq_len=8, val_batches=None, loading=SERIAL)
    batches = list(spec.load(batch=4).val(DataPartition()))
    assert len(batches) == 2  # whole batches only
    chosen = [
        pair[0][mask[0] == 1].tolist() for b in batches for pair, mask in zip(b[IDS_KEY], b[MASK_KEY], strict=True)
    ]
    assert chosen == [row["chosen"] for row in val_rows[:8]]
    bounded = PreferencePairs(records=as_records(pair_rows(8)), val_path=val, seq_len=8, val_batches=1, loading=SERIAL)
    assert len(list(bounded.load(batch=4).val(DataPartition()))) == 1
    assert PreferencePairs(records=as_records(pair_rows(8)), seq_len=8).load(batch=4).val is None


def test_a_changed_table_is_refused_on_resume() -> None:
    one = PreferencePairs(records=as_records(pair_rows(8)), seq_len=8, loading=SERIAL).load(batch=2)
    other = PreferencePairs(records=as_records(pair_rows(8, seed=1)), seq_len=8, loading=SERIAL).load(batch=2)
    with one.train(DataPartition()) as stream:
        next(stream)
        state = stream.get_state()
    with other.train(DataPartition()) as stream, pytest.raises(ValueError, match="reads something else"):
        stream.set_state(state)


def test_config_round_trip() -> None:
    spec = PreferencePairs(path="gs://bucket/pairs.parquet", val_path="v.parquet", seq_len=512, pad_id=2, seed=3)
    assert datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec
    assert spec.to_config()["kind"] == "preference_pairs"


def test_a_row_longer_than_seq_len_fails_naming_it(tmp_path) -> None:
    rows = pair_rows(5)
    rows[3] = {"prompt": [1, 2, 3], "chosen": [4, 5], "rejected": [6, 7, 8, 9, 10, 11]}
    with pytest.raises(ValueError, match=r"record 3 needs 9 tokens .*seq_len=8"):
        PreferencePairs(records=as_records(rows), seq_len=8).load(batch=1)
    path = write_parquet(tmp_path / "long.parquet", rows)
    with pytest.raises(ValueError, match=r"row 3 of .*long.parquet needs 9 tokens"):
        PreferencePairs(path=path, seq_len=8).load(batch=1)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"prompt": [1], "chosen": [2]}, r"record 1 has no field 'rejected'"),
        ({"prompt": [1], "chosen": [], "rejected": [3]}, r"record 1: the chosen completion is empty"),
        ({"prompt": "hi", "chosen": [2], "rejected": [3]}, r"record 1: prompt must be a list of token ids"),
        ({"prompt": [1], "chosen": [-2], "rejected": [3]}, r"record 1: chosen holds -2"),
        # int() used to truncate these into ids silently: 1.5 became 1, true 1, "7" 7.
        ({"prompt": [1.5], "chosen": [2], "rejected": [3]}, r"record 1: prompt holds 1\.5, which is no token id"),
        ({"prompt": [1], "chosen": [True], "rejected": [3]}, r"record 1: chosen holds True, which is no token id"),
        ({"prompt": [1], "chosen": [2], "rejected": ["7"]}, r"record 1: rejected holds '7', which is no token id"),
        ([1, 2], r"record 1 is a JSON list, not an object"),
    ],
)
def test_bad_json_rows_are_named(row, message) -> None:
    records = (json.dumps(pair_rows(1)[0]), json.dumps(row))
    with pytest.raises(ValueError, match=message):
        PreferencePairs(records=records, seq_len=8).load(batch=1)


def test_bad_parquet_is_named(tmp_path) -> None:
    missing = tmp_path / "missing.parquet"
    pq.write_table(pa.table({"prompt": [[1]], "chosen": [[2]]}), missing)
    with pytest.raises(ValueError, match=r"missing.parquet has no column 'rejected'; its columns are prompt, chosen"):
        PreferencePairs(path=str(missing)).load(batch=1)
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"prompt": [[1], None], "chosen": [[2], [2]], "rejected": [[3], [3]]}), nulls)
    with pytest.raises(ValueError, match=r"row 1 of .*nulls.parquet: prompt is null"):
        PreferencePairs(path=str(nulls)).load(batch=1)
    text = tmp_path / "text.parquet"
    pq.write_table(pa.table({"prompt": ["a"], "chosen": [[2]], "rejected": [[3]]}), text)
    with pytest.raises(ValueError, match=r"column 'prompt' must hold lists of integer token ids"):
        PreferencePairs(path=str(text)).load(batch=1)
    with pytest.raises(FileNotFoundError, match="no parquet file at"):
        PreferencePairs(path=str(tmp_path / "nowhere.parquet")).load(batch=1)


def test_exactly_one_source_and_sane_fields() -> None:
    with pytest.raises(ValueError, match="exactly one of path"):
        PreferencePairs()
    with pytest.raises(ValueError, match="exactly one of path"):
        PreferencePairs(path="a.parquet", records=("{}",))
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        PreferencePairs(path="a.parquet", seq_len=0)
    with pytest.raises(ValueError, match="carries no captions"):
        PreferencePairs(records=as_records(pair_rows(2)), seq_len=8).load(batch=1, tokenize=lambda texts: texts)


@given(stop_at=st.integers(0, 8), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]), samples=st.integers(1, 20))
@settings(max_examples=6, deadline=None)
def test_a_ramped_run_and_its_validation_pass_resume_exactly(tmp_path_factory, stop_at, counts, samples) -> None:
    val = write_parquet(tmp_path_factory.mktemp("pairs") / "val.parquet", pair_rows(13, seed=9))
    spec = PreferencePairs(
        records=as_records(pair_rows(11)), val_path=val, seq_len=8, val_batches=None, seed=2, loading=SERIAL
    )
    data = spec.load(batch=4)
    ramp = Ramp(start=2, increment=2, samples=samples)
    assert_ramped_resume_exact(data, ramp, stop_at=stop_at, counts=counts, train_steps=8, val_steps=3)


@pytest.mark.gcs
def test_a_gs_parquet_file_reads_the_pairs_the_local_one_holds_through_throttling(gcs_faults, tmp_path) -> None:
    """A gs:// parquet file goes through dew's own client: a 429 with Retry-After is waited out, and the
    pairs equal the local file's."""
    from tests.conftest import BUCKET
    from tests.gcs_faults import Fault
    from tests.support import gcs_filesystem

    rows = pair_rows(24)
    local = write_parquet(tmp_path / "pairs.parquet", rows)
    uri = f"gs://{BUCKET}/preference/pairs.parquet"
    fs = gcs_filesystem()
    with open(local, "rb") as source, fs.open(uri, "wb") as target:
        target.write(source.read())
    gcs_faults.inject(Fault("429", path="pairs.parquet", retry_after="0", times=2))
    remote = PreferencePairs(path=uri, seq_len=8, seed=4, loading=SERIAL).load(batch=6)
    assert not gcs_faults.pending() and gcs_faults.count("pairs.parquet") >= 3
    here = PreferencePairs(path=local, seq_len=8, seed=4, loading=SERIAL).load(batch=6)
    for a, b in zip(read_global(remote.train, 1, 4)[0], read_global(here.train, 1, 4)[0], strict=True):
        np.testing.assert_array_equal(a[IDS_KEY], b[IDS_KEY])
        np.testing.assert_array_equal(a[MASK_KEY], b[MASK_KEY])
