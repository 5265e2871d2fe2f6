"""mypy over dew's three packages, and over a user's script as a user's checker sees an installed dew.

The packages are checked with pyproject.toml's [tool.mypy] settings and its cache in .mypy_cache, so a
rerun after a small change rechecks only what changed. The user's side runs mypy --strict from an
empty directory with no config: dew is then found the way an installed distribution is (the
environment's site-packages, through its py.typed markers), and errors inside dew are not the user's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PACKAGES = ("dew.data", "dew.preprocess", "dew.pipelines")


def _mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.slow
def test_the_three_packages_type_check_with_no_error() -> None:
    packages = [arg for name in PACKAGES for arg in ("-p", name)]
    result = _mypy(*packages, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


def _as_a_user(script: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return _mypy(
        "--strict",
        "--config-file",
        str(tmp_path / "none.ini"),
        "--cache-dir",
        str(ROOT / ".mypy_cache" / "user"),
        str(script),
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_a_users_script_over_datasets_load_and_batches_checks_strictly(tmp_path: Path) -> None:
    (tmp_path / "none.ini").write_text("[mypy]\n")
    result = _as_a_user(HERE / "user_code.py", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_a_users_mistakes_with_a_kind_are_reported_line_by_line(tmp_path: Path) -> None:
    """Each line of user_mistakes.py marked wrong is an error, and nothing else is: the kinds' signatures
    reach the user's checker, rather than a registry attribute typed as any DatasetSpec."""
    (tmp_path / "none.ini").write_text("[mypy]\n")
    script = HERE / "user_mistakes.py"
    wanted = {i for i, line in enumerate(script.read_text().splitlines(), 1) if re.search(r"\S  # wrong:", line)}
    result = _as_a_user(script, tmp_path)
    reported = {int(m[1]) for m in re.finditer(rf"{re.escape(script.name)}:(\d+): error:", result.stdout)}
    assert reported == wanted, result.stdout
