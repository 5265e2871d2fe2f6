"""The quality filters against datatrove's own verdicts, recorded by benchmarks/record_quality_tables.py.

datatrove is not installed here: its defaults, its words and its verdicts on real text (pydoc topics, stdlib
docstrings, degraded variants) and on one crafted document per rule are read from the recorded tables.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from dew.preprocess.cleaning.c4 import CITATION, ELLIPSIS, END_PUNCTUATION, POLICY_SUBSTRINGS, c4_lines
from dew.preprocess.cleaning.fineweb import fineweb_failure
from dew.preprocess.cleaning.gopher import quality_failure, repetition_failure
from dew.preprocess.cleaning.quality import QUALITY_REASONS, QualityConfig, filter_text, first_failure
from dew.preprocess.cleaning.words import count_sentences, split_words
from tests.preprocess.quality_corpus import BASE_TOPIC, STOP_WORDS, base, crafted, fingerprint, recorded_sample

HERE = Path(__file__).parent
DEFAULTS = json.loads((HERE / "datatrove_filter_defaults.json").read_text(encoding="utf-8"))
RECORDED = json.loads((HERE / "datatrove_verdicts.json").read_text(encoding="utf-8"))["documents"]
CONFIG = QualityConfig()
FAMILIES = {
    "gopher_repetition": lambda text: repetition_failure(text, split_words(text), CONFIG),
    "gopher_quality": lambda text: quality_failure(text, split_words(text), CONFIG),
    "c4": lambda text: c4_lines(text, CONFIG)[1],
    "fineweb": lambda text: fineweb_failure(text, CONFIG),
}


def _recorded(texts: list[str]) -> list[tuple[str, dict]]:
    """The texts datatrove's verdicts were recorded for; pydoc's text moves with the Python version."""
    found = [(text, RECORDED[fingerprint(text)]) for text in texts if fingerprint(text) in RECORDED]
    if len(found) < 0.9 * len(texts):
        pytest.skip(f"only {len(found)} of {len(texts)} documents are the recorded ones (another Python's pydoc)")
    return found


@pytest.fixture(scope="module")
def sample() -> list[tuple[str, dict]]:
    return _recorded(recorded_sample())


def _family(code: str) -> str:
    """The QualityConfig switch of the family a reason code belongs to."""
    prefixes = {"gopher_rep_": "gopher_repetition", "gopher_": "gopher_quality", "c4_": "c4", "fineweb_": "fineweb"}
    return next(switch for prefix, switch in prefixes.items() if code.startswith(prefix))


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def test_defaults_are_datatrove_constructor_defaults():
    # Every recorded datatrove argument is either a field with the same value or named here with why it is not.
    not_fields = {
        "language": "the word tokenizer's language: English only (spaCy 'en', as datatrove's default 'eng')",
        "stop_words": "None there means STOP_WORDS; the field holds the list itself",
        "split_paragraph": "C4 over lines, datatrove's default; sentence mode is not offered",
        "stop_chars": "None there means TERMINAL_PUNCTUATION, which dew's FineWeb rules use",
        "top_n_grams": "one field per n",
        "dup_n_grams": "one field per n",
        "languages": "None there (any language) is '' here",
        "backend": "the model is a local file, whichever backend trained it",
        "label_only": "labelling without dropping is not a clean job's business",
        "keep_top_pairs_threshold": "scores are not written to metadata",
    }
    fields = {f.name: f.default for f in dataclasses.fields(QualityConfig)}
    for filter_name, prefix in [
        ("GopherRepetitionFilter", ""),
        ("GopherQualityFilter", ""),
        ("C4QualityFilter", "c4_"),
        ("FineWebQualityFilter", ""),
        ("LanguageFilter", ""),
    ]:
        for name, value in DEFAULTS[filter_name].items():
            if name in not_fields:
                continue
            assert fields[prefix + name] == value, (filter_name, name)
    repetition = DEFAULTS["GopherRepetitionFilter"]
    assert [[n, fields[f"top_{n}_gram_frac"]] for n, _ in repetition["top_n_grams"]] == repetition["top_n_grams"]
    assert [[n, fields[f"dup_{n}_gram_frac"]] for n, _ in repetition["dup_n_grams"]] == repetition["dup_n_grams"]
    assert DEFAULTS["C4QualityFilter"]["split_paragraph"] is True
    assert DEFAULTS["GopherQualityFilter"]["language"] == "eng"
    assert DEFAULTS["LanguageFilter"]["languages"] is None and fields["languages"] == ""
    constants = DEFAULTS["constants"]
    assert CONFIG.stop_word_set == set(constants["gopher_stop_words"]) == set(STOP_WORDS)
    assert list(END_PUNCTUATION) == constants["c4_end_punctuation"]
    assert constants["c4_ellipsis"] == ELLIPSIS
    assert list(POLICY_SUBSTRINGS) == constants["c4_policy_substrings"]
    assert CITATION.pattern == constants["c4_citation_regex"]


def test_words_are_datatrove_words_on_real_text(sample):
    for text, recorded in sample:
        words = split_words(text)
        assert (len(words), _sha("\x1f".join(words))) == (recorded["word_count"], recorded["words"]), text[:200]


def test_each_family_decides_as_datatrove_on_real_text(sample):
    dropped = {family: 0 for family in FAMILIES}
    for text, recorded in sample:
        for family, verdict in FAMILIES.items():
            assert verdict(text) == recorded[family], (family, text[:200])
            dropped[family] += recorded[family] is not None
    # The sample exercises every family both ways.
    assert all(0 < count < len(sample) for count in dropped.values()), dropped


def test_chain_gives_datatrove_reason_and_c4_text(sample):
    for text, recorded in sample:
        kept_text, reason = filter_text(text, CONFIG)
        assert reason == recorded["chain"], text[:200]
        assert first_failure(text, CONFIG) == reason
        if "c4_text" in recorded:
            assert _sha(c4_lines(text, CONFIG)[0]) == recorded["c4_text"], text[:200]
        if reason is None:
            assert _sha(kept_text) == recorded["c4_text"]


def test_real_documents_datatrove_keeps_are_kept(sample):
    kept = [text for text, recorded in sample if recorded["chain"] is None]
    assert len(kept) >= 20
    assert all(first_failure(text, CONFIG) is None for text in kept)
    assert first_failure(base(), CONFIG) is None, BASE_TOPIC


@pytest.mark.parametrize("code", sorted(set(QUALITY_REASONS) - {"language", "fineweb_empty", "c4_empty"}))
def test_crafted_document_fails_exactly_its_rule(code):
    docs = crafted()
    text = docs[code]
    ((_, recorded),) = _recorded([text])
    assert recorded["chain"] == code  # datatrove drops it for that very rule
    assert first_failure(text, CONFIG) == code
    if code == "gopher_long_doc":
        return  # 100,010 made-up words: once is enough
    # It is the base text (or made-up words) bent for this rule alone: with that rule's family off, it is
    # not dropped for a reason of the same family.
    other = first_failure(text, dataclasses.replace(CONFIG, **{_family(code): False}))
    assert other is None or _family(other) != _family(code)


def test_fineweb_empty_after_c4_drops_every_line():
    # C4 alone keeps a document whose only sentences sit on one line; turned off, FineWeb sees blank text.
    assert fineweb_failure("\n \n\t\n", CONFIG) == "fineweb_empty"
    config = dataclasses.replace(CONFIG, gopher_repetition=False, gopher_quality=False, c4=False)
    assert first_failure("  \n\n  ", config) == "fineweb_empty"


def test_c4_empty_when_every_line_goes_and_the_sentence_count_is_off():
    headings = "Installing the package\n  Running the tests  \n\nSee also the reference pages"
    assert c4_lines(headings, CONFIG) == (headings, "c4_too_few_sentences")  # datatrove's verdict
    off = dataclasses.replace(CONFIG, c4_min_num_sentences=-1)
    assert c4_lines(headings, off) == (headings, "c4_empty")
    assert c4_lines(headings, dataclasses.replace(off, c4_min_num_sentences=0)) == (headings, "c4_empty")
    # With FineWeb off nothing after C4 would drop it: the document is removed with its own text.
    alone = dataclasses.replace(off, gopher_repetition=False, gopher_quality=False, fineweb=False)
    assert filter_text(headings, alone) == (headings, "c4_empty")
    kept = "A sentence that ends.\nno stop here"
    assert filter_text(kept, alone) == ("A sentence that ends.", None)


def test_switches_and_thresholds_change_the_verdict():
    docs = crafted()
    assert first_failure(docs["gopher_short_doc"], dataclasses.replace(CONFIG, min_doc_words=0)) != "gopher_short_doc"
    hashes = docs["gopher_too_many_hashes"]
    assert first_failure(hashes, dataclasses.replace(CONFIG, max_symbol_word_ratio=0.5)) != "gopher_too_many_hashes"
    assert first_failure(docs["c4_curly_bracket"], dataclasses.replace(CONFIG, c4_filter_curly_bracket=False)) is None
    assert first_failure(docs["gopher_rep_top_2_gram"], dataclasses.replace(CONFIG, top_2_gram_frac=0)) != (
        "gopher_rep_top_2_gram"
    )
    off = dataclasses.replace(CONFIG, gopher_repetition=False, gopher_quality=False, c4=False, fineweb=False)
    assert all(first_failure(text, off) is None for text in docs.values())


def test_c4_keeps_its_lines_for_fineweb():
    text = base()
    kept, reason = c4_lines(text, CONFIG)
    assert reason is None
    lines = kept.split("\n")
    # Only lines that end a sentence survive (pydoc wraps lines mid-sentence), stripped.
    assert lines and all(line.endswith(END_PUNCTUATION) and line == line.strip() for line in lines)
    assert set(lines) <= {line.strip() for line in text.splitlines()}
    assert filter_text(text, CONFIG) == (kept, None)


def test_sentence_count_follows_spacy_sentencizer():
    assert count_sentences("One. Two! Three? four") == 4
    assert count_sentences("Ends here.) and goes on.") == 2  # closing punctuation stays in the sentence
    assert count_sentences("a.m. is one token, e.g. this.") == 1
    assert count_sentences("Spaced.  Out.") == 2  # the second space is a token of its own
    assert count_sentences("") == 1


def test_words_split_punctuation_contractions_and_keep_urls():
    assert split_words("Don't stop, (really) at https://example.com/a?b=1 now...") == [
        "Do", "n't", "stop", ",", "(", "really", ")", "at", "https://example.com/a?b=1", "now", "...",
    ]  # fmt: skip
    assert split_words("well-known U.S. 10km.\n\n  x") == ["well", "-", "known", "U.S.", "10", "km", ".", "x"]


def test_config_validates_and_round_trips():
    config = QualityConfig(min_doc_words=10, languages="", c4_min_num_sentences=-1)
    assert QualityConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    with pytest.raises(TypeError, match="min_doc_words"):
        QualityConfig(min_doc_words="50")
    with pytest.raises(ValueError, match="dup_line_frac"):
        QualityConfig(dup_line_frac=-0.1)
    # NaN passed as not below 0, and turned a rule off unsaid (every "max" one, as `dup_line_frac`) or made
    # it drop every document (`language_threshold`, `line_punct_thr`): it compares false with every ratio.
    for name in ("dup_line_frac", "line_punct_thr", "language_threshold", "max_avg_word_length"):
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=f"{name} must be a finite number"):
                QualityConfig(**{name: value})
    with pytest.raises(ValueError, match="language_model"):
        QualityConfig(languages="en")
    with pytest.raises(ValueError, match="no field"):
        QualityConfig.from_json({"min_words": 3})
    assert all(field.metadata["help"] for field in dataclasses.fields(QualityConfig))


def test_reasons_cover_every_code_the_filters_return(sample):
    seen = {reason for _, recorded in sample for reason in [recorded["chain"]] if reason}
    seen |= set(crafted())
    assert seen <= set(QUALITY_REASONS)
    assert all(meaning and "\n" not in meaning for meaning in QUALITY_REASONS.values())


def test_memos_stay_bounded_and_change_no_word(monkeypatch):
    from dew.preprocess.cleaning import words

    tokenizer = words._tokenizer()
    text = base()
    expected = split_words(text)
    monkeypatch.setattr(words, "MEMO_LIMIT", 50)
    tokenizer.memo.clear()
    assert split_words(text) == expected
    assert len(tokenizer.memo) <= 50
    assert len(set(text.split())) > 50  # the memo was cleared on the way


def test_config_pickles_for_workers():
    import pickle

    config = QualityConfig(min_doc_words=7)
    assert config.stop_word_set  # a cached value travels along harmlessly
    assert pickle.loads(pickle.dumps(config)) == config


def test_importing_the_filters_loads_no_heavy_stack():
    import subprocess
    import sys

    code = (
        "import sys; import dew.preprocess.cleaning.quality as q; q.first_failure('A short text.', q.QualityConfig());"
        "print(sorted(m for m in ('fasttext', 'numpy', 'apache_beam', 'spacy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"
