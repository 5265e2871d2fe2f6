"""Mistakes mypy --strict must catch in a user's script: tests/typecheck/test_mypy.py expects an error on
each line the comment after its code marks wrong, and on no other line."""

from __future__ import annotations

from dew.data import DataPartition, datasets

datasets.PackedTokens(pth="corpora/tokens")  # wrong: no field pth
datasets.PackedTokens(path="corpora/tokens", seq_len="128")  # wrong: seq_len is an int
datasets.ArrayRecordImages(path="corpora/images").load(batch_size=8)  # wrong: load takes batch=
steps: str = datasets.TokenWindows(path="x.bin").load(batch=2).steps_per_epoch  # wrong: an int
datasets.TokenWindows(path="x.bin").load(batch=2).train(DataPartition(index="0"))  # wrong: index is an int
