"""Dataflow's --setup_file route: Beam builds dew's sdist offline, and a worker's install of it holds
every part of the namespace package (dew.data, dew.preprocess, dew.pipelines)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_beam_builds_an_sdist_whose_wheel_holds_all_of_dew(tmp_path: Path) -> None:
    from apache_beam.runners.portability.stager import Stager

    sdist = Stager._build_setup_package(str(ROOT / "pyproject.toml"), str(tmp_path))
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("runtime/dew/data/__init__.py") for n in names)
    assert not any("/tests/" in n or "/terraform/" in n for n in names), "the sdist ships only the sources"

    # What a Dataflow worker does with the staged sdist: build and install it.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), sdist],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("dew-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = set(archive.namelist())
    for module in ("dew/data/__init__.py", "dew/preprocess/tokenize_corpus.py", "dew/pipelines/cli.py"):
        assert module in files, f"{module} missing from the worker's wheel"
    for marker in ("dew/data/py.typed", "dew/preprocess/py.typed", "dew/pipelines/py.typed"):
        assert marker in files, f"{marker} missing: type checkers would treat the installed package as untyped"
    assert "dew/__init__.py" not in files, "dew is a namespace package over three source roots"
