"""Fixed windows of seq_len + 1 ids off a token stream, and the TokenWindows dataset."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dew.data import validate
from dew.data.dataset import Dataset, global_dataset
from dew.data.mixture import Corpus, MixtureOrder
from dew.data.records import describe_source
from dew.data.registry import datasets
from dew.data.spec import DatasetSpec, Tokenize
from dew.data.tokens.corpus import open_tokens, validation_split
from dew.data.tokens.sources import TokenSource, spans


class TokenWindowSource:
    """Record i is {"text": tokens[(first + i) * seq_len : … + seq_len + 1]} as int32.

    Consecutive windows share one id, so a model trained on them sees every transition once.
    first and count select a run of windows (a held-out tail, say).
    """

    def __init__(self, tokens: TokenSource, seq_len: int, *, first: int = 0, count: int | None = None) -> None:
        validate.positive_int("TokenWindowSource.seq_len", seq_len)
        self.tokens, self.seq_len, self.first = tokens, seq_len, first
        whole = max(0, (len(tokens) - 1) // seq_len)
        self.count = whole - first if count is None else count
        if first < 0 or self.count < 0 or first + self.count > whole:
            raise ValueError(f"windows {first}..{first + self.count} are outside the corpus's {whole} windows")

    @property
    def tokens_per_record(self) -> int:
        """Ids every window reads."""
        return self.seq_len + 1

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"text": self.read_batch(np.array([index]))["text"][0]}

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.count):
            raise IndexError(f"window {int(indices.max())} is outside this {self.count}-window source")
        starts = (indices + self.first) * self.seq_len
        return {"text": spans(self.tokens, starts, self.seq_len + 1).astype(np.int32)}

    def describe(self) -> dict[str, Any]:
        return {
            "windows": self.seq_len + 1,
            "first": self.first,
            "count": self.count,
            "tokens": describe_source(self.tokens),
        }


@datasets("token_windows")
@dataclasses.dataclass(frozen=True)
class TokenWindows(DatasetSpec):
    """Fixed windows of seq_len + 1 ids, each starting seq_len ids after the last.

    A batch is {"text": int32 [batch, seq_len + 1]}. path is a committed corpus directory or one
    .bin/.array_record/.parquet file; field names the ArrayRecord field or parquet column holding the
    ids. Validation reads the corpus's val split when it has one; otherwise val_batches whole batches
    of windows are held out of the stream's tail (None then holds nothing out, since there is no split
    to score whole). The training position is one global window count.
    """

    path: str | None = None
    seq_len: int = 256
    val_batches: int | None = 4
    field: str | None = None

    def __post_init__(self) -> None:
        validate.fields(self, positive=("seq_len",), optional=("val_batches",))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        if self.path is None:
            raise ValueError("TokenWindows.path is unset: name a tokenized corpus directory or file")
        train = TokenWindowSource(open_tokens(self.path, field=self.field), self.seq_len)
        held = validation_split(self.path)
        val = None
        if held is not None:
            val = TokenWindowSource(open_tokens(self.path, split=held, field=self.field), self.seq_len)
        elif self.val_batches:
            tail = self.val_batches * batch
            if len(train) <= tail:
                raise ValueError(
                    f"{self.path}: {len(train)} windows of {self.seq_len + 1} ids cannot spare {tail} for "
                    "validation; lower val_batches or the batch"
                )
            val = TokenWindowSource(train.tokens, self.seq_len, first=len(train) - tail)
            train = TokenWindowSource(train.tokens, self.seq_len, count=len(train) - tail)
        if len(train) == 0:
            raise ValueError(f"{self.path}: the corpus holds fewer than {self.seq_len + 1} ids, not one window")
        order = MixtureOrder([Corpus(self.path, train, 1.0)], self.seed)
        return global_dataset(
            train=train,
            val=val,
            batch=batch,
            seed=self.seed,
            loading=self.loading,
            val_batches=self.val_batches,
            order=order,
        )
