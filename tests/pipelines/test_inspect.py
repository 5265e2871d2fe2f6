"""dew-preprocess inspect: the numbers of a committed directory of any kind, or of a mixture plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats, packing
from dew.pipelines import cli, tokenize_job
from dew.pipelines.inspection import summarize
from dew.preprocess.plan_mixture import MixtureRequest, mixture_plan, write_plan
from tests.preprocess.corpora import topics

IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def test_inspect_imports_neither_beam_nor_an_image_stack() -> None:
    code = "import sys, dew.pipelines.inspect_job; print(sorted({'apache_beam', 'PIL', 'cv2'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


@pytest.mark.beam
def test_a_token_corpus_written_by_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = topics(12)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:6]) + "{broken\n")
    out = tmp_path / "corpus"
    flags = ["--input", str(source), "--output", str(out), "--pack", "--val_fraction", "0.1", "--seq_len", "64"]
    tokenize_job.main([*flags, *IN_MEMORY])
    meta = formats.read_meta(str(out))

    summary = summarize(str(out), seq_len=64, samples=2)
    assert (summary.kind, summary.format, summary.unit) == ("tokens", "dew.tokens/2", "ids")
    for split, row in summary.splits.items():
        assert row["units"] == sum(s.units for s in meta.shards(split))
        assert row["records"] == sum(s.records for s in meta.shards(split))
    assert summary.section["tokenizer"] == "byte" and summary.section["eos_id"] == 256
    assert summary.stats["dropped"] == {"malformed_json": 1}
    assert summary.stats["drop_examples"]["malformed_json"] == {"path": str(source), "row": 6}
    ends = packing.load_document_ends(formats.derived_path(str(out), "train", "documents"), meta.fingerprint())
    lengths = packing.lengths_of(ends)
    assert summary.documents["count"] == len(lengths) == sum(n for _, _, n in summary.lengths)
    assert all(lo <= length < hi for length in lengths for lo, hi, n in summary.lengths if n and lo <= length < hi)
    offline = packing.PackingPlan.load(
        formats.derived_path(str(out), "train", packing.packing_name(65, 8)), meta.fingerprint()
    )
    assert summary.packing["windows"] == len(offline) and summary.packing["fill"] == pytest.approx(1 - offline.padding)
    assert [s["text"] for s in summary.samples] == texts[:2]
    assert summary.samples[0]["tokens"] == len(texts[0].encode()) + 1  # its eos included

    assert cli.main(["inspect", str(out), "--seq_len", "64", "--samples", "1"]) == 0
    text = capsys.readouterr().out
    assert "dropped malformed_json: 1 (e.g." in text and "packing at seq_len 64 (bins 8)" in text
    assert "(offline plan)" in text and "fill [100%, 100%)" not in text and "fill [ 95%, 100%)" in text
    assert cli.main(["inspect", str(out), "--seqlen", "64"]) == 2
    assert "did you mean --seq_len?" in capsys.readouterr().err
    # Without --seq_len the fill shown is the one the job planned offline (tokenize --pack --seq_len 64).
    assert summarize(str(out)).packing == summary.packing
    assert sum(n for _, _, n in summary.packing["fill_histogram"]) == summary.packing["windows"]
    report = tmp_path / "report.html"
    assert cli.main(["inspect", str(out), "--html", str(report)]) == 0
    page = report.read_text()
    assert "<script" not in page and "<svg" in page and "window fill (tokens held / seq_len + 1)" in page
    assert "document length (tokens, power-of-two buckets)" in page and ">p99 " in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.beam
def test_a_packed_dict_directory(tmp_path: Path) -> None:
    from tests.preprocess.test_write_records import keyed_records, write

    meta = write(str(tmp_path / "images"), "array_record", keyed_records())
    summary = summarize(str(tmp_path / "images"), samples=2)
    assert (summary.kind, summary.unit) == ("images", "bytes")
    assert summary.splits["train"]["records"] == sum(s.records for s in meta.shards("train")) == 10
    assert summary.section["fields"] == ["image", "caption"] and not summary.stats["dropped"] and not summary.lengths
    assert [set(s["fields"]) for s in summary.samples] == [{"image", "caption"}] * 2
    assert summary.samples[0]["fields"]["caption"] == len(b"photograph 0")


def test_a_mixture_plan(tmp_path: Path) -> None:
    meta = formats.Meta.from_json(json.loads(_tiny_meta()))
    weights = {str(tmp_path / "web"): 3.0, str(tmp_path / "code"): 1.0}
    request = MixtureRequest(corpora=weights, tokens=640, seq_len=64)
    plan = mixture_plan(request, [(path, meta, 4) for path in weights])
    write_plan(str(tmp_path / "mixture.json"), plan)
    summary = summarize(str(tmp_path / "mixture.json"))
    assert summary.kind == "mixture" and summary.section["windows"] == 10
    by_path = {c["path"]: c for c in summary.corpora}
    assert by_path[str(tmp_path / "web")]["weight"] == 0.75
    assert by_path[str(tmp_path / "web")]["epochs"] == pytest.approx(by_path[str(tmp_path / "web")]["windows"] / 4)
    assert np.isclose(sum(c["weight"] for c in summary.corpora), 1.0)


def test_a_corpus_whose_tokenizer_does_not_load_here_shows_ids(tmp_path: Path) -> None:
    """The tokenizer loads on first use, so its failure escaped the fallback to ids: inspect of a corpus
    tokenized with a hub tokenizer not cached here ended in an error about the hub's disk cache."""
    from tests.runtime.token_support import documents, write_corpus

    docs = documents(5, longest=30)
    corpus = write_corpus(str(tmp_path / "c"), {"train": docs}, kind="bin", tokenizer="no-such-org/no-such-model")
    summary = summarize(corpus, samples=2)
    assert [s["text"] for s in summary.samples] == [None, None]
    assert summary.samples[0]["ids"] == docs[0][:-1].tolist()
    assert cli.main(["inspect", corpus]) == 0


def _tiny_meta() -> str:
    section = {"tokenizer": "byte", "tokenizer_hash": "h", "vocab_size": 257, "dtype": "uint16", "eos_id": 256}
    shard = {"name": "train-00000-of-00001.bin", "records": 3, "units": 300, "bytes": 600, "sha256": "0" * 64}
    return json.dumps({"format": "dew.tokens/2", "splits": {"train": [shard]}, "tokens": section})


def test_a_corpus_without_an_eos_shows_no_documents_nor_a_packing_and_is_never_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without an eos the stream has no document boundaries: inspect showed "train documents: 1" beside
    meta.json's 3,000 records, a packing fill PackedTokens refuses to read, and read the whole train split
    into memory (and decoded it) to show that one "document" as its first sample."""
    from dew.pipelines import inspection
    from tests.runtime.token_support import documents, write_corpus

    corpus = write_corpus(str(tmp_path / "flat"), {"train": documents(3000, longest=120)}, eos_id=None)
    opened = inspection.open_tokens
    spans: list[int] = []

    class Watched:
        def __init__(self, tokens: object) -> None:
            self.tokens = tokens

        def __len__(self) -> int:
            return len(self.tokens)  # type: ignore[arg-type]

        def __getitem__(self, span: slice) -> np.ndarray:
            ids = self.tokens[span]  # type: ignore[index]
            spans.append(len(ids))
            return ids

    monkeypatch.setattr(inspection, "open_tokens", lambda *a, **k: Watched(opened(*a, **k)))
    summary = summarize(corpus, seq_len=8, samples=2)
    total = summary.splits["train"]["units"]
    assert summary.splits["train"]["records"] == 3000 and total > 1 << 17
    assert summary.documents == {} and summary.lengths == [] and summary.packing == {}
    assert spans and max(spans) < total
    report = tmp_path / "report.html"
    assert cli.main(["inspect", corpus, "--seq_len", "8", "--html", str(report)]) == 0
    text = capsys.readouterr().out
    assert "no eos id" in text and "train documents" not in text and "packing at" not in text
    page = report.read_text()  # its sample is headed as what it is, not as "document 0"
    assert "Head of the stream" in page and "document 0" not in page


def test_a_mixture_plan_names_a_corpus_changed_since_it_was_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inspect printed a plan's windows available and epochs as planned after a corpus was rewritten, when
    the run would refuse the plan and the numbers no longer describe the corpus."""
    from tests.runtime.token_support import documents, write_corpus

    web = write_corpus(str(tmp_path / "web"), {"train": documents(30)})
    code = write_corpus(str(tmp_path / "code"), {"train": documents(30, seed=1)})
    request = MixtureRequest(corpora={web: 3.0, code: 1.0}, tokens=640, seq_len=16)
    plan = mixture_plan(request, [(path, formats.read_meta(path), 40) for path in (web, code)])
    write_plan(str(tmp_path / "mixture.json"), plan)
    assert [c["state"] for c in summarize(str(tmp_path / "mixture.json")).corpora] == ["as planned"] * 2
    write_corpus(code, {"train": documents(31, seed=1)})
    states = {c["path"]: c["state"] for c in summarize(str(tmp_path / "mixture.json")).corpora}
    assert states[web] == "as planned" and states[code].startswith("changed since the plan")
    assert cli.main(["inspect", str(tmp_path / "mixture.json")]) == 0
    assert f"{code}: changed since the plan" in capsys.readouterr().out
