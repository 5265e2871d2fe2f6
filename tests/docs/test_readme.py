"""The README's first Python snippet runs as written, on the corpus `make demo` leaves in demo-out/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dew.pipelines import demo

pytestmark = [pytest.mark.jax, pytest.mark.beam, pytest.mark.slow]

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_first_python_snippet_runs_on_the_demo_corpus(tmp_path: Path) -> None:
    in_memory = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    demo.main(["--workdir", str(tmp_path / "demo-out"), "--steps", "1", *in_memory])
    snippet = re.search(r"```python\n(.*?)\n```", README.read_text(), re.DOTALL)
    assert snippet is not None
    script = tmp_path / "snippet.py"
    # The assertions follow the snippet, so the names it promises are checked as it left them.
    script.write_text(snippet.group(1) + '\nassert batch["text"].shape == (8, 513) and state["records"] == 8\n')
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
