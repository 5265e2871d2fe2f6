"""Fixed windows of seq_len + 1 ids off a token stream, and the TokenWindows dataset."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from dew.data import validate
from dew.data.dataset import Dataset
from dew.data.mixture import Corpus, MixtureOrder
from dew.data.records import BatchRecords, describe_source
from dew.data.registry import datasets
from dew.data.spec import VAL_BATCHES, IndexedSpec, Tokenize
from dew.data.tokens.opening import corpus_meta, open_tokens
from dew.data.tokens.sources import TokenSource, spans


class TokenWindowSource(BatchRecords):
    """Record i is {"text": tokens[(first + i) * seq_len : … + seq_len + 1]} as int32.

    Consecutive windows share one id, so a model trained on them sees every transition once.
    first and count select a run of windows (a held-out tail, say).

    Args:
        tokens: The id stream.
        seq_len: Ids a model sees per window; each record holds one more, its last target.
        first: The first window of the run.
        count: How many windows; by default every whole one from `first` on.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.array([5, 6, 0, 7, 8, 9, 0], dtype=np.uint16).tofile(path)  # two documents, eos 0
        >>> from dew.data import TokenBytes, TokenWindowSource
        >>> windows = TokenWindowSource(TokenBytes(path), seq_len=2)
        >>> len(windows), windows[1]["text"].tolist()
        (3, [0, 7, 8])
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

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        # One reduction instead of min and max: a negative index, seen unsigned, is past any count.
        if indices.size and int(indices.view(np.uint64).max()) >= self.count:
            raise IndexError(f"windows {indices.tolist()} reach outside this {self.count}-window source")
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
class TokenWindows(IndexedSpec):
    """Fixed windows of seq_len + 1 ids, each starting seq_len ids after the last.

    A batch is {"text": int32 [batch, seq_len + 1]}. path is a committed corpus directory or one
    .bin/.array_record/.parquet file; field names the ArrayRecord field or parquet column holding the
    ids. Validation reads the corpus's val split when it has one; otherwise val_batches whole batches
    of windows are held out of the stream's tail (None then holds nothing out, since there is no split
    to score whole). The training position is one global window count.

    Args:
        path: A committed corpus directory, or one .bin, .array_record or .parquet file.
        seq_len: Ids a window predicts; a window holds seq_len + 1.
        val_batches: Whole batches held out of the tail when the corpus has no val split.
        field: The ArrayRecord field or parquet column holding the ids.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from dew.data import DataPartition, Loading, datasets
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.arange(1000, dtype=np.uint16).tofile(path)  # a nanoGPT-style file of token ids
        >>> data = datasets.TokenWindows(path=path, seq_len=8, loading=Loading(workers=0)).load(batch=4)
        >>> with data.train(DataPartition()) as stream:
        ...     batch = next(stream)
        >>> batch["text"].shape, data.steps_per_epoch
        ((4, 9), 27)
    """

    reads_in_process: ClassVar[bool] = True

    path: str | None = None
    seq_len: int = 256
    val_batches: int | None = VAL_BATCHES
    field: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("seq_len",))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        if self.path is None:
            raise ValueError("TokenWindows.path is unset: name a tokenized corpus directory or file")
        train = TokenWindowSource(open_tokens(self.path, field=self.field), self.seq_len)
        held = self.held_out_split(corpus_meta(self.path), path=self.path)
        val = None
        if held is not None:
            val = TokenWindowSource(open_tokens(self.path, split=held, field=self.field), self.seq_len)
        else:
            cut = self.held_out_tail(len(train), batch, path=self.path, what=f"windows of {self.seq_len + 1} ids")
            if cut is not None:
                val = TokenWindowSource(train.tokens, self.seq_len, first=cut)
                train = TokenWindowSource(train.tokens, self.seq_len, count=cut)
        if len(train) == 0:
            raise ValueError(f"{self.path}: the corpus holds fewer than {self.seq_len + 1} ids, not one window")
        order = MixtureOrder([Corpus(self.path, train, 1.0)], self.seed)
        return self.global_dataset(batch, train=train, val=val, order=order)
