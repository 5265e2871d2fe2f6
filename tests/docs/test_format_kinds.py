"""docs/format.md's kinds table is written by hand (it explains each field), so this holds it to the
registry: one row a Section, with the format tag that kind's meta.json carries, and no row for a kind
dew does not have. A new kind's step 1 (docs/contributing.md) fails here until its row is written."""

from __future__ import annotations

import re

from dew.data.sections import SECTIONS
from tests.docs.pages import ROOT

HEADER = "| kind | format | unit | fields | read by |"
_ROW = re.compile(r"^\| `(?P<kind>[^`]+)` \| `(?P<tag>[^`]+)` \|")


def table_rows() -> dict[str, str]:
    lines = (ROOT / "docs" / "format.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER) + 2
    rows: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        match = _ROW.match(line)
        assert match, f"docs/format.md: a kinds row that names no kind and format: {line[:80]}"
        rows[match["kind"]] = match["tag"]
    return rows


def test_the_kinds_table_has_a_row_for_every_section_with_its_format_tag() -> None:
    assert table_rows() == {kind: section.format_tag() for kind, section in SECTIONS.items()}
