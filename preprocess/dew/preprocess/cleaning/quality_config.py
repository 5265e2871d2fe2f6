"""QualityConfig: every threshold and switch of the quality filters, with datatrove's defaults.

Field names follow datatrove's constructor arguments (C4's carry a `c4_` prefix, since "max_word_length" or
"min_words_per_line" alone would not say which filter they tune). Where datatrove disables a rule with a
falsy threshold (Gopher's), 0 disables it here too; C4 uses -1 as datatrove does. A Gopher n-gram fraction
of 0 disables that n (datatrove: leave the pair out of top_n_grams / dup_n_grams).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


def _f(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, kw_only=True)
class QualityConfig:
    """Thresholds of the quality filters, applied in datatrove's FineWeb order: language, Gopher repetition,
    Gopher quality, C4, FineWeb. Defaults are the anchors' (datatrove 0.10 constructor defaults)."""

    language_model: str = _f("", "fastText language-id model (.bin), local or gs://; empty disables language id")
    languages: str = _f("", "comma-separated labels to keep (e.g. 'en,fr'); empty keeps any language")
    language_threshold: float = _f(0.65, "drop a document whose kept language(s) score at most this")

    gopher_repetition: bool = _f(True, "run Gopher's repetition rules")
    dup_line_frac: float = _f(0.3, "max fraction of lines that repeat an earlier line (0 disables)")
    dup_para_frac: float = _f(0.3, "max fraction of paragraphs that repeat an earlier one (0 disables)")
    dup_line_char_frac: float = _f(0.2, "max fraction of characters in repeated lines (0 disables)")
    dup_para_char_frac: float = _f(0.2, "max fraction of characters in repeated paragraphs (0 disables)")
    top_2_gram_frac: float = _f(0.2, "max character fraction of the most frequent word 2-gram (0 disables)")
    top_3_gram_frac: float = _f(0.18, "max character fraction of the most frequent word 3-gram (0 disables)")
    top_4_gram_frac: float = _f(0.16, "max character fraction of the most frequent word 4-gram (0 disables)")
    dup_5_gram_frac: float = _f(0.15, "max character fraction in repeated word 5-grams (0 disables)")
    dup_6_gram_frac: float = _f(0.14, "max character fraction in repeated word 6-grams (0 disables)")
    dup_7_gram_frac: float = _f(0.13, "max character fraction in repeated word 7-grams (0 disables)")
    dup_8_gram_frac: float = _f(0.12, "max character fraction in repeated word 8-grams (0 disables)")
    dup_9_gram_frac: float = _f(0.11, "max character fraction in repeated word 9-grams (0 disables)")
    dup_10_gram_frac: float = _f(0.10, "max character fraction in repeated word 10-grams (0 disables)")

    gopher_quality: bool = _f(True, "run Gopher's quality rules")
    min_doc_words: int = _f(50, "min words that are not only punctuation (0 disables)")
    max_doc_words: int = _f(100_000, "max words that are not only punctuation (0 disables)")
    min_avg_word_length: float = _f(3, "min mean length of those words (0 disables)")
    max_avg_word_length: float = _f(10, "max mean length of those words (0 disables)")
    max_symbol_word_ratio: float = _f(0.1, "max '#' per word, and max '...' per word (0 disables)")
    max_bullet_lines_ratio: float = _f(0.9, "max fraction of lines starting with a bullet (0 disables)")
    max_ellipsis_lines_ratio: float = _f(0.3, "max fraction of lines ending with an ellipsis (0 disables)")
    max_non_alpha_words_ratio: float = _f(0.8, "min fraction of words with a letter (datatrove's name; 0 disables)")
    min_stop_words: int = _f(2, "min distinct stop words present (0 disables)")
    stop_words: str = _f("the,be,to,of,and,that,have,with", "comma-separated stop words for min_stop_words")

    c4: bool = _f(True, "run C4's rules (dropping lines as C4 does before counting sentences)")
    c4_remove_citations: bool = _f(True, "strip wikipedia citations like [1] and [edit] from lines")
    c4_filter_no_terminal_punct: bool = _f(True, "drop lines not ending in . ? ! \" ' (or ending in ...)")
    c4_min_num_sentences: int = _f(5, "min sentences in the kept lines (-1 disables)")
    c4_min_words_per_line: int = _f(3, "drop lines with fewer words (-1 disables)")
    c4_max_word_length: int = _f(1000, "drop lines with a longer word (-1 disables)")
    c4_filter_lorem_ipsum: bool = _f(True, "drop documents with a kept line containing 'lorem ipsum'")
    c4_filter_javascript: bool = _f(True, "drop lines mentioning javascript")
    c4_filter_curly_bracket: bool = _f(True, "drop documents with a kept line containing '{'")
    c4_filter_policy: bool = _f(True, "drop lines mentioning cookies, terms of use or privacy policy")

    fineweb: bool = _f(True, "run FineWeb's rules (over the text C4 kept, when C4 runs)")
    line_punct_thr: float = _f(0.12, "min fraction of lines ending in terminal punctuation")
    line_punct_exclude_zero: bool = _f(False, "keep documents where no line ends in terminal punctuation")
    short_line_thr: float = _f(0.67, "max fraction of short lines")
    short_line_length: int = _f(30, "a line of at most this many characters is short")
    char_duplicates_ratio: float = _f(0.01, "max fraction of characters in repeated lines")
    new_line_ratio: float = _f(0.3, "max newlines per word")

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            kinds: dict[str, type | tuple[type, ...]] = {"bool": bool, "int": int, "float": (int, float), "str": str}
            kind = kinds[str(item.type)]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise TypeError(f"QualityConfig.{item.name} must be {item.type}, got {value!r}")
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            if not math.isfinite(value):
                # NaN compares false with everything: a "max" rule would never drop, a "min" one always.
                raise ValueError(f"QualityConfig.{item.name} must be a finite number (0 disables), got {value!r}")
            if value < 0 and not (item.name.startswith("c4_") and value == -1):
                raise ValueError(f"QualityConfig.{item.name} must be >= 0, got {value!r}")
        if self.languages and not self.language_model:
            raise ValueError("QualityConfig.languages needs language_model (a local fastText model path)")

    @cached_property
    def language_labels(self) -> tuple[str, ...]:
        return tuple(label.strip() for label in self.languages.split(",") if label.strip())

    @cached_property
    def stop_word_set(self) -> frozenset[str]:
        return frozenset(word.strip() for word in self.stop_words.split(",") if word.strip())

    @cached_property
    def top_n_grams(self) -> tuple[tuple[int, float], ...]:
        pairs = ((2, self.top_2_gram_frac), (3, self.top_3_gram_frac), (4, self.top_4_gram_frac))
        return tuple(pair for pair in pairs if pair[1])

    @cached_property
    def dup_n_grams(self) -> tuple[tuple[int, float], ...]:
        pairs = tuple((n, getattr(self, f"dup_{n}_gram_frac")) for n in range(5, 11))
        return tuple(pair for pair in pairs if pair[1])

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QualityConfig:
        unknown = set(data) - {item.name for item in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"QualityConfig has no field(s) {sorted(unknown)}")
        return cls(**data)
