"""What dew wrote before keeps working: a dew.tokens/1 corpus reads, and positions saved over it resume.

tests/fixtures/tokens-v1 was written by `dew-preprocess tokenize --tokenizer byte --pack --seq_len 64
--val_fraction 0.1 --num_shards 2` at commit d1c6fb4 (the last before the shared envelope), once as .bin
and once as ArrayRecord shards, from 24 of CPython's pydoc topics. positions.json holds, for TokenWindows
and PackedTokens over each (seq_len 64, batch 4, seed 3), the position saved after 3 steps by that code and
the two batches it read next.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from dew.data import DataPartition, Loading, datasets, formats
from dew.data.tokens.opening import open_tokens
from tests.support import read_global

LEGACY = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tokens-v1")
# Where the fixture lay when its positions were saved: they name each corpus by its path then.
SAVED_AT = "/work/main/tests/fixtures/tokens-v1"


def test_a_corpus_committed_as_dew_tokens_1_reads_as_the_same_corpus(tmp_path) -> None:
    directory = shutil.copytree(f"{LEGACY}/array_record", tmp_path / "corpus")
    legacy = json.loads((directory / formats.META).read_text())
    assert legacy["format"] == formats.LEGACY_TOKENS_FORMAT and "tokenizer" in legacy
    read = formats.read_meta(str(directory), kind="tokens")
    assert read.tokens.eos_id == legacy["eos_id"] and read.tokens.dtype == legacy["dtype"]
    assert [s.records for s in read.shards("train")] == [s["documents"] for s in legacy["splits"]["train"]]
    # Written again through today's envelope, it is the same corpus: same fingerprint, same derived files.
    formats.write_meta(str(directory), read)
    rewritten = formats.read_meta(str(directory))
    assert rewritten.format == "dew.tokens/2" and rewritten.fingerprint() == read.fingerprint()
    a, b = open_tokens(f"{LEGACY}/array_record"), open_tokens(str(directory))
    np.testing.assert_array_equal(a[0 : len(a)], b[0 : len(b)])


SPECS = {"windows": datasets.TokenWindows, "packed": datasets.PackedTokens}


def saved(name: str) -> dict:
    with open(os.path.join(LEGACY, "positions.json")) as f:
        return json.load(f)[name]


@pytest.mark.parametrize("fmt", ["bin", "array_record"])
@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("shares", [1, 2])
def test_a_position_saved_by_the_old_code_resumes_exactly(fmt, kind, shares, tmp_path) -> None:
    root = str(shutil.copytree(LEGACY, tmp_path / "tokens-v1"))
    entry = saved(f"{fmt}-{kind}")
    # The corpus now lies elsewhere than where the position was saved: it resumes all the same, and its
    # token counter carries on under its new path.
    assert entry["state"]["reads"]["corpora"][0]["name"] == f"{SAVED_AT}/{fmt}" != f"{root}/{fmt}"
    spec = SPECS[kind](path=f"{root}/{fmt}", seq_len=64, seed=3, loading=Loading(workers=0))
    batches, state = read_global(spec.load(batch=4).train, shares, 2, entry["state"])
    for got, want in zip(batches, entry["text"], strict=True):
        np.testing.assert_array_equal(got["text"], np.asarray(want))
    (before,) = entry["state"]["tokens"].values()
    (name, after) = next(iter(state["tokens"].items()))
    assert name == f"{root}/{fmt}" and after > before


def test_the_saved_positions_read_on_the_current_code_from_the_start(tmp_path) -> None:
    """The fixture's batches are what today's code reads too, from step 3 of an uninterrupted run."""
    root = str(shutil.copytree(LEGACY, tmp_path / "tokens-v1"))
    spec = datasets.PackedTokens(path=f"{root}/bin", seq_len=64, seed=3, loading=Loading(workers=0))
    stream = spec.load(batch=4).train(DataPartition())
    try:
        batches = [next(stream) for _ in range(5)]
    finally:
        stream.close()
    want = saved("bin-packed")["text"]
    for got, expected in zip(batches[3:], want, strict=True):
        np.testing.assert_array_equal(got["text"], np.asarray(expected))
