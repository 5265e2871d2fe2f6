"""Jobs stopped dead at chosen points of their commit (tests.preprocess.crash_points, in a subprocess), and
what the next run, another run beside them, or a reader makes of what they left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dew.data import formats
from tests.preprocess.test_tokenize_job import IN_MEMORY, listing, tokenize

pytestmark = pytest.mark.beam
ROOT = Path(__file__).resolve().parents[2]


def launch(at: str, job: str, *flags: str, signal_name: str = "SIGSTOP") -> subprocess.Popen[bytes]:
    """The job in a process of its own, signalled (stopped, by default) at the point `at` names."""
    path = os.pathsep.join([str(ROOT / "runtime"), str(ROOT / "preprocess"), str(ROOT / "pipelines"), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path, "DEW_CRASH_SIGNAL": signal_name}
    command = [sys.executable, "-m", "tests.preprocess.crash_points", at, job, *flags, *IN_MEMORY]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stopped(process: subprocess.Popen[bytes]) -> None:
    """Waits until the process has stopped itself at its point (failing if it ended instead)."""
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        _, err = process.communicate()
        raise AssertionError(f"the job ended before its point: {err.decode()[-2000:]}")


def resumed(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Lets a stopped process go on; its exit code and stderr."""
    os.kill(process.pid, signal.SIGCONT)
    _, err = process.communicate(timeout=300)
    return process.returncode, err.decode()


def test_a_run_whose_output_another_run_took_over_never_commits(text_inputs: Path, tmp_path: Path) -> None:
    """A job still running when another (--overwrite, other flags) takes its output stops without a commit."""
    tokenize(text_inputs, tmp_path / "clean", "--num_shards", "2")
    out = tmp_path / "out"
    first = launch("@commit.total", "tokenize", "--input", str(text_inputs / "*"), "--output", str(out))
    stopped(first)  # every shard written, its commit about to begin
    tokenize(text_inputs, out, "--num_shards", "2", "--overwrite")
    code, err = resumed(first)
    assert code != 0 and "claimed by another run" in err
    assert listing(out) == listing(tmp_path / "clean")


@pytest.mark.parametrize("at", ["@.dew-job.json", "@meta.json"])  # as it claims, as it decommits
def test_a_refetch_killed_as_it_reopens_its_output_is_resumed_by_its_rerun(at: str, tmp_path: Path) -> None:
    """`--refetch_failed` uncommits the directory it rewrites in place; killed as it does, its rerun resumes."""
    pytest.importorskip("cv2")
    from tests.preprocess.test_ingest_urls import FETCH, _RecoveringHandler, run, write_url_lists
    from tests.runtime.online_support import ImageServer

    server = ImageServer()
    server.RequestHandlerClass = _RecoveringHandler
    server.recovered = False  # type: ignore[attr-defined]
    server.start()
    try:
        write_url_lists(tmp_path / "in", [(server.url("photo", i), None) for i in range(3)])
        (tmp_path / "in" / "d.jsonl").write_text(f'{{"url": "{server.base}/flaky/0.jpg", "caption": "x"}}\n')
        out, flags = tmp_path / "out", ("--rows_per_shard", "4", "--format", "parquet")
        run(out, tmp_path / "in", *flags)
        server.recovered = True  # type: ignore[attr-defined]
        argv = ("--input", str(tmp_path / "in" / "*"), "--output", str(out), *FETCH, *flags, "--refetch_failed")
        killed = launch(at, "ingest-urls", *argv, signal_name="SIGKILL")
        assert killed.wait(timeout=300) == -signal.SIGKILL
        found = run(out, tmp_path / "in", *flags, "--refetch_failed")
    finally:
        server.stop()
    assert found["urls_refetched"] == 1
    assert formats.read_meta(str(out), kind="images").splits


def test_a_disk_that_fills_during_a_shard_keeps_no_part_of_it(
    text_inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard write that runs out of space leaves no partial file behind to hold the space its rerun needs."""
    import errno

    from dew.preprocess import shard_files

    tokenize(text_inputs, tmp_path / "clean", "--num_shards", "2")
    write_bin = shard_files._WRITERS["bin"]

    def full(path: str, fmt: shard_files.ShardFormat, records: object) -> None:
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setitem(shard_files._WRITERS, "bin", full)
    out = tmp_path / "out"
    with pytest.raises(Exception, match="No space left on device"):
        tokenize(text_inputs, out, "--num_shards", "2")
    assert [p.name for p in (out / ".dew-tmp").iterdir() if ".bin." in p.name] == []
    monkeypatch.setitem(shard_files._WRITERS, "bin", write_bin)
    tokenize(text_inputs, out, "--num_shards", "2")
    assert listing(out) == listing(tmp_path / "clean")
