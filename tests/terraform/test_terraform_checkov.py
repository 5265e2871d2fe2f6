"""checkov finds nothing to fix in terraform/, and every check it skips says why, beside the resource.

checkov runs once for this file (it takes seconds to start). It comes from its own venv, which
`make test` puts on PATH, because its pins clash with apache-beam's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SKIP_COMMENT = re.compile(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?")


@pytest.fixture(scope="module")
def report(terraform_dir: Path) -> dict:
    checkov = shutil.which("checkov")
    if checkov is None:
        pytest.skip("checkov is not on PATH; `make test` puts .venv-checkov/bin there")
    # --skip-download: no network calls for guidelines; the checks themselves ship with checkov.
    result = subprocess.run(
        [checkov, "--directory", str(terraform_dir), "--framework", "terraform", "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # checkov exits 1 when a check fails; anything else unparsable is a crash worth seeing whole.
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov exited {result.returncode} without a JSON report:\n{result.stderr[-4000:]}")
    assert isinstance(report, dict), f"expected one terraform report, got {type(report).__name__}"
    return report


def _describe(checks: list[dict]) -> str:
    return "\n".join(
        f"  {c['check_id']} {c['check_name']}: {c['resource']} ({c['file_path']}:{c['file_line_range'][0]})"
        for c in checks
    )


def test_no_failed_checks(report: dict) -> None:
    summary = report["summary"]
    failed = report["results"]["failed_checks"]
    assert summary["failed"] == 0 and not failed, f"checkov failed checks:\n{_describe(failed)}"
    assert summary["parsing_errors"] == 0
    assert summary["passed"] > 0, "checkov passed nothing: did it see the resources?"


def test_checkov_scanned_every_module(report: dict, terraform_dir: Path) -> None:
    results = report["results"]
    seen = {c["file_abs_path"] for kind in ("passed_checks", "skipped_checks") for c in results[kind]}
    for main in sorted((terraform_dir / "modules").glob("*/main.tf")):
        assert str(main) in seen, f"checkov evaluated nothing in {main}"


def test_every_skip_gives_its_reason(report: dict) -> None:
    for check in report["results"]["skipped_checks"]:
        reason = (check["check_result"].get("suppress_comment") or "").strip()
        assert len(reason) >= 20, f"{check['check_id']} on {check['resource']} is skipped without a reason"


def _inline_skips(terraform_dir: Path) -> dict[tuple[str, str], str]:
    skips = {}
    for path in sorted(terraform_dir.rglob("*.tf")):
        for match in SKIP_COMMENT.finditer(path.read_text()):
            skips[(str(path), match.group(1))] = (match.group(2) or "").strip()
    return skips


def test_skips_are_inline_and_all_in_use(report: dict, terraform_dir: Path, repo_dir: Path) -> None:
    # Skips live beside the resource they excuse, never in a config file that hides them all.
    for config in (".checkov.yaml", ".checkov.yml"):
        assert not (repo_dir / config).exists() and not (terraform_dir / config).exists(), config
    written = _inline_skips(terraform_dir)
    assert all(written.values()), f"skip comments without a reason: {[k for k, v in written.items() if not v]}"
    applied = {(c["file_abs_path"], c["check_id"]) for c in report["results"]["skipped_checks"]}
    stale = sorted(set(written) - applied)
    assert not stale, f"skip comments that excuse nothing (remove them): {stale}"
