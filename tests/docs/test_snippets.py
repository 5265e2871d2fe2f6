"""The pages' snippets marked `<!-- snippet: runs -->` run as they are written, each as a script of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
MARKED = re.compile(r"<!-- snippet: runs -->\n```python\n(.*?)\n```", re.DOTALL)


def snippets() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for number, code in enumerate(MARKED.findall(page.read_text())):
            found.append((f"{page.relative_to(DOCS)}#{number}", code))
    return found


def test_snippets_are_marked() -> None:
    assert any(name.startswith("providers.md") for name, _ in snippets())


@pytest.mark.parametrize(("name", "code"), snippets(), ids=[name for name, _ in snippets()])
def test_a_marked_snippet_runs(name: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code + "\n")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "TFDS_DATA_DIR": str(tmp_path / "tfds")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
