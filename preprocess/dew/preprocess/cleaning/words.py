"""Word and sentence splitting that gives the tokens datatrove's English filters see, in pure Python.

datatrove splits English text with spaCy's blank "en" tokenizer (`load_word_tokenizer("eng")`), then drops
whitespace tokens; C4 counts sentences with spaCy's sentencizer over each line. The filters' ratios are
counted over those tokens, so a plain `str.split()` or regex word split disagrees with datatrove on most real
text (punctuation glued to words, "don't" as one word). This module ports spaCy's tokenizer algorithm
(`Tokenizer._tokenize_affixes`, `_split_affixes`, `_attach_tokens` and the special-case matcher pass in
spacy/tokenizer.pyx) over the tables spaCy itself uses, recorded in quality_tables.json by
benchmarks/record_quality_tables.py; it needs neither spaCy nor datatrove. The recorder refuses tables the
port does not model (a token_match, special cases with a space inside).

Each whitespace-separated chunk is tokenized once and remembered (spaCy caches the same way), in a memo that
is cleared whenever it holds `MEMO_LIMIT` chunks, so memory stays bounded however large the corpus.
"""

from __future__ import annotations

import json
import re
import unicodedata
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from functools import cache, partial
from itertools import accumulate, chain
from pathlib import Path
from typing import Any

MEMO_LIMIT = 200_000
_WHITESPACE_RUNS = re.compile(r"(\s+)")
_WHITESPACE = re.compile(r"\s")  # str.split()'s whitespace: both are Py_UNICODE_ISSPACE
_PART = 1 << 16


@cache
def tables() -> dict[str, Any]:
    """The recorded spaCy and datatrove tables (read once per process)."""
    return json.loads((Path(__file__).with_name("quality_tables.json")).read_text(encoding="utf-8"))


class _Tokenizer:
    def __init__(self) -> None:
        t = tables()
        self.prefix = re.compile(t["prefix"], t["flags"][0]).search
        self.suffix = re.compile(t["suffix"], t["flags"][1]).search
        self.infix = re.compile(t["infix"], t["flags"][2]).finditer
        self.url = re.compile(t["url"], t["flags"][3]).match
        self.specials: dict[str, tuple[str, ...]] = {orth: tuple(pieces) for orth, pieces in t["rules"].items()}
        self.memo: dict[str, tuple[str, ...]] = {}
        self.patterns = self._matcher_patterns(t["faster_heuristics"])
        self.first = frozenset(pattern[0] for pattern in self.patterns)
        self.by_first: dict[str, list[tuple[str, ...]]] = {}
        for pattern in sorted(self.patterns):
            self.by_first.setdefault(pattern[0], []).append(pattern)

    def _matcher_patterns(self, faster_heuristics: bool) -> set[tuple[str, ...]]:
        # spaCy's add_special_case: a rule goes to the matcher pass as its own tokenization without special
        # cases, when it has a prefix, infix or suffix (or a space). A one-token pattern over whitespace or
        # equal to its rule changes nothing, and only blocks other one-token matches: left out.
        patterns = set()
        for orth in self.specials:
            affixed = self._prefix_len(orth) or self._suffix_len(orth) or list(self.infix(orth)) or " " in orth
            if faster_heuristics and not affixed:
                continue
            pattern = tuple(token for chunk in orth.split() for token in self._chunk(chunk, specials={}))
            if len(pattern) > 1 or (pattern and pattern != self.specials[orth]):
                patterns.add(pattern)
        return patterns

    def _prefix_len(self, string: str) -> int:
        match = self.prefix(string)
        return match.end() - match.start() if match is not None else 0

    def _suffix_len(self, string: str) -> int:
        match = self.suffix(string)
        return match.end() - match.start() if match is not None else 0

    def _chunk(self, string: str, specials: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        """One whitespace-free chunk, as spaCy's _tokenize_affixes handles a span between whitespace."""
        if string in specials:
            return specials[string]
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        while string and len(string) != last_size:
            if string in specials:
                break
            last_size = len(string)
            pre_len = self._prefix_len(string)
            if pre_len:
                prefix, minus_pre = string[:pre_len], string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            suf_len = self._suffix_len(string[pre_len:])
            if suf_len:
                suffix, minus_suf = string[-suf_len:], string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    string = minus_suf
                    suffixes.append(suffix)
                    break
            if pre_len and suf_len and pre_len + suf_len <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        tokens = prefixes
        if string:
            if string in specials:
                tokens.extend(specials[string])
            elif self.url(string):
                tokens.append(string)
            else:
                tokens.extend(self._infixes(string))
        tokens.extend(reversed(suffixes))
        return tuple(tokens)

    def _infixes(self, string: str) -> list[str]:
        out: list[str] = []
        start = 0
        for match in self.infix(string):
            infix_start, infix_end = match.span()
            if infix_start == 0:
                continue
            if infix_start != start:
                out.append(string[start:infix_start])
            if infix_start != infix_end:
                out.append(string[infix_start:infix_end])
            start = infix_end
        if start < len(string):
            out.append(string[start:])
        return out

    def chunk(self, string: str) -> tuple[str, ...]:
        tokens = self.memo.get(string)
        if tokens is None:
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            tokens = self.memo[string] = self._chunk(string, self.specials)
        return tokens

    def tokens(self, text: str) -> list[str]:
        """The non-whitespace tokens of spaCy's tokenizer(text), in order."""
        chunk = self.chunk
        words: list[str] = []
        sizes = array("I")  # tokens per chunk, for the special pass: not the chunks' tuples, a document long
        for part in _parts(text):
            pieces = [chunk(c) for c in part.split()]
            words.extend(chain.from_iterable(pieces))
            sizes.extend(map(len, pieces))
        if self.first.isdisjoint(words):
            return words
        return self._special_pass(text, sizes, words)

    def _special_pass(self, text: str, sizes: array[int], words: list[str]) -> list[str]:
        # spaCy's _apply_special_cases: every match of a rule's pattern over the document's tokens, the longest
        # (then the leftmost) first, one whose first or last token is taken is dropped; a kept one is replaced
        # by its rule when its text (tokens with the spaces between them) is a rule: only one inside a chunk.
        by_first = self.by_first
        matches: list[tuple[int, int]] = []
        for start in (index for index, word in enumerate(words) if word in by_first):
            for pattern in by_first[words[start]]:
                end = start + len(pattern)
                if len(pattern) > 1 and words[start + 1 : start + 2] != [pattern[1]]:
                    continue  # the cheap test first: most candidates differ at their second token
                if tuple(words[start:end]) == pattern:
                    matches.append((start, end))
        if not matches:
            return words
        # A word's chunk by bisection over the chunks' cumulative token counts, and the separators after
        # each chunk as one flag a chunk: not a list of every word's chunk or every whitespace run.
        ends = array("Q", accumulate(sizes))
        chunk_of = partial(bisect_right, ends)
        single: bytearray | None = None
        valid: list[tuple[int, int]] = []
        for start, end in matches:
            first_chunk, last_chunk = chunk_of(start), chunk_of(end - 1)
            if first_chunk != last_chunk:
                # Across chunks only over single spaces (anything else is a whitespace token between).
                if single is None:
                    single = _single_spaces(text, len(ends))
                if not all(single[first_chunk:last_chunk]):
                    continue
            valid.append((start, end))
        matches = valid
        if not matches:
            return words
        matches.sort(key=lambda span: (span[0] - span[1], span[0]))
        seen: set[int] = set()
        kept: list[tuple[int, int]] = []
        for start, end in matches:
            if start not in seen and end - 1 not in seen:
                kept.append((start, end))
            seen.update(range(start, end))
        out: list[str] = []
        position = 0
        for start, end in sorted(kept):
            if chunk_of(start) != chunk_of(end - 1):
                continue
            out.extend(words[position:start])
            out.extend(self.specials["".join(words[start:end])])
            position = end
        out.extend(words[position:])
        return out


def _single_spaces(text: str, chunks: int) -> bytearray:
    """For each of the first chunks - 1 whitespace runs between text.split()'s chunks, 1 if it is one space."""
    flags = bytearray(max(chunks - 1, 0))
    runs = _WHITESPACE_RUNS.finditer(text)
    index = 0
    for run in runs:
        if run.start() == 0:
            continue  # leading whitespace: before the first chunk
        if index == len(flags):
            break  # trailing whitespace, after the last chunk
        flags[index] = run.group() == " "
        index += 1
    return flags


def _parts(text: str) -> list[str] | Iterator[str]:
    """`text` in pieces of about _PART characters cut at whitespace: their split() is text.split(), without
    a list of every chunk of a large document alive at once (tens of bytes each)."""
    if len(text) <= _PART:
        return [text]
    return _cut(text)


def _cut(text: str) -> Iterator[str]:
    start = 0
    while (space := _WHITESPACE.search(text, start + _PART)) is not None:
        yield text[start : space.start()]
        start = space.start()
    yield text[start:]


@cache
def _tokenizer() -> _Tokenizer:
    return _Tokenizer()


def split_words(text: str) -> list[str]:
    """The words datatrove's `split_into_words(text, "eng")` returns: spaCy English tokens, whitespace dropped."""
    return _tokenizer().tokens(text)


@cache
def _sentence_punct() -> frozenset[str]:
    return frozenset(tables()["sentence_punct"])


_CLASS_MEMO: dict[str, int] = {}
_ENDS, _PUNCT, _OTHER = 2, 1, 0


def _token_class(token: str) -> int:
    kind = _CLASS_MEMO.get(token)
    if kind is None:
        if len(_CLASS_MEMO) >= MEMO_LIMIT:
            _CLASS_MEMO.clear()
        if token in _sentence_punct():
            kind = _ENDS
        elif all(unicodedata.category(char).startswith("P") for char in token):
            kind = _PUNCT  # spaCy's is_punct
        else:
            kind = _OTHER
        kind = _CLASS_MEMO[token] = kind
    return kind


def count_sentences(line: str) -> int:
    """How many sentences spaCy's sentencizer finds in a stripped line (datatrove's C4 sentence count).

    A sentence starts at the first token and at every token that is neither punctuation nor sentence-final
    after a sentence-final one (".", "!", "?" and the other scripts' stops). Whitespace runs other than one
    space are tokens of their own there, so they count as such a token.
    """
    tokenizer = _tokenizer()
    words = tokenizer.tokens(line)
    if not words:
        return 1
    chunks = line.split()
    if len(line) - sum(map(len, chunks)) == len(chunks) - 1 and line.count(" ") == len(chunks) - 1:
        sequence: list[str] = words
    else:
        sequence = _with_whitespace_tokens(line, tokenizer)
    starts, seen_end = 1, False
    for token in sequence:
        kind = _token_class(token) if token else _OTHER
        if kind == _ENDS:
            seen_end = True
        elif seen_end and kind == _OTHER:
            starts += 1
            seen_end = False
    return starts


def _with_whitespace_tokens(line: str, tokenizer: _Tokenizer) -> list[str]:
    # spaCy attaches one space after a token to it; any other whitespace run (or the rest of one) is a token.
    # Such tokens are marked "" here (only their class matters). The special-case pass never matches across
    # one, so tokenizing the whitespace-free pieces between them separately gives the same tokens.
    parts = _WHITESPACE_RUNS.split(line)
    out: list[str] = []
    text = parts[0]
    for index in range(1, len(parts), 2):
        run, following = parts[index], parts[index + 1]
        if run == " ":
            text += run + following
            continue
        out.extend(tokenizer.tokens(text))
        out.append("")
        text = following
    out.extend(tokenizer.tokens(text))
    return out
