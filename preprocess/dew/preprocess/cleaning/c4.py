"""C4's rules (Raffel et al. 2020; TFDS c4_utils) as datatrove's C4QualityFilter applies them, line by line.

C4 is the one family that edits a kept document: it drops lines (too long a word, no terminal punctuation,
too few words, javascript, cookie/terms notices) and keeps the rest, stripped, joined by newlines. FineWeb's
rules run on that text in datatrove's pipeline, so c4_lines returns it too. A document C4 would leave with
no text at all is dropped as `c4_empty` (dew's own code: datatrove leaves that to FineWeb's `empty`).
"""

from __future__ import annotations

import re

from dew.preprocess.cleaning.quality_config import QualityConfig
from dew.preprocess.cleaning.words import count_sentences

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
END_PUNCTUATION = (".", "?", "!", '"', "'")
ELLIPSIS = "..."
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


def c4_lines(text: str, config: QualityConfig) -> tuple[str, str | None]:
    """(the text C4 keeps, the reason it drops the whole document or None)."""
    sentences = 0
    kept: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        words = line.split()
        if config.c4_max_word_length != -1 and any(len(word) > config.c4_max_word_length for word in words):
            continue
        if config.c4_remove_citations:
            line = CITATION.sub("", line)
        if config.c4_filter_no_terminal_punct and (not line.endswith(END_PUNCTUATION) or line.endswith(ELLIPSIS)):
            continue
        if len(words) < config.c4_min_words_per_line:
            continue
        lowered = line.lower()
        if config.c4_filter_lorem_ipsum and "lorem ipsum" in lowered:
            return text, "c4_lorem_ipsum"
        if config.c4_filter_javascript and "javascript" in lowered:
            continue
        if config.c4_filter_curly_bracket and "{" in line:
            return text, "c4_curly_bracket"
        if config.c4_filter_policy and any(phrase in lowered for phrase in POLICY_SUBSTRINGS):
            continue
        if config.c4_min_num_sentences != -1:
            sentences += count_sentences(line)
        kept.append(line)
    if sentences < config.c4_min_num_sentences:
        return text, "c4_too_few_sentences"
    left = "\n".join(kept).strip()
    if not left:
        # Reached only with c4_min_num_sentences at -1 or 0: datatrove would go on with an empty text
        # (FineWeb's `empty` drops it after), but without FineWeb it would be written as a blank document.
        return text, "c4_empty"
    return left, None
