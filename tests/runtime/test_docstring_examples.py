"""The Example of every public spec's docstring, of load and Dataset, and of the values a load takes, runs
and shows what it says."""

from __future__ import annotations

import dataclasses
import doctest
import inspect

import pytest

import dew.data
from dew.data import Dataset, DatasetSpec, datasets, load

pytestmark = pytest.mark.slow  # the load example imports HF datasets

# Each kind's docstring, the bases whose docstrings document the fields kinds share, load and Dataset,
# and the value types a load takes: Loading, DataPartition, Ramp, DataPhase and the two processors.
DOCUMENTED = sorted(
    {kind for kind in datasets.values() if kind.__module__.startswith("dew.data.")}
    | {DatasetSpec, Dataset, load, DatasetSpec.load}
    | {dew.data.ImageDataset, dew.data.VideoDataset}
    | {dew.data.Loading, dew.data.DataPartition, dew.data.Ramp, dew.data.DataPhase}
    | {dew.data.AutoTextTokenizer, dew.data.AutoAudioProcessor},
    key=lambda obj: obj.__qualname__,
)


def _has_args(doc: str) -> bool:
    return "\n    Args:\n" in doc or "\n        Args:\n" in doc


def _own_fields(cls: type) -> list[str]:
    own = inspect.get_annotations(cls)
    return [field.name for field in dataclasses.fields(cls) if field.name in own]


def _own_docstring(obj: object) -> str:
    return (obj.__dict__.get("__doc__") or "") if inspect.isclass(obj) else (obj.__doc__ or "")


@pytest.mark.parametrize("obj", DOCUMENTED, ids=[obj.__qualname__ for obj in DOCUMENTED])
def test_the_docstring_has_args_and_its_example_runs(obj: object) -> None:
    doc = _own_docstring(obj)
    # A kind that declares no field of its own (a preset such as CC3M) has its fields documented by a base.
    documents_args = [c for c in inspect.getmro(obj) if _has_args(_own_docstring(c))] if inspect.isclass(obj) else []
    assert _has_args(doc) or (inspect.isclass(obj) and not _own_fields(obj) and documents_args), (
        f"{obj.__qualname__} has no Args section"
    )
    if obj in (dew.data.ImageDataset, dew.data.VideoDataset):
        return  # a base: its kinds carry the examples
    assert "Examples:" in doc, f"{obj.__qualname__} has no Examples section"
    if obj is load:
        pytest.importorskip("datasets")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(doc, {}, obj.__qualname__, inspect.getsourcefile(obj), 0)
    assert test.examples, f"{obj.__qualname__}'s Example has no >>> lines"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{obj.__qualname__}: {result.failed} of {result.attempted} example lines failed"
