"""Token sources and TokenWindows: one stream over any shard kind, windows, resume, bad input."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, Loading, Ramp, TokenBytes, TokenWindows, TokenWindowSource, datasets, ramped
from dew.data.tokens.opening import open_tokens
from dew.data.tokens.token_column import TokenColumn
from dew.data.tokens.token_records import TokenRecords
from tests.runtime.token_support import documents, stream_of, write_corpus
from tests.support import assert_resume_exact, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("tokens")
    splits = {"train": documents(60), "val": documents(12, seed=1)}
    out = {kind: write_corpus(str(root / kind), splits, kind=kind, shards=3) for kind in ("bin", "parquet")}
    out["array_record"] = write_corpus(str(root / "ar"), splits, kind="array_record", shards=3, field="ids")
    out["stream"] = stream_of(splits["train"])
    return out


@given(starts=st.lists(st.integers(0, 1100), min_size=1, max_size=40), length=st.integers(1, 300))
@settings(max_examples=40, deadline=None)
def test_spans_of_a_sharded_bin_corpus_equal_its_slices(corpora, starts: list[int], length: int) -> None:
    source = open_tokens(corpora["bin"])
    stream = corpora["stream"]
    starts = [min(s, len(stream) - length) for s in starts]  # rows within, across and between shards
    expected = np.stack([stream[s : s + length] for s in starts]).astype(source.dtype)
    np.testing.assert_array_equal(source.spans(np.array(starts), length), expected)


@pytest.mark.parametrize("kind", ["bin", "parquet", "array_record"])
@given(start=st.integers(0, 1200), size=st.integers(0, 300))
@settings(max_examples=30, deadline=None)
def test_every_shard_kind_reads_as_one_stream(corpora, kind: str, start: int, size: int) -> None:
    source = open_tokens(corpora[kind], field="ids" if kind != "bin" else None)
    stream = corpora["stream"]
    assert len(source) == len(stream)
    np.testing.assert_array_equal(source[start : start + size], stream[start : start + size])
    again = pickle.loads(pickle.dumps(source))
    np.testing.assert_array_equal(again[start : start + size], stream[start : start + size])
    assert source.eos_id == 0


def test_a_plain_bin_reads_as_uint16_without_meta(tmp_path) -> None:
    ids = np.arange(1000, dtype=np.uint16)
    ids.tofile(tmp_path / "train.bin")
    source = TokenBytes(str(tmp_path / "train.bin"))
    assert source.dtype == np.uint16 and source.eos_id is None
    np.testing.assert_array_equal(source[10:20], ids[10:20])
    assert isinstance(source.open_handle(), np.memmap)


def test_windows_overlap_by_one_token(corpora) -> None:
    windows = TokenWindowSource(open_tokens(corpora["bin"]), seq_len=16)
    stream = corpora["stream"]
    assert len(windows) == (len(stream) - 1) // 16
    batch = windows.read_batch(np.array([0, 1, 5]))["text"]
    assert batch.dtype == np.int32 and batch.shape == (3, 17)
    np.testing.assert_array_equal(batch[0], stream[:17])
    assert batch[0, -1] == batch[1, 0]
    np.testing.assert_array_equal(batch[2], stream[80:97])


@given(
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 6),
    seed=st.integers(0, 100),
    kind=st.sampled_from(["bin", "parquet"]),
)
@settings(max_examples=12, deadline=None)
def test_token_windows_resume_exactly_on_another_share_count(corpora, shares, new_shares, stop_at, seed, kind) -> None:
    spec = TokenWindows(
        path=corpora[kind], seq_len=8, seed=seed, loading=SERIAL, field="ids" if kind != "bin" else None
    )
    data = spec.load(batch=8)
    assert_resume_exact(data.train, steps=6, stop_at=stop_at, count_before=shares, count_after=new_shares)


@given(stop_at=st.integers(0, 14), start=st.sampled_from([2, 4]), samples=st.integers(1, 60))
@settings(max_examples=10, deadline=None)
def test_a_ramped_token_stream_resumes_mid_ramp_from_the_record_count(corpora, stop_at, start, samples) -> None:
    data = ramped(TokenWindows(path=corpora["bin"], seq_len=8, loading=SERIAL).load(batch=8), Ramp(start, 2, samples))
    assert_resume_exact(data.train, steps=14, stop_at=stop_at, count_before=2, count_after=1)


def test_position_counts_tokens_and_validation_reads_the_val_split(corpora) -> None:
    data = TokenWindows(path=corpora["bin"], seq_len=8, loading=SERIAL, val_batches=None).load(batch=4)
    _, state = read_global(data.train, 2, 3)
    assert state["records"] == 12 and state["tokens"] == {corpora["bin"]: 12 * 9}
    val = list(data.val(DataPartition()))
    assert len(val) == (len(stream_of(documents(12, seed=1))) - 1) // 8 // 4
    assert data.records == (len(corpora["stream"]) - 1) // 8


def test_without_a_val_split_the_tail_is_held_out(tmp_path) -> None:
    np.arange(1, 402, dtype=np.uint16).tofile(tmp_path / "x.bin")
    data = TokenWindows(path=str(tmp_path / "x.bin"), seq_len=10, loading=SERIAL, val_batches=2).load(batch=3)
    assert data.records == 40 - 6
    rows = np.concatenate([b["text"] for b in data.val(DataPartition())])
    assert rows[0, 0] == 34 * 10 + 1 and len(rows) == 6


def test_spec_round_trips_through_its_config(corpora) -> None:
    spec = TokenWindows(path=corpora["bin"], seq_len=32, val_batches=None, field=None, seed=3)
    assert datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec
    assert datasets.TokenWindows is TokenWindows and datasets["token_windows"] is TokenWindows


def test_a_resume_onto_a_changed_corpus_is_refused_by_name(tmp_path) -> None:
    path = write_corpus(str(tmp_path / "c"), {"train": documents(40)})
    state = read_global(TokenWindows(path=path, seq_len=8, loading=SERIAL).load(batch=4).train, 1, 1)[1]
    write_corpus(path, {"train": documents(40, seed=9)})  # same place, other content
    stream = TokenWindows(path=path, seq_len=8, loading=SERIAL).load(batch=4).train(DataPartition())
    with pytest.raises(ValueError, match=f"corpus '{path}' source"):
        stream.set_state(state)
    stream.close()


# Bad input: each a clear error naming the file or field.


def test_empty_corpus_is_refused(tmp_path) -> None:
    np.zeros(5, dtype=np.uint16).tofile(tmp_path / "tiny.bin")
    with pytest.raises(ValueError, match=r"tiny.bin.*not one window"):
        TokenWindows(path=str(tmp_path / "tiny.bin"), seq_len=8, val_batches=0, loading=SERIAL).load(batch=2)


def test_wrong_dtype_in_meta_is_refused(tmp_path) -> None:
    np.zeros(8, dtype=np.uint16).tofile(tmp_path / "a.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"dtype": "float32"}))
    with pytest.raises(ValueError, match=r"meta.json: field 'dtype' is 'float32'"):
        TokenBytes(str(tmp_path / "a.bin"))


def test_truncated_bin_is_refused(tmp_path) -> None:
    (tmp_path / "odd.bin").write_bytes(b"\x01\x00\x02")
    with pytest.raises(ValueError, match=r"odd.bin holds 3 bytes"):
        TokenBytes(str(tmp_path / "odd.bin"))
    corpus = write_corpus(str(tmp_path / "c"), {"train": documents(10)})
    shard = os.path.join(corpus, "train-00001-of-00002.bin")
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 2)
    with pytest.raises(ValueError, match=r"train-00001-of-00002.bin holds .* bytes but meta.json records"):
        open_tokens(corpus)


def test_corrupt_array_record_shard_is_refused(tmp_path) -> None:
    bad = tmp_path / "bad.array_record"
    bad.write_bytes(b"this is not an array record file at all" * 10)
    with pytest.raises(ValueError, match=r"bad.array_record"):
        TokenRecords([str(bad)])


def test_missing_field_or_column_is_named(corpora) -> None:
    files = sorted(os.path.join(corpora["array_record"], f) for f in os.listdir(corpora["array_record"]))
    with pytest.raises(KeyError, match=r"record 0.*no field 'tokens'"):
        TokenRecords([f for f in files if f.endswith(".array_record")], field="tokens")
    parquet = sorted(os.path.join(corpora["parquet"], f) for f in os.listdir(corpora["parquet"]) if "parquet" in f)
    with pytest.raises(ValueError, match=r"name the token column.*\['ids'\]"):
        TokenColumn(parquet, column="text")


def test_seq_len_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        TokenWindows(path="x", seq_len=0)


def test_an_uncommitted_directory_is_refused(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no meta\.json"):
        open_tokens(str(tmp_path))


def test_a_damaged_parquet_file_is_named(tmp_path) -> None:
    from dew.data.rows import read_table
    from dew.data.tokens.opening import open_tokens

    bad = tmp_path / "ids.parquet"
    bad.write_bytes(b"PAR1 not a footer")
    with pytest.raises(ValueError, match=f"{bad} is not a readable parquet file"):
        open_tokens(str(bad))
    with pytest.raises(ValueError, match=f"{bad} is not a readable parquet file"):
        read_table(str(bad), ["prompt"])


@pytest.mark.parametrize("batch", [0, -4, True, 8.0])
def test_a_batch_that_is_not_a_positive_int_is_refused_by_name(corpora, batch) -> None:
    """load(batch=0) used to reach `len(val) // batch` and fail as a bare ZeroDivisionError."""
    for spec in (
        TokenWindows(path=corpora["bin"], seq_len=8, loading=SERIAL),  # holds out the tail of train
        TokenWindows(path=corpora["bin"], seq_len=8, val_batches=None, loading=SERIAL),  # reads the val split
    ):
        with pytest.raises(ValueError, match=r"load\(batch=\) must be a positive int"):
            spec.load(batch=batch)


@given(stop_at=st.integers(0, 3), shares=st.sampled_from([1, 2, 4]), new_shares=st.sampled_from([1, 2, 4]))
@settings(max_examples=6, deadline=None)
def test_a_validation_pass_resumes_exactly_on_another_share_count(corpora, stop_at, shares, new_shares) -> None:
    data = TokenWindows(path=corpora["bin"], seq_len=8, loading=SERIAL, val_batches=None).load(batch=4)
    with data.val(DataPartition()) as whole:
        steps = len(list(whole))
    assert steps > 3
    assert_resume_exact(data.val, steps=steps, stop_at=stop_at, count_before=shares, count_after=new_shares)


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
def test_an_empty_shard_between_two_others_reads_as_no_ids(tmp_path, kind: str) -> None:
    """tokenize writes an empty shard when one document spans a shard's whole share of the split; a span
    across it failed with numpy's bare "cannot mmap an empty file", naming no shard."""
    docs = documents(12, seed=3)
    path = write_corpus(str(tmp_path / kind), {"train": docs}, kind=kind, groups=[5, 0, 7])
    source = open_tokens(path)
    stream = stream_of(docs)
    assert len(source) == len(stream)
    np.testing.assert_array_equal(source[0 : len(stream)], stream)
    starts = np.arange(len(stream) - 9)
    np.testing.assert_array_equal(
        open_tokens(path).spans(starts, 9) if kind == "bin" else [source[s : s + 9] for s in starts],
        np.stack([stream[s : s + 9] for s in starts]),
    )
    data = TokenWindows(path=path, seq_len=8, val_batches=0, loading=SERIAL).load(batch=2)
    windows = TokenWindowSource(source, 8)
    with data.train(DataPartition()) as train:
        seen = [row.tolist() for _ in range(data.steps_per_epoch) for row in next(train)["text"]]
    assert sorted(seen) == sorted(w.tolist() for w in windows.read_batch(np.arange(len(windows)))["text"])
