"""Gopher's n-gram rules on large documents: the numpy arrays (ngrams.py) against the exact Python count.

gopher._top_gram_chars and gopher._repeated_gram_chars are the oracle: the arrays must give their very numbers,
on random word lists built to collide ("ab" + "c" joins as "a" + "bc") and on real text, and a forced hash
collision must fall back to them. The memory test bounds the traced peak of the rules on a large document.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.preprocess.cleaning import gopher, ngrams
from dew.preprocess.cleaning import words as words_module
from dew.preprocess.cleaning.quality import QualityConfig, filter_text
from dew.preprocess.cleaning.words import split_words
from tests.preprocess.quality_corpus import real_texts

WORDS = st.lists(st.sampled_from(["a", "b", "ab", "ba", "c", "abc", "the", ".", "é"]), min_size=1, max_size=80)


def _exact_repeated(words: list[str], n: int, size: int, fraction: float) -> int:
    joined, offsets = "".join(words), [0, *accumulate(map(len, words))]
    return gopher._repeated_gram_chars(joined, offsets, n, size, fraction)


@settings(max_examples=300, deadline=None)
@given(WORDS, st.integers(1, 4), st.sampled_from([0.02, 0.1, 0.3, 0.7]))
def test_arrays_count_exactly_as_python(words, copies, fraction):
    words = words * copies + words[: len(words) // 2]  # repeats, and repeats cut short
    grams = ngrams.WordGrams(words)
    for n in (2, 3, 4, 2):  # the last one asks again below the ids already extended
        if len(words) >= n:
            assert grams.top_gram_chars(n) == gopher._top_gram_chars(words, n)
    size = len(" ".join(words))
    for n in range(5, 11):
        assert grams.repeated_gram_chars("".join(words), n, size, fraction) == _exact_repeated(words, n, size, fraction)


@settings(max_examples=100, deadline=None)
@given(WORDS, st.integers(1, 4))
def test_a_hash_collision_falls_back_to_the_exact_count(words, copies):
    words = words * copies
    size = len(" ".join(words))
    config = dataclasses.replace(QualityConfig(), dup_para_frac=0, dup_para_char_frac=0, dup_line_frac=0)
    config = dataclasses.replace(config, dup_line_char_frac=0)
    expected = gopher.repetition_failure(" ".join(words), words, config)
    with pytest.MonkeyPatch.context() as patch:  # hypothesis reruns the test: not the function-scoped fixture
        patch.setattr(gopher, "LARGE_WORDS", 1)
        patch.setattr(ngrams, "_hash", len)  # every n-gram collides with the others of its length
        assert gopher.repetition_failure(" ".join(words), words, config) == expected
        for n in range(5, 11):
            got = ngrams.WordGrams(words).repeated_gram_chars("".join(words), n, size, 0.0)
            assert got is None or got == _exact_repeated(words, n, size, 0.0)


@pytest.fixture(scope="module")
def large() -> str:
    """About 400 KB of real text (pydoc topics, stdlib docstrings): over LARGE_WORDS words."""
    texts, total = [], 0
    for text in real_texts():
        texts.append(text)
        total += len(text)
        if total > 400_000:
            break
    return "\n\n".join(texts)


def test_large_real_document_gives_the_python_verdicts(large, monkeypatch):
    words = split_words(large)
    assert len(words) > gopher.LARGE_WORDS
    config = dataclasses.replace(QualityConfig(), dup_para_frac=0, dup_para_char_frac=0)
    for fraction in (0.05, 0.3, 0.9):  # the bound decides, or the scan stops early, or it runs to the end
        loose = dataclasses.replace(config, **{f"dup_{n}_gram_frac": fraction for n in range(5, 11)})
        arrays = gopher.repetition_failure(large, words, loose), filter_text(large, loose)
        with monkeypatch.context() as patch:
            patch.setattr(gopher, "LARGE_WORDS", 1 << 62)
            assert (gopher.repetition_failure(large, words, loose), filter_text(large, loose)) == arrays


def _traced_peak(function) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_repetition_rules_memory_is_tens_of_bytes_a_word(large, monkeypatch):
    words = split_words(large)
    # Every n-gram rule runs (no earlier rule fails, none of them fails): the most they can hold.
    config = dataclasses.replace(
        QualityConfig(), dup_para_frac=0, dup_para_char_frac=0, dup_line_frac=0, dup_line_char_frac=0
    )
    config = dataclasses.replace(config, top_2_gram_frac=1, top_3_gram_frac=1, top_4_gram_frac=1)
    config = dataclasses.replace(config, **{f"dup_{n}_gram_frac": 1.0 for n in range(5, 11)})
    assert gopher.repetition_failure(large, words, config) is None
    ngrams.WordGrams(words)  # numpy's import and first calls outside the trace
    peak = _traced_peak(lambda: gopher.repetition_failure(large, words, config))
    # Measured 110 bytes a word (int64 ids and hashes, np.unique's sort, the lines, the joined words); the
    # Python count of the same rules took 202 (tuples, joined n-gram strings, Counters), and more on larger ones.
    assert peak < 150 * len(words)
    with monkeypatch.context() as patch:
        patch.setattr(gopher, "LARGE_WORDS", 1 << 62)
        assert _traced_peak(lambda: gopher.repetition_failure(large, words, config)) > peak


BYTES_PER_BYTE = 18  # about 1.6 times the 11 measured on this document


def test_whole_chain_memory_is_a_few_bytes_per_byte_of_text(large):
    # Every rule runs to the end (none fails before C4, whose curly brackets end the chain: source text): the
    # word split, the n-gram arrays, the quality counts, C4's lines. Measured about 11 bytes per byte of text
    # here (the chunk memo, bounded, is much of it) and less on larger documents; it was 21 to 25 before the word
    # split's special-case pass and the n-gram arrays were made lean (int32 positions, sorting in place).
    config = dataclasses.replace(
        QualityConfig(), dup_para_frac=0, dup_para_char_frac=0, dup_line_frac=0, dup_line_char_frac=0
    )
    config = dataclasses.replace(config, top_2_gram_frac=1, top_3_gram_frac=1, top_4_gram_frac=1)
    config = dataclasses.replace(config, **{f"dup_{n}_gram_frac": 1.0 for n in range(5, 11)})
    config = dataclasses.replace(config, max_doc_words=0, min_avg_word_length=0, max_avg_word_length=0)
    document = large * 2  # about 800 KB
    filter_text(document, config)  # numpy's import and the tables outside the trace
    words_module._tokenizer().memo.clear()  # the chunk memo filled inside it, as on a new document
    peak = _traced_peak(lambda: filter_text(document, config))
    print(f"{peak / len(document):.1f} bytes per byte of text")
    assert peak < BYTES_PER_BYTE * len(document)
