"""A gs:// directory written by save_to_disk reads as what it holds, under its gs:// name."""

from __future__ import annotations

import os

import pytest

from dew.data import HFOptions
from tests.conftest import BUCKET
from tests.support import gcs_filesystem

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.gcs


def _upload_tree(local: str, uri: str) -> None:
    fs = gcs_filesystem()
    for folder, _, names in os.walk(local):
        for name in sorted(names):
            path = os.path.join(folder, name)
            with open(path, "rb") as source, fs.open(f"{uri}/{os.path.relpath(path, local)}", "wb") as target:
                target.write(source.read())
    fs.invalidate_cache()


def test_a_saved_dataset_dict_on_gs_reads_back_every_row(gcs_emulator, tmp_path) -> None:
    rows = [{"url": f"http://127.0.0.1/{i}.jpg", "caption": f"caption {i}"} for i in range(7)]
    saved = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows), "test": datasets.Dataset.from_list(rows[:2])}
    )
    saved.save_to_disk(str(tmp_path / "saved"))
    uri = f"gs://{BUCKET}/saved-dict"
    _upload_tree(str(tmp_path / "saved"), uri)

    train = HFOptions().load(uri, "train", streaming=False)
    assert train.to_list() == rows
    streamed = HFOptions().load(uri, "test", streaming=True)
    assert list(streamed) == rows[:2]


def test_a_gs_path_without_a_saved_dataset_is_refused_under_its_gs_name(gcs_emulator) -> None:
    uri = f"gs://{BUCKET}/no-such-dataset"
    with pytest.raises(FileNotFoundError, match=f"^{uri} holds no dataset written by save_to_disk"):
        HFOptions().load(uri, "train", streaming=False)
