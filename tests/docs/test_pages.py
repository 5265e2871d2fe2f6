"""Every code block of README.md and docs/*.md runs as written, in page order, as a top-level script.

Each page runs in a folder of its own with the data its own blocks make. docs/offline.md makes the local
stand-ins for hub models (tokenizers, feature extractors) once a session in `local/`; every other page's
folder has that `local/` too, as a reader who followed Working offline has. A page whose code names a
gs:// path runs against the GCS emulator (STORAGE_EMULATOR_HOST), whose bucket is `dew-test`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.pages import ROOT, Step, console_commands, pages, steps

pytestmark = pytest.mark.slow

OFFLINE = ROOT / "docs" / "offline.md"
STEP_TIMEOUT_S = 300
_MARK = "@@dew-docs-console@@"


def _environment(folder: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "JAX_PLATFORMS": "cpu",
        "TFDS_DATA_DIR": str(folder / "tfds"),
        # Blocks use the local stand-ins; a block that reaches for the hub fails at once instead of waiting.
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        # `~/dew_datasets` and every other home-relative default land in the page's folder.
        "HOME": str(folder),
    }


def _run(args: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=STEP_TIMEOUT_S
    )


def _console(step: Step, folder: Path, env: dict[str, str], where: str) -> None:
    commands = console_commands(step.code)
    # One stream, in order: what a command writes to stderr stays between its markers.
    # `$?` after a marker is still the command's status, as the page's `echo $?` expects.
    script = "exec 2>&1\n" + "\n".join(
        f"{command}\n__dew_status=$?\necho {_MARK}\n(exit $__dew_status)" for command, _ in commands
    )
    done = _run(["bash", "-c", script], folder, env)
    printed = (done.stdout + done.stderr).split(_MARK)
    for (command, shown), output in zip(commands, printed, strict=False):
        missing = [line for line in shown if line not in output]
        assert not missing, f"{where}: `{command}` printed\n{output[-3000:]}\nwithout the page's lines {missing}"


def run_page(page: Path, folder: Path, env: dict[str, str]) -> None:
    """Runs the page's steps in order in `folder`; the first that fails fails with its page line and output."""
    name = str(page.relative_to(ROOT))
    for number, step in enumerate(steps(page.read_text(), name)):
        where = f"{name} line {step.line}"
        if step.kind == "file":
            target = folder / step.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.code)
            continue
        if step.kind == "console":
            _console(step, folder, env, where)
            continue
        if step.kind == "python":
            script = folder / f"step-{number}.py"
            script.write_text(step.code)
            done = _run([sys.executable, script.name], folder, env)
        else:
            done = _run(["bash", "-e", "-o", "pipefail", "-c", step.code], folder, env)
        assert done.returncode == 0, f"{where} ({step.kind}) exited {done.returncode}:\n{step.code[-1500:]}\n" + (
            done.stdout[-3000:] + done.stderr[-4000:]
        )


@pytest.fixture(scope="session")
def local_stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `local/` folder docs/offline.md makes: its blocks run once, in a folder of their own."""
    folder = tmp_path_factory.mktemp("offline.md")
    run_page(OFFLINE, folder, _environment(folder))
    return folder / "local"


def _runnable_pages() -> list[Path]:
    return [page for page in pages() if steps(page.read_text(), page.name)]


def test_every_page_with_code_is_collected() -> None:
    names = {page.name for page in _runnable_pages()}
    assert {"README.md", "offline.md", "tokens.md", "images.md", "runtime.md"} <= names


@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda page: page.name)
def test_the_page_runs_as_written(page: Path, local_stand_ins: Path, tmp_path: Path, request) -> None:
    if page == OFFLINE:
        assert any(local_stand_ins.iterdir())
        return
    (tmp_path / "local").symlink_to(local_stand_ins, target_is_directory=True)
    env = _environment(tmp_path)
    if "gs://" in "".join(step.code for step in steps(page.read_text(), page.name)):
        env["STORAGE_EMULATOR_HOST"] = request.getfixturevalue("gcs_emulator")
    run_page(page, tmp_path, env)
