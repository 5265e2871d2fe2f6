"""Every module of dew's three source roots reads in one sitting: at most 400 lines. A module past it has
grown a second concern; split it at that seam (as formats gave shard_entry, and remote gave retries)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for root in ("runtime", "preprocess", "pipelines")
        for path in (ROOT / root).rglob("*.py")
    }
    assert len(sizes) > 150
    assert {path: n for path, n in sizes.items() if n > LIMIT} == {}
