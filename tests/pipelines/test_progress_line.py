"""The launcher's progress line: the tallies workers publish, summed into one line with the phase, its
units done of the total, percent, rate and ETA; and a real job's run printing it through its phases."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from dew.pipelines.progress_line import ProgressLine
from dew.preprocess import progress
from dew.preprocess.progress import Phase

PHASES = (
    Phase(name="read", unit="documents", total=1000, measured_in="bytes"),
    Phase(name="tokenize", unit="documents", total_of="read"),
    Phase(name="write", unit="pieces"),
    Phase(name="commit"),
)


def test_the_line_sums_every_tally_of_the_latest_phase_with_its_total_rate_and_eta() -> None:
    with ProgressLine("tokenize", PHASES, out=io.StringIO(), every=3600) as line:
        assert line.line(now=line.started + 2) == (
            "dew-preprocess tokenize: 2 s, starting (phase 1/4 read has not begun)"
        )
        read = [progress.Tally("read", measure=lambda: 100), progress.Tally("read", measure=lambda: 150)]
        for tally in read:
            tally.add(10)
            tally.publish()
        first = line.line(now=line.started + 10)
        assert first == "dew-preprocess tokenize: 10 s, phase 1/4 read: 20 documents, 0.0 MB of 0.0 MB (25.0%)"
        read[0].measure = lambda: 350  # 500 of the 1000 bytes, 20 more documents, 5 s later
        read[0].add(20)
        read[0].publish()
        later = line.line(now=line.started + 15)
        # 250 bytes in 5 s: 50 bytes/s, so the 500 left take 10 s; 20 documents in 5 s.
        assert later.endswith("phase 1/4 read: 40 documents, 0.0 MB of 0.0 MB (50.0%), 4.0 documents/s, ETA 10 s")

        tokenized = progress.Tally("tokenize")
        tokenized.add(10)
        tokenized.publish()
        # Its total is the documents read; the line moved on to the latest phase with anything done.
        assert line.line(now=line.started + 16).endswith("phase 2/4 tokenize: 10 documents of 40 (25.0%)")

        progress.announce_total("write", 400)  # known early (the layout), but tokenize is under way still
        # No more tokenized since the first look: no rate to give an ETA by.
        assert line.line(now=line.started + 17).endswith("tokenize: 10 documents of 40 (25.0%), 0.0 documents/s")
        tokenized.add(30)
        tokenized.publish()
        # Tokenize is complete and write knows its total: the line moves on while write waits for its input.
        assert line.line(now=line.started + 18).endswith("phase 3/4 write: 0 pieces of 400 (0.0%)")
        written = progress.Tally("write")
        written.add(400)
        written.publish()
        progress.announce_total("commit", 1)
        assert line.line(now=line.started + 19).endswith("phase 4/4 commit: under way")
        progress.Tally("commit").add()
        assert line.line(now=line.started + 20).endswith("phase 4/4 commit: done")
        directory = line.directory
    assert directory is not None and not Path(directory).exists()  # removed with the run


def test_a_tally_outside_a_run_only_counts() -> None:
    tally = progress.Tally("read")
    tally.add(3)
    tally.publish()  # no launcher named a directory: nothing to write, nothing raised
    assert tally.done == 3


# With --pack the document index and the packing plans are phases too: six in all.
LINE = re.compile(
    r"^dew-preprocess tokenize: \d+ s, (starting \(phase 1/6 read has not begun\)"
    r"|phase (?P<n>[1-6])/6 (?P<phase>read|tokenize|write|index|plan|commit): .*)$"
)


@pytest.mark.beam
def test_a_tokenize_run_prints_its_progress_through_its_phases_and_ends_with_its_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dew.pipelines import tokenize_job

    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(3000)))
    monkeypatch.setenv("DEW_PROGRESS_SECONDS", "0.05")
    argv = ["--input", str(source), "--output", str(tmp_path / "out"), "--pack", "--num_shards", "2"]
    tokenize_job.main([*argv, "--direct_running_mode=in_memory", "--direct_num_workers=1"])
    lines = capsys.readouterr().err.splitlines()
    shown = [line for line in lines if line.startswith("dew-preprocess tokenize:")]
    assert shown, lines
    phases = []
    for line in shown:
        matched = LINE.match(line)
        assert matched, line
        if matched["n"]:
            phases.append(int(matched["n"]))
        percents = [float(p) for p in re.findall(r"\((\d+\.\d)%\)", line)]
        assert all(0.0 <= p <= 100.0 for p in percents), line
    assert phases == sorted(phases)  # the phases only move forward
    assert any(line.startswith("finished in ") for line in lines)
