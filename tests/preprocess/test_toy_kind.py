"""A new kind through the skeletons, end to end: tests/toy_kind.py adds "pairs" as docs/contributing.md
says (a section, a codec, a reader, a writer, a job), its job writes a committed directory from text
files, and its spec reads back every record the inputs held, in its split, with the drops counted."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dew.data import DataPartition, Loading, datasets, formats, sections
from dew.data.sections import SECTIONS

pytestmark = pytest.mark.beam
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


@pytest.fixture
def toy_kind() -> Iterator[ModuleType]:
    """tests/toy_kind.py, imported afresh for one test: its kind and its section are registered for that
    test only, so no other test, and no listing of dew's kinds, meets them."""
    with datasets.scoped(), sections.scoped():
        sys.modules.pop("tests.toy_kind", None)
        try:
            yield importlib.import_module("tests.toy_kind")
        finally:
            sys.modules.pop("tests.toy_kind", None)


def write_inputs(directory: Path) -> dict[tuple[str, str], int]:
    """Two files of pairs, with a line in each that has no tab; returns every good pair (file index)."""
    directory.mkdir()
    pairs: dict[tuple[str, str], int] = {}
    for index, name in enumerate(["a.txt", "b.txt"]):
        lines = []
        for row in range(40):
            left, right = f"{name} left {row}", f"right {row * row}"
            lines.append(f"{left}\t{right}")
            pairs[(left, right)] = index
        lines.insert(7, f"{name} has no tab here")
        (directory / name).write_text("\n".join(lines) + "\n")
    return pairs


def test_a_toy_kind_writes_a_committed_directory_its_reader_reads_back_whole(
    tmp_path: Path, toy_kind: ModuleType
) -> None:
    pairs = write_inputs(tmp_path / "in")
    output = tmp_path / "pairs"
    argv = ["--input", str(tmp_path / "in" / "*.txt"), "--output", str(output), "--val_fraction", "0.25"]
    counters = toy_kind.main([*argv, "--shard_size_mb", "0.001", *IN_MEMORY])
    assert counters["records_written"] == len(pairs)

    assert SECTIONS["pairs"] is toy_kind.PairsSection  # registered by defining it
    meta = formats.read_meta(str(output), kind="pairs")
    assert set(meta.splits) == {"train", "val"} and len(meta.shards("train")) > 1  # sized by bytes
    stats = json.loads((output / "stats.json").read_text())
    assert stats["lines_in"] == 82 and stats["lines_written"] == 80 and stats["dropped"] == {"no_tab": 2}

    read = {}
    for split in ("train", "val"):
        records = toy_kind._records(meta, str(output), split)
        batch = toy_kind.every_pair(records)
        read[split] = list(zip(batch["left"], batch["right"], strict=True))
    assert sorted(read["train"] + read["val"]) == sorted(pairs)  # every pair once, none invented
    assert read["val"] and len(read["val"]) < len(read["train"])

    # The spec, through the registry, streams the train split and validates on val.
    spec = datasets["toy_pairs"](path=str(output), loading=Loading(workers=0), val_batches=None)
    data = spec.load(batch=4)
    stream = data.train(DataPartition())
    try:
        seen = [next(stream) for _ in range(len(read["train"]) // 4)]
    finally:
        stream.close()
    streamed = [(left, right) for b in seen for left, right in zip(b["left"], b["right"], strict=True)]
    assert len(set(streamed)) == len(streamed) and set(streamed) <= set(read["train"])
    assert data.val is not None
    scored = [
        (left, right) for b in data.val(DataPartition()) for left, right in zip(b["left"], b["right"], strict=True)
    ]
    assert scored and set(scored) <= set(read["val"]) and len(set(scored)) == len(scored)


def test_a_rerun_of_the_toy_job_finds_it_committed_and_writes_nothing(tmp_path: Path, toy_kind: ModuleType) -> None:
    write_inputs(tmp_path / "in")
    argv = ["--input", str(tmp_path / "in" / "*.txt"), "--output", str(tmp_path / "pairs"), *IN_MEMORY]
    assert toy_kind.main(argv)["records_written"] == 80
    before = {p.name: p.read_bytes() for p in (tmp_path / "pairs").iterdir()}
    assert toy_kind.main(argv) == {}
    assert {p.name: p.read_bytes() for p in (tmp_path / "pairs").iterdir()} == before
    assert np.sum([s.records for s in formats.read_meta(str(tmp_path / "pairs")).shards("train")]) == 80


def test_the_toy_kind_is_registered_only_while_a_test_holds_it(toy_kind: ModuleType) -> None:
    assert datasets["toy_pairs"] is toy_kind.ToyPairs and SECTIONS["pairs"] is toy_kind.PairsSection


def test_no_toy_kind_outlives_the_test_that_imported_it() -> None:
    assert "toy_pairs" not in datasets.names() and "pairs" not in SECTIONS
