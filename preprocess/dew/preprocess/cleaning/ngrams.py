"""Gopher's word n-gram counts for a large document, on integer arrays instead of Python n-gram objects.

gopher._top_gram_chars and gopher._repeated_gram_chars build one tuple or string per position, a few hundred
bytes a word: an 8 MB document held 300 MiB. This module gives their exact results (the tests compare both
on random and real text) in tens of bytes a word, transiently: gopher.py uses it from LARGE_WORDS words up,
and imports it (and numpy) only then.

An n-gram is named by the position where it first occurs, so ids order as first occurrences do, as a
Counter's insertion order does:
- word tuples (the top n-gram rules) get those ids exactly: a word's id comes from a dict of the distinct
  words, an n-gram's from the pair (id of its first n-1 words, id of its last word) encoded as one integer
  below len(words) ** 2 and ranked by np.unique. No hashing, no collision.
- the duplicated n-gram rules compare the n words joined without a separator ("ab" + "c" is "a" + "bc"), so
  those n-grams are named by Python's hash of the joined string. Equal strings always hash alike; a collision
  only merges classes, so it can raise the upper bound the rule checks first, never lower it. A bound under
  the threshold is therefore final; in the exact scan after it, every position visited is checked against
  its class's first string, and any collision hands the document back to the exact Python count (None).
"""

from __future__ import annotations

from itertools import count
from typing import Any

import numpy as np

BLOCK = 1 << 14  # positions hashed at a time: bounds the Python objects alive at once (about 2 MB)
_hash = hash  # a name of its own, so a test can force collisions


def _first_positions(codes: Any) -> Any:
    """For each element of `codes` (int64, consumed: sorted in place), the position of the first element equal
    to it, as int32. np.unique(return_index=True, return_inverse=True) gives the same in over twice the memory
    (a sorted copy, int64 inverse and index arrays): here one int64 order and int32 arrays besides the codes."""
    size = len(codes)
    if not size:
        return np.zeros(0, dtype=np.int32)
    order = codes.argsort()
    codes.sort()  # the same sorted values as codes[order], without a second array
    new = np.empty(size, dtype=bool)
    new[0] = True
    np.not_equal(codes[1:], codes[:-1], out=new[1:])
    del codes  # the caller's reference is its last: the codes are freed here
    order = order.astype(np.int32)
    starts = np.flatnonzero(new)
    firsts = np.minimum.reduceat(order, starts)  # the order within a run of equal codes is arbitrary
    del starts
    group = np.cumsum(new, dtype=np.int32)
    del new
    group -= 1
    values = firsts[group]
    del group, firsts
    out = np.empty(size, dtype=np.int32)
    out[order] = values
    return out


class WordGrams:
    """The n-gram counts of one document's words; tuple ids are extended from the last n asked for."""

    _ids: Any  # int32 first positions of the last n's tuples (None while the next n's are sorted)

    def __init__(self, words: list[str]) -> None:
        self.size = len(words)
        if self.size >= 1 << 31:  # positions fit int32, and ids multiply to under 2 ** 62
            raise ValueError(f"a document of {self.size} words is beyond the n-gram arrays' range")
        first: dict[str, int] = {}
        self.word_ids = np.fromiter(map(first.setdefault, words, count()), dtype=np.int32, count=self.size)
        del first
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=self.size)
        total = int(lengths.sum())
        self.offsets = np.zeros(self.size + 1, dtype=np.int32 if total < 1 << 31 else np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        del lengths
        self._n, self._ids = 1, self.word_ids

    def tuple_ids(self, n: int) -> Any:
        """For each start of n words, the first position of the same n words (as tuples)."""
        if n < self._n:
            self._n, self._ids = 1, self.word_ids
        while self._n < n:
            self._n += 1
            grams = self.size - self._n + 1
            # The codes go straight into the call, which holds their only reference and frees them early.
            self._ids = _first_positions(self._codes(grams))
        return self._ids

    def _codes(self, grams: int) -> Any:
        """(id of the first n - 1 words) * size + id of the nth word, for each start of n words: the n-gram."""
        codes = self._ids[:grams].astype(np.int64)
        codes *= self.size
        codes += self.word_ids[self._n - 1 :]
        self._ids = None  # the last n's ids are not needed past here: freed before the sort
        return codes

    def top_gram_chars(self, n: int) -> int:
        """gopher._top_gram_chars: characters of the first most frequent n-gram (words and n - 1 spaces) x count."""
        counts = np.bincount(self.tuple_ids(n))
        first = int(np.argmax(counts))  # the earliest first occurrence among the most frequent
        chars = int(self.offsets[first + n] - self.offsets[first])
        return (chars + n - 1) * int(counts[first])

    def repeated_gram_chars(self, joined: str, n: int, size: int, fraction: float) -> int | None:
        """gopher._repeated_gram_chars over the joined words, or None when two distinct n-grams' hashes collide."""
        grams = self.size + 1 - n
        if grams <= 0:
            return 0
        ids = _first_positions(self._hashes(joined, n, grams))
        repeats = ids != np.arange(grams, dtype=np.int32)
        bound = int(self.offsets[n:][repeats].sum() - self.offsets[:grams][repeats].sum())
        del repeats
        if bound / size <= fraction:
            return bound  # at least the exact bound: the exact count passes too
        # The scan reads only the positions it visits: each one that is not its class's first is checked
        # against that first's string, so among them a shared id means an equal string (a collision: None).
        seen = bytearray(grams)
        id_at, offset_at = memoryview(ids), self.offsets.data
        repeated, index = 0, 0
        while index < grams:
            gram = id_at[index]
            if gram != index:
                start, first = offset_at[index], offset_at[gram]
                chars = offset_at[index + n] - start
                if joined[start : start + chars] != joined[first : first + chars]:
                    return None
            if seen[gram]:
                repeated += offset_at[index + n] - offset_at[index]
                if repeated / size > fraction:
                    return repeated
                index += n
            else:
                seen[gram] = 1
                index += 1
        return repeated

    def _hashes(self, joined: str, n: int, grams: int) -> Any:
        hashes = np.empty(grams, dtype=np.int64)
        for start in range(0, grams, BLOCK):
            stop = min(start + BLOCK, grams)
            offsets = self.offsets[start : stop + n].tolist()
            texts = map(joined.__getitem__, map(slice, offsets, offsets[n:]))
            hashes[start:stop] = np.fromiter(map(_hash, texts), dtype=np.int64, count=stop - start)
        return hashes
