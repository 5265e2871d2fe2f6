"""Weighted mixtures of record sources, as one global order computed by index arithmetic.

Which corpus global record k comes from is a function of k alone: the weights become exact integer
proportions, one period of sum(weights) records is laid out once by Balinski and Young's quota method
(see _layout), and record k is period k // P, slot k % P. So a mixture's position is one global record
count, restoring record 10**9 is arithmetic, and every prefix of the order holds each corpus's share
to strictly within one record. Nothing here is token-specific: any indexable source mixes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import validate
from dew.data.order import BaseOrder, ShuffledEpochs
from dew.data.position import describe, differences
from dew.data.records import Records, describe_source, read_batch

if TYPE_CHECKING:
    import grain

_PRECISION, _MAX_PERIOD = 100, 1 << 20  # weights are integers to a hundredth of the smallest, as grain's mix


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """One corpus of a weighted mixture: its name, the records it reads, and its share of a step.

    weight is a share of each step, not a record count, so a small corpus comes round again while a
    large one is still on its first pass. offset is how many records of its endless training order
    earlier phases of the run already read; it starts past them (0 for a run of one order).

    Args:
        name: What the corpus is called in the mixture's description and in a saved position.
        source: Its records, by index.
        weight: Its share of each step.
        offset: Records of its training order that earlier phases read.

    Examples:
        >>> from dew.data import Corpus
        >>> Corpus("wiki", list(range(10)), weight=0.5).offset
        0
    """

    name: str
    source: Records
    weight: float
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a corpus needs a non-empty name, got {self.name!r}")
        validate.weight(f"corpus {self.name!r}", self.weight)
        validate.non_negative_int(f"corpus {self.name!r}: offset", self.offset)
        if len(self.source) < 1:
            raise ValueError(f"corpus {self.name!r} holds no records: {describe(describe_source(self.source))}")


def integer_weights(weights: Sequence[float]) -> tuple[int, ...]:
    """The weights as the smallest integers in the same proportions, to a hundredth of the smallest."""
    smallest = min(weights)
    ratios = [w / smallest for w in weights]  # inf for a weight past 1e308 times the smallest
    if not all(r <= _MAX_PERIOD for r in ratios):  # a period would hold more than _MAX_PERIOD records
        raise ValueError(f"mixture weights {tuple(weights)} are more than {_MAX_PERIOD} apart; use closer ones")
    scaled = [max(1, round(_PRECISION * r)) for r in ratios]
    common = math.gcd(*scaled)
    return tuple(s // common for s in scaled)


def _layout(weights: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One period: (corpus of each slot, its rank within that corpus, counts before each slot [P + 1, C])."""
    period = sum(weights)
    if period > _MAX_PERIOD:
        raise ValueError(
            f"mixture weights {weights} need a period of {period} records (at most {_MAX_PERIOD}); "
            "use weights closer together or rounder"
        )
    corpus = np.empty(period, dtype=np.int64)
    counts = np.zeros((period + 1, len(weights)), dtype=np.int64)
    taken = [0] * len(weights)
    for slot in range(period):
        # The quota method: among corpora that one more record would not put past the ceiling of their
        # share of slot + 1 records, the one with the largest weight / (taken + 1), lower index on ties.
        # Unlike "the corpus furthest behind", it keeps every prefix strictly within one record of every
        # share (it can be off by exactly one, e.g. weights 1, 1, 1, 6, 6 after ten records).
        chosen = -1
        for c, w in enumerate(weights):
            if taken[c] + 1 > -(-(slot + 1) * w // period):
                continue
            if chosen < 0 or w * (taken[chosen] + 1) > weights[chosen] * (taken[c] + 1):
                chosen = c
        corpus[slot] = chosen
        taken[chosen] += 1
        counts[slot + 1] = taken
    rank = counts[np.arange(period), corpus]
    return corpus, rank, counts


def _corpus_key(seed: int, source: Records) -> int:
    # Keyed by what the corpus holds, not by its place in the list or its address, so a corpus keeps
    # its shuffle when phases reorder or add corpora, and reads alike from a local copy or from gs://.
    content = describe(describe_source(source))
    return int.from_bytes(hashlib.sha256(f"{seed}:{content}".encode()).digest()[:8], "little")


class MixtureOrder(BaseOrder):
    """Corpora interleaved at their weights, as one global order over records.

    With a seed every corpus repeats endlessly, each epoch in its own shuffle, and the order never
    ends. Without one, each corpus is read once in its own order and the order ends before any corpus
    would come round again; it is then also a Records source of that length (a validation pass).
    """

    def __init__(self, corpora: Sequence[Corpus], seed: int | None) -> None:
        if not corpora:
            raise ValueError("a mixture needs at least one corpus")
        names = [c.name for c in corpora]
        if len(set(names)) != len(names):
            raise ValueError(f"corpus names must be distinct, got {names}")
        self.corpora, self.seed = tuple(corpora), seed
        self.weights = integer_weights([c.weight for c in corpora])
        self.period = sum(self.weights)
        self._corpus, self._rank, self._counts = _layout(self.weights)
        self._orders = (
            [ShuffledEpochs(c.source, _corpus_key(seed, c.source), offset=c.offset) for c in corpora]
            if seed is not None
            else None
        )
        self._length = None if seed is not None else self._pass_length()
        self._description: dict[str, Any] | None = None

    def counts(self, records: int) -> np.ndarray:
        """How many of the first `records` global records each corpus supplied."""
        cycles, slot = divmod(records, self.period)
        return cycles * np.array(self.weights, dtype=np.int64) + self._counts[slot]

    def _first_reaching(self, targets: Sequence[int]) -> int:
        """The fewest records in which every corpus c supplies at least targets[c]."""
        weights, wanted = np.array(self.weights, dtype=np.int64), np.asarray(targets, dtype=np.int64)
        # Fewer whole periods than this leave some corpus short even after one more partial period.
        cycles = max(0, int(np.max(-(-wanted // weights) - 1)))
        reached = np.all(cycles * weights + self._counts >= wanted, axis=1)
        return cycles * self.period + int(np.argmax(reached))

    def _pass_length(self) -> int:
        """Records before any corpus would read past its end."""
        weights = np.array(self.weights, dtype=np.int64)
        sizes = np.array([len(c.source) - c.offset for c in self.corpora], dtype=np.int64)
        if np.any(sizes < 1):
            late = self.corpora[int(np.argmin(sizes))].name
            raise ValueError(f"corpus {late!r}: its offset is past its end, so a one-pass mixture reads nothing")
        cycles = int(np.min(sizes // weights))
        fits = np.all(cycles * weights + self._counts <= sizes, axis=1)
        return cycles * self.period + int(np.argmin(fits)) - 1

    def locate(self, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(corpus, index into that corpus's source) of each global record in ks."""
        ks = np.asarray(ks, dtype=np.int64)
        if len(self.corpora) == 1:  # the common case: global record k is the corpus's own record k
            return np.zeros_like(ks), self._index(0, ks)
        cycles, slot = np.divmod(ks, self.period)
        corpus = self._corpus[slot]
        local = cycles * np.array(self.weights, dtype=np.int64)[corpus] + self._rank[slot]
        index = np.empty_like(local)
        for c in np.unique(corpus).tolist():
            hit = corpus == c
            index[hit] = self._index(c, local[hit])
        return corpus, index

    def _index(self, c: int, local: np.ndarray) -> np.ndarray:
        """Where corpus c's records `local` (of its own endless or one-pass order) lie in its source."""
        if self._orders is not None:
            return self._orders[c].indices(local)
        return local + self.corpora[c].offset

    def read(self, ks: np.ndarray) -> Any:
        ks = np.asarray(ks, dtype=np.int64)
        if self._length is not None and ks.size and int(ks.max()) >= self._length:
            raise IndexError(f"record {int(ks.max())} is past the end of a {self._length}-record mixture pass")
        if len(self.corpora) == 1:
            return read_batch(self.corpora[0].source, self._index(0, ks))
        corpus, index = self.locate(ks)
        present = np.unique(corpus).tolist()
        if len(present) == 1:
            return read_batch(self.corpora[present[0]].source, index)
        parts = [(corpus == c, read_batch(self.corpora[c].source, index[corpus == c])) for c in present]
        return _scatter(parts, len(ks))

    # One-pass mixtures are Records too, so a validation pass reads them like any source.
    def __len__(self) -> int:
        if self._length is None:
            return sys.maxsize
        return self._length

    def __getitem__(self, k: int) -> Any:
        corpus, index = self.locate(np.array([k]))
        return self.corpora[int(corpus[0])].source[int(index[0])]

    def read_batch(self, ks: np.ndarray) -> Any:
        return self.read(ks)

    def describe(self) -> dict[str, Any]:
        # The corpora never change under an order, and every get_state and set_state asks: describe once.
        if self._description is None:
            self._description = {
                "order": "mixture",
                "seed": self.seed,
                "corpora": [
                    {"name": c.name, "weight": w, "offset": c.offset, "source": describe_source(c.source)}
                    for c, w in zip(self.corpora, self.weights, strict=True)
                ],
            }
        return copy.deepcopy(self._description)

    def check_resume(self, saved: Mapping[str, Any], records: int) -> None:
        if saved.get("order") == "mixture":
            differences = mixture_changes(saved, self.describe())
            if differences:
                raise ValueError(
                    "the saved data position reads another mixture than this stream: "
                    + "; ".join(differences)
                    + ". Resume with the mixture the checkpoint was written with, or add a DataPhase"
                )
            return  # seed and every corpus's content, weight, offset and place agree; only paths may differ
        if saved.get("order") == "phased":  # a phased run going on in its current phase alone
            from dew.data import phases  # which builds on this module

            ours = [{"until": None, "reads": self.describe()}]
            phases.check_phases_resume(phases.saved_phases(saved) or [], ours, records)
            return
        super().check_resume(saved, records)

    def renamed_corpora(self, saved: Mapping[str, Any]) -> dict[str, str]:
        from dew.data import phases

        return phases.renamed_in_phases(phases.saved_phases(saved) or [], [{"until": None, "reads": self.describe()}])

    def record_tokens(self, ks: np.ndarray) -> dict[str, int]:
        """Real tokens each corpus supplied to global records `ks` (corpora whose source counts them)."""
        ks = np.asarray(ks, dtype=np.int64)
        corpus = self._corpus[ks % self.period]
        out = {}
        for c, entry in enumerate(self.corpora):
            fixed = getattr(entry.source, "tokens_per_record", None)
            if fixed is not None:  # every record the same size: no need to find which records they are
                out[entry.name] = int(np.count_nonzero(corpus == c)) * fixed
            elif hasattr(entry.source, "tokens_in"):
                _, index = self.locate(ks[corpus == c])
                out[entry.name] = int(entry.source.tokens_in(index).sum())
        return out


_CONTENT = ("weight", "offset", "source")


def _same(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    return all(describe(before[field]) == describe(after[field]) for field in _CONTENT)


def match_corpora(saved: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, str]:
    """Each saved corpus's name in our mixture: the corpus of the same name, else the one that reads the
    same content at the same weight and offset (the same corpus moved to another path, bucket or mount).
    A corpus's name is where it lies; what a position must match is what it reads."""
    before, after = list(saved.get("corpora", [])), list(ours.get("corpora", []))
    names = {c["name"] for c in after}
    out = {c["name"]: c["name"] for c in before if c["name"] in names}
    free = [c for c in after if c["name"] not in out.values()]
    for corpus in before:
        if corpus["name"] in out:
            continue
        moved = next((c for c in free if _same(corpus, c)), None)
        if moved is not None:
            out[corpus["name"]] = moved["name"]
            free.remove(moved)
    return out


def mixture_changes(saved: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """What differs between two mixture descriptions, corpus by corpus. Corpora pair up by name, or by
    content when one moved (match_corpora), so a moved corpus is no change and a changed one is named."""
    out = []
    if saved.get("seed") != ours.get("seed"):
        out.append(f"seed {saved.get('seed')} became {ours.get('seed')}")
    before = {c["name"]: c for c in saved.get("corpora", [])}
    after = {c["name"]: c for c in ours.get("corpora", [])}
    pairs = match_corpora(saved, ours)
    out += [f"corpus {n!r} was dropped" for n in before if n not in pairs]
    out += [f"corpus {n!r} was added" for n in after if n not in pairs.values()]
    for old, new in pairs.items():
        for field in _CONTENT:
            if describe(before[old][field]) != describe(after[new][field]):
                changed = differences(before[old][field], after[new][field], path=field)
                out += [f"corpus {old!r} {change}" for change in changed]
    order = [pairs.get(c["name"]) for c in saved.get("corpora", [])]
    if not out and order != [c["name"] for c in ours.get("corpora", [])]:
        out.append("the corpora are listed in another order")
    return sorted(out)


def _scatter(parts: list[tuple[np.ndarray, Any]], size: int) -> Any:
    """One batch from per-corpus batches, each row put back where its mask says."""
    first = parts[0][1]
    if isinstance(first, Mapping):
        return {key: _scatter([(mask, part[key]) for mask, part in parts], size) for key in first}
    if isinstance(first, list):
        out: list[Any] = [None] * size
        for mask, part in parts:
            for position, row in zip(np.flatnonzero(mask).tolist(), part, strict=True):
                out[position] = row
        return out
    arrays = [(mask, np.asarray(part)) for mask, part in parts]
    shapes = {a.shape[1:] for _, a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"the corpora of a mixture give records of different shapes {sorted(shapes)}")
    out_array = np.empty((size, *arrays[0][1].shape[1:]), dtype=np.result_type(*(a.dtype for _, a in arrays)))
    for mask, array in arrays:
        out_array[mask] = array
    return out_array


def mixed_records(corpora: Sequence[Corpus]) -> int:
    """Records of a mixture's pass: the fewest in which every corpus has been read at least once.

    Args:
        corpora: The mixture's corpora.

    Returns:
        The record count.

    Examples:
        >>> from dew.data import Corpus, mixed_records
        >>> mixed_records([Corpus("a", list(range(10)), 0.5), Corpus("b", list(range(100)), 0.5)])
        200
    """
    order = MixtureOrder([dataclasses.replace(c, offset=0) for c in corpora], seed=0)
    return order._first_reaching([len(c.source) for c in corpora])


def mixture(corpora: Sequence[Corpus], seed: int | None) -> grain.MapDataset:
    """The corpora read together at their weights, as a grain MapDataset over one global order.

    With a seed it is endless (each corpus reshuffled per epoch and repeated before mixing); without
    one it is one pass that stops before any corpus would come round again. `.order` is the
    MixtureOrder behind it, which a Dataset's global stream reads a whole batch at a time.

    Args:
        corpora: The corpora and their weights.
        seed: The shuffle seed of an endless training order, or None for one unshuffled pass.

    Returns:
        The mixed records.

    Examples:
        >>> from dew.data import Corpus, mixture
        >>> mixed = mixture([Corpus("a", [0] * 10, 0.5), Corpus("b", [1] * 100, 0.5)], seed=None)
        >>> len(mixed), sorted({mixed[i] for i in range(len(mixed))})  # b stops once a would come round
        (20, [0, 1])
    """
    return __getattr__("MixtureDataset")(MixtureOrder(corpora, seed))


def _mixture_dataset_class() -> type:
    import grain

    class MixtureDataset(grain.MapDataset):
        """A MixtureOrder as a grain MapDataset, record by record."""

        def __init__(self, order: MixtureOrder) -> None:
            super().__init__()
            self.order = order

        def __len__(self) -> int:
            return len(self.order)

        def __getitem__(self, index: Any) -> Any:
            if isinstance(index, slice):
                return self.slice(index)
            return self.order[index]

        def __str__(self) -> str:
            return f"MixtureDataset({', '.join(c.name for c in self.order.corpora)})"

    MixtureDataset.__module__, MixtureDataset.__qualname__ = __name__, "MixtureDataset"
    return MixtureDataset


def __getattr__(name: str) -> Any:
    # grain (and jax under it) load only when a mixture dataset is first built or unpickled; the
    # class then lives in this module under its own name, so pickles of it resolve.
    if name == "MixtureDataset":
        return globals().setdefault(name, _mixture_dataset_class())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
