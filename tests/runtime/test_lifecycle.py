"""What a stream starts fits its host, and nothing it starts outlives the trainer: however the trainer ends."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import dew.data
from dew.data import DataPartition, Loading, PackedTokens, TokenWindows, workers
from dew.data.loading import RECORDS_PER_WORKER
from tests.runtime.token_support import documents, write_corpus

# Generous: a child imports grain (and jax) and spawns its workers on a small, shared machine.
SCRIPT_SECONDS = 120


@pytest.mark.parametrize(("cores", "started"), [(1, 0), (2, 1), (8, 7), (200, 32)])
def test_the_default_workers_fit_the_host(monkeypatch, cores: int, started: int) -> None:
    monkeypatch.setattr(workers, "host_cores", lambda: cores)
    assert Loading().started() == Loading(workers=started)
    assert Loading().started(in_process=True).workers == 0
    assert Loading().started(decodes=False).workers == 0


@pytest.mark.parametrize(("records", "started"), [(1, 0), (RECORDS_PER_WORKER - 1, 0), (3 * RECORDS_PER_WORKER, 3)])
def test_the_default_workers_fit_the_records(monkeypatch, records: int, started: int) -> None:
    monkeypatch.setattr(workers, "host_cores", lambda: 200)
    assert Loading().started(records=records).workers == started
    assert Loading().started(records=10**9).workers == 32


def test_workers_the_caller_set_are_kept(monkeypatch, caplog) -> None:
    monkeypatch.setattr(workers, "host_cores", lambda: 2)
    assert Loading(workers=2).started(in_process=True).workers == 2
    assert Loading(workers=2).started(decodes=False, records=1).workers == 2
    with caplog.at_level(logging.WARNING):
        assert Loading(workers=5).started().workers == 5
    assert "more worker processes than the 1 cores" in caplog.text
    assert Loading(workers=0).started().workers == 0


def test_token_kinds_read_in_process_unless_asked(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(workers, "host_cores", lambda: 200)
    path = write_corpus(str(tmp_path / "corpus"), {"train": documents(40, longest=60)})
    for kind in (TokenWindows, PackedTokens):
        assert kind(path=path, seq_len=16, val_batches=0).load(batch=4).train.loading.workers == 0
        asked = kind(path=path, seq_len=16, val_batches=0, loading=Loading(workers=3)).load(batch=4)
        assert asked.train.loading.workers == 3


def test_a_decoding_stream_takes_workers_for_its_records_up_to_the_hosts_share(monkeypatch) -> None:
    from dew.data.dataset import global_dataset

    monkeypatch.setattr(workers, "host_cores", lambda: 4)
    for records, started in ((10, 0), (2 * RECORDS_PER_WORKER, 2), (100 * RECORDS_PER_WORKER, 3)):
        data = global_dataset(
            train=np.arange(records), val=None, batch=2, seed=0, loading=Loading(), val_batches=None, decodes=True
        )
        assert data.train.loading.workers == started
    plain = global_dataset(train=np.arange(10**6), val=None, batch=2, seed=0, loading=Loading(), val_batches=None)
    assert plain.train.loading.workers == 0


def test_a_spec_and_its_dataset_show_what_starts_and_no_addresses(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(workers, "host_cores", lambda: 8)
    path = write_corpus(str(tmp_path / "corpus"), {"train": documents(40, longest=60)})
    spec = TokenWindows(path=path, seq_len=16, val_batches=0)
    assert "Loading(workers=0 (in process), threads=64" in repr(spec)
    assert "workers=32" not in repr(spec)
    assert "Loading(workers=3, " in repr(TokenWindows(path=path, seq_len=16, loading=Loading(workers=3)))
    data = spec.load(batch=4)
    assert len(data) == data.steps_per_epoch
    shown = repr(data)
    assert f"steps_per_epoch={data.steps_per_epoch}" in shown and "workers=0" in shown
    assert " at 0x" not in shown and " at 0x" not in repr(spec)


def _run_script(tmp_path: Path, body: str) -> subprocess.Popen:
    """Starts `body` as a script; its stderr goes to tmp_path/stderr, which a surviving worker cannot hold open."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    runtime = str(Path(dew.data.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([runtime, os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "stderr", "w") as stderr:
        command = [sys.executable, str(script)]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)


def _gone(pids: list[int]) -> bool:
    """Every pid has exited (a zombie waiting for an init that does not reap counts as exited)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def _settled(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


# Reads from two worker processes, then reports every process and /dev/shm segment it and they hold.
_READ_WITH_WORKERS = """
    import json, psutil
    import numpy as np
    from dew.data import DataPartition, Loading
    from dew.data.dataset import global_dataset

    def report():
        me = psutil.Process()
        processes = [me, *me.children(recursive=True)]
        shm = {m.path for p in processes for m in p.memory_maps() if m.path.startswith("/dev/shm/")}
        print(json.dumps({"children": [p.pid for p in processes[1:]], "shm": sorted(shm)}), flush=True)
"""


def test_a_script_piped_into_python_is_refused_before_its_workers_die_starting(monkeypatch) -> None:
    piped = type(sys)("__main__")
    piped.__file__, piped.__spec__ = "<stdin>", None
    monkeypatch.setitem(sys.modules, "__main__", piped)
    with pytest.raises(RuntimeError, match=r"'<stdin>', not a file worker processes can re-run.*Loading\(workers=0\)"):
        workers.check_main_guard()


@pytest.mark.slow
def test_a_script_without_a_main_guard_gets_one_error_naming_the_fix(tmp_path) -> None:
    process = _run_script(
        tmp_path,
        """
        import numpy as np
        from dew.data import DataPartition, Loading
        from dew.data.dataset import global_dataset

        loading = Loading(workers=1, threads=2, read_buffer=8)
        data = global_dataset(train=np.arange(100), val=None, batch=4, seed=0, loading=loading, val_batches=None)
        stream = data.train(DataPartition())
        next(stream)
        """,
    )
    process.communicate(timeout=SCRIPT_SECONDS)
    err = (tmp_path / "stderr").read_text()
    assert process.returncode == 1
    assert err.count("Traceback") == 1, err
    assert 'if __name__ == "__main__":' in err and "line 9" in err


@pytest.mark.slow
def test_a_stream_never_closed_is_cleaned_up_silently_at_exit(tmp_path) -> None:
    process = _run_script(
        tmp_path,
        _READ_WITH_WORKERS
        + """
    if __name__ == "__main__":
        loading = Loading(workers=2, threads=2, read_buffer=8)
        data = global_dataset(train=np.arange(500), val=None, batch=8, seed=0, loading=loading, val_batches=None)
        stream = data.train(DataPartition())
        held = [next(stream) for _ in range(10)]  # still held, and the stream still open, at exit
        report()
    """,
    )
    out, _ = process.communicate(timeout=SCRIPT_SECONDS)
    err = (tmp_path / "stderr").read_text()
    assert process.returncode == 0, err
    for noise in ("Traceback", "Exception ignored", "leaked"):
        assert noise not in err, err
    left = json.loads(out.strip().splitlines()[-1])
    assert left["children"], "the script should have started worker processes"
    assert _settled(lambda: _gone(left["children"]), 30)
    assert not [path for path in left["shm"] if os.path.exists(path)]


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_no_worker_outlives_a_killed_trainer(tmp_path, how: signal.Signals) -> None:
    process = _run_script(
        tmp_path,
        _READ_WITH_WORKERS
        + """
    if __name__ == "__main__":
        import time
        loading = Loading(workers=2, threads=2, read_buffer=8)
        data = global_dataset(train=np.arange(500), val=None, batch=8, seed=0, loading=loading, val_batches=None)
        stream = data.train(DataPartition())
        next(stream)
        report()
        time.sleep(600)
    """,
    )
    children: list[int] = []
    try:
        line = process.stdout.readline()
        assert line, (tmp_path / "stderr").read_text()
        children = json.loads(line)["children"]
        assert children, "the script should have started worker processes"
        process.send_signal(how)
        process.wait(timeout=SCRIPT_SECONDS)
        assert _settled(lambda: _gone(children), 30), [p for p in children if psutil.pid_exists(p)]
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        for pid in children:  # a failed run must not leave its workers behind for the next test
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                continue


def test_streams_close_as_context_managers() -> None:
    from dew.data.dataset import global_dataset

    data = global_dataset(
        train=np.arange(40), val=None, batch=4, seed=0, loading=Loading(workers=0, threads=2), val_batches=None
    )
    with data.train(DataPartition()) as stream:
        next(stream)
    with pytest.raises(RuntimeError, match="closed"):
        next(stream)
