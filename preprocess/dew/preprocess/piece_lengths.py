"""Piece lengths: what a reader needs to find an offset in a record-shaped shard (ArrayRecord, parquet).

The shard writer knows every record's length as it writes, so it parks each committed shard's lengths in
the run's temporary directory (park_lengths), and the commit joins them into `<split>.pieces.npz`
(write_piece_indexes), checked against meta.json's counts. A .bin shard needs none: its offsets are
byte arithmetic.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from dew.data import formats
from dew.data.formats import Meta
from dew.data.pieces import PIECES, PieceIndex
from dew.preprocess import files
from dew.preprocess.shard_files import ShardFormat


def park_lengths(output: str, name: str, fmt: ShardFormat, lengths: np.ndarray) -> None:
    """Parks a committed shard's piece lengths for write_piece_indexes (a .bin shard needs none).

    Called after the shard's commit, and on the skip path too, so a crash between the two heals on rerun.
    """
    if fmt.ext != "bin":
        files.write_atomic(_lengths_path(output, name), lengths.astype("<i8").tobytes(), output)


def _lengths_path(output: str, name: str) -> str:
    return files.join(output, files.TEMP_DIR, f"{name}.lengths")


def write_piece_indexes(output: str, meta: Meta) -> list[str]:
    """Joins the lengths WriteShards parked into each ArrayRecord or parquet split's `<split>.pieces.npz`,
    whatever kind of record the directory holds.

    Checked against meta.json's per-shard record and unit counts before anything is written; returns
    the splits indexed. A split of .bin shards needs no index (its offsets are byte arithmetic).
    """
    fingerprint = meta.fingerprint()
    indexed = []
    for split, shards in meta.splits.items():
        ext = formats.shard_extension(shards[0].name) if shards else "bin"
        if ext == "bin":
            continue
        lengths = []
        for shard in shards:
            where = _lengths_path(output, shard.name)
            if not files.exists(where):
                raise RuntimeError(f"{where} is missing: WriteShards did not record the pieces of {shard.name}")
            found = np.frombuffer(files.read_bytes(where), dtype="<i8").astype(np.int64)
            if len(found) != shard.records or int(found.sum()) != shard.units:
                raise RuntimeError(
                    f"{where} records {len(found)} pieces of {int(found.sum())} units, but {shard.name} was "
                    f"written with {shard.records} records of {shard.units} units"
                )
            lengths.append(found)
        index = PieceIndex.of_lengths(lengths, field=ShardFormat(ext=ext, section=meta.section).piece_field)
        final = formats.derived_path(output, split, PIECES)
        with tempfile.TemporaryDirectory(prefix="dew-pieces-") as local:
            path = os.path.join(local, os.path.basename(final))
            index.save(path, fingerprint)
            files.upload(path, final, output, replace=True)
        # Named one by one: a rerun rewrites them on its skip path, so they need not outlive the index.
        files.delete([_lengths_path(output, shard.name) for shard in shards])
        indexed.append(split)
    return indexed
