"""The dew-preprocess console script and the Dataflow packaging around it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dew.pipelines import cli, common, flags
from dew.pipelines.jobs import JOBS
from tests.support import assert_refused_quietly, run_preprocess

ROOT = Path(__file__).resolve().parents[2]


def test_usage_lists_every_job_without_importing_beam() -> None:
    code = "import sys; from dew.pipelines import cli; cli.main(['--help']); print('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    for job in ("tokenize", "pack", "plan-mixture"):
        assert job in out
    assert out.strip().endswith("False")


def test_unknown_job_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["detokenize"]) == 2
    assert "unknown job 'detokenize'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_console_script_is_declared() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dew-preprocess"] == "dew.pipelines.cli:main"


def test_switches_take_flex_template_values() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    flags.switch(parser, "--pack", "")
    assert parser.parse_args([]).pack is False
    assert parser.parse_args(["--pack"]).pack is True
    assert parser.parse_args(["--pack=true"]).pack is True
    assert parser.parse_args(["--pack=false"]).pack is False
    assert parser.parse_args(["--pack", "--no-pack"]).pack is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--pack=maybe"])
    assert flags.verbose(["--input", "x", "--verbose=true"]) and not flags.verbose(["--verbose=false"])


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("--seqlen", "--seq_len"), ("--val-fraction", "--val_fraction"), ("--seq", "--seq_len"), ("--runer", "--runner")],
)
def test_a_mistyped_flag_is_refused_naming_the_closest(
    typed: str, meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["tokenize", "--input", str(tmp_path / "*.jsonl"), "--output", str(out), "--pack", typed, "1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"unknown flag {typed}: did you mean {meant}?" in err and "Traceback" not in err
    assert not out.exists()


def test_a_misspelt_required_flag_is_named_as_misspelt_not_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["images", "--input", str(tmp_path), "--ouput", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown flag --ouput: did you mean --output?" in err and "required" not in err


def test_job_flags_beam_flags_and_template_values_are_accepted() -> None:
    from dew.pipelines import tokenize_job

    argv = ["--input=x.jsonl", "--output=o", "--pack=true", "--runner=DataflowRunner", "--project=p"]
    argv += ["--temp_location", "gs://b/t", "--experiments=a", "--experiments=b", "--sdk_container_image=i"]
    args, rest = flags.parse(tokenize_job.parser(), argv, beam=True)
    assert args.pack is True and args.input == ["x.jsonl"]
    assert rest == argv[3:]
    with pytest.raises(flags.UsageError, match="unexpected argument 'stray'"):
        flags.parse(tokenize_job.parser(), ["--input=x", "--output=o", "stray"], beam=True)


def test_help_shows_defaults_and_units() -> None:
    from dew.pipelines import tokenize_job

    text = " ".join(tokenize_job.parser().format_help().split())
    assert "--pack [true|false] write the eos id after every document; --no-pack turns it off (default: False)" in text
    assert "target shard size, MiB (default: 256.0)" in text
    assert "(default: 0.5)" in text and "(default: None)" not in text


def test_user_errors_are_one_line_and_bugs_keep_their_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = ["tokenize", "--input", str(tmp_path / "none-*.jsonl"), "--output", str(tmp_path / "o")]
    assert cli.main(missing) == 2
    err = capsys.readouterr().err
    assert err == f"dew-preprocess tokenize: --input '{tmp_path}/none-*.jsonl' matches no file\n"
    assert cli.main([*missing, "--verbose"]) == 2
    assert "Traceback" in capsys.readouterr().err
    # What a multi-process runner or Dataflow relays: the worker's traceback as text, wrapped per step.
    relayed = RuntimeError(
        "Traceback (most recent call last):\n  File x\n"
        "dew.preprocess.job_errors.TooManyDropsError: the job wrote none of 2 documents.\n  missing_field: 2"
        " [while running 'TokenizeCorpus/Commit']\n\nDuring handling of the above exception ...\n"
    )
    assert cli.user_error(relayed) == "the job wrote none of 2 documents.\n  missing_field: 2"
    assert cli.user_error(RuntimeError("KeyError: 'documents_in'")) is None
    # A FileNotFoundError a library caught and replaced (`from None`) is no path the user gave.
    try:
        try:
            raise FileNotFoundError("the hub cache has no tokenizer.json")
        except FileNotFoundError:
            raise OSError("cannot load tokenizer 'x'") from None
    except OSError as hidden:
        assert cli.user_error(hidden) is None

    def bug(argv: list[str]) -> None:
        raise KeyError("documents_in")

    from dew.pipelines import tokenize_job

    monkeypatch.setattr(tokenize_job, "main", bug)
    with pytest.raises(KeyError):
        cli.main(["tokenize"])


def test_job_flags_and_beam_flags_part_ways() -> None:
    from dew.pipelines import tokenize_job

    args, rest = tokenize_job.parser().parse_known_args(
        ["--input", "x.jsonl", "--output", "o", "--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    )
    assert args.input == ["x.jsonl"] and rest == ["--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    options = common.pipeline_options(["--direct_num_workers=3"])
    assert options.get_all_options()["direct_running_mode"] == "multi_processing"
    assert options.get_all_options()["direct_num_workers"] == 3


def test_dockerfile_pins_the_beam_of_pyproject() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["beam"]
    pinned = next(re.search(r"==([\d.]+)", d)[1] for d in dependencies if d.startswith("apache-beam"))
    dockerfile = (ROOT / "pipelines/dataflow/Dockerfile").read_text()
    assert re.search(r"^ARG BEAM_VERSION=([\d.]+)$", dockerfile, re.M)[1] == pinned
    assert "FROM apache/beam_python3.11_sdk:${BEAM_VERSION}" in dockerfile
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/dew/pipelines/dataflow/launch.py" in dockerfile


def test_flex_template_parameters_are_flags_of_the_jobs() -> None:
    metadata = json.loads((ROOT / "pipelines/dataflow/metadata.json").read_text())
    known = {"job"}
    for job in JOBS:
        known |= {a.dest for a in job.load().parser()._actions}
    names = [p["name"] for p in metadata["parameters"]]
    assert set(names) <= known and len(names) == len(set(names))


def test_launch_dispatches_by_job(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "pipelines/dataflow"))
    try:
        import launch
    finally:
        sys.path.pop(0)
    assert launch.run(["--job", "pack", "--help"]) == 0  # help.json's text: no argparse exit, no Beam
    assert "dew-preprocess pack" in capsys.readouterr().out


@pytest.mark.beam
@pytest.mark.slow
def test_a_user_error_on_a_worker_process_is_one_message_with_no_traceback(tmp_path: Path) -> None:
    """The local runner's worker processes print a failed step's traceback to the launcher's stderr;
    for a mistake of the user's, nothing but the launcher's one message reaches the terminal."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"body": f"document {i}"}) + "\n" for i in range(12)))
    where = ("--input", str(source), "--output", str(tmp_path / "out"))
    done = run_preprocess("tokenize", *where, "--direct_num_workers", "2")
    assert_refused_quietly(done)
    assert "dew-preprocess tokenize: the job wrote none of 12 documents" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tokenize", "--input", "x.jsonl", "--output", "o", "--pack", "--seq_len", "0"], "--seq_len: must be"),
        (["tokenize", "--input", "x.jsonl", "--output", "o", "--packing_bins", "0"], "--packing_bins: must be"),
        (["pack", "--corpus", "c", "--seq_len", "-8"], "--seq_len: must be a positive int, got '-8'"),
        (["pack", "--corpus", "c", "--seq_len", "8", "--packing_bins", "0"], "--packing_bins: must be"),
        (["plan-mixture", "--corpus", "a=-1", "--tokens", "100", "--seq_len", "8", "--output", "m"], "positive"),
        (["plan-mixture", "--corpus", "a=0", "--tokens", "100", "--seq_len", "8", "--output", "m"], "positive"),
        (["plan-mixture", "--corpus", "a=nan", "--tokens", "100", "--seq_len", "8", "--output", "m"], "positive"),
        (["plan-mixture", "--corpus", "a", "--tokens", "0", "--seq_len", "8", "--output", "m"], "--tokens: must be"),
        (["inspect", "c", "--seq_len", "0"], "--seq_len: must be"),
    ],
)
def test_a_count_or_weight_below_one_is_a_usage_error_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """These reached a ValueError inside the job and ended in a traceback with exit code 1."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("job", ["tokenize", "images", "ingest-urls", "decode-clips"])
@pytest.mark.parametrize(
    ("count", "message"),
    [("0", "must be a positive int, got '0'"), ("100000", "a split holds at most 99999 shards, got '100000'")],
)
def test_a_shard_count_a_name_cannot_spell_is_refused_at_the_command_line(
    job: str, count: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """-of-100000 does not parse back as a shard name: refused here, not by a worker writing shard 0."""
    with pytest.raises(SystemExit) as exited:
        cli.main([job, "--input", "x", "--output", "o", "--num_shards", count])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--num_shards: {message}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        ([], ["--project is missing", "--region is missing", "--temp_location (or --staging_location)"]),
        (["--project=p", "--region=r"], ["--temp_location (or --staging_location) must be a gs:// path"]),
        (["--project=p", "--region=r", "--temp_location=/tmp/t"], ["must be a gs:// path"]),
        (["--project=p", "--region=r", "--temp_location=gs://b/t"], ["Dataflow workers cannot reach"]),
    ],
)
def test_a_dataflow_launch_missing_what_it_needs_is_refused_before_anything_is_written(
    given: list[str], refused: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beam checked these only when the pipeline ran, after the output was claimed and the tokenizer
    loaded, and it answered a missing temp_location by creating a bucket of its own in the project."""
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    out = tmp_path / "out"
    argv = ["tokenize", "--input", str(tmp_path / "a.jsonl"), "--output", str(out), "--runner=DataflowRunner"]
    assert cli.main([*argv, *given]) == 2
    err = capsys.readouterr().err
    assert all(part in err for part in refused) and "Traceback" not in err, err
    assert not out.exists()


def test_a_dataflow_launch_refuses_local_inputs_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    dataflow = ["--runner=DataflowRunner", "--project=p", "--region=r", "--temp_location=gs://b/t"]
    argv = ["tokenize", "--input", str(tmp_path / "a.jsonl"), "--output", "gs://b/out", *dataflow]
    assert cli.main(argv) == 2
    assert "--input" in capsys.readouterr().err
    options = common.pipeline_options(dataflow)
    with pytest.raises(flags.UsageError, match="--output"):  # every committing job's output, not only tokenize's
        common.run_committed(str(tmp_path / "out"), None, options, lambda pipeline: None, overwrite=False)
    assert not (tmp_path / "out").exists()


def test_the_dataflow_image_holds_what_every_job_of_its_template_imports() -> None:
    """The image installed dew without `video`, so decode-clips, which its template offers, failed on
    every worker importing av."""
    from dew.pipelines.jobs import JOBS

    dockerfile = (ROOT / "pipelines/dataflow/Dockerfile").read_text()
    installed = set(re.search(r'pip install [^"]*"\.\[([a-z,]+)\]"', dockerfile)[1].split(","))
    # Each job declares the extras its workers import on demand (JOB = Job(..., extras=...)).
    missing = {job.name: sorted(set(job.extras) - installed) for job in JOBS if set(job.extras) - installed}
    assert not missing, f"the image lacks extras these jobs' workers import: {missing}"


def test_a_leading_tilde_in_a_path_flag_is_the_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dew.pipelines import pack_job, tokenize_job

    monkeypatch.setenv("HOME", str(tmp_path))
    argv = ["--input=~/raw/*.jsonl", "--input", "gs://b/~x", "--output=~/c"]
    args, _ = flags.parse(tokenize_job.parser(), argv, beam=True)
    assert args.input == [f"{tmp_path}/raw/*.jsonl", "gs://b/~x"] and args.output == f"{tmp_path}/c"
    assert flags.parse(pack_job.parser(), ["--corpus=~/c", "--seq_len=8"], beam=True)[0].corpus == f"{tmp_path}/c"


@pytest.mark.parametrize("job", ["tokenize", "images", "ingest-urls", "caption-tokenize", "decode-clips"])
@pytest.mark.parametrize(
    ("given", "output", "says"),
    [
        ("in", "in", "the same as --input"),
        ("in", "in/out", "inside --input"),
        ("in/", "./in/out/", "inside --input"),
        ("in/*", "in", "matched by --input"),
        ("in/**", "in/deep/out", "matched by --input"),
        ("in/*.parquet", "in", "matched by --input"),
    ],
)
def test_an_output_over_its_own_input_is_refused_before_anything_is_touched(
    job: str, given: str, output: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """`caption-tokenize --input d --output d --overwrite` deleted d's shards and then failed reading them;
    an output a glob of --input matches is read back as input by the next run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "meta.json").write_text("{}")
    argv = [job, "--input", given, "--output", output, "--overwrite"]
    assert cli.main([*argv, *(["--tokenizer", "t"] if job == "caption-tokenize" else [])]) == 2
    err = capsys.readouterr().err
    assert f"--output {output!r} is {says} {given!r}" in err and "Traceback" not in err, err
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["meta.json"]


@pytest.mark.parametrize(
    ("given", "output"),
    [
        ("in/*.jsonl", "in/corpus"),
        ("in/a.jsonl", "in/corpus"),
        ("in", "inside"),
        ("in/*", "other"),
        ("in/*", "in/out"),  # a glob's * stops at a /, and a folder it matches is not read
        ("gs://b/raw/*", "gs://b/rawc"),
    ],
)
def test_an_output_beside_its_input_is_not_refused(given: str, output: str) -> None:
    assert flags.output_over_input(output, [given]) is None


@pytest.mark.parametrize("job", ["tokenize", "caption-tokenize"])
def test_a_tokenizer_that_does_not_load_is_a_usage_error_naming_it(
    job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt --tokenizer path ended in an OSError traceback with exit code 1, as if dew had a bug."""
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    given = str(tmp_path / ("a.jsonl" if job == "tokenize" else "images"))  # the tokenizer loads first
    argv = [job, "--input", given, "--output", str(tmp_path / "out"), "--tokenizer", str(tmp_path / "no-such-dir")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"cannot load tokenizer '{tmp_path / 'no-such-dir'}'" in err and "Traceback" not in err, err


@pytest.mark.parametrize("output", ["c/meta.json", "c", "c/mixture.json"])
def test_a_mixture_plan_written_into_a_corpus_is_refused(
    output: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan-mixture --output c/meta.json replaced the corpus's commit with the plan, and said nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "meta.json").write_text("{}")
    argv = ["plan-mixture", "--corpus", "c=1", "--tokens", "100", "--seq_len", "8", "--output", output]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"--output {output!r} is " in err and f"--corpus '{tmp_path / 'c'}'" in err and "Traceback" not in err, err
    assert (tmp_path / "c" / "meta.json").read_text() == "{}"
