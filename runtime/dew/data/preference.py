"""PreferencePairs: tokenized chosen and rejected completions of one prompt, as fixed-width pairs."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import validate
from dew.data.records import BatchRecords
from dew.data.registry import datasets
from dew.data.rows import Ragged, check_source, json_rows, read_table, where
from dew.data.spec import VAL_BATCHES, IndexedSpec, Tokenize

if TYPE_CHECKING:
    from dew.data.dataset import Dataset

IDS_KEY = "input_ids"
"""Batch key of the [B, 2, seq_len] pair ids: the chosen sequence at index 0, the rejected at 1."""

MASK_KEY = "completion_mask"
"""Batch key of the [B, 2, seq_len] completion marks: 1 on completion tokens, 0 on prompt and padding."""

COLUMNS = ("prompt", "chosen", "rejected")


class PairSource(BatchRecords):
    """The pairs of one table by index; `read_batch` builds a whole batch with vectorised scatters."""

    def __init__(
        self, prompt: Ragged, chosen: Ragged, rejected: Ragged, *, seq_len: int, pad_id: int, path: str | None
    ):
        self.prompt, self.chosen, self.rejected = prompt, chosen, rejected
        self.seq_len, self.pad_id = seq_len, pad_id
        longest = prompt.lengths + np.maximum(chosen.lengths, rejected.lengths)
        over = np.flatnonzero(longest > seq_len)
        if over.size:
            row = int(over[0])
            raise ValueError(
                f"{where(path, row)} needs {int(longest[row])} tokens (prompt {int(prompt.lengths[row])}, chosen "
                f"{int(chosen.lengths[row])}, rejected {int(rejected.lengths[row])}), more than seq_len={seq_len}; "
                f"{over.size} of {len(prompt)} rows are too long: raise seq_len or filter them out"
            )
        for name, completions in (("chosen", chosen), ("rejected", rejected)):
            empty = np.flatnonzero(completions.lengths == 0)
            if empty.size:
                raise ValueError(
                    f"{where(path, int(empty[0]))}: the {name} completion is empty, so it has nothing to score"
                )

    @classmethod
    def read(cls, path: str | None, json_records: tuple[str, ...], *, seq_len: int, pad_id: int) -> PairSource:
        if path is not None:
            table = read_table(path, COLUMNS)
            columns = [Ragged.from_arrow(table.column(name), name=name, path=path) for name in COLUMNS]
        else:
            rows = json_rows(json_records, COLUMNS)
            columns = [Ragged.from_lists([row[name] for row in rows], name=name) for name in COLUMNS]
        return cls(*columns, seq_len=seq_len, pad_id=pad_id, path=path)

    def __len__(self) -> int:
        return len(self.prompt)

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        rows = len(indices)
        ids = np.full((rows, 2, self.seq_len), self.pad_id, dtype=np.int32)
        mask = np.zeros((rows, 2, self.seq_len), dtype=np.int32)
        prompt_lengths = self.prompt.lengths[indices]
        columns = np.arange(self.seq_len)
        for side, completions in enumerate((self.chosen, self.rejected)):
            self.prompt.scatter(indices, ids[:, side])
            completions.scatter(indices, ids[:, side], prompt_lengths)
            ends = prompt_lengths + completions.lengths[indices]
            mask[:, side] = (columns >= prompt_lengths[:, None]) & (columns < ends[:, None])
        return {IDS_KEY: ids, MASK_KEY: mask}

    def describe(self) -> dict[str, Any]:
        return {
            "type": "preference_pairs",
            "rows": len(self),
            "seq_len": self.seq_len,
            "pad_id": self.pad_id,
            "sha256": [c.digest() for c in (self.prompt, self.chosen, self.rejected)],
        }


@datasets("preference_pairs")
@dataclasses.dataclass(frozen=True)
class PreferencePairs(IndexedSpec):
    """Chosen and rejected completions of one prompt, read as fixed-width pairs for DPO-style objectives.

    Each row holds three columns of token ids: `prompt`, `chosen` and `rejected`. path is a parquet file
    with those columns; records are the same rows as JSON objects, for tests and small sweeps. Exactly
    one of the two is set.

    A batch is {IDS_KEY: int32 [B, 2, seq_len], MASK_KEY: int32 [B, 2, seq_len]}: index 0 is prompt +
    chosen and index 1 prompt + rejected, right-padded with pad_id, and the mask is 1 on the completion's
    tokens only. A row whose prompt and longer completion exceed seq_len is refused at load, by row.

    The training stream is every row reshuffled each epoch; its position is a global pair count, so it
    resumes on any process count the batch divides. val_path is a second parquet file read in its own
    order as one pass of at most val_batches batches (None reads all of it); without it there is no
    validation.

    Args:
        path: A parquet file with prompt, chosen and rejected id columns.
        records: The same rows as JSON objects, instead of path.
        val_path: A parquet file to validate on.
        seq_len: The width of each side of a pair.
        pad_id: The id of empty places.
        val_batches: Batches a validation pass reads at most; None reads all.

    Examples:
        >>> from dew.data import datasets
        >>> row = '{"prompt": [1, 2], "chosen": [3], "rejected": [4, 5]}'
        >>> spec = datasets.PreferencePairs(records=(row,), seq_len=8, val_batches=0)
        >>> len(spec.records)
        1
    """

    path: str | None = None
    records: tuple[str, ...] = ()
    val_path: str | None = None
    seq_len: int = 256
    pad_id: int = 0
    val_batches: int | None = VAL_BATCHES

    def __post_init__(self) -> None:
        check_source(type(self).__name__, self.path, self.records)
        super().__post_init__()
        validate.fields(self, positive=("seq_len",), non_negative=("pad_id",))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:

        self.uncaptioned(tokenize)
        train = PairSource.read(self.path, self.records, seq_len=self.seq_len, pad_id=self.pad_id)
        val = None
        if self.val_path is not None:
            val = PairSource.read(self.val_path, (), seq_len=self.seq_len, pad_id=self.pad_id)
        return self.global_dataset(batch, train=train, val=val)
