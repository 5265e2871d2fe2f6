"""FineWeb's own rules (Penedo et al. 2024) as datatrove's FineWebQualityFilter applies them."""

from __future__ import annotations

from functools import cache

from dew.preprocess.cleaning.gopher import duplicates
from dew.preprocess.cleaning.quality_config import QualityConfig
from dew.preprocess.cleaning.words import split_words, tables


@cache
def _stop_chars() -> tuple[str, ...]:
    return tuple(tables()["terminal_punctuation"])


def fineweb_failure(text: str, config: QualityConfig, word_count: int | None = None) -> str | None:
    """The first FineWeb rule `text` fails, or None; `word_count` is len(split_words(text)) when the caller has it."""
    lines = [line for line in text.split("\n") if line.strip() != ""]
    if not lines:
        return "fineweb_empty"
    ratio = sum(1 for line in lines if line.endswith(_stop_chars())) / len(lines)
    if ratio < config.line_punct_thr and not (ratio == 0 and config.line_punct_exclude_zero):
        return "fineweb_line_punct_ratio"
    ratio = sum(1 for line in lines if len(line) <= config.short_line_length) / len(lines)
    if ratio > config.short_line_thr:
        return "fineweb_short_line_ratio"
    if duplicates(lines)[1] / (len(text) - text.count("\n")) > config.char_duplicates_ratio:
        return "fineweb_char_dup_ratio"
    del lines
    if word_count is None:
        word_count = len(split_words(text))
    if text.count("\n") / word_count > config.new_line_ratio:
        return "fineweb_list_ratio"
    return None
