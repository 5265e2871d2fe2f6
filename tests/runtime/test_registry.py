"""The datasets registry, JSON configs of specs, and what `import dew.data` costs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest

from dew.data import DatasetSpec, Loading, datasets, json_list_argument
from dew.data.extras import EXTRAS
from dew.data.registry import Registry

# Every optional stack (each module an extra installs, from pyproject.toml), and the heavy ones that come
# without an extra of their own: tensorflow through tensorflow_datasets, grain as a dependency.
HEAVY = [*EXTRAS, "tensorflow", "grain"]


@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    weight: float = 1.0


@dataclasses.dataclass(frozen=True)
class Example(DatasetSpec):
    path: str
    sizes: tuple[int, ...] = (1, 2)
    weights: str | dict[str, float] | None = None
    parts: Annotated[tuple[Part, ...], json_list_argument(Part)] = ()


def registry_with_example() -> Registry:
    registry = Registry()
    registry("example")(Example)
    return registry


def test_a_spec_round_trips_through_json() -> None:
    registry = registry_with_example()
    spec = Example(
        path="/data/x",
        sizes=(3, 4),
        weights={"a": 0.25, "b": 0.75},
        parts=(Part("p", 2.0), Part("q")),
        seed=7,
        loading=Loading(workers=2, threads=3),
    )
    config = json.loads(json.dumps(spec.to_config()))
    assert config["kind"] == "example" and config["loading"]["workers"] == 2
    assert registry.from_config(config) == spec
    assert registry["example"] is Example and registry.Example is Example and "example" in registry.names()


def test_every_kind_that_builds_from_its_defaults_round_trips() -> None:
    # Kinds whose defaults are incomplete (a path is required) have round-trip tests of their own.
    checked = 0
    for name in datasets:
        try:
            spec = datasets[name]()
        except (TypeError, ValueError):
            continue
        assert datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec, name
        checked += 1
    assert checked or not len(datasets)


def test_an_unknown_kind_lists_the_registered_ones() -> None:
    registry = registry_with_example()
    with pytest.raises(KeyError, match="no dataset named 'nope'; registered: example"):
        registry["nope"]
    with pytest.raises(KeyError, match="registered: example"):
        registry.from_config({"kind": "nope"})
    with pytest.raises(AttributeError, match="kinds: Example"):
        registry.Nope  # noqa: B018


def test_an_extra_field_lists_the_valid_ones() -> None:
    registry = registry_with_example()
    with pytest.raises(ValueError, match=r"no field 'colour'; valid fields: loading, parts, path, seed"):
        registry.from_config({"kind": "example", "path": "x", "colour": "red"})
    with pytest.raises(ValueError, match=r"example\.loading: Loading has no field 'cores'"):
        registry.from_config({"kind": "example", "path": "x", "loading": {"cores": 4}})
    with pytest.raises(ValueError, match=r"example\.parts\[0\]: Part has no field 'size'"):
        registry.from_config({"kind": "example", "path": "x", "parts": [{"name": "a", "size": 1}]})


def test_registration_needs_a_frozen_spec() -> None:
    registry = Registry()

    class Plain(DatasetSpec):
        path: str = ""

    with pytest.raises(TypeError, match="frozen dataclass"):
        registry("plain")(Plain)
    with pytest.raises(TypeError, match="DatasetSpec subclasses"):
        registry("part")(Part)


def test_loading_is_checked_and_counts_its_stop_time() -> None:
    with pytest.raises(ValueError, match=r"Loading\.workers must be a non-negative int"):
        Loading(workers=-1)
    with pytest.raises(ValueError, match=r"Loading\.threads must be at least 1"):
        Loading(threads=0)
    assert Loading(workers=8).stop_seconds > Loading(workers=0).stop_seconds


def test_loading_takes_its_knobs_in_the_order_the_reference_gives_them() -> None:
    """The dew.data reference signs Loading(workers=32, threads=64, read_buffer=128, worker_buffer=2),
    positional like DataPartition and Ramp; it was keyword-only, so Loading(0) was a TypeError."""
    assert Loading(0, 2, 8, 1) == Loading(workers=0, threads=2, read_buffer=8, worker_buffer=1)
    assert Loading(4) == Loading(workers=4) and Loading() == Loading(32, 64, 128, 2)


def test_uncaptioned_refuses_a_caption_reader() -> None:
    Example(path="x").uncaptioned(None)
    with pytest.raises(ValueError, match="carries no captions"):
        Example(path="x").uncaptioned(lambda captions: captions)


def test_import_registers_every_kind_and_loads_no_heavy_stack() -> None:
    # The kinds are listed first: finding them imports every kind module, which must stay cheap too.
    script = (
        "import sys, json; import dew.data as d; kinds = d.datasets.names(); "
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], 'kinds': kinds}}))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"import dew.data loaded {report['heavy']}"
    # A test's own kinds (tests/toy_kind/) are registered in a copy of the sources, never here.
    assert report["kinds"] == datasets.names()
    assert {"token_windows", "packed_tokens", "hf", "tfds", "chat_messages", "prompts"} <= set(report["kinds"])


KIND_MODULE = """
import dataclasses

from dew.data.registry import datasets
from dew.data.spec import DatasetSpec


@datasets({name!r})
@dataclasses.dataclass(frozen=True)
class {cls}(DatasetSpec):
    path: str = ""
"""


def test_a_kind_is_found_from_its_own_module_and_from_an_entry_point(tmp_path: Path) -> None:
    # One kind module dropped beside dew.data's own, one in a package that names it as an entry point;
    # neither is mentioned anywhere else.
    (tmp_path / "portion").mkdir()
    (tmp_path / "portion" / "scratch_kind.py").write_text(KIND_MODULE.format(name="scratch", cls="ScratchKind"))
    (tmp_path / "site" / "outside").mkdir(parents=True)
    (tmp_path / "site" / "outside" / "__init__.py").write_text(KIND_MODULE.format(name="outside", cls="OutsideKind"))
    info = tmp_path / "site" / "outside-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: outside\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dew.datasets]\noutside = outside\n")
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r}); import dew.data as d; "
        f"d.__path__.append({str(tmp_path / 'portion')!r}); "
        "from dew.data import ScratchKind; "
        "assert d.datasets['scratch'] is ScratchKind and d.datasets['outside'] is d.OutsideKind; "
        "assert 'ScratchKind' in dir(d) and 'TokenWindows' in dir(d); print('found')"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "found", out.stderr


def test_discovery_runs_once_before_the_first_lookup_and_again_after_a_failure() -> None:
    calls: list[int] = []

    def discover() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise ImportError("a kind module failed")
        registry("example")(Example)

    registry = Registry(discover)
    assert calls == []
    with pytest.raises(ImportError, match="a kind module failed"):
        registry.names()
    assert registry["example"] is Example and "example" in registry and len(registry) == 1
    assert calls == [0, 1]


def test_the_package_reaches_kinds_by_class_name() -> None:
    import dew.data

    assert dew.data.TokenWindows is datasets["token_windows"] is datasets.TokenWindows
    assert {"TokenWindows", "HubDataset", "load", "datasets"} <= set(dir(dew.data))
    assert set(dew.data.__all__) <= set(dir(dew.data))
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        dew.data.Nope  # noqa: B018
