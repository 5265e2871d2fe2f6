"""examples/quickstart.py, run as a reader would run it, with settings small enough for every `make test`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.jax, pytest.mark.beam, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def losses(path: Path) -> list[tuple[int, float]]:
    with path.open() as f:
        return [(row["step"], row["loss"]) for row in map(json.loads, f)]


def test_the_quickstart_resumes_after_a_kill_with_the_same_losses(tmp_path: Path) -> None:
    # Checkpoints every 4 steps and a kill at step 10: the resume starts at step 8 (or 4, see below) and
    # takes the steps after it again.
    flags = ["--steps", "12", "--checkpoint_every", "4", "--kill_at", "10", "--workdir", str(tmp_path)]
    in_memory = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), *flags, *in_memory],
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Orbax finishes a save in the background: a kill at step 10 on a loaded machine can come before step
    # 8's save is final, and the resume then starts from step 4, as a real preemption would.
    resumed = re.search(r"resumed at step (\d+) after a kill at step 10: all 12 losses equal bit for bit", done.stdout)
    assert resumed is not None and int(resumed.group(1)) in (4, 8), done.stdout[-3000:]
    start = int(resumed.group(1))

    # The example checks itself; this checks its logs independently. JSON keeps a float's every bit.
    whole = losses(tmp_path / "uninterrupted" / "losses.jsonl")
    assert [step for step, _ in whole] == list(range(1, 13))
    stopped = losses(tmp_path / "stopped" / "losses.jsonl")
    assert [step for step, _ in stopped] == [*range(1, 11), *range(start + 1, 13)]
    assert [loss for _, loss in stopped] == [dict(whole)[step] for step, _ in stopped]
    assert len(set(dict(whole).values())) > 1  # the model did train
