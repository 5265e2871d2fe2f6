"""Helpers shared by the test suites: reading a stream as global batches, and the resume check."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import DataPartition, Ramp, Reader, ramped


def interleave(shares: Sequence[Any]) -> Any:
    """The global batch whose rows i, i + c, … are share i's rows (the cut a DataPartition makes)."""
    first = shares[0]
    if isinstance(first, Mapping):
        return {key: interleave([s[key] for s in shares]) for key in first}
    if isinstance(first, list):
        out = [None] * sum(len(s) for s in shares)
        for i, share in enumerate(shares):
            out[i :: len(shares)] = share
        return out
    arrays = [np.asarray(s) for s in shares]
    out = np.empty((sum(len(a) for a in arrays), *arrays[0].shape[1:]), dtype=arrays[0].dtype)
    for i, array in enumerate(arrays):
        out[i :: len(arrays)] = array
    return out


def read_global(
    reader: Reader, count: int, steps: int, state: Mapping[str, Any] | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """`steps` global batches read by `count` shares (from `state` when given) and the state after."""
    streams = [reader(DataPartition(index=i, count=count)) for i in range(count)]
    try:
        if state is not None:
            for stream in streams:
                stream.set_state(state)
        batches = [interleave([next(s) for s in streams]) for _ in range(steps)]
        states = [s.get_state() for s in streams]
    finally:
        for stream in streams:
            stream.close()
    assert all(s == states[0] for s in states), f"shares disagree on the position: {states}"
    return batches, json.loads(json.dumps(states[0]))


def assert_batches_equal(expected: Sequence[Any], actual: Sequence[Any]) -> None:
    assert len(expected) == len(actual), f"{len(expected)} batches expected, got {len(actual)}"
    for step, (want, got) in enumerate(zip(expected, actual, strict=True)):
        _assert_tree_equal(want, got, f"step {step}")


def _assert_tree_equal(want: Any, got: Any, where: str) -> None:
    if isinstance(want, Mapping):
        assert isinstance(got, Mapping) and want.keys() == got.keys(), f"{where}: keys differ"
        for key in want:
            _assert_tree_equal(want[key], got[key], f"{where}[{key!r}]")
    elif isinstance(want, list):
        assert want == got, f"{where}: lists differ"
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=where)


def assert_resume_exact(
    reader: Reader, *, steps: int, stop_at: int, count_before: int = 1, count_after: int = 1
) -> None:
    """A stream stopped after `stop_at` steps on `count_before` shares, saved as JSON and resumed on
    `count_after` shares, yields exactly the global batches of one uninterrupted single-reader run, and
    ends at the same position (record count and token counters)."""
    full, full_state = read_global(reader, 1, steps)
    head, state = read_global(reader, count_before, stop_at)
    tail, tail_state = read_global(reader, count_after, steps - stop_at, state)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state, f"the resumed run ends at {tail_state}, the uninterrupted one at {full_state}"


def assert_ramped_resume_exact(
    data: Any, ramp: Ramp, *, stop_at: int, counts: tuple[int, int], train_steps: int = 6, val_steps: int | None = None
) -> None:
    """`data` under `ramp`: its training stream and its validation pass (`val_steps` batches, counted when
    None) each resume exactly, stopped on counts[0] shares and resumed on counts[1]."""
    run = ramped(data, ramp)
    if val_steps is None:
        with run.val(DataPartition()) as one_pass:
            val_steps = sum(1 for _ in one_pass)
    before, after = counts
    assert_resume_exact(run.train, steps=train_steps, stop_at=stop_at, count_before=before, count_after=after)
    assert_resume_exact(
        run.val, steps=val_steps, stop_at=min(stop_at, val_steps), count_before=before, count_after=after
    )


def run_preprocess(*args: str) -> subprocess.CompletedProcess[str]:
    """`dew-preprocess ARGS` in a fresh interpreter, as a user runs it: its exit code and what it printed,
    with DEW_VERBOSE unset so the test sees the one-line errors a user sees, not the tracebacks."""
    return subprocess.run(
        [sys.executable, "-m", "dew.pipelines.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={name: value for name, value in os.environ.items() if name != "DEW_VERBOSE"},
    )


def assert_refused_quietly(done: subprocess.CompletedProcess[str]) -> None:
    """A job refused with exit code 2 and no traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def inspect_text(path: str, *flags: str) -> str:
    """What `dew-preprocess inspect PATH FLAGS` prints, run in this process (inspect imports no Beam)."""
    from dew.pipelines import inspect_job

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        inspect_job.main([path, *flags])
    return out.getvalue()


def gcs_filesystem() -> Any:
    """gcsfs on the GCS emulator, for tests to write and remove objects: dew's runtime itself only reads."""
    import gcsfs.core

    return gcsfs.core.GCSFileSystem(token="anon")
