"""The tokenize job end to end on DirectRunner: content, determinism, commit protocol, crash and rerun."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from dew.data import block_sums, formats, integrity, packing
from dew.data.text import ByteTokenizer, HFTokenizer
from dew.pipelines import cli, pack_job
from dew.pipelines import tokenize_job as job
from dew.preprocess.commit import OutputConflictError
from dew.preprocess.drops import TooManyDropsError
from dew.preprocess.pack import shard_tokens
from tests.preprocess.corpora import reference_stream, topics, write_jsonl

pytestmark = pytest.mark.beam
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def tokenize(inputs: Path, output: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    return job.main(["--input", str(inputs / "*"), "--output", str(output), *flags, *runner])


def split_tokens(directory: Path, split: str) -> np.ndarray:
    meta = formats.read_meta(str(directory))
    parts = []
    for shard in meta.shards(split):
        ext = formats.parse_shard_name(shard.name)[3]
        parts.extend(shard_tokens(str(directory / shard.name), ext, np.dtype(meta.tokens.dtype)))
    return np.concatenate(parts) if parts else np.zeros(0, meta.tokens.dtype)


def listing(directory: Path) -> dict[str, str]:
    """Every committed file with its sha256: two runs agree byte for byte when these agree."""
    return {p.name: formats.sha256_file(str(p)) for p in sorted(directory.iterdir()) if p.is_file()}


def test_byte_corpus_holds_every_document_in_order_with_eos(text_inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    found = tokenize(text_inputs, out, "--pack", "--val_fraction", "0.1", "--num_shards", "3", "--seq_len", "64")
    meta = formats.read_meta(str(out))
    section = meta.tokens
    assert (section.tokenizer, section.vocab_size, section.eos_id, section.dtype) == ("byte", 257, 256, "uint16")
    want = reference_stream(topics(40), ByteTokenizer(), 256, np.uint16)
    cut = len(want) - int(len(want) * 0.1)
    np.testing.assert_array_equal(split_tokens(out, "train"), want[:cut])
    np.testing.assert_array_equal(split_tokens(out, "val"), want[cut:])
    assert [s.name for s in meta.shards("train")] == [f"train-0000{i}-of-00003.bin" for i in range(3)]
    train = split_tokens(out, "train")
    starts = np.cumsum([s.units for s in meta.shards("train")])[:-1]
    assert all(train[s - 1] == 256 for s in starts if s > 0)  # shards break between documents
    for split in meta.splits:
        for shard in meta.shards(split):
            assert integrity.digests(str(out / shard.name)) == (shard.sha256, shard.crc32c) and shard.crc32c
            formats.verify_shard(str(out), shard, checksum=True)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == stats["documents_written"] + sum(stats["dropped"].values()) == 40
    assert found["documents_in"] == 40 and found["files"] == 3
    assert not (out / ".dew-job.json").exists() and not (out / ".dew-tmp").exists()


def test_every_runner_and_worker_count_writes_the_same_bytes(text_inputs: Path, tmp_path: Path) -> None:
    flags = ("--pack", "--val_fraction", "0.2", "--num_shards", "2", "--format", "array_record", "--seq_len", "32")
    tokenize(text_inputs, tmp_path / "one", *flags)
    two = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    tokenize(text_inputs, tmp_path / "two", *flags, runner=two)
    assert listing(tmp_path / "one") == listing(tmp_path / "two")


def test_bin_array_record_and_parquet_hold_the_same_tokens(text_inputs: Path, tmp_path: Path) -> None:
    streams = {}
    for ext in ("bin", "array_record", "parquet"):
        tokenize(text_inputs, tmp_path / ext, "--pack", "--val_fraction", "0.1", "--format", ext)
        streams[ext] = (split_tokens(tmp_path / ext, "train"), split_tokens(tmp_path / ext, "val"))
        meta = formats.read_meta(str(tmp_path / ext))
        assert meta.shards("train")[0].name.endswith(f".{ext}")
        # .bin shards are read at random windows, so their block checksums are of 256 bytes; the rest 4 KiB.
        block = integrity.TOKEN_BLOCK_BYTES if ext == "bin" else integrity.BLOCK_BYTES
        for shard in meta.shards("train"):
            digest = integrity.Digest(block_bytes=block)
            digest.update((tmp_path / ext / shard.name).read_bytes())
            sums = (tmp_path / ext / (shard.name + formats.BLOCKS_SUFFIX)).read_bytes()
            assert shard.block_bytes == block and sums[: len(digest.blocks)] == digest.blocks
            assert len(digest.blocks) == 4 * -(-shard.bytes // block)
            # The two-level layout: the checksums, then the top level meta.json's blocks_crc32c covers.
            assert shard.blocks_version == block_sums.BLOCKS_VERSION
            step, flat = 4 * (65536 // block), digest.blocks  # a group: the checksums of 64 KiB of shard
            groups = [flat[a : a + step] for a in range(0, len(flat), step)]
            top = b"".join(integrity.crc32c_value(group).to_bytes(4, "big") for group in groups)
            assert sums == flat + top and shard.blocks_crc32c == integrity.digest_bytes(top)
    for ext in ("array_record", "parquet"):
        for want, got in zip(streams["bin"], streams[ext], strict=True):
            np.testing.assert_array_equal(want, got)


def test_hf_tokenizer_trained_here_and_saved_locally(text_inputs: Path, tmp_path: Path, hf_tokenizer_dir: str) -> None:
    out = tmp_path / "out"
    tokenize(text_inputs, out, "--tokenizer", hf_tokenizer_dir, "--pack")
    tokenizer = HFTokenizer(hf_tokenizer_dir)
    meta = formats.read_meta(str(out))
    assert (meta.tokens.tokenizer_hash, meta.tokens.vocab_size, meta.tokens.eos_id) == (
        tokenizer.fingerprint(),
        tokenizer.vocab_size,
        tokenizer.eos_id,
    )
    want = reference_stream(topics(40), tokenizer, tokenizer.eos_id, np.uint16)
    np.testing.assert_array_equal(split_tokens(out, "train"), want)
    assert list(meta.splits) == ["train"]


def test_offline_pack_files_equal_what_the_runtime_computes(text_inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    tokenize(text_inputs, out, "--pack", "--val_fraction", "0.1", "--num_shards", "2", "--seq_len", "100")
    pack_job.main(["--corpus", str(out), "--seq_len", "30", "--packing_bins", "3", *IN_MEMORY])
    meta = formats.read_meta(str(out))
    fingerprint = meta.fingerprint()
    for split in ("train", "val"):
        stream = split_tokens(out, split)
        ends = packing.document_ends(len(stream), lambda a, b, s=stream: s[a:b], meta.tokens.eos_id)
        offline = packing.load_document_ends(formats.derived_path(str(out), split, packing.DOCUMENTS), fingerprint)
        np.testing.assert_array_equal(offline, ends)
        for seq_len, bins in ((100, 8), (30, 3)):
            path = formats.derived_path(str(out), split, packing.packing_name(seq_len + 1, bins))
            offline_plan = packing.PackingPlan.load(path, fingerprint)
            assert offline_plan == packing.plan_packing(packing.lengths_of(ends), seq_len + 1, bins)
            assert packing.PackingPlan.load(path, "another corpus") is None


def test_crash_then_rerun_skips_committed_shards_and_ends_identical(text_inputs: Path, tmp_path: Path) -> None:
    flags = ("--pack", "--num_shards", "4", "--format", "array_record", "--seq_len", "50")
    tokenize(text_inputs, tmp_path / "clean", *flags)
    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00002-of-00004.array_record"
    blocker.mkdir(parents=True)  # a directory where a shard must go: writing that shard fails for real
    with pytest.raises(Exception, match="train-00002-of-00004"):
        tokenize(text_inputs, crashed, *flags)
    assert not (crashed / formats.META).exists()
    with pytest.raises(FileNotFoundError, match="never committed"):
        formats.read_meta(str(crashed))
    committed = {p.name for p in crashed.iterdir() if p.is_file() and formats.parse_shard_name(p.name)}
    blocker.rmdir()
    found = tokenize(text_inputs, crashed, *flags)
    assert found.get("shards_skipped", 0) == len(committed)
    assert found["shards_written"] == 4 - len(committed)
    assert listing(crashed) == listing(tmp_path / "clean")


def test_a_committed_shard_found_short_on_rerun_is_named(text_inputs: Path, tmp_path: Path) -> None:
    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00002.bin"
    blocker.mkdir(parents=True)
    with pytest.raises(Exception, match="train-00001-of-00002"):
        tokenize(text_inputs, crashed, "--num_shards", "2")
    claim = (crashed / ".dew-job.json").read_bytes()
    blocker.rmdir()
    tokenize(text_inputs, crashed, "--num_shards", "2")
    # Back to the crashed state with every shard committed, one of them since cut short.
    (crashed / formats.META).unlink()
    (crashed / ".dew-job.json").write_bytes(claim)
    short = crashed / "train-00000-of-00002.bin"
    short.write_bytes(short.read_bytes()[:-6])
    with pytest.raises(Exception, match=r"train-00000-of-00002.bin was committed by an earlier run .* holds \d+ bytes"):
        tokenize(text_inputs, crashed, "--num_shards", "2")
    assert not (crashed / formats.META).exists()


def test_rerun_with_another_config_refuses_and_overwrite_leaves_no_stale_shards(
    text_inputs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    tokenize(text_inputs, out, "--num_shards", "3")
    # A kill right after meta.json's rename leaves the claim and temporaries; the next run clears them.
    (out / ".dew-job.json").write_text("{}")
    (out / ".dew-tmp").mkdir()
    (out / ".dew-tmp" / "stats.json.0123").write_text("{}")
    assert tokenize(text_inputs, out, "--num_shards", "3") == {}  # already committed by this very job
    assert not (out / ".dew-job.json").exists() and not (out / ".dew-tmp").exists()
    with pytest.raises(OutputConflictError, match=r"num_shards.*--overwrite"):
        tokenize(text_inputs, out, "--num_shards", "2")
    tokenize(text_inputs, out, "--num_shards", "2", "--overwrite")
    shards = sorted(p.name for p in out.iterdir() if formats.parse_shard_name(p.name))
    assert shards == ["train-00000-of-00002.bin", "train-00001-of-00002.bin"]
    (text_inputs / "d.jsonl").write_text(json.dumps({"text": "one more"}) + "\n")
    with pytest.raises(OutputConflictError, match="inputs"):
        tokenize(text_inputs, out, "--num_shards", "2")


def test_foreign_files_in_the_output_are_refused(text_inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "train-00000-of-00009.bin").write_bytes(b"\0\0")
    with pytest.raises(OutputConflictError, match="did not write"):
        tokenize(text_inputs, out)


def test_bad_input_is_counted_and_the_books_balance(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    lines = [b'{"text": "good one"}', b"{broken", b'{"text": "\xff\xfe"}', b'{"body": "x"}', b'{"text": ""}']
    (inputs / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n" + b'{"text": "' + b"x" * 5000 + b'"}\n')
    (inputs / "b.jsonl.gz").write_bytes(b"this is not gzip")
    out = tmp_path / "out"
    # Six of seven dropped is past the default --max_drop_fraction: refused, naming the reasons and rows.
    with pytest.raises(TooManyDropsError, match=r"dropped 85\.7% of 7 documents") as refused:
        tokenize(inputs, out, "--pack", "--max_document_bytes", "1000")
    assert f"corrupt_input: 1 (14.3%), e.g. {inputs / 'b.jsonl.gz'} row 0" in str(refused.value)
    assert f"invalid_utf8: 1 (14.3%), e.g. {inputs / 'a.jsonl'} row 2 — is the text UTF-8?" in str(refused.value)
    assert not out.exists() or not any(out.iterdir())
    found = tokenize(inputs, out, "--pack", "--max_document_bytes", "1000", "--max_drop_fraction", "0.9")
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_written"] == 1 and stats["files_unreadable"] == 1
    assert stats["drop_examples"]["missing_field"] == {"path": str(inputs / "a.jsonl"), "row": 3}
    assert {k: v for k, v in stats["dropped"].items() if v} == {
        "malformed_json": 1,
        "invalid_utf8": 1,
        "missing_field": 1,
        "empty": 1,
        "too_long": 1,
        "corrupt_input": 1,
    }
    assert found["documents_in"] == 7 == stats["documents_in"]
    with pytest.raises(Exception, match=r"a\.jsonl: row 1: malformed json"):
        tokenize(inputs, tmp_path / "strict", "--strict")


def test_a_job_that_writes_nothing_fails_uncommitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "empty.jsonl").write_bytes(b"")
    out = tmp_path / "out"
    with pytest.raises(TooManyDropsError, match="the inputs hold no document"):
        tokenize(inputs, out)
    write_jsonl(inputs / "empty.jsonl", topics(3))
    command = ["tokenize", "--input", str(inputs / "*"), "--output", str(out), *IN_MEMORY]
    assert cli.main([*command, "--text_field", "body"]) == 2
    err = capsys.readouterr().err
    assert f"missing_field: 3 (100.0%), e.g. {inputs / 'empty.jsonl'} row 0 — is the text under --text_field?" in err
    assert "Traceback" not in err.split("dew-preprocess tokenize:")[-1]
    assert not (out / "meta.json").exists() and not (out / ".dew-job.json").exists()
    # The failed run left nothing behind, so the corrected command needs no --overwrite.
    assert cli.main([*command, "--text_field", "text"]) == 0
    assert formats.read_meta(str(out)).shards("train")


def test_a_shard_size_that_plans_too_many_shards_is_refused_before_any_is_written(
    text_inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The count is known only once the tokens are counted; it used to reach shard_name inside a worker,
    as a traceback, after the job had already begun writing."""
    out = tmp_path / "out"
    command = ["tokenize", "--input", str(text_inputs / "*"), "--output", str(out), *IN_MEMORY]
    assert cli.main([*command, "--shard_size_mb", "1e-9"]) == 2
    err = capsys.readouterr().err
    refusal = err.split("dew-preprocess tokenize: ")[-1]
    assert refusal.startswith("--shard_size_mb plans ") and " train shards (" in refusal, err[-2000:]
    assert refusal.rstrip().endswith("Use a larger --shard_size_mb, or set the count with --num_shards")
    assert "Traceback" not in refusal and len(refusal.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.gcs
def test_gs_inputs_and_outputs_through_the_emulator(text_inputs: Path, tmp_path: Path, gcs_emulator: str) -> None:
    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("dew-test")
    for path in sorted(text_inputs.iterdir()):
        bucket.blob(f"in/{path.name}").upload_from_filename(str(path))
    flags = ("--pack", "--num_shards", "2", "--format", "array_record", "--seq_len", "40", "--val_fraction", "0.1")
    tokenize(text_inputs, tmp_path / "local", *flags)
    job.main(["--input", "gs://dew-test/in/*", "--output", "gs://dew-test/corpus", *flags, *IN_MEMORY, "--no_auth"])
    names = sorted(b.name for b in bucket.list_blobs(prefix="corpus/"))
    local = listing(tmp_path / "local")
    assert names == sorted(f"corpus/{n}" for n in local)
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    for name in names:
        bucket.blob(name).download_to_filename(str(downloaded / os.path.basename(name)))
    # The input manifest names gs:// paths, so meta.json differs; every shard and derived file is identical.
    for name, digest in local.items():
        if name != formats.META:
            assert formats.sha256_file(str(downloaded / name)) == digest, name
    assert formats.Meta.from_json(json.loads((downloaded / formats.META).read_text())).fingerprint() == (
        formats.read_meta(str(tmp_path / "local")).fingerprint()
    )


def test_gzip_zstd_txt_and_parquet_inputs(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    texts = topics(8)
    inputs = tmp_path / "in"
    inputs.mkdir()
    with gzip.open(inputs / "a.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": texts[0]}) + "\n")
    (inputs / "b.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress((json.dumps({"text": texts[1]}) + "\n").encode())
    )
    pq.write_table(pa.table({"text": [texts[2], None, texts[3]]}), inputs / "c.parquet")
    (inputs / "d.txt").write_text(texts[4])
    out = tmp_path / "out"
    tokenize(inputs, out, "--pack")
    want = reference_stream([texts[0], texts[1], texts[2], texts[3], texts[4]], ByteTokenizer(), 256, np.uint16)
    np.testing.assert_array_equal(split_tokens(out, "train"), want)
    assert json.loads((out / "stats.json").read_text())["dropped"]["missing_field"] == 1
    shutil.rmtree(out)
    tokenize(inputs, out, "--txt_documents", "line")
    lines = [line for line in texts[4].split("\n") if line]
    assert json.loads((out / "stats.json").read_text())["documents_written"] == 4 + len(lines)


def test_an_output_in_a_bucket_that_does_not_exist_is_refused_by_name(
    text_inputs: Path, gcs_emulator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in the bucket of --output failed deep in the claim as a BeamIOError about listing
    `.dew-tmp/*`, with 'unknown error' and a traceback, naming neither the bucket nor the fix."""
    argv = ["tokenize", "--input", str(text_inputs / "*"), "--output", "gs://no-such-bucket/corpus", *IN_MEMORY]
    assert cli.main([*argv, "--no_auth"]) == 2
    err = capsys.readouterr().err
    assert "gs://no-such-bucket does not exist" in err and "Traceback" not in err, err
