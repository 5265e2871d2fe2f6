"""pack, plan-mixture and inspect over a committed directory that is damaged, of another kind or not
committed: one line naming the file and the fix, exit code 2, never a traceback or a reader's bare error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dew.pipelines import cli
from tests.runtime.image_support import write_committed
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_refused_quietly, run_preprocess

IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
OVERWRITE = "rerun the preprocess job with --overwrite"


def token_corpus(directory: Path, kind: str = "array_record", tokenizer: str = "byte-test") -> Path:
    return Path(write_corpus(str(directory), {"train": documents(40, longest=200)}, kind=kind, tokenizer=tokenizer))


def images(directory: Path) -> Path:
    write_committed(str(directory), {"train": [[{"image": b"\xff\xd8" * 40, "caption": b"a cat"}] * 3] * 2})
    return directory


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_pack_refuses_a_truncated_shard_by_name_before_the_runner_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It failed as `RuntimeError:  [while running 'Pack/ShardEnds']`, or a Riegeli error naming no file."""
    corpus = token_corpus(tmp_path / "c")
    shard = corpus / "train-00001-of-00002.array_record"
    shard.write_bytes(shard.read_bytes()[:-7])
    err = refused(["pack", "--corpus", str(corpus), "--seq_len", "16", *IN_MEMORY], capsys)
    assert f"{shard} holds" in err and "truncated" in err and OVERWRITE in err


def test_pack_refuses_a_flipped_byte_in_a_shard_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = token_corpus(tmp_path / "c")
    shard = corpus / "train-00000-of-00002.array_record"
    flip(shard, shard.stat().st_size // 2)  # the size is right: only the checksum, read on the worker, tells
    err = refused(["pack", "--corpus", str(corpus), "--seq_len", "16", *IN_MEMORY], capsys)
    assert f"{shard} fails its" in err and OVERWRITE in err
    assert not (corpus / "train.documents.npz").exists()


@pytest.mark.parametrize("job", ["pack", "plan-mixture"])
def test_a_directory_of_another_kind_is_refused_as_a_usage_error(
    job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = images(tmp_path / "images")
    if job == "pack":
        argv = ["pack", "--corpus", str(directory), "--seq_len", "16"]
    else:
        argv = ["plan-mixture", "--corpus", f"{directory}=1", "--tokens", "100", "--seq_len", "8"]
        argv += ["--output", str(tmp_path / "m.json")]
    err = refused([*argv, *IN_MEMORY], capsys)
    assert f"{directory} holds images (dew.images/1), not tokens" in err


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("uncommitted", "has no meta.json: it is not a committed corpus; run tokenize first"),
        ("tokenizers", "these corpora come from different tokenizers"),
        ("split", "has no split 'val' (--split); it holds train"),
        ("truncated", OVERWRITE),
    ],
)
def test_plan_mixture_refuses_on_the_launcher_what_a_worker_would_fail_on(case: str, said: str, tmp_path: Path) -> None:
    """On the default multi-process runner each of these failed on a worker: a traceback, exit 1."""
    web = token_corpus(tmp_path / "web", kind="bin")
    other = tmp_path / "other"
    if case == "uncommitted":
        other.mkdir()
    elif case == "tokenizers":
        token_corpus(other, kind="bin", tokenizer="another")
    else:
        token_corpus(other, kind="bin")
    if case == "truncated":
        shard = other / "train-00001-of-00002.bin"
        shard.write_bytes(shard.read_bytes()[:-2])
    argv = ["plan-mixture", "--corpus", f"{web}=1", "--corpus", f"{other}=1", "--tokens", "100", "--seq_len", "8"]
    argv += ["--output", str(tmp_path / "m.json")]
    if case == "split":
        argv += ["--split", "val"]
    done = run_preprocess(*argv, "--direct_num_workers", "2")
    assert_refused_quietly(done)
    assert said in done.stderr
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("damage", ["flipped", "truncated", "missing", "meta", "not json", "pieces"])
def test_inspect_reports_damage_as_one_line_naming_the_file(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inspect is how a user diagnoses a directory: damage was a plain ValueError or a Riegeli RuntimeError
    with a traceback (exit 1), and damage in a shard after the first went unseen."""
    directory = images(tmp_path / "images")
    first, second = directory / "train-00000-of-00002.array_record", directory / "train-00001-of-00002.array_record"
    meta = directory / "meta.json"
    if damage == "flipped":
        flip(first, first.stat().st_size // 2)
        named = f"{first} fails its"
    elif damage == "truncated":
        second.write_bytes(second.read_bytes()[:-1])
        named = f"{second} holds"
    elif damage == "missing":
        second.unlink()
        named = f"{second} is listed in meta.json but missing"
    elif damage == "meta":
        meta.write_text(meta.read_text().replace('"records": 3', '"records": 4', 1))
        named = "its checksum does not match its content"
    elif damage == "not json":
        meta.write_text(meta.read_text()[:-20])
        named = f"{meta} is not valid JSON"
    else:
        directory = token_corpus(tmp_path / "tokens")
        from dew.data import formats
        from dew.data.pieces import PIECES, PieceIndex

        index = formats.derived_path(str(directory), "train", PIECES)
        fingerprint = formats.read_meta(str(directory)).fingerprint()
        lengths = np.array([len(d) for d in documents(40, longest=200)])
        PieceIndex.of_lengths([lengths[:20], lengths[20:]]).save(index, fingerprint)
        flip(Path(index), Path(index).stat().st_size // 2)
        named = f"{index} fails its zip-crc32 check"
    err = refused(["inspect", str(directory)], capsys)
    assert named in err and ("--overwrite" in err or "rerun the preprocess job" in err), err


def test_a_damaged_directory_relayed_by_a_worker_is_a_user_error() -> None:
    relayed = RuntimeError(
        "Traceback (most recent call last):\n  ...\ndew.data.remote.DamagedError: c/x.bin fails its sha256 check "
        "against meta.json; rerun the preprocess job with --overwrite [while running 'Pack/ShardEnds']"
    )
    assert cli.user_error(relayed) == f"c/x.bin fails its sha256 check against meta.json; {OVERWRITE}"


def test_inspect_into_a_closed_pipe_ends_without_a_traceback(tmp_path: Path) -> None:
    """`dew-preprocess inspect c/ | head -1`: the reader leaves early, and inspect printed BrokenPipeError
    twice, as a traceback and again at exit."""
    import os
    import subprocess
    import sys

    corpus = token_corpus(tmp_path / "c", kind="bin", tokenizer="byte")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a closed pipe
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dew.pipelines.cli", "inspect", str(corpus)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == cli.BROKEN_PIPE_EXIT and done.stderr == "", done.stderr


def documents_directory(directory: Path) -> Path:
    """A committed documents directory as another tool may write one: one parquet shard, meta.json, no
    stats.json (the contract leaves it optional) and no removal tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dew.data import formats
    from dew.data.sections import DocumentsSection

    directory.mkdir()
    name = formats.shard_name("train", 0, 1, "parquet")
    rows = {f: [f"{f} {i}".encode() for i in range(5)] for f in ("id", "text", "source", "row")}
    pq.write_table(pa.table({f: pa.array(v, type=pa.binary()) for f, v in rows.items()}), directory / name)
    written = directory / name
    shard = formats.Shard(name, 5, 40, written.stat().st_size, formats.sha256_file(str(written)))
    formats.write_meta(str(directory), formats.Meta(section=DocumentsSection(), splits={"train": (shard,)}))
    return directory


def recount(directory: Path, index: int, delta: int) -> Path:
    """meta.json rewritten, checksum and all, with train shard `index` holding `delta` more records than
    its own footer (or, for a .bin, its eos ids) counts: the shard is named in what refuses it."""
    from tests.runtime.test_committed import rewrite_records

    return directory / rewrite_records(directory, "train", index, delta)


@pytest.mark.parametrize(("kind", "delta"), [("bin", 1), ("array_record", 1), ("array_record", -1), ("parquet", -1)])
@pytest.mark.parametrize("job", ["pack", "plan-mixture"])
def test_a_record_count_unlike_the_shards_own_is_refused_by_name_and_nothing_is_written(
    job: str, kind: str, delta: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pack and plan-mixture counted documents by the shards' eos ids and never compared meta.json's
    records: pack wrote its document index and plans, plan-mixture its plan, over a meta.json that lies."""
    corpus = token_corpus(tmp_path / "c", kind=kind)
    shard = recount(corpus, 1, delta)
    if job == "pack":
        argv = ["pack", "--corpus", str(corpus), "--seq_len", "16"]
    else:
        argv = ["plan-mixture", "--corpus", f"{corpus}=1", "--tokens", "100", "--seq_len", "8"]
        argv += ["--output", str(tmp_path / "m.json")]
    err = refused([*argv, *IN_MEMORY], capsys)
    assert str(shard) in err or f"shard {shard.name} " in err, err
    assert "meta.json records" in err and OVERWRITE in err, err
    assert not (corpus / "train.documents.npz").exists() and not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("delta", [1, -1])
@pytest.mark.parametrize("kind", ["images", "documents"])
def test_inspect_refuses_a_sampled_shard_whose_own_count_is_not_meta_jsons(
    kind: str, delta: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample is spread over meta.json's count: past the footer's it raised a bare `index 3 out of
    bound 3`, short of it the report went out sampling a part of the shard, with meta.json's count."""
    directory = images(tmp_path / "images") if kind == "images" else documents_directory(tmp_path / "documents")
    shard = recount(directory, 0, delta)
    err = refused(["inspect", str(directory)], capsys)
    assert f"{shard} holds" in err and "by its own footer, but meta.json records" in err and OVERWRITE in err, err


def test_inspect_reads_a_documents_directory_without_stats_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stats.json is optional by the contract; inspect of such a documents directory failed with a
    traceback, `KeyError: 'dropped'`, after printing half its report."""
    directory = documents_directory(tmp_path / "documents")
    assert cli.main(["inspect", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "5 records spread over the 5 of train-00000-of-00001.parquet" in out, out
