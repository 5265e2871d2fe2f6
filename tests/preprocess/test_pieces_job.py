"""The tokenize job's piece index: what it writes equals what the runtime computes, and the runtime uses it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.data.pieces import PIECES, PieceIndex
from dew.data.tokens.opening import open_tokens
from dew.data.tokens.token_column import TokenColumn
from dew.data.tokens.token_records import TokenRecords
from tests.preprocess.test_tokenize_job import split_tokens, tokenize

pytestmark = pytest.mark.beam
SOURCES = {"array_record": TokenRecords, "parquet": TokenColumn}


@pytest.mark.parametrize(
    ("ext", "flags"),
    [
        ("array_record", ("--num_shards", "3")),  # no --pack: no eos, no document index, still a piece index
        ("parquet", ("--pack", "--val_fraction", "0.2", "--seq_len", "32")),
    ],
)
def test_offline_pieces_equal_what_the_runtime_computes(
    text_inputs: Path, tmp_path: Path, monkeypatch, ext: str, flags: tuple[str, ...]
) -> None:
    out = tmp_path / ext
    tokenize(text_inputs, out, "--format", ext, *flags)
    meta = formats.read_meta(str(out))
    assert ("--pack" in flags) == (meta.tokens.eos_id is not None)
    offline = {}
    for split in meta.splits:
        offline[split] = PieceIndex.load(formats.derived_path(str(out), split, PIECES), meta.fingerprint())
        files = [str(out / shard.name) for shard in meta.shards(split)]
        assert offline[split] == SOURCES[ext](files).pieces  # no index given: the source scans its shards
        assert offline[split].counts.tolist() == [s.records for s in meta.shards(split)]

    def refuse(*_, **__):
        raise AssertionError("the runtime scanned shards the job indexed")

    monkeypatch.setattr(SOURCES[ext], "scan", refuse)
    for split in meta.splits:
        source = open_tokens(str(out), split=split)
        assert source.pieces == offline[split]
        np.testing.assert_array_equal(source[0 : len(source)], split_tokens(out, split))


def test_bin_corpora_need_no_piece_index(text_inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    tokenize(text_inputs, out, "--num_shards", "2")
    assert not [name for name in os.listdir(out) if name.endswith(f".{PIECES}.npz")]
