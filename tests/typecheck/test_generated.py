"""Every generated file is what its declarations give now: a kind added, renamed or moved without
`python -m dew.pipelines.generated --write` fails here, naming the file."""

from __future__ import annotations

import ast
from pathlib import Path

from dew.data import datasets
from dew.pipelines import generated


def test_no_generated_file_is_stale() -> None:
    assert generated.stale() == [], "run python -m dew.pipelines.generated --write"


def test_the_kinds_module_declares_each_builtin_kind_as_its_own_class() -> None:
    with open(generated.KINDS_PATH, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    (attributes,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KindAttributes")
    (checking,) = (n for n in attributes.body if isinstance(n, ast.If))
    declarations = [node for node in checking.body if isinstance(node, ast.AnnAssign)]
    declared = {ast.unparse(node.target): ast.unparse(node.annotation) for node in declarations}
    builtin = {cls.__name__ for cls in (datasets[name] for name in datasets) if cls.__module__.startswith("dew.data.")}
    assert set(declared) == builtin
    assert all(annotation == f"type[{name}]" for name, annotation in declared.items())


def test_write_renders_a_file_before_truncating_it(tmp_path: Path) -> None:
    """docs/preprocess.md's tables are rendered from the file itself (the text around their markers): a
    --write that opened the file before rendering read it empty and left it empty."""
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- t -->\nold\n<!-- /t -->\n", encoding="utf-8")

    def render() -> str:
        head, _, _ = page.read_text(encoding="utf-8").partition("<!-- t -->\n")
        return head + "<!-- t -->\nnew\n<!-- /t -->\n"

    assert generated.command(["--write"], prog="p", description="d", files=lambda: {str(page): render}) == 0
    assert page.read_text(encoding="utf-8") == "intro\n<!-- t -->\nnew\n<!-- /t -->\n"
