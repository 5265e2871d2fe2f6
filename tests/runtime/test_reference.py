"""Names and signatures the dew.data reference page gives, checked where the code once drifted from them."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from dew.data import Loading, load


def test_load_defaults_loading_to_the_default_loading() -> None:
    assert inspect.signature(load).parameters["loading"].default == Loading()


def test_from_grain_defaults_loading_to_the_default_loading() -> None:
    from dew.data import Dataset

    assert inspect.signature(Dataset.from_grain).parameters["loading"].default == Loading()


def test_load_still_takes_loading_none_as_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # None was load()'s default before it took the page's signature; a caller passing it keeps working.
    import importlib

    load_module = importlib.import_module("dew.data.providers.load")

    @dataclasses.dataclass(frozen=True)
    class Fake:
        name: str = ""
        split: str = "train"
        val_split: str | None = None
        val_batches: int | None = None
        records: int | None = None
        preprocess: object = None
        seed: int = 0
        loading: Loading = Loading()
        options: object = None

        @classmethod
        def options_type(cls) -> type:
            return object

        def load(self, *, batch: int) -> Fake:
            return self

    monkeypatch.setattr(load_module, "providers", lambda: {"fake": Fake})
    assert load("fake/x", batch=1, loading=None).loading == Loading()
    assert load("fake/x", batch=1).loading == Loading()
    assert load("fake/x", batch=1, loading=Loading(workers=0)).loading == Loading(workers=0)


def test_image_kinds_are_reached_in_dew_data_images_where_the_page_documents_them() -> None:
    import dew.data
    import dew.data.images as images

    for name in (
        "ArrayRecordImages",
        "CC3M",
        "CC12M",
        "Combined30M",
        "CombinedMsml612",
        "CombinedOnline",
        "DiffusionDB",
        "HFImages",
        "ImageDataset",
        "Laion2bAesthetic",
        "Laion12mCoco",
        "OnlineImages",
        "OxfordFlowers",
    ):
        assert getattr(images, name) is getattr(dew.data, name)
        assert name in dir(images)
    with pytest.raises(AttributeError):
        images.TokenWindows  # noqa: B018 - a kind of another package is not an image kind


def test_the_modules_the_page_names_for_positions_and_checkpoints_import() -> None:
    import dew.data.position
    import dew.position

    assert dew.position.parse is dew.data.position.parse
    assert dew.position.GlobalPosition is dew.data.position.GlobalPosition
    pytest.importorskip("orbax.checkpoint")
    import dew.checkpoints
    import dew.data.checkpoints

    assert dew.checkpoints.DataPositionSave is dew.data.checkpoints.DataPositionSave
    assert dew.checkpoints.DataPositionRestore is dew.data.checkpoints.DataPositionRestore


def test_signatures_name_the_types_the_page_gives() -> None:
    from dew.data import Dataset, HubDataset

    held = "ArrowDataset | IterableDataset | None"
    assert inspect.signature(load).parameters["dataset"].annotation == held
    assert inspect.signature(HubDataset.rows).parameters["dataset"].annotation.startswith(held)
    grain_parameters = inspect.signature(Dataset.from_grain).parameters
    assert grain_parameters["train"].annotation == "GrainPipeline"
    assert grain_parameters["validation"].annotation == "GrainPipeline | None"
