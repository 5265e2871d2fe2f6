"""Golden outputs: every dew-preprocess job that writes run on small fixed inputs, each output file's sha256.

The digests in tests/fixtures/golden/digests.json were recorded from main before the writer skeleton
was shared; test_golden reruns the jobs and compares, so a refactor of the writers proves that it
changed no output byte. Record them again only for a change that means to change an output:

    .venv/bin/python -m tests.preprocess.golden --write

Inputs are built here from what every machine has: pydoc topics, skimage photographs, videos PyAV
encodes, every input file with one fixed modification time. The jobs run inside the temporary root on
relative paths, since meta.json records its inputs and their fingerprint; a file is hashed as written,
except that a JSON file has the temporary root replaced by "<root>" first (plan-mixture writes the
corpora's absolute paths). Nothing the jobs write holds a clock time. The urls of
ingest-urls name a host (GOLDEN_HOST) that resolves, in this process only, to the local image server:
its port changes from run to run, and a url's hash decides its shard and split.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

DIGESTS = Path(__file__).parent.parent / "fixtures" / "golden" / "digests.json"
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
GOLDEN_HOST = "dew-golden.test"
TEXT_DOCUMENTS = 60
INPUT_TIME = 1_700_000_000


def _texts(count: int) -> list[str]:
    from tests.preprocess.corpora import topics

    return topics(count)


def _write_text_inputs(directory: Path) -> Path:
    import gzip

    from tests.preprocess.corpora import write_jsonl

    texts = _texts(TEXT_DOCUMENTS)
    directory.mkdir(parents=True)
    write_jsonl(directory / "a.jsonl", texts[:25])
    write_jsonl(directory / "b.jsonl", texts[25:45])
    with gzip.GzipFile(directory / "c.jsonl.gz", "wb", mtime=0) as f:
        f.write("".join(json.dumps({"text": t}) + "\n" for t in texts[45:]).encode())
    return directory


def _write_copies(directory: Path) -> Path:
    """Duplicates for the clean job: exact copies of three topics and a near copy of a fourth."""
    from tests.preprocess.corpora import write_jsonl

    texts = _texts(TEXT_DOCUMENTS)
    words = texts[4].split()
    near = " ".join(["golden", *words[1:]])
    directory.mkdir(parents=True)
    write_jsonl(directory / "copies.jsonl", [texts[0], texts[30].upper(), texts[50], near])
    return directory


def _tokenizer(directory: Path) -> str:
    """A 300-token BPE trained here on pydoc text, saved as a local HF tokenizer directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(_texts(80), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>")
    fast.save_pretrained(directory)
    return str(_settle(directory))


def _write_image_folder(directory: Path) -> Path:
    """An ImageFolder of two classes: photographs in three encodings, plus images every job drops."""
    from tests.preprocess.photos import bad_images, good_images

    good = sorted(good_images().items())
    for i, (name, data) in enumerate(good):
        folder = directory / ("cats" if i % 2 else "dogs")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    for name, (data, _) in sorted(bad_images().items()):
        # hubble.jpg, over MAX_PIXELS, costs a second to decode for a reason seen elsewhere; restarts.jpg
        # (corrupt_scan) came after the digests were recorded, which record the inputs' fingerprint
        if name not in ("hubble.jpg", "restarts.jpg"):
            (directory / "dogs" / name).write_bytes(data)
    return directory


def _write_videos(directory: Path) -> Path:
    from tests.runtime.video_support import write_video

    directory.mkdir(parents=True)
    write_video(str(directory / "red.mp4"), frames=30, size=(64, 48))
    write_video(str(directory / "quiet.mp4"), frames=25, size=(48, 64), fps=20, audio=False)
    write_video(str(directory / "odd.mkv"), codec="mpeg4", frames=20, size=(64, 64))
    (directory / "broken.mp4").write_bytes(b"\0\0\0\x18ftypmp42 not a video at all")
    return directory


def _url_rows() -> list[tuple[str, str]]:
    base = f"http://{GOLDEN_HOST}"
    kinds = ["photo"] * 8 + ["missing", "error", "html", "truncated", "tiny", "flat", "grey", "noai"]
    return [(f"{base}/{kind}/{i}.jpg", f"image {i} {kind}") for i, kind in enumerate(kinds)]


def _write_url_lists(directory: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _url_rows()
    directory.mkdir(parents=True)
    urls, captions = zip(*rows, strict=True)
    pq.write_table(pa.table({"url": list(urls[:10]), "caption": list(captions[:10])}), directory / "a.parquet")
    lines = [json.dumps({"url": u, "caption": c}) for u, c in rows[10:]]
    (directory / "b.jsonl").write_text("\n".join(lines) + "\n")
    return directory


@contextlib.contextmanager
def _golden_host(port: int) -> Iterator[None]:
    """GOLDEN_HOST:80 resolves to 127.0.0.1:port in this process while the block runs."""
    real = socket.getaddrinfo

    def resolve(host, service, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == GOLDEN_HOST:
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, service, *args, **kwargs)

    socket.getaddrinfo = resolve  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]


def _quietly(job: Callable[[list[str]], object], argv: list[str]) -> None:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        job([*argv, *IN_MEMORY])


def _settle(directory: Path) -> Path:
    """Gives every file under `directory` one fixed modification time: input fingerprints include it."""
    for path in directory.rglob("*"):
        os.utime(path, (INPUT_TIME, INPUT_TIME))
    return directory


@contextlib.contextmanager
def _inside(root: Path) -> Iterator[None]:
    """Runs the block with `root` as the working directory: the jobs get relative paths, which their
    fingerprints and meta.json record, so a run in another temporary directory writes the same bytes."""
    before = os.getcwd()
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(before)


def run_jobs(root: Path) -> dict[str, Path]:
    """Runs every writing job in `root` on inputs built there; returns each job's output by run name."""
    with _inside(root):
        return {run: root / output for run, output in _run_jobs(Path(".")).items()}


def _run_jobs(root: Path) -> dict[str, Path]:
    from dew.pipelines import (
        caption_tokenize_job,
        clean_job,
        decode_clips_job,
        images_job,
        ingest_urls_job,
        pack_job,
        plan_mixture_job,
        tokenize_job,
    )

    text = _settle(_write_text_inputs(root / "text"))
    tokenizer = _tokenizer(root / "tokenizer")
    out: dict[str, Path] = {}

    out["tokenize-byte"] = root / "tokens-byte"
    # With an eos after every document (--pack): plan-mixture below refuses a corpus without one.
    byte = ["--input", str(text / "*"), "--output", str(out["tokenize-byte"]), "--num_shards", "2", "--pack"]
    _quietly(tokenize_job.main, byte)
    out["tokenize-bpe-pack"] = root / "tokens-bpe"
    bpe = ["--input", str(text / "*"), "--output", str(out["tokenize-bpe-pack"]), "--tokenizer", tokenizer]
    packed = ["--format", "array_record", "--val_fraction", "0.1", "--pack", "--seq_len", "64"]
    _quietly(tokenize_job.main, [*bpe, *packed])
    out["tokenize-parquet"] = root / "tokens-parquet"
    parquet = ["--input", str(text / "*"), "--output", str(out["tokenize-parquet"]), "--format", "parquet"]
    _quietly(tokenize_job.main, [*parquet, "--shard_size_mb", "0.06", "--pack", "--seq_len", "30"])
    # pack adds its plans to the byte corpus, so that run's digests are taken after it.
    _quietly(pack_job.main, ["--corpus", str(out["tokenize-byte"]), "--seq_len", "30", "--packing_bins", "3"])
    out["tokenize-byte+pack"] = out.pop("tokenize-byte")
    out["plan-mixture"] = root / "mixture"
    out["plan-mixture"].mkdir()
    corpora = ["--corpus", f"{out['tokenize-byte+pack']}=0.7", "--corpus", f"{out['tokenize-parquet']}=0.3"]
    mixture = [*corpora, "--seq_len", "30", "--output", str(out["plan-mixture"] / "mixture.json")]
    _quietly(plan_mixture_job.main, [*mixture, "--tokens", "20000"])

    out["clean"] = root / "documents"
    copies = _settle(_write_copies(root / "copies"))
    cleaning = ["--input", str(text / "*"), "--input", str(copies / "*"), "--output", str(out["clean"])]
    _quietly(clean_job.main, [*cleaning, "--no-quality", "--num_shards", "2"])

    folder = _settle(_write_image_folder(root / "photos"))
    out["images"] = root / "images"
    images = ["--input", str(folder), "--output", str(out["images"]), "--size", "64", "--num_shards", "2"]
    _quietly(images_job.main, [*images, "--val_fraction", "0.25"])
    out["images-parquet-png"] = root / "images-png"
    png = ["--input", str(folder), "--output", str(out["images-parquet-png"]), "--size", "48", "--resize", "keep"]
    _quietly(images_job.main, [*png, "--encoding", "png", "--format", "parquet", "--max_pixels", "600000"])
    out["caption-tokenize"] = root / "captions"
    captions = ["--input", str(out["images"]), "--output", str(out["caption-tokenize"]), "--tokenizer", tokenizer]
    _quietly(caption_tokenize_job.main, captions)

    out["ingest-urls"] = root / "ingested"
    lists = _settle(_write_url_lists(root / "urls"))
    ingest = ["--input", str(lists / "*"), "--output", str(out["ingest-urls"]), "--size", "64", "--num_shards", "2"]
    fetch = ["--timeout", "5", "--retries", "0", "--threads", "4", "--val_fraction", "0.2"]
    from tests.runtime.online_support import ImageServer

    server = ImageServer()
    server.start()
    try:
        with _golden_host(server.server_address[1]):
            _quietly(ingest_urls_job.main, [*ingest, *fetch])
    finally:
        server.stop()

    videos = _settle(_write_videos(root / "videos"))
    out["decode-clips"] = root / "clips"
    clips = ["--input", str(videos), "--output", str(out["decode-clips"]), "--frames", "4", "--frame_size", "32"]
    _quietly(decode_clips_job.main, [*clips, "--every", "0.5", "--audio_rate", "8000", "--num_shards", "2"])
    return out


def digest(path: Path, root: Path) -> str:
    """A file's sha256; a JSON file's with the temporary root written as "<root>" first."""
    data = path.read_bytes()
    if path.suffix == ".json":
        data = data.replace(str(root).encode(), b"<root>")
    return hashlib.sha256(data).hexdigest()


def digests(root: Path) -> dict[str, dict[str, str]]:
    """{run: {file relative to its output: sha256}} for every run of run_jobs(root)."""
    found: dict[str, dict[str, str]] = {}
    for run, output in run_jobs(root).items():
        files = sorted(p for p in output.rglob("*") if p.is_file())
        found[run] = {str(p.relative_to(output)): digest(p, root) for p in files}
    return found


def main(argv: list[str] | None = None) -> int:
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help=f"record the digests in {DIGESTS}")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        found = digests(Path(root))
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if args.write:
        DIGESTS.parent.mkdir(parents=True, exist_ok=True)
        DIGESTS.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
