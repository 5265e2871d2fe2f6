"""The API reference lists every public name, kind and job, and shows each signature as Python has it.

The pages are generated (dew.pipelines.apidocs; their staleness is tests/typecheck/test_generated.py);
mkdocstrings renders each entry through griffe, which reads the source rather than running it. A
dataclass signature griffe assembles in another order than the class's own __init__ (a base's field
declared for type checkers once put val_batches first, which is not valid Python) fails here.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import typing
from pathlib import Path

import griffe
import pytest

import dew.data
from dew.pipelines import apidocs
from dew.pipelines.jobs import JOBS

ROOT = Path(__file__).resolve().parents[2]


def test_the_data_page_lists_every_public_name_and_every_kind() -> None:
    documented = set(apidocs.documented("data.md"))
    public = {apidocs.public_path(module, n) for module, names in apidocs.public_modules().items() for n in names}
    assert len(public) == len(dew.data.__all__) and public <= documented
    kinds = {f"{k.__module__}.{k.__name__}" for k in dew.data.datasets.values()}
    assert kinds <= documented
    for wanted in ("AutoTextTokenizer", "AutoAudioProcessor", "Batch", "OnlineImages", "ClipShards", "CC3M"):
        assert any(path.endswith(f".{wanted}") for path in documented), wanted


def test_the_pipelines_page_lists_every_job_with_its_flags() -> None:
    page = apidocs.render_pipelines()
    assert {job.module for job in JOBS} <= set(apidocs.documented("pipelines.md"))
    for job in JOBS:
        section = page.split(f"### `dew-preprocess {job.name}`", 1)[1].split("\n### ", 1)[0]
        # A switch's --no-X is one of its hidden actions; the shown one's help names it.
        shown = [a for a in job.load().parser()._actions if a.help != argparse.SUPPRESS]
        flags = [o for a in shown for o in a.option_strings if o not in ("-h", "--help")]
        assert flags and all(f"`{flag}`" in section for flag in flags), job.name


def _runtime(path: str) -> object:
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


def _griffe_objects() -> griffe.Object:
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / "runtime")])
    package = loader.load("dew.data")
    loader.resolve_aliases(implicit=False, external=False)
    return package


@pytest.mark.slow
def test_every_documented_signature_is_in_the_order_python_calls_it() -> None:
    package = _griffe_objects()
    checked, wrong = 0, []
    for path in apidocs.documented("data.md"):
        obj = _runtime(path)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or path in apidocs.JAX_MODULES:
            continue
        if inspect.isclass(obj) and (
            issubclass(obj, enum.Enum) or getattr(obj, "_is_protocol", False) or typing.is_typeddict(obj)
        ):
            continue  # an enum is not called to build one, a Protocol not at all, a TypedDict is a dict
        if obj.__name__ != path.rsplit(".", 1)[1]:
            continue  # a documented alias (the reference page's PhasedStream): checked under its own name
        signature = inspect.signature(obj)
        static = package[path.removeprefix("dew.data.")]
        assert static.is_class or static.is_function, f"{path} renders as a {static.kind.value}"
        static = static.final_target if static.is_alias else static
        documented = [(p.name, p.kind.value) for p in static.parameters if p.name not in ("self", "cls")]
        actual = [(p.name, p.kind.description) for p in signature.parameters.values()]
        if documented != actual:
            wrong.append(f"{path}: documented {documented}, called {actual}")
        checked += 1
    assert wrong == []
    assert checked >= 40


def _beam_after_importing(modules: list[str]) -> dict[str, bool]:
    """Whether apache_beam is loaded after importing each of `modules` in turn, in a fresh process."""
    import json
    import subprocess
    import sys

    script = (
        "import importlib, json, sys\n"
        f"print(json.dumps({{m: importlib.import_module(m) and 'apache_beam' in sys.modules for m in {modules!r}}}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_preprocess_page_says_truly_which_modules_import_beam() -> None:
    modules = apidocs._modules("dew.preprocess")
    plain = [m for m in modules if not apidocs.imports_beam(m)]
    assert plain and len(plain) < len(modules)
    assert not any(_beam_after_importing(plain).values())  # every one of them, together
    for module in sorted(set(modules) - set(plain))[:3]:
        assert _beam_after_importing([module]) == {module: True}
    head = apidocs.render_preprocess().split("::: ")[0]
    assert all(f"`{m}`" in head for m in plain)
