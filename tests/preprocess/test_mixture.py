"""plan-mixture: windows per corpus from the packing plan the runtime would use, epochs, one tokenizer only."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dew.data import formats, packing
from dew.data.mixture import integer_weights
from dew.pipelines import cli, common, tokenize_job
from dew.preprocess.plan_mixture import MANY_EPOCHS, epoch_warnings, run_shares
from tests.preprocess.corpora import topics, write_jsonl
from tests.preprocess.test_tokenize_job import IN_MEMORY, split_tokens

pytestmark = pytest.mark.beam


def corpus(tmp_path: Path, name: str, texts: list[str], *flags: str) -> Path:
    source = tmp_path / f"{name}-in"
    source.mkdir()
    write_jsonl(source / "docs.jsonl", texts)
    out = tmp_path / name
    tokenize_job.main(["--input", str(source / "*"), "--output", str(out), "--pack", *flags, *IN_MEMORY])
    return out


def test_plan_counts_windows_and_epochs_and_refuses_mixed_tokenizers(
    tmp_path: Path, hf_tokenizer_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    web = corpus(tmp_path, "web", topics(30)[:20], "--seq_len", "64")  # offline plan present
    code = corpus(tmp_path, "code", topics(30)[20:])  # planned on the spot
    plan_path = tmp_path / "mixture.json"
    flags = ["--corpus", f"{web}=3", "--corpus", f"{code}=1", "--tokens", "20000", "--seq_len", "64"]
    capsys.readouterr()
    cli.main(["plan-mixture", *flags, "--output", str(plan_path), *IN_MEMORY])
    plan = json.loads(plan_path.read_text())
    printed = capsys.readouterr()
    for entry in plan["corpora"]:
        assert (f"warning: {entry['path']}:" in printed.err) == (entry["epochs"] > MANY_EPOCHS)
    assert plan["windows"] == -(-20000 // 64) == sum(c["windows"] for c in plan["corpora"])
    by_path = {c["path"]: c for c in plan["corpora"]}
    for path, weight in ((web, 0.75), (code, 0.25)):
        entry = by_path[str(path)]
        meta = formats.read_meta(str(path))
        stream = split_tokens(path, "train")
        ends = packing.document_ends(len(stream), lambda a, b, s=stream: s[a:b], meta.tokens.eos_id)
        assert entry["windows_available"] == len(packing.plan_packing(packing.lengths_of(ends), 65, 8))
        assert entry["weight"] == weight and abs(entry["windows"] - weight * plan["windows"]) <= 1
        assert entry["epochs"] == pytest.approx(entry["windows"] / entry["windows_available"])
        assert entry["fingerprint"] == meta.fingerprint()
    other = corpus(tmp_path, "other", topics(5), "--tokenizer", hf_tokenizer_dir)
    mixed = ["--corpus", str(web), "--corpus", str(other), "--tokens", "100", "--seq_len", "8", "--output", "y"]
    assert cli.main(["plan-mixture", *mixed, *IN_MEMORY]) == 2  # refused on the launcher, as a usage error
    assert "different tokenizers" in capsys.readouterr().err
    # Raised where the launcher can see it (in memory), a missing corpus is the user's to fix: one line, exit 2.
    nowhere = ["--corpus", str(tmp_path / "nowhere"), "--tokens", "9", "--seq_len", "8", "--output", "x"]
    assert cli.main(["plan-mixture", *nowhere, *IN_MEMORY]) == 2
    assert "is not a committed corpus" in capsys.readouterr().err


def test_a_plan_that_repeats_a_corpus_thousands_of_times_is_warned_of() -> None:
    def entry(path: str, windows: int, available: int) -> dict:
        return {"path": path, "windows": windows, "windows_available": available, "epochs": windows / available}

    plan = {"corpora": [entry("web", 29_980, 10), entry("code", 40, 10), entry("tiny", MANY_EPOCHS * 10, 10)]}
    (warning,) = epoch_warnings(plan)
    assert warning.startswith("warning: web: the plan reads it 2,998 times over (29,980 windows from the 10 ")
    assert "--tokens" in warning
    # plan-mixture's steps count nothing: its last line says it finished, with no empty "counters:" heading.
    report = io.StringIO()
    common.report({}, 1.25, report)
    assert report.getvalue() == "finished in 1.2 s\n"


@given(total=st.integers(0, 10**9), weights=st.lists(st.floats(0.5, 5), min_size=1, max_size=4))
def test_run_shares_are_exact_and_within_one_of_the_runs_quota(total: int, weights: list[float]) -> None:
    shares = run_shares(total, weights)
    assert sum(shares) == total
    whole = integer_weights(weights)  # the proportions the run's mixture reads the weights as
    for share, w in zip(shares, whole, strict=True):
        assert abs(share - total * w / sum(whole)) < 1


def test_a_plan_reads_as_the_mixture_it_describes_and_refuses_a_changed_corpus(tmp_path: Path) -> None:
    from dew.data import DataPartition, Loading, datasets

    web = corpus(tmp_path, "web", topics(30)[:20], "--seq_len", "64")
    code = corpus(tmp_path, "code", topics(30)[20:])
    plan_path = tmp_path / "mixture.json"
    flags = ["--corpus", f"{web}=3", "--corpus", f"{code}=1", "--tokens", "20000", "--seq_len", "64"]
    assert cli.main(["plan-mixture", *flags, "--output", str(plan_path), *IN_MEMORY]) == 0
    loading = Loading(workers=0, threads=1, read_buffer=2)

    def batches(path: object, count: int = 6) -> tuple[list[np.ndarray], int]:
        data = datasets.PackedTokens(path=path, seq_len=64, val_batches=1, loading=loading).load(batch=4)
        stream = data.train(DataPartition(index=0, count=1))
        try:
            return [next(stream)["text"] for _ in range(count)], data.steps_per_epoch
        finally:
            stream.close()

    planned, steps = batches(str(plan_path))
    mapped, _ = batches({str(code): 1.0, str(web): 3.0})  # the plan lists its corpora by path
    for a, b in zip(planned, mapped, strict=True):
        np.testing.assert_array_equal(a, b)
    assert steps == -(-json.loads(plan_path.read_text())["windows"] // 4)  # the run is the plan's token budget
    with pytest.raises(ValueError, match="plans windows of seq_len 64"):
        datasets.PackedTokens(path=str(plan_path), seq_len=32).load(batch=4)
    write_jsonl(tmp_path / "code-in" / "docs.jsonl", topics(31)[20:])
    changed = ["--input", str(tmp_path / "code-in" / "*"), "--output", str(code), "--pack", "--overwrite"]
    tokenize_job.main([*changed, *IN_MEMORY])
    with pytest.raises(ValueError, match=f"corpus {code} changed since the plan was made"):
        batches(str(plan_path))


def test_the_plan_is_written_into_a_directory_that_does_not_exist_yet(tmp_path: Path) -> None:
    """`--output plan/mixture.json`, as docs/tokens.md writes it, failed with ENOENT on the temporary file."""
    from dew.preprocess.plan_mixture import write_plan

    target = tmp_path / "plan" / "mixture.json"
    write_plan(str(target), {"windows": 3})
    assert json.loads(target.read_text()) == {"windows": 3}
    assert [p.name for p in target.parent.iterdir()] == ["mixture.json"]


def test_a_relative_corpus_is_planned_by_its_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan is read by a training run wherever it starts; a relative `--corpus web/` was recorded as
    `web` and the run refused it as an uncommitted corpus from any other working directory."""
    from dew.pipelines import plan_mixture_job

    monkeypatch.chdir(tmp_path)
    argv = ["--corpus", "web/=0.7", "--corpus", "gs://b/code/=0.3", "--tokens", "9", "--seq_len", "4", "--output", "m"]
    assert plan_mixture_job.parser().parse_args(argv).corpus == [(str(tmp_path / "web"), 0.7), ("gs://b/code", 0.3)]


@pytest.mark.parametrize(("weights", "windows"), [((0.7, 0.3), 12345), ((3.0, 1.0), 7), ((0.123, 0.877), 5)])
def test_the_windows_a_plan_gives_each_corpus_are_the_ones_its_run_reads(
    tmp_path: Path, weights: tuple[float, float], windows: int
) -> None:
    """The plan split its budget by the exact weights, the run by its mixture order (weights to a hundredth
    of the smallest, laid out by the quota method): at 0.7/0.3 over 12,345 windows the plan promised web
    8,642 windows and the run read 8,638, so the epochs it printed were not the run's."""
    from dew.data import datasets
    from dew.preprocess.plan_mixture import MixtureRequest, mixture_plan, write_plan
    from tests.runtime.token_support import documents, write_corpus

    paths = [write_corpus(str(tmp_path / name), {"train": documents(30, seed=i)}) for i, name in enumerate("ab")]
    request = MixtureRequest(corpora=dict(zip(paths, weights, strict=True)), tokens=16 * windows, seq_len=16)
    plan = mixture_plan(request, [(path, formats.read_meta(path), 10) for path in paths])
    write_plan(str(tmp_path / "mixture.json"), plan)
    spec = datasets.PackedTokens(path=str(tmp_path / "mixture.json"), seq_len=16, val_batches=0)
    data = spec.load(batch=5)
    assert data.records == plan["windows"] == windows
    read = data.train.order.counts(data.records).tolist()
    assert [c["windows"] for c in plan["corpora"]] == read
    assert [c["epochs"] for c in plan["corpora"]] == [n / 10 for n in read]


def test_a_corpus_without_an_eos_is_refused_by_the_launcher(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan is a PackedTokens run's, and PackedTokens refuses a corpus without document boundaries: a
    plan over one counted its windows as one document a split and wrote a plan no run could read."""
    from tests.runtime.token_support import documents, write_corpus

    flat = write_corpus(str(tmp_path / "flat"), {"train": documents(20)}, eos_id=None)
    argv = ["--corpus", flat, "--tokens", "100", "--seq_len", "8", "--output", str(tmp_path / "m.json")]
    assert cli.main(["plan-mixture", *argv, *IN_MEMORY]) == 2
    assert "records no eos id" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
