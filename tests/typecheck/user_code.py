"""What a user's training script writes against dew.data; tests/typecheck/test_mypy.py checks it with
mypy --strict. It is type-checked, never run: the paths name no real corpus."""

from __future__ import annotations

from dew.data import DataPartition, Dataset, Loading, TokenWindows, datasets, load

tokens = datasets.PackedTokens(path="corpora/tokens", seq_len=128, val_batches=1, loading=Loading(workers=0))
images = datasets.ArrayRecordImages(path="corpora/images", image_size=64, split="train")
data: Dataset = tokens.load(batch=8)
steps: int = 3 * data.steps_per_epoch
windows: TokenWindows = TokenWindows(path="x.bin", seq_len=64)  # dew.data.<Kind> is the same class
hub: Dataset = load("hf/user/corpus", batch=8, val_batches=0)

batches = data.train(DataPartition(index=0, count=2))
for batch in batches:
    ids = batch["text"]
    break
if data.val is not None:
    held_out = [batch["text"] for batch in data.val(DataPartition())]
