"""Gopher's repetition and quality rules (Rae et al. 2021, table A1), as datatrove's GopherRepetitionFilter and
GopherQualityFilter apply them: same order, same ratios, same word split (words.split_words).

Counting is rearranged for speed where the result is provably the same: duplicates as (all - distinct), the
most frequent n-gram over word tuples (their " "-joined strings are distinct exactly when the tuples are,
since words hold no space), per-word facts remembered per distinct word. From LARGE_WORDS words up the
n-gram rules count on integer arrays instead (ngrams.py), with the same results, in memory a small multiple
of the word count.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache, partial
from itertools import accumulate
from operator import itemgetter

from dew.preprocess.cleaning.quality_config import QualityConfig
from dew.preprocess.cleaning.words import MEMO_LIMIT, tables

_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile("\n+")
_SECOND = itemgetter(1)
# From this many words the n-gram rules count on numpy arrays (ngrams.py): tens of bytes a word, where the
# Python objects below take hundreds. Under it they stay in Python, faster on short documents.
LARGE_WORDS = 10_000


def duplicates(items: list[str]) -> tuple[int, int]:
    """(how many items repeat an earlier one, their characters): datatrove's find_duplicates."""
    distinct = set(items)
    return len(items) - len(distinct), sum(map(len, items)) - sum(map(len, distinct))


def _top_gram_chars(words: list[str], n: int) -> int:
    counts = Counter(zip(*(words[i:] for i in range(n)), strict=False))
    gram, count = max(counts.items(), key=_SECOND)  # the first most frequent, as Counter.most_common(1)
    return (sum(map(len, gram)) + n - 1) * count


def _repeated_gram_chars(joined: str, offsets: list[int], n: int, size: int, fraction: float) -> int:
    # datatrove's find_all_duplicate: scan "".join of n words; a repeat counts its characters and skips n words.
    # The n words from i are joined[offsets[i]:offsets[i + n]] (offsets: where each word starts in joined).
    # What it returns fails `fraction` of `size` exactly when the count does (the caller makes that comparison):
    # the count itself, or a bound under the rule, or the count so far once that fails (it only grows).
    grams = [joined[a:b] for a, b in zip(offsets, offsets[n:], strict=False)]
    # Only a gram's later occurrences can count, so their characters bound the count: most documents stay
    # under the rule even so, and need no scan.
    bound = sum((count - 1) * len(gram) for gram, count in Counter(grams).items() if count > 1)
    if bound / size <= fraction:
        return bound
    unique: set[str] = set()
    repeated, index, end = 0, 0, len(grams)
    while index < end:
        gram = grams[index]
        if gram in unique:
            repeated += len(gram)
            if repeated / size > fraction:
                return repeated
            index += n
        else:
            unique.add(gram)
            index += 1
    return repeated


def repetition_failure(text: str, words: list[str], config: QualityConfig) -> str | None:
    """The first Gopher repetition rule `text` fails, or None."""
    if not text:
        return "gopher_rep_empty"
    size = len(text)
    paragraphs = _PARAGRAPHS.split(text.strip())
    repeats, chars = duplicates(paragraphs)
    if config.dup_para_frac and repeats / len(paragraphs) > config.dup_para_frac:
        return "gopher_rep_dup_para_frac"
    if config.dup_para_char_frac and chars / size > config.dup_para_char_frac:
        return "gopher_rep_dup_para_char_frac"
    del paragraphs  # each list a few bytes per byte of text: not alive beside the next, nor the n-gram arrays
    lines = _LINES.split(text)
    repeats, chars = duplicates(lines)
    if config.dup_line_frac and repeats / len(lines) > config.dup_line_frac:
        return "gopher_rep_dup_line_frac"
    if config.dup_line_char_frac and chars / size > config.dup_line_char_frac:
        return "gopher_rep_dup_line_char_frac"
    del lines
    if len(words) >= LARGE_WORDS:
        from dew.preprocess.cleaning.ngrams import WordGrams  # numpy: imported for large documents only

        grams = WordGrams(words)
        top, repeated = grams.top_gram_chars, grams.repeated_gram_chars
    else:
        top, repeated = partial(_top_gram_chars, words), None
    for n, fraction in config.top_n_grams:
        if len(words) >= n and top(n) / size > fraction:
            return f"gopher_rep_top_{n}_gram"
    joined, offsets = "".join(words), None
    for n, fraction in config.dup_n_grams:
        counted = repeated(joined, n, size, fraction) if repeated else None
        if counted is None:  # a small document, or a hash collision in the arrays: the exact Python count
            offsets = offsets or [0, *accumulate(map(len, words))]
            counted = _repeated_gram_chars(joined, offsets, n, size, fraction)
        if counted / size > fraction:
            return f"gopher_rep_duplicated_{n}_n_grams"
    return None


@cache
def _punctuation() -> frozenset[str]:
    return frozenset(tables()["punctuation"])


_WORD_FACTS: dict[str, tuple[bool, bool]] = {}


def _facts(word: str) -> tuple[bool, bool]:
    """(has a character outside datatrove's punctuation, has a letter), remembered per word."""
    facts = _WORD_FACTS.get(word)
    if facts is None:
        if len(_WORD_FACTS) >= MEMO_LIMIT:
            _WORD_FACTS.clear()
        facts = _WORD_FACTS[word] = (not _punctuation().issuperset(word), any(c.isalpha() for c in word))
    return facts


def quality_failure(text: str, words: list[str], config: QualityConfig) -> str | None:
    """The first Gopher quality rule `text` fails, or None."""
    # Counted over the distinct words (a word's facts are its own): no list of facts or lengths a word long.
    counts = Counter(words)
    n_words = len(words)
    kept = kept_chars = alpha = 0
    for word, number in counts.items():
        non_symbol, has_alpha = _facts(word)
        if non_symbol:
            kept += number
            kept_chars += number * len(word)
        if has_alpha:
            alpha += number
    stop_words = len(config.stop_word_set.intersection(counts)) if config.min_stop_words else 0
    del counts
    if config.min_doc_words and kept < config.min_doc_words:
        return "gopher_short_doc"
    if config.max_doc_words and kept > config.max_doc_words:
        return "gopher_long_doc"
    mean = kept_chars / kept if kept else math.nan  # numpy's mean of nothing: never out of range
    if config.min_avg_word_length and mean < config.min_avg_word_length:
        return "gopher_below_avg_threshold"
    if config.max_avg_word_length and mean > config.max_avg_word_length:
        return "gopher_above_avg_threshold"
    if n_words:  # datatrove divides by zero here (only reachable with min_doc_words disabled)
        if config.max_symbol_word_ratio and text.count("#") / n_words > config.max_symbol_word_ratio:
            return "gopher_too_many_hashes"
        ellipses = text.count("...") + text.count("…")
        if config.max_symbol_word_ratio and ellipses / n_words > config.max_symbol_word_ratio:
            return "gopher_too_many_ellipsis"
        lines = text.splitlines()
        if config.max_bullet_lines_ratio:
            bullets = sum(line.lstrip().startswith(("•", "-")) for line in lines)
            if bullets / len(lines) > config.max_bullet_lines_ratio:
                return "gopher_too_many_bullets"
        if config.max_ellipsis_lines_ratio:
            ending = sum(line.rstrip().endswith(("...", "…")) for line in lines)
            if ending / len(lines) > config.max_ellipsis_lines_ratio:
                return "gopher_too_many_end_ellipsis"
        if config.max_non_alpha_words_ratio and alpha / n_words < config.max_non_alpha_words_ratio:
            return "gopher_below_alpha_threshold"
    if config.min_stop_words and stop_words < config.min_stop_words:
        return "gopher_enough_stop_words"
    return None
