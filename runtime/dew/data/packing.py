"""Packing documents into fixed windows: the plan shared by the runtime and the offline pack job.

A plan is a pure function of (document lengths, window, bins), so the Beam job that writes it ahead of
time and a runtime that computes it on the spot agree to the piece. It knows nothing about tokens:
any records with a length (token documents, rendered conversations) pack the same way.

The rule, in file order:
- a document longer than the window is cut into pieces of `window` items, its remainder last;
- a piece that fills a whole window is a window of its own, emitted at once;
- any other piece goes into the first open window with room for it, the open windows taken fullest
  first (so the piece lands where it leaves the least room: best fit), ties in the order they opened;
  a window it fills exactly is emitted then;
- when no open window has room, a new one opens; if `bins` are open already, the fullest is emitted
  first to make space (it is the one least likely to take another piece);
- at the end the windows still open are emitted in the order they were opened.
Windows are numbered in the order they are emitted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from dew.data import formats

DOCUMENTS = "documents"
_PLAN_ARRAYS = ("offsets", "documents", "starts", "lengths", "shape")


# Names the packing rule in derived-file names, so a plan written under an earlier rule is never read.
RULE = "bf1"


def packing_name(window: int, bins: int) -> str:
    """The derived-file name of a plan: formats.derived_path(directory, split, packing_name(w, b))."""
    return f"packing-{RULE}-{window}-{bins}"


@dataclasses.dataclass(frozen=True, eq=False)
class PackingPlan:
    """Which document pieces fill each window, in CSR layout.

    Window w holds pieces offsets[w]:offsets[w + 1]; piece p is items starts[p]:starts[p] + lengths[p]
    of document documents[p]. Pieces sit in a window in the order they were placed.
    """

    window: int
    bins: int
    offsets: np.ndarray
    documents: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        if self.window < 1 or self.bins < 1:
            raise ValueError(f"a packing plan needs window >= 1 and bins >= 1, got {self.window} and {self.bins}")
        pieces = len(self.documents)
        if len(self.starts) != pieces or len(self.lengths) != pieces:
            raise ValueError("a packing plan's documents, starts and lengths must be one length")
        if len(self.offsets) < 1 or self.offsets[0] != 0 or self.offsets[-1] != pieces:
            raise ValueError(f"a packing plan's offsets must run from 0 to its {pieces} pieces")
        # Nothing here reads the whole plan: a loaded plan is read in place, and a start must cost the same
        # whatever the corpus holds. That every window holds a piece is checked where a plan is saved.

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackingPlan):
            return NotImplemented
        return (self.window, self.bins) == (other.window, other.bins) and all(
            np.array_equal(getattr(self, name), getattr(other, name))
            for name in ("offsets", "documents", "starts", "lengths")
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def tokens(self) -> int:
        """Items the windows hold, padding excluded."""
        return int(self.lengths.sum())

    @property
    def padding(self) -> float:
        """The fraction of window slots left empty."""
        slots = len(self) * self.window
        return 0.0 if slots == 0 else 1.0 - self.tokens / slots

    def save(self, path: str, fingerprint: str) -> None:
        """Writes the plan, stamped with the fingerprint of the corpus it packs (atomic rename).

        Refuses an empty window: readers map the file and trust it without scanning it.
        """
        if np.any(np.diff(self.offsets) < 1):
            raise ValueError("every window of a packing plan holds at least one piece")
        formats.save_derived(
            path,
            fingerprint,
            {
                "offsets": self.offsets,
                "documents": self.documents,
                "starts": self.starts,
                "lengths": self.lengths,
                "shape": np.array([self.window, self.bins], dtype=np.int64),
            },
        )

    @classmethod
    def load(cls, path: str, fingerprint: str) -> PackingPlan | None:
        """The plan at path when it was derived from the corpus with this fingerprint, else None."""
        arrays = formats.load_derived(path, fingerprint, _PLAN_ARRAYS)
        if arrays is None:
            return None
        window, bins = (int(v) for v in arrays.pop("shape"))
        try:
            return cls(window=window, bins=bins, **arrays)
        except ValueError as error:
            raise ValueError(f"{path}: {error}; delete it and the runtime will plan afresh") from None


def plan_packing(lengths: np.ndarray, window: int, bins: int) -> PackingPlan:
    """Packs documents of `lengths` items, in order, into `window`-item windows, keeping `bins` open.

    Deterministic and pure; see the module docstring for the rule. Zero-length documents place nothing.
    """
    if not isinstance(window, int | np.integer) or window < 1:
        raise ValueError(f"window must be a positive int, got {window!r}")
    if not isinstance(bins, int | np.integer) or bins < 1:
        raise ValueError(f"packing bins must be a positive int, got {bins!r}")
    window, bins = int(window), int(bins)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be one-dimensional, got shape {lengths.shape}")
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError(f"document {int(np.argmin(lengths))} has negative length {int(lengths.min())}")
    fulls, rests = np.divmod(lengths, window)

    # The only sequential part: the best fit over at most `bins` open windows. Whole-window pieces
    # never touch the open windows, so they only advance the emission counter.
    full_rank, rest_window, rank = _place(fulls.tolist(), rests.tolist(), window, bins)

    counts = fulls + (rests > 0)
    total = int(counts.sum())
    documents = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
    first_piece = np.cumsum(counts) - counts
    chunk = np.arange(total, dtype=np.int64) - np.repeat(first_piece, counts)
    starts = chunk * window
    is_rest = chunk == fulls[documents]
    piece_lengths = np.where(is_rest, rests[documents], window)
    windows = np.where(is_rest, 0, np.asarray(full_rank, dtype=np.int64)[documents] + chunk)
    windows[is_rest] = np.asarray(rank, dtype=np.int64)[np.asarray(rest_window, dtype=np.int64)[documents[is_rest]]]

    # Pieces are generated in placement order, so a stable sort by window keeps each window's order.
    order = np.argsort(windows, kind="stable")
    emitted = int(windows.max()) + 1 if total else 0
    offsets = np.zeros(emitted + 1, dtype=np.int64)
    np.cumsum(np.bincount(windows, minlength=emitted), out=offsets[1:])
    return PackingPlan(
        window=window,
        bins=bins,
        offsets=offsets,
        documents=documents[order],
        starts=starts[order],
        lengths=piece_lengths[order],
    )


def _place(fulls: list[int], rests: list[int], window: int, bins: int) -> tuple[list[int], list[int], list[int]]:
    """(emission rank of each document's first whole piece, open-window id of each remainder, rank of each id)."""
    full_rank: list[int] = []
    rest_window: list[int] = []
    rank: list[int] = []
    free: list[int] = []  # room left in each open window, in opening order
    ids: list[int] = []  # the open windows' ids, same order
    emitted = 0
    for full, rest in zip(fulls, rests, strict=True):
        full_rank.append(emitted)
        emitted += full
        if not rest:
            rest_window.append(-1)
            continue
        best = -1
        for j, room in enumerate(free):
            if rest <= room and (best < 0 or room < free[best]):
                best = j
        if best >= 0:
            rest_window.append(ids[best])
            if free[best] == rest:
                rank[ids[best]] = emitted
                emitted += 1
                del free[best], ids[best]
            else:
                free[best] -= rest
        else:
            if len(free) == bins:
                fullest = free.index(min(free))
                rank[ids[fullest]] = emitted
                emitted += 1
                del free[fullest], ids[fullest]
            rest_window.append(len(rank))
            ids.append(len(rank))
            free.append(window - rest)
            rank.append(-1)
    for opened in ids:
        rank[opened] = emitted
        emitted += 1
    return full_rank, rest_window, rank


def document_ends(
    length: int, read: Callable[[int, int], np.ndarray], eos_id: int | None, *, chunk: int = 1 << 24
) -> np.ndarray:
    """Exclusive end offsets of each document of a `length`-item stream, int64.

    `read(start, stop)` gives a span of the stream. A document runs through its eos; a tail after the
    last eos is a document too, and a stream without eos_id (or without any eos) is one document.
    The stream is read in `chunk`-item spans, so memory stays bounded whatever the corpus size.
    """
    if length < 0:
        raise ValueError(f"a stream cannot hold {length} items")
    if eos_id is None:
        return np.array([length] if length else [], dtype=np.int64)
    found = []
    for start in range(0, length, chunk):
        span = np.asarray(read(start, min(start + chunk, length)))
        found.append(np.flatnonzero(span == eos_id).astype(np.int64) + (start + 1))
    ends = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    if length and (ends.size == 0 or ends[-1] != length):
        ends = np.append(ends, np.int64(length))
    return ends


def save_document_ends(path: str, fingerprint: str, ends: np.ndarray) -> None:
    """Writes a split's document index (formats.derived_path(directory, split, DOCUMENTS)).

    Refuses ends that do not rise strictly from 1: readers map the file and trust it without scanning it.
    """
    ends = np.asarray(ends, dtype=np.int64)
    if ends.size and (ends[0] < 1 or np.any(np.diff(ends) < 1)):
        raise ValueError("document ends must rise strictly from 1")
    formats.save_derived(path, fingerprint, {"ends": ends})


def load_document_ends(path: str, fingerprint: str) -> np.ndarray | None:
    """The document index at path when derived from the corpus with this fingerprint, else None."""
    arrays = formats.load_derived(path, fingerprint, ("ends",))
    if arrays is None:
        return None
    ends = arrays["ends"]
    # O(1) checks only: the writer checked that the ends rise, and the file's CRC that it is what was written.
    if ends.ndim != 1 or ends.dtype != np.int64 or (ends.size and ends[0] < 1):
        raise ValueError(f"{path}: not a document index of int64 ends from 1; delete it and the runtime will recompute")
    return ends


def lengths_of(ends: np.ndarray) -> np.ndarray:
    """Document lengths from exclusive end offsets."""
    return np.diff(np.asarray(ends, dtype=np.int64), prepend=np.int64(0))
