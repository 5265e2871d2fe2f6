"""What `terraform validate` would catch, checked statically: every name used is declared.

And the example's contract with its users: its outputs are the flags `dew-preprocess --runner
DataflowRunner` takes, and the docs only ask for outputs that exist.
"""

from __future__ import annotations

import re
from pathlib import Path

# The Beam pipeline options a Dataflow launch of dew-preprocess needs from the infrastructure.
BEAM_OPTIONS = (
    "project",
    "region",
    "temp_location",
    "staging_location",
    "service_account_email",
    "sdk_container_image",
)
EXAMPLE_OUTPUTS = {
    *BEAM_OPTIONS,
    "dataflow_flags",  # all of the above as one line
    "raw_bucket",  # --input
    "processed_bucket",  # --output, and where training reads
    "templates_location",  # flex-template specs
}


def _module_source(example_dir: Path, body: dict) -> Path:
    source = body["source"]
    assert source.startswith("../"), f"module source {source!r} is not a local module"
    return (example_dir / source).resolve()


def test_module_calls_match_module_variables(example_dir: Path, tf) -> None:
    for name, body in tf(example_dir).modules.items():
        variables = tf(_module_source(example_dir, body)).variables
        arguments = set(body) - {"source", "depends_on", "providers", "count", "for_each"}
        unknown = sorted(arguments - set(variables))
        required = {v for v, spec in variables.items() if "default" not in spec}
        missing = sorted(required - arguments)
        assert not unknown, f"module {name} is passed undeclared variables {unknown}"
        assert not missing, f"module {name} is not passed required variables {missing}"


def test_module_outputs_used_exist(example_dir: Path, tf) -> None:
    config = tf(example_dir)
    for module, output in set(re.findall(r"\bmodule\.([a-z_0-9]+)\.([a-z_0-9]+)", config.text)):
        assert module in config.modules, f"module.{module} is used but not declared"
        outputs = tf(_module_source(example_dir, config.modules[module])).outputs
        assert output in outputs, f"module.{module}.{output} is used but module {module} has no such output"


def test_variables_and_locals_used_are_declared(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    used_vars = set(re.findall(r"\bvar\.([a-z_0-9]+)", config.text))
    used_locals = set(re.findall(r"\blocal\.([a-z_0-9]+)", config.text))
    assert used_vars <= set(config.variables), f"undeclared: {sorted(used_vars - set(config.variables))}"
    assert used_locals <= set(config.locals), f"undeclared: {sorted(used_locals - set(config.locals))}"
    unused = sorted(set(config.variables) - used_vars)
    assert not unused, f"variables declared but never used in {config_dir}: {unused}"


def test_resources_referenced_are_declared(config_dir: Path, tf) -> None:
    config = tf(config_dir)
    referenced = set(re.findall(r"\b(google_[a-z_0-9]+\.[a-z_0-9]+)\.", config.text))
    undeclared = sorted(referenced - set(config.resources))
    assert not undeclared, f"references to undeclared resources in {config_dir}: {undeclared}"


def test_example_outputs_are_the_launch_flags(example_dir: Path, tf) -> None:
    outputs = tf(example_dir).outputs
    assert set(outputs) == EXAMPLE_OUTPUTS
    flags = outputs["dataflow_flags"]["value"]
    assert "--runner DataflowRunner" in flags
    for option in BEAM_OPTIONS:
        assert f"--{option} " in flags, f"dataflow_flags lacks --{option}"
        # Each flag carries the same value as the output of the same name.
        value = outputs[option]["value"].removeprefix("${").removesuffix("}")
        assert value in flags, f"--{option} in dataflow_flags differs from output {option}"


def test_docs_ask_only_for_outputs_that_exist(example_dir: Path, repo_dir: Path, tf) -> None:
    outputs = set(tf(example_dir).outputs)
    for doc in (repo_dir / "docs" / "infrastructure.md", example_dir / "README.md"):
        asked = set(re.findall(r"terraform (?:-chdir=\S+ )?output (?:-raw |-json )?([a-z_]+)", doc.read_text()))
        assert asked, f"{doc} never reads a terraform output"
        assert asked <= outputs, f"{doc} reads outputs that do not exist: {sorted(asked - outputs)}"


def test_docs_name_only_settings_the_example_takes(example_dir: Path, terraform_dir: Path, repo_dir: Path, tf) -> None:
    """infrastructure.md tells the user to keep temp_object_age_days above their longest job, and names
    noncurrent_version_age_days as the undo window, but the root configuration it applies did not take
    them: the only way to change either was to edit the example."""
    module_variables = {
        name for module in (terraform_dir / "modules").iterdir() if module.is_dir() for name in tf(module).variables
    }
    named = set(re.findall(r"`([a-z_]+)`", (repo_dir / "docs" / "infrastructure.md").read_text())) & module_variables
    named -= set(tf(example_dir).outputs)  # raw_bucket and the like, which the docs name as outputs
    assert named, "infrastructure.md names no module variable"
    missing = sorted(named - set(tf(example_dir).variables))
    assert not missing, f"infrastructure.md names settings the example does not take: {missing}"
