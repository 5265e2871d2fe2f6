"""Record, from datatrove and spaCy themselves, the tables dew's quality filters are built on.

Not a benchmark (`make bench` runs bench_*.py): run it with the python of a venv that has datatrove, spaCy
and regex installed (bench_clean_filters.py makes one) whenever those anchors move:

    python benchmarks/record_quality_tables.py

It writes three files:
- preprocess/dew/preprocess/cleaning/quality_tables.json: what the filters need at run time and cannot
  derive: spaCy's English tokenizer (prefix, suffix, infix and URL patterns, the special cases' pieces),
  its sentencizer's punctuation, and datatrove's punctuation sets (spaCy and datatrove are Apache-2.0 / MIT).
- tests/preprocess/datatrove_filter_defaults.json: every constructor default of datatrove's filters and
  their constants, which tests/preprocess/test_quality.py compares with QualityConfig's defaults.
- tests/preprocess/datatrove_verdicts.json: for each document of quality_corpus (the sample, the base topic
  and the crafted documents, by fingerprint), datatrove's words (a hash and a count), each filter's verdict
  alone and chained, and the text C4 leaves (a hash) when it keeps the document.
"""

from __future__ import annotations

import inspect
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLES = ROOT / "preprocess" / "dew" / "preprocess" / "cleaning" / "quality_tables.json"
DEFAULTS = ROOT / "tests" / "preprocess" / "datatrove_filter_defaults.json"
VERDICTS = ROOT / "tests" / "preprocess" / "datatrove_verdicts.json"


def tokenizer_tables() -> dict:
    import spacy
    from spacy.attrs import ORTH
    from spacy.pipeline.sentencizer import Sentencizer
    from spacy.util import get_lang_class

    nlp = spacy.blank("en")
    tokenizer = nlp.tokenizer
    if tokenizer.token_match is not None:
        raise SystemExit("spaCy's English tokenizer now has a token_match: dew's port does not model it")
    rules = {orth: [piece[ORTH] for piece in pieces] for orth, pieces in tokenizer.rules.items()}
    spaced = [orth for orth in rules if any(c.isspace() for c in orth) and not orth.isspace()]
    if spaced:
        raise SystemExit(f"spaCy now has special cases with spaces inside {spaced}: dew's port does not model them")
    return {
        "spacy_version": spacy.__version__,
        "faster_heuristics": tokenizer.faster_heuristics,
        "prefix": tokenizer.prefix_search.__self__.pattern,
        "suffix": tokenizer.suffix_search.__self__.pattern,
        "infix": tokenizer.infix_finditer.__self__.pattern,
        "url": tokenizer.url_match.__self__.pattern,
        "flags": [
            tokenizer.prefix_search.__self__.flags,
            tokenizer.suffix_search.__self__.flags,
            tokenizer.infix_finditer.__self__.flags,
            tokenizer.url_match.__self__.flags,
        ],
        "rules": dict(sorted(rules.items())),
        "sentence_punct": sorted(Sentencizer.default_punct_chars),
        "lex_attrs_overridden": sorted(str(key) for key in get_lang_class("en").Defaults.lex_attr_getters),
    }


def datatrove_tables() -> tuple[dict, dict]:
    from importlib.metadata import version

    from datatrove.pipeline.filters import c4_filters, gopher_quality_filter
    from datatrove.pipeline.filters.c4_filters import C4QualityFilter
    from datatrove.pipeline.filters.fineweb_quality_filter import FineWebQualityFilter
    from datatrove.pipeline.filters.gopher_quality_filter import GopherQualityFilter
    from datatrove.pipeline.filters.gopher_repetition_filter import GopherRepetitionFilter
    from datatrove.pipeline.filters.language_filter import LanguageFilter
    from datatrove.utils.text import PUNCTUATION_SET, TERMINAL_PUNCTUATION

    def defaults(cls: type) -> dict:
        out = {}
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name in ("self", "exclusion_writer") or parameter.default is inspect.Parameter.empty:
                continue
            value = parameter.default
            out[name] = [list(item) for item in value] if isinstance(value, tuple) else value
        return out

    runtime = {
        "datatrove_version": version("datatrove"),
        "punctuation": sorted(PUNCTUATION_SET),
        "terminal_punctuation": sorted(TERMINAL_PUNCTUATION),
    }
    recorded = {
        "datatrove_version": version("datatrove"),
        "GopherRepetitionFilter": defaults(GopherRepetitionFilter),
        "GopherQualityFilter": defaults(GopherQualityFilter),
        "C4QualityFilter": defaults(C4QualityFilter),
        "FineWebQualityFilter": defaults(FineWebQualityFilter),
        "LanguageFilter": defaults(LanguageFilter),
        "constants": {
            "gopher_stop_words": gopher_quality_filter.STOP_WORDS,
            "c4_end_punctuation": list(c4_filters.END_PUNCTUATION),
            "c4_ellipsis": c4_filters.ELLIPSIS,
            "c4_policy_substrings": c4_filters.POLICY_SUBSTRINGS,
            "c4_citation_regex": c4_filters.CITATION_REGEX.pattern,
        },
    }
    return runtime, recorded


def verdicts() -> dict:
    import hashlib

    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.utils.text import split_into_words

    sys.path.insert(0, str(ROOT))
    from tests.preprocess.quality_corpus import base, crafted, fingerprint, recorded_sample

    steps = {
        "gopher_repetition": (GopherRepetitionFilter(), "gopher_rep_"),
        "gopher_quality": (GopherQualityFilter(), ""),
        "c4": (C4QualityFilter(), "c4_"),
        "fineweb": (FineWebQualityFilter(), "fineweb_"),
    }

    def reason(family: str, doc: Document) -> str | None:
        step, prefix = steps[family]
        result = step.filter(doc)
        return None if result is True else prefix + result[1]

    out = {}
    for text in [*recorded_sample(), base(), *crafted().values()]:
        words = split_into_words(text, "eng")
        entry = {
            "words": hashlib.sha1("\x1f".join(words).encode("utf-8")).hexdigest()[:16],
            "word_count": len(words),
            **{family: reason(family, Document(text=text, id="0")) for family in steps},
        }
        doc = Document(text=text, id="0")
        entry["chain"] = next((r for family in steps if (r := reason(family, doc)) is not None), None)
        c4_doc = Document(text=text, id="0")
        if steps["c4"][0].filter(c4_doc) is True:  # C4 keeps the lines it keeps in doc.text
            entry["c4_text"] = hashlib.sha1(c4_doc.text.encode("utf-8")).hexdigest()[:16]
        out[fingerprint(text)] = entry
    return out


def main() -> int:
    runtime, recorded = datatrove_tables()
    tables = {"source": "recorded by benchmarks/record_quality_tables.py", **tokenizer_tables(), **runtime}
    TABLES.write_text(json.dumps(tables, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    DEFAULTS.write_text(json.dumps(recorded, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    recorded_verdicts = {"python": sys.version.split()[0], "documents": verdicts()}
    VERDICTS.write_text(json.dumps(recorded_verdicts, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {TABLES.relative_to(ROOT)}, {DEFAULTS.relative_to(ROOT)} and {VERDICTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
