"""ToyPairs: a committed `dew.pairs/1` directory read back, its val split the validation pass."""

from __future__ import annotations

import dataclasses
from typing import Any

from dew.data import formats
from dew.data.committed_records import CommittedRecords, committed_split
from dew.data.dataset import Dataset
from dew.data.formats import Meta
from dew.data.pairs.records import unpack_pairs
from dew.data.registry import datasets
from dew.data.sections import PairsSection
from dew.data.spec import IndexedSpec, Tokenize


class PairRecords(CommittedRecords):
    WHAT = "pairs"

    def decode(self, raw: list[bytes], where: list[str], verified: list[bool]) -> dict[str, Any]:
        return unpack_pairs(raw, where)


def pair_records(meta: Meta, path: str, split: str) -> PairRecords:
    shards, files = committed_split(meta, path, split, reader="ToyPairs", writer=PairsSection.WRITER)
    description = {"pairs": "committed", "corpus": meta.fingerprint(), "split": split}
    return PairRecords(files, [s.records for s in shards], description, directory=path, shards=shards)


@datasets("toy_pairs")
@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyPairs(IndexedSpec):
    """Pairs of strings from a committed `dew.pairs/1` directory; its val split is the validation pass."""

    path: str
    split: str = "train"
    val_batches: int | None = 0

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        meta = formats.read_meta(self.path, kind=PairsSection.KIND)  # once a load
        held = self.held_out_split(meta, path=self.path, other_than=self.split)
        val = pair_records(meta, self.path, held) if held is not None else None
        return self.global_dataset(batch, train=pair_records(meta, self.path, self.split), val=val)
