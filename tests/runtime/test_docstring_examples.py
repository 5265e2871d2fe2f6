"""The Example of every public spec's docstring, of load and Dataset, and of the values a load takes, runs
and shows what it says; every job's parser() and main(argv) say what they take and return."""

from __future__ import annotations

import dataclasses
import doctest
import enum
import inspect
import types

import pytest

import dew.data
from dew.data import DatasetSpec, datasets, load
from dew.pipelines.jobs import JOBS, Job

pytestmark = pytest.mark.slow  # the load example imports HF datasets

# Type aliases and constants carry no docstring of their own: the reference documents them where defined.
NOT_DOCUMENTABLE = {"Reader", "Tokenize", "IDS_KEY", "MASK_KEY"}


def _public() -> set[object]:
    """Every class and function dew.data exports, those of dew.data.position, and the registry's class."""
    found: set[object] = {type(datasets)}
    for name in sorted(set(dew.data.__all__) - NOT_DOCUMENTABLE):
        obj = getattr(dew.data, name)
        if isinstance(obj, types.ModuleType):
            found |= {v for n, v in vars(obj).items() if _defined_in(v, obj.__name__) and not n.startswith("_")}
        elif obj is not datasets:
            found.add(obj)
    return found


def _defined_in(obj: object, module: str) -> bool:
    return (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == module


# Each kind's docstring, every public name, the bases whose docstrings document the fields kinds share,
# load and Dataset, and the job declarations.
DOCUMENTED = sorted(
    {kind for kind in datasets.values() if kind.__module__.startswith("dew.data.")}
    | _public()
    | {DatasetSpec.load, type(datasets).scoped},
    key=lambda obj: f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}",
)


# What an Example needs beyond dew.data's own dependencies: the optional extra it imports.
NEEDS = {
    load: "datasets",
    dew.data.HFDatasetSource: "datasets",
    dew.data.TokenColumn: "pyarrow",
}


def _path(obj: object) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


def _case(obj: object) -> object:
    return pytest.param(obj, id=_path(obj))


def _parameters(obj: object) -> list[str]:
    """What a caller passes: a function's parameters, a class's constructor's (a dataclass: its own fields)."""
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
        return _own_fields(obj)
    if inspect.isclass(obj) and ("__init__" not in obj.__dict__ or _typing_construct(obj)):
        return []  # a protocol, TypedDict or enum: not built by a caller with arguments
    try:
        signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)  # type: ignore[misc]
    except (TypeError, ValueError):
        return []
    return [p for p in signature.parameters if p not in ("self", "cls")]


def _typing_construct(cls: type) -> bool:
    return getattr(cls, "_is_protocol", False) or issubclass(cls, enum.Enum) or hasattr(cls, "__total__")


def _has_args(doc: str) -> bool:
    return _has_section(doc, "Args")


def _has_section(doc: str, name: str) -> bool:
    return f"\n    {name}:\n" in doc or f"\n        {name}:\n" in doc or doc.startswith(f"{name}:\n")


def _own_fields(cls: type) -> list[str]:
    own = inspect.get_annotations(cls)
    return [field.name for field in dataclasses.fields(cls) if field.name in own]


def _own_docstring(obj: object) -> str:
    return (obj.__dict__.get("__doc__") or "") if inspect.isclass(obj) else (obj.__doc__ or "")


@pytest.mark.parametrize("obj", [_case(obj) for obj in DOCUMENTED])
def test_the_docstring_has_args_and_its_example_runs(obj: object) -> None:
    doc = _own_docstring(obj)
    # A kind that declares no field of its own (a preset such as CC3M) has its fields documented by a base.
    documents_args = [c for c in inspect.getmro(obj) if _has_args(_own_docstring(c))] if inspect.isclass(obj) else []
    own = _own_fields(obj) if dataclasses.is_dataclass(obj) else _parameters(obj)
    needs_args = _parameters(obj) and not (inspect.isclass(obj) and not own and documents_args)
    assert _has_args(doc) or not needs_args, f"{obj.__qualname__} takes {_parameters(obj)} and has no Args section"
    if obj in (dew.data.ImageDataset, dew.data.VideoDataset):
        return  # a base: its kinds carry the examples
    assert "Examples:" in doc, f"{obj.__qualname__} has no Examples section"
    if obj in NEEDS:
        pytest.importorskip(NEEDS[obj])
    _run_examples(obj, doc)


def _run_examples(obj: object, doc: str, globs: dict[str, object] | None = None) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(doc, dict(globs or {}), obj.__qualname__, inspect.getsourcefile(obj), 0)
    assert test.examples, f"{obj.__qualname__}'s Example has no >>> lines"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{obj.__qualname__}: {result.failed} of {result.attempted} example lines failed"


# Each job's entry points. Importing a job module imports apache_beam (inspect's aside), so they are
# held to Args and Returns; an Example, where one is written, runs in its module's namespace.
@pytest.mark.parametrize("entry", ["parser", "main"])
@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.module)
def test_a_job_entry_point_has_args_and_returns(job: Job, entry: str) -> None:
    pytest.importorskip("apache_beam")
    module = job.load()
    function = getattr(module, entry)
    doc = function.__doc__ or ""
    assert _has_args(doc) or not _parameters(function), f"{job.module}.{entry} has no Args section"
    assert _has_section(doc, "Returns"), f"{job.module}.{entry} has no Returns section"
    if "Examples:" in doc:
        _run_examples(function, doc, vars(module))
