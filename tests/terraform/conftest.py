"""Read the Terraform tree the way Terraform would see it, without Terraform.

Terraform cannot be installed here, so `terraform validate` is replaced by checks over what
python-hcl2 parses: one `TfConfig` per directory (a module or an example), with its blocks merged
across files and keyed by name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2
import pytest

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"


def _parse(path: Path) -> dict[str, Any]:
    """Parse one .tf file into plain values: strings without their HCL quotes, blocks as dicts."""
    text = path.read_text()
    # python-hcl2 >= 7 keeps quotes and comments unless told not to; older releases have no options.
    options_type = getattr(hcl2, "SerializationOptions", None)
    if options_type is None:
        return hcl2.loads(text)
    options = options_type(with_comments=False, explicit_blocks=False, strip_string_quotes=True)
    return hcl2.loads(text, serialization_options=options)


@dataclass
class TfConfig:
    """The blocks of every .tf file in one directory, merged and keyed by name."""

    directory: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    # "type.name" -> body
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    terraform: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.directory.glob("*.tf")))

    def resources_of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        prefix = resource_type + "."
        return {k[len(prefix) :]: v for k, v in self.resources.items() if k.startswith(prefix)}


@functools.cache
def load_config(directory: Path) -> TfConfig:
    config = TfConfig(directory=directory)
    for path in sorted(directory.glob("*.tf")):
        parsed = _parse(path)
        config.files[path.name] = parsed
        for block in parsed.get("variable", []):
            config.variables.update(block)
        for block in parsed.get("output", []):
            config.outputs.update(block)
        for block in parsed.get("module", []):
            config.modules.update(block)
        for block in parsed.get("locals", []):
            config.locals.update(block)
        for block in parsed.get("resource", []):
            for resource_type, by_name in block.items():
                for name, body in by_name.items():
                    config.resources[f"{resource_type}.{name}"] = body
        config.terraform.extend(parsed.get("terraform", []))
    return config


def _module_dirs() -> list[Path]:
    return sorted(p for p in (TERRAFORM / "modules").iterdir() if p.is_dir())


def _example_dirs() -> list[Path]:
    return sorted(p for p in (TERRAFORM / "examples").iterdir() if p.is_dir())


def _config_dirs() -> list[Path]:
    return _module_dirs() + _example_dirs()


def _tf_files() -> list[Path]:
    return sorted(p for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts)


# Each of these argument names, in a test under this directory, runs the test once per path.
_PARAMETERS = {
    "module_dir": _module_dirs,  # terraform/modules/*
    "example_dir": _example_dirs,  # terraform/examples/*
    "config_dir": _config_dirs,  # both: every directory Terraform is pointed at or calls into
    "tf_file": _tf_files,  # every .tf file
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, paths in _PARAMETERS.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, paths(), ids=lambda p: str(p.relative_to(TERRAFORM)))


@pytest.fixture(scope="session")
def tf() -> Callable[[Path], TfConfig]:
    """Parse a Terraform directory once per session."""
    return load_config


@pytest.fixture(scope="session")
def parse_tf() -> Callable[[Path], dict[str, Any]]:
    """Parse one .tf file, uncached."""
    return _parse


@pytest.fixture(scope="session")
def terraform_dir() -> Path:
    return TERRAFORM


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO
