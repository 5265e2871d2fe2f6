"""The distribution as a library states it: open to current CPython, ranges for what it needs, and the
tested set pinned apart, in constraints.txt, which `make setup` installs with."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            found[canonical(name)] = version
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_requires_python_is_open_to_current_cpython() -> None:
    allowed = SpecifierSet(PROJECT["requires-python"])
    assert all(version in allowed for version in ("3.11", "3.12", "3.13", "3.14"))


def test_runtime_dependencies_are_ranges_and_the_tested_versions_lie_inside_them() -> None:
    pinned = pins()
    for line in PROJECT["dependencies"]:
        requirement = Requirement(line)
        assert not any(s.operator == "==" for s in requirement.specifier), f"{line} is an exact pin"
        assert {s.operator for s in requirement.specifier} >= {">=", "<"}, f"{line} is not a bounded range"
        version = pinned[canonical(requirement.name)]
        assert version in requirement.specifier, (requirement.name, version)


def test_every_extra_is_pinned_by_the_constraints_file() -> None:
    pinned = pins()
    for extra, lines in PROJECT["optional-dependencies"].items():
        for line in lines:
            requirement = Requirement(line)
            if requirement.name == "dew":
                continue
            name = canonical(requirement.name)
            assert name in pinned, f"{extra}: {requirement.name} is not in constraints.txt"
            assert pinned[name] in requirement.specifier, (extra, line)


def test_make_setup_installs_under_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"uv pip install .*-c constraints\.txt -e '\.\[all,test,docs\]'", makefile)
    assert re.search(r"^\$\(STAMP\): pyproject\.toml constraints\.txt$", makefile, re.M)


def test_the_install_page_lists_every_extra() -> None:
    page = (ROOT / "docs" / "install.md").read_text()
    for extra in PROJECT["optional-dependencies"]:
        assert f"| `{extra}` |" in page, f"docs/install.md has no row for dew[{extra}]"
