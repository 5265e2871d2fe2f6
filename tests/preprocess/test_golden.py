"""Every writing job's output, byte for byte, against the digests recorded from main before the writers
shared one skeleton (tests/preprocess/golden.py says how they are made and when to record them again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.preprocess import golden

pytestmark = pytest.mark.beam
pytest.importorskip("cv2")
pytest.importorskip("av")


def test_every_job_writes_the_recorded_bytes(tmp_path: Path) -> None:
    recorded = json.loads(golden.DIGESTS.read_text())
    found = golden.digests(tmp_path)
    assert sorted(found) == sorted(recorded), "the golden runs changed: record them again on main"
    for run in recorded:
        changed = {name for name in {*recorded[run], *found[run]} if recorded[run].get(name) != found[run].get(name)}
        assert not changed, f"{run}: these files differ from the recorded ones: {sorted(changed)}"
