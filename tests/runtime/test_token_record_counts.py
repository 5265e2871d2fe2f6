"""Token readers check meta.json's record count of every shard against the shard's own (its footer, or
the piece index derived from it) when they open a corpus, naming the shard, with or without an index."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.data.tokens.corpus import open_tokens
from tests.runtime.test_committed import rewrite_records
from tests.runtime.test_tokens_pieces import DOCS, SHARDS, index_path, indexed_corpus

pytest.importorskip("array_record")
pytest.importorskip("pyarrow")


@pytest.mark.parametrize("kind", ["array_record", "parquet"])
@pytest.mark.parametrize("delta", [-1, 1])
@pytest.mark.parametrize("indexed", [True, False])
def test_a_record_count_unlike_the_shards_own_is_refused_naming_the_shard(tmp_path, kind, delta, indexed) -> None:
    directory = indexed_corpus(str(tmp_path), kind)
    if not indexed:
        os.remove(index_path(directory))  # the reader scans the shards for their counts
    name = rewrite_records(Path(directory), "train", 1, delta)
    held = len(SHARDS[1])
    said = (
        rf"{os.path.join(directory, name)} holds {held} records by its own footer, but meta.json records {held + delta}"
        if not indexed
        else rf"disagrees with meta.json on the records or units of split 'train'\'s shard {name}"
    )
    with pytest.raises(formats.DamagedError, match=said):
        open_tokens(directory, field="ids" if kind == "parquet" else None)


@pytest.mark.parametrize("kind", ["array_record", "parquet"])
def test_counts_that_agree_read_every_document_as_written(tmp_path, kind) -> None:
    directory = indexed_corpus(str(tmp_path), kind)
    source = open_tokens(directory, field="ids" if kind == "parquet" else None)
    np.testing.assert_array_equal(source[0 : len(source)], np.concatenate(DOCS))
