"""Every Terraform directory has the standard module shape and a complete, documented interface."""

from __future__ import annotations

import re
from pathlib import Path

STANDARD_FILES = ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md")


def test_every_tf_file_parses(tf_file: Path, parse_tf) -> None:
    assert parse_tf(tf_file), f"{tf_file} is empty"


def test_has_standard_files(config_dir: Path) -> None:
    missing = [name for name in STANDARD_FILES if not (config_dir / name).is_file()]
    assert not missing, f"{config_dir} lacks {missing}"


def test_every_variable_is_typed_and_described(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    assert config.variables, f"{config_dir} declares no variables"
    untyped = [name for name, body in config.variables.items() if not body.get("type")]
    undescribed = [name for name, body in config.variables.items() if not str(body.get("description", "")).strip()]
    assert not untyped, f"variables without a type in {config_dir}: {untyped}"
    assert not undescribed, f"variables without a description in {config_dir}: {undescribed}"


def test_every_output_is_described(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    assert config.outputs, f"{config_dir} declares no outputs"
    undescribed = [name for name, body in config.outputs.items() if not str(body.get("description", "")).strip()]
    assert not undescribed, f"outputs without a description in {config_dir}: {undescribed}"


def test_project_has_no_default(config_dir: Path, tf) -> None:
    # A default project would let `terraform apply` deploy into whatever project it names.
    variables = tf(config_dir).variables
    assert "project_id" in variables, f"{config_dir} takes no project_id"
    assert "default" not in variables["project_id"]


def test_variables_live_in_variables_tf_and_outputs_in_outputs_tf(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    for name, parsed in config.files.items():
        if name != "variables.tf":
            assert "variable" not in parsed, f"{config_dir / name} declares variables"
        if name != "outputs.tf":
            assert "output" not in parsed, f"{config_dir / name} declares outputs"


def _constraints(config) -> dict[str, str]:
    constraints = {}
    for block in config.files["versions.tf"].get("terraform", []):
        for providers in block.get("required_providers", []):
            for name, spec in providers.items():
                constraints[name] = spec["version"]
    return constraints


def test_providers_are_bounded_above(config_dir: Path, tf) -> None:
    constraints = _constraints(tf(config_dir))
    assert constraints.get("google"), f"{config_dir}/versions.tf does not require the google provider"
    for name, constraint in constraints.items():
        parts = [part.strip() for part in constraint.split(",")]
        assert any(p.startswith(">=") for p in parts), f"{name} {constraint!r} has no lower bound"
        assert any(p.startswith("<") or p.startswith("~>") for p in parts), (
            f"{name} {constraint!r} has no upper bound: a new major release could break every apply"
        )
    terraform_blocks = tf(config_dir).files["versions.tf"]["terraform"]
    assert any("required_version" in block for block in terraform_blocks)


def test_every_config_accepts_the_same_provider_range(terraform_dir: Path, tf) -> None:
    dirs = sorted({p.parent for p in terraform_dir.rglob("versions.tf") if ".terraform" not in p.parts})
    ranges = {str(d.relative_to(terraform_dir)): _constraints(tf(d)).get("google") for d in dirs}
    assert len(set(ranges.values())) == 1, f"the google provider ranges differ: {ranges}"


def _readme_names(readme: Path) -> set[str]:
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", readme.read_text()))


def test_readme_lists_every_input_and_output(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    named = _readme_names(config_dir / "README.md")
    missing_inputs = sorted(set(config.variables) - named)
    missing_outputs = sorted(set(config.outputs) - named)
    assert not missing_inputs, f"{config_dir}/README.md does not list inputs {missing_inputs}"
    assert not missing_outputs, f"{config_dir}/README.md does not list outputs {missing_outputs}"
