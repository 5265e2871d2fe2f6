"""Quality filters for `dew-preprocess clean`: one reason code for the first rule a document fails.

The families run in datatrove's FineWeb pipeline order (LanguageFilter, GopherRepetitionFilter,
GopherQualityFilter, C4QualityFilter, FineWebQualityFilter) with datatrove's semantics and defaults, on
English word splitting identical to datatrove's (words.split_words). A document's words are split once and
shared by the rules that count them. Pure Python, memory bounded by one document plus fixed-size memos.

    >>> first_failure("too short", QualityConfig())  # its one 2-gram is all of it: Gopher repetition runs first
    'gopher_rep_top_2_gram'
"""

from __future__ import annotations

from dew.preprocess.cleaning.c4 import c4_lines
from dew.preprocess.cleaning.fineweb import fineweb_failure
from dew.preprocess.cleaning.gopher import quality_failure, repetition_failure
from dew.preprocess.cleaning.quality_config import QualityConfig
from dew.preprocess.cleaning.words import split_words

__all__ = ["QUALITY_REASONS", "QualityConfig", "filter_text", "first_failure"]

_REPETITION = {
    "gopher_rep_empty": "the document is empty",
    "gopher_rep_dup_para_frac": "over dup_para_frac of its paragraphs repeat an earlier paragraph",
    "gopher_rep_dup_para_char_frac": "over dup_para_char_frac of its characters are in repeated paragraphs",
    "gopher_rep_dup_line_frac": "over dup_line_frac of its lines repeat an earlier line",
    "gopher_rep_dup_line_char_frac": "over dup_line_char_frac of its characters are in repeated lines",
    **{
        f"gopher_rep_top_{n}_gram": f"its most frequent word {n}-gram covers over top_{n}_gram_frac of its characters"
        for n in (2, 3, 4)
    },
    **{
        f"gopher_rep_duplicated_{n}_n_grams": f"repeated word {n}-grams cover over dup_{n}_gram_frac of its characters"
        for n in range(5, 11)
    },
}

QUALITY_REASONS: dict[str, str] = {
    "language": "no kept language scores above language_threshold (fastText)",
    **_REPETITION,
    "gopher_short_doc": "fewer than min_doc_words words that are not only punctuation",
    "gopher_long_doc": "more than max_doc_words words that are not only punctuation",
    "gopher_below_avg_threshold": "mean word length below min_avg_word_length",
    "gopher_above_avg_threshold": "mean word length above max_avg_word_length",
    "gopher_too_many_hashes": "more '#' per word than max_symbol_word_ratio",
    "gopher_too_many_ellipsis": "more '...' or '…' per word than max_symbol_word_ratio",
    "gopher_too_many_bullets": "over max_bullet_lines_ratio of its lines start with '•' or '-'",
    "gopher_too_many_end_ellipsis": "over max_ellipsis_lines_ratio of its lines end with '...' or '…'",
    "gopher_below_alpha_threshold": "under max_non_alpha_words_ratio of its words contain a letter",
    "gopher_enough_stop_words": "fewer than min_stop_words distinct stop words",
    "c4_lorem_ipsum": "a kept line contains 'lorem ipsum'",
    "c4_curly_bracket": "a kept line contains '{'",
    "c4_too_few_sentences": "its kept lines hold fewer than c4_min_num_sentences sentences",
    "c4_empty": "C4 dropped every line (c4_min_num_sentences at -1 or 0 let it through)",
    "fineweb_empty": "no line left that is not blank",
    "fineweb_line_punct_ratio": "under line_punct_thr of its lines end in terminal punctuation",
    "fineweb_short_line_ratio": "over short_line_thr of its lines have at most short_line_length characters",
    "fineweb_char_dup_ratio": "over char_duplicates_ratio of its characters are in repeated lines",
    "fineweb_list_ratio": "more than new_line_ratio newlines per word",
}


def filter_text(text: str, config: QualityConfig) -> tuple[str, str | None]:
    """(the text a kept document goes on with, the first failing rule's reason code or None).

    The text is `text` itself unless C4 runs and keeps the document: then it is the lines C4 kept, stripped,
    joined by newlines, as datatrove's C4QualityFilter leaves `doc.text` for the filters after it.
    """
    if config.language_model:
        from dew.preprocess.cleaning.langid import language_failure

        reason = language_failure(text, config)
        if reason:
            return text, reason
    # Split once, and only when a Gopher family reads the words; FineWeb splits them itself otherwise. Only
    # their count outlives the Gopher rules: C4 and FineWeb run without the list of words alive.
    word_count: int | None = None
    if config.gopher_repetition or config.gopher_quality:
        words = split_words(text)
        word_count = len(words)
        if config.gopher_repetition and (reason := repetition_failure(text, words, config)):
            return text, reason
        if config.gopher_quality and (reason := quality_failure(text, words, config)):
            return text, reason
        del words
    if config.c4:
        kept, reason = c4_lines(text, config)
        if reason:
            return text, reason
        if kept != text:
            text, word_count = kept, None
    if config.fineweb and (reason := fineweb_failure(text, config, word_count)):
        return text, reason
    return text, None


def first_failure(text: str, config: QualityConfig) -> str | None:
    """The reason code (a key of QUALITY_REASONS) of the first rule `text` fails, or None when it is kept."""
    return filter_text(text, config)[1]
