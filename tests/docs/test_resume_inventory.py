"""docs/runtime.md's resume inventory names tests that exist: a renamed or removed resume test shows
here, not as a row that points at nothing."""

from __future__ import annotations

import ast
import re

from tests.docs.pages import ROOT

CITED = re.compile(r"`((?:tests/[\w/]+/)?(?:R|test_\w+\.py))::(test_\w+)(?:\[(\w+)\])?`")


def _inventory() -> str:
    page = (ROOT / "docs" / "runtime.md").read_text()
    return page[page.index("## Resume inventory") : page.index("## Your own Grain pipelines")]


def test_every_test_the_resume_inventory_names_exists() -> None:
    cited = CITED.findall(_inventory())
    assert len(cited) > 30, "the inventory's citations were not found: has its format changed?"
    missing = []
    for where, name, case in cited:
        relative = "tests/runtime/test_resume.py" if where == "R" else where
        if not relative.startswith("tests/"):
            relative = f"tests/runtime/{relative}"
        path = ROOT / relative
        source = path.read_text() if path.is_file() else ""
        defined = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
        if name not in defined or (case and f'"{case}"' not in source):
            missing.append(f"{relative}::{name}" + (f"[{case}]" if case else ""))
    assert not missing, f"docs/runtime.md's resume inventory names tests that do not exist: {missing}"
