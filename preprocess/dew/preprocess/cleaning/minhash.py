"""Normalized text, its exact-duplicate hash, MinHash signatures and their LSH band keys.

Normalization (lowercase, NFKC, punctuation and symbols to spaces, the combining marks on a letter
kept, invisible format characters deleted, runs of whitespace to one space) decides both kinds of
duplicate: two documents are exact duplicates when their normalized texts are equal, and near
duplicates are judged on the word n-grams ("shingles") of the normalized text.

A signature is bands × rows minimum hashes. Each word is hashed once (blake2b, 64 bits), a shingle's
hash combines its words' hashes with fixed odd multipliers (mod 2**64), and each of the bands × rows
hash functions is a multiply-add mod 2**64 keeping the top 32 bits, all in numpy. Two documents whose
shingle sets have Jaccard similarity s agree on one minimum hash with probability s, so they share at
least one band (all `rows` hashes of it) with probability 1 - (1 - s**rows)**bands: with the default
14 bands of 8 rows that is 0.92 at s = 0.75, 0.995 at s = 0.85 and 0.04 at s = 0.5.

Everything is a pure function of the text and the config, so every worker computes the same keys.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import unicodedata

import numpy as np

# A run of punctuation, symbols and "_": it becomes a space, bar the combining marks it starts with on a letter.
_PUNCTUATION = re.compile(r"(?:[^\w\s]|_)+", re.UNICODE)
_SPACE = re.compile(r"\s+", re.UNICODE)
_MASK64 = (1 << 64) - 1
# Shingles hashed at once by each of the bands × rows functions: a block is SHINGLE_BLOCK × 112 uint64
# values (3.5 MiB at the defaults), so a huge document's signature takes memory bounded by the block,
# not by its length (a 64 MiB document has about 10^7 shingles: 9 GiB hashed at once).
SHINGLE_BLOCK = 4096


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinHashConfig:
    """ngram: words a shingle; bands × rows: the signature's hashes; seed: draws the hash functions."""

    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("ngram", "bands", "rows"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"minhash {name} must be a positive int, got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            # numpy draws from non-negative seeds only, and said so on a worker, naming no flag.
            raise ValueError(f"minhash seed must be an int >= 0, got {self.seed!r}")
        if self.bands > 255 or self.bands * self.rows > 4096:
            raise ValueError(f"minhash takes at most 255 bands and 4096 hashes, got {self.bands} × {self.rows}")

    def hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """The (a, b) of each hash function h(x) = (a*x + b) mod 2**64 >> 32, a odd, drawn from the seed."""
        rng = np.random.default_rng(self.seed)
        count = self.bands * self.rows
        a = rng.integers(1, 1 << 63, size=count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        b = rng.integers(0, 1 << 63, size=count, dtype=np.uint64)
        return a, b

    def shingle_multipliers(self) -> np.ndarray:
        """One odd multiplier per word position of a shingle."""
        rng = np.random.default_rng([self.seed, 7])
        return rng.integers(1, 1 << 62, size=self.ngram, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


# A band key's bytes: the band's number, then a digest of its rows' hashes.
BAND_KEY_BYTES = 12


def normalize(text: str) -> str:
    """The text two documents must share to be exact duplicates, and whose words make the shingles."""
    text = unicodedata.normalize("NFKC", text).lower()
    return _SPACE.sub(" ", _PUNCTUATION.sub(_spaced, text)).strip()


def _spaced(run: re.Match[str]) -> str:
    """A punctuation run's replacement: a space, after the combining marks (Unicode category M) it starts
    with when they sit on a letter; and nothing for the invisible format characters in it (category Cf).

    Python's \\w holds no mark, so Devanagari's and Thai's vowel signs are `[^\\w\\s]` to the regex; made
    spaces, they split words, and "लड़का" and "लड़की" (boy, girl) were both "लड क": texts that differ only
    in vowel signs were exact duplicates. A mark on a symbol or a space (an emoji's variation selector) goes
    with it. Format characters render as nothing (a soft hyphen, zero-width spaces and joiners, a byte order
    mark, direction marks): made spaces, they split the words they sit in, and a page hyphenated by soft
    hyphens kept 4% of its original's shingles, neither an exact nor a near duplicate of it."""
    found = run.group()
    if found[0] < "\u00ad":  # Latin-1 punctuation: no mark nor format character comes before U+00AD
        return " "
    start = run.start()
    return _replacement(found, start > 0 and run.string[start - 1].isalnum())  # after \w other than "_"


@functools.lru_cache(maxsize=1 << 12)
def _replacement(found: str, on_letter: bool) -> str:
    """_spaced's answer for a run, by the run and whether it follows a letter (the same runs recur)."""
    found = "".join(c for c in found if unicodedata.category(c) != "Cf")
    if not found:
        return ""
    if not on_letter or unicodedata.category(found[0])[0] != "M":
        return " "
    end = 1
    while end < len(found) and unicodedata.category(found[end])[0] == "M":
        end += 1
    return found if end == len(found) else found[:end] + " "


def exact_key(normalized: str, text: str | None = None) -> bytes:
    """16 bytes naming a normalized text; for one without words (`text` only punctuation, symbols or
    whitespace, which all normalize to ""), naming `text` itself.

    Every wordless text normalizes to the same "", so keying those by it would make "***", "?!" and an
    emoji exact duplicates of one another. They are duplicates only when their texts are equal: the key
    is then of the text, marked by a leading NUL, which no normalized text holds (NUL is no word
    character, so normalization turns it into a space), so it never equals a normalized text's key."""
    if not normalized and text is not None:
        normalized = "\0" + text
    return hashlib.blake2b(normalized.encode("utf-8"), digest_size=16).digest()


def _word_hashes(words: list[str]) -> np.ndarray:
    cache: dict[str, int] = {}
    out = np.empty(len(words), dtype=np.uint64)
    for i, word in enumerate(words):
        value = cache.get(word)
        if value is None:
            value = cache[word] = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        out[i] = value
    return out


class Signer:
    """Signatures of one config; holds its hash functions so a worker draws them once."""

    def __init__(self, config: MinHashConfig) -> None:
        self.config = config
        self.a, self.b = config.hashes()
        self.multipliers = config.shingle_multipliers()

    def shingles(self, normalized: str) -> np.ndarray:
        """The distinct shingle hashes of a normalized text; a text shorter than ngram is one shingle."""
        words = normalized.split(" ") if normalized else []
        if not words:
            return np.zeros(0, dtype=np.uint64)
        hashed = _word_hashes(words)
        n = min(self.config.ngram, len(words))
        count = len(words) - n + 1
        with np.errstate(over="ignore"):
            combined = np.zeros(count, dtype=np.uint64)
            for k in range(n):
                combined += hashed[k : k + count] * self.multipliers[k]
        return np.unique(combined)

    def signature(self, normalized: str) -> np.ndarray | None:
        """bands × rows minimum hashes (uint32), or None for a text without words."""
        shingles = self.shingles(normalized)
        if not shingles.size:
            return None
        lowest = np.full(self.a.shape, np.iinfo(np.uint64).max, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for start in range(0, shingles.size, SHINGLE_BLOCK):
                block = shingles[start : start + SHINGLE_BLOCK, None]
                np.minimum(
                    lowest, ((block * self.a[None, :] + self.b[None, :]) >> np.uint64(32)).min(axis=0), out=lowest
                )
        return lowest.astype(np.uint32)

    def band_keys(self, signature: np.ndarray) -> list[bytes]:
        """One key a band: the band's number and its rows' hashes, digested to BAND_KEY_BYTES."""
        rows = self.config.rows
        digest = hashlib.blake2b
        return [
            bytes([band])
            + digest(signature[band * rows : (band + 1) * rows].tobytes(), digest_size=BAND_KEY_BYTES - 1).digest()
            for band in range(self.config.bands)
        ]


def jaccard(a: str, b: str, ngram: int) -> float:
    """The Jaccard similarity of two texts' shingle sets (as word tuples), for tests and reports."""

    def shingles(text: str) -> set[tuple[str, ...]]:
        words = normalize(text).split(" ")
        n = min(ngram, len(words))
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y) if x | y else 1.0
