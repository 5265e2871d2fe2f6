"""Global record orders: which source record global record k is, as pure index arithmetic.

An order never buffers: record k of the stream is a function of k (and the seed), so a position is a
record count and a resume at record 10**9 costs what a fresh start costs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from dew.data.position import describe, differences
from dew.data.records import describe_source, read_batch

_MASK64 = (1 << 64) - 1
_ROUNDS = 4


def _mix64(value: int) -> int:
    """splitmix64's finaliser: spreads a key into well-mixed 64 bits."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def _round_keys(*key: int) -> list[int]:
    state = 0
    for part in key:
        state = _mix64(state ^ (part & _MASK64))
    keys = []
    for _ in range(_ROUNDS):
        state = _mix64(state)
        keys.append(state)
    return keys


def permute(positions: np.ndarray, size: int, *key: int) -> np.ndarray:
    """A keyed bijection of [0, size): where each of `positions` lands in one shuffle of `size` items.

    A balanced Feistel network over the smallest even power of two covering `size`, walked again for
    values that land outside it (cycle walking), so it is a permutation of exactly [0, size). It is
    vectorised over `positions` and needs no O(size) table, which keeps startup independent of corpus
    size.
    """
    if size < 1:
        raise ValueError(f"cannot shuffle {size} records")
    positions = np.asarray(positions, dtype=np.uint64)
    if size == 1:
        return np.zeros_like(positions, dtype=np.int64)
    half_bits = max(1, ((size - 1).bit_length() + 1) // 2)
    mask = np.uint64((1 << half_bits) - 1)
    shift = np.uint64(half_bits)
    keys = [np.uint64(k) for k in _round_keys(*key)]
    out = positions.copy()
    todo = np.ones(out.shape, dtype=bool)
    with np.errstate(over="ignore"):
        while todo.any():
            x = out[todo]
            left, right = x >> shift, x & mask
            for k in keys:
                f = (right ^ k) * np.uint64(0x9E3779B97F4A7C15)
                f = (f ^ (f >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
                left, right = right, left ^ ((f >> np.uint64(32)) & mask)
            out[todo] = (left << shift) | right
            todo = out >= np.uint64(size)
    return out.astype(np.int64)


class Order(Protocol):
    """A global order over records: `read(ks)` gives the batch of global records `ks`."""

    def read(self, ks: np.ndarray) -> Any: ...

    def describe(self) -> dict[str, Any]: ...

    def check_resume(self, saved: Mapping[str, Any], records: int) -> None: ...

    def renamed_corpora(self, saved: Mapping[str, Any]) -> dict[str, str]: ...

    def record_tokens(self, ks: np.ndarray) -> dict[str, int]: ...


class BaseOrder:
    """Shared behaviour: a resume must read the same thing, and no token counters by default."""

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def check_resume(self, saved: Mapping[str, Any], records: int) -> None:
        ours = self.describe()
        if _canonical(saved) != _canonical(ours):
            changed = "; ".join(differences(_canonical(saved), _canonical(ours)))
            raise ValueError(
                f"the saved data position reads something else than this stream ({changed}); resume with the "
                "data the checkpoint was written with, or start the data afresh"
            )

    def renamed_corpora(self, saved: Mapping[str, Any]) -> dict[str, str]:
        """The saved description's corpus names → this order's, where a corpus now lies elsewhere."""
        return {}

    def record_tokens(self, ks: np.ndarray) -> dict[str, int]:
        """Real tokens (padding excluded) that global records `ks` hold, per corpus; {} where uncounted."""
        return {}


class DecodedOrder:
    """An order whose batches are `inner`'s records turned into something else (pixels, clips).

    Everything but the read is the inner order's: the position a stream saves names which records a run
    has read, and how they are decoded (an image size, a clip shape) is not part of that, so a run may
    change it and keep its place. A subclass implements `read`.
    """

    inner: Order

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def check_resume(self, saved: Mapping[str, Any], records: int) -> None:
        self.inner.check_resume(saved, records)

    def renamed_corpora(self, saved: Mapping[str, Any]) -> dict[str, str]:
        return self.inner.renamed_corpora(saved)

    def record_tokens(self, ks: np.ndarray) -> dict[str, int]:
        return self.inner.record_tokens(ks)


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


# Positions a shuffled order computes at once (see ShuffledEpochs._ahead): permute costs ~0.4 ms for
# 1k positions and ~1 ms for 8k, so runs this long cost a 32-row step about 4 µs of permuting.
_RUN_POSITIONS = 1 << 13


@dataclasses.dataclass(frozen=True)
class _Run:
    """permute(first + stride * arange(len(values)), size, seed, epoch): positions computed ahead."""

    epoch: int
    first: int
    stride: int
    values: np.ndarray


class ShuffledEpochs(BaseOrder):
    """The source repeated forever, each pass in its own seeded shuffle.

    Global record k is pass k // n at position k % n, shuffled by a permutation keyed by (seed, pass).
    """

    def __init__(self, source: Any, seed: int, *, offset: int = 0) -> None:
        self.source = source
        self.size = len(source)
        if self.size < 1:
            raise ValueError(f"cannot train on an empty source: {describe(describe_source(source))}")
        self.seed = seed
        self.offset = offset
        self._run: _Run | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_run": None}  # derived from the seed; recomputed where it is needed

    def indices(self, ks: np.ndarray) -> np.ndarray:
        ks = np.asarray(ks, dtype=np.int64)
        ahead = self._ahead(ks)
        if ahead is not None:
            return ahead
        epochs, within = np.divmod(ks + self.offset, self.size)
        out = np.empty_like(ks)
        for epoch in np.unique(epochs).tolist():
            hit = epochs == epoch
            out[hit] = permute(within[hit], self.size, self.seed, epoch)
        return out

    def _ahead(self, ks: np.ndarray) -> np.ndarray | None:
        """The shuffled positions of `ks` from a run computed ahead, when `ks` is an evenly spaced run of
        records within one epoch (what a stream asks for, step after step); else None.

        A permute call costs a few hundred µs before its per-position work (a few dozen numpy calls
        per Feistel pass, repeated while any position still walks its cycle), so the next
        _RUN_POSITIONS positions at this spacing are computed in one call and later steps slice them.
        """
        n = len(ks)
        if n < 2:
            return None
        first, stride = int(ks[0]), int(ks[1] - ks[0])
        epoch, at = divmod(first + self.offset, self.size)
        if stride < 1 or at + stride * (n - 1) >= self.size:
            return None
        if not (ks == np.arange(first, first + stride * n, stride)).all():
            return None
        run = self._run  # one read: another thread may replace it meanwhile
        if run is not None and run.epoch == epoch and run.stride == stride:
            offset, rest = divmod(at - run.first, stride)
            if rest == 0 and 0 <= offset <= len(run.values) - n:
                return run.values[offset : offset + n].copy()
        count = min(max(n, _RUN_POSITIONS), (self.size - 1 - at) // stride + 1)
        values = permute(np.arange(at, at + stride * count, stride), self.size, self.seed, epoch)
        self._run = _Run(epoch, at, stride, values)
        return values[:n].copy()

    def read(self, ks: np.ndarray) -> Any:
        return read_batch(self.source, self.indices(ks))

    def describe(self) -> dict[str, Any]:
        return {
            "order": "shuffled-epochs",
            "seed": self.seed,
            "offset": self.offset,
            "source": describe_source(self.source),
        }


class OnePass(BaseOrder):
    """The source once, in its own order: what a validation pass reads."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.size = len(source)

    def read(self, ks: np.ndarray) -> Any:
        ks = np.asarray(ks, dtype=np.int64)
        if ks.size and int(ks.max()) >= self.size:
            raise IndexError(f"record {int(ks.max())} is past the end of a {self.size}-record pass")
        return read_batch(self.source, ks)

    def describe(self) -> dict[str, Any]:
        return {"order": "one-pass", "source": describe_source(self.source)}


def record_rng(seed: int, index: int) -> np.random.Generator:
    """The random draws of global record `index`: Philox keyed by (seed, index) through SeedSequence.

    Keyed by the record's place in the stream rather than by its place in the corpus, so each epoch
    crops a record afresh, and keyed by nothing else, so a resume draws what the first run drew.
    """
    mask = (1 << 64) - 1
    return np.random.Generator(np.random.Philox(np.random.SeedSequence((seed & mask, index & mask))))
