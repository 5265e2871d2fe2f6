"""dew's quality filters against datatrove's on the same documents: keep/drop agreement and documents/s.

The corpus is real text (CPython's pydoc topics and stdlib docstrings, cut into documents of about 2 KB)
plus degraded variants of it, each made to trip one family's rules: repeated lines, short lines, no
punctuation, bullets, ellipses, hashes, lorem ipsum, javascript and cookie notices, curly braces.

The baseline is datatrove 0.10 with spaCy (its English word tokenizer), installed with uv in a venv of its own
under a temporary folder (or the one --datatrove-python names, to skip the install); the benchmark says so
and stops when that cannot be installed. Both sides run one process on the same documents in datatrove's
FineWeb order (Gopher repetition, Gopher quality, C4, FineWeb), calling each filter's filter() directly,
datatrove's pipeline machinery left out. Language id runs apart, on the same documents plus French and German
ones, with a fastText model trained here (both sides load the same file). Reported:
- per family, run alone over every document: the fraction of documents both keep or both drop (goal >= 99.5%);
- the whole chain: the fraction of documents given the same reason (or both kept);
- documents/s of the chain, start-up (imports, spaCy's load, a warm-up pass) timed apart; ratio dew /
  datatrove (goal >= 1.0x).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.preprocess.quality_corpus import corpus, language_documents, train_language_model

FAMILIES = ("gopher_repetition", "gopher_quality", "c4", "fineweb")
WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.utils.text import split_into_words
split_into_words("Warm up spaCy's tokenizer.", "eng")
filters = {"gopher_repetition": (GopherRepetitionFilter(), "gopher_rep_"),
           "gopher_quality": (GopherQualityFilter(), ""),
           "c4": (C4QualityFilter(), "c4_"), "fineweb": (FineWebQualityFilter(), "fineweb_")}
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]

def verdict(family, text):
    step, prefix = filters[family]
    result = step.filter(Document(text=text, id="0"))
    return None if result is True else prefix + result[1]

def chain(text):
    doc = Document(text=text, id="0")
    for family in filters:
        step, prefix = filters[family]
        result = step.filter(doc)
        if result is not True:
            return prefix + result[1]
    return None

[chain(text) for text in texts[:50]]
startup = time.perf_counter() - t0
start = time.perf_counter()
reasons = [chain(text) for text in texts]
seconds = time.perf_counter() - start
families = {family: [verdict(family, text) for text in texts] for family in filters}
if len(sys.argv) > 2:  # a local fastText model: datatrove's LanguageFilter with it in place of lid.176
    from datatrove.pipeline.filters import LanguageFilter
    from fasttext.FastText import _FastText
    language = LanguageFilter(languages=["en"])
    language.model._model = _FastText(sys.argv[2])
    others = [json.loads(line)["text"] for line in open(sys.argv[3], encoding="utf-8")]
    families["language"] = [None if language.filter(Document(text=t, id="0")) else "language" for t in texts + others]
json.dump({"startup": startup, "seconds": seconds, "chain": reasons, "families": families}, sys.stdout)
"""


def datatrove_python(folder: Path) -> Path | None:
    python = folder / "bin" / "python"
    uv = Path(sys.executable).with_name("uv")
    uv_command = [str(uv)] if uv.exists() else [sys.executable, "-m", "uv"]
    try:
        subprocess.run([*uv_command, "venv", "-q", "--python", sys.executable, str(folder)], check=True, timeout=120)
        install = [
            *uv_command,
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "datatrove==0.10.1",
            "spacy>=3.8,<3.9",
            "regex",
            "fasttext-numpy2-wheel",
            "fasteners",  # LanguageFilter asks for it
        ]
        subprocess.run(install, check=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as error:
        print(f"SKIPPED: datatrove could not be installed in its own venv ({error})")
        return None
    return python


def language_model(folder: Path) -> str | None:
    try:
        return train_language_model(folder)
    except ImportError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=800)
    parser.add_argument("--datatrove-python", help="a python with datatrove, spacy and regex (skips the install)")
    args = parser.parse_args()

    from dew.preprocess.cleaning import quality
    from dew.preprocess.cleaning.c4 import c4_lines
    from dew.preprocess.cleaning.fineweb import fineweb_failure
    from dew.preprocess.cleaning.gopher import quality_failure, repetition_failure
    from dew.preprocess.cleaning.langid import language_failure
    from dew.preprocess.cleaning.words import split_words

    texts = corpus(args.documents)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl"
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        python = Path(args.datatrove_python) if args.datatrove_python else datatrove_python(Path(tmp) / "venv")
        if python is None:
            return 0
        worker = Path(tmp) / "worker.py"
        worker.write_text(WORKER, encoding="utf-8")
        command = [str(python), str(worker), str(path)]
        model = language_model(Path(tmp))
        if model:
            others = Path(tmp) / "others.jsonl"
            others.write_text("".join(json.dumps({"text": t}) + "\n" for t in language_documents()), encoding="utf-8")
            command += [model, str(others)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        run = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if run.returncode:
            raise SystemExit(f"datatrove's side failed:\n{run.stderr[-3000:]}")
        theirs = json.loads(run.stdout)
        if model:
            language = dataclasses.replace(quality.QualityConfig(), language_model=model, languages="en")
            mine_language = [language_failure(text, language) for text in texts + language_documents()]

    config = quality.QualityConfig()
    start = time.perf_counter()
    quality.first_failure("Warm up the word splitter.", config)
    startup = time.perf_counter() - start
    start = time.perf_counter()
    ours = [quality.first_failure(text, config) for text in texts]
    seconds = time.perf_counter() - start

    alone = {
        "gopher_repetition": lambda t: repetition_failure(t, split_words(t), config),
        "gopher_quality": lambda t: quality_failure(t, split_words(t), config),
        "c4": lambda t: c4_lines(t, config)[1],
        "fineweb": lambda t: fineweb_failure(t, config),
    }
    kept = sum(reason is None for reason in ours)
    print(f"baseline: datatrove 0.10.1 filters (spaCy words) on {len(texts)} documents, {kept} kept by dew")
    for family in FAMILIES:
        mine = [alone[family](text) for text in texts]
        same = sum((a is None) == (b is None) for a, b in zip(mine, theirs["families"][family], strict=True))
        drops = sum(b is not None for b in theirs["families"][family])
        print(
            f"  {family:18s} keep/drop agreement {same / len(texts):.2%}  ({drops} dropped by datatrove; goal >= 99.5%)"
        )
        for text, a, b in zip(texts, mine, theirs["families"][family], strict=True):
            if (a is None) != (b is None):
                print(f"    differs: dew {a} datatrove {b}: {text[:100]!r}")
                break
    if model:
        same = sum(a == b for a, b in zip(mine_language, theirs["families"]["language"], strict=True))
        drops = sum(b is not None for b in theirs["families"]["language"])
        share = same / len(mine_language)
        print(f"  language (fastText trained here, keep en): agreement {share:.2%} ({drops} dropped by datatrove)")
    else:
        print("  language: skipped (fastText is not installed here: the langid extra)")
    same = sum(a == b for a, b in zip(ours, theirs["chain"], strict=True))
    print(f"  whole chain: same reason for {same / len(texts):.2%}")
    ours_rate, theirs_rate = len(texts) / seconds, len(texts) / theirs["seconds"]
    print(
        f"dew {ours_rate:.0f} documents/s (start-up {startup:.2f} s); datatrove {theirs_rate:.0f} documents/s "
        f"(start-up {theirs['startup']:.2f} s)"
    )
    print(f"ratio dew / datatrove documents/s: {ours_rate / theirs_rate:.2f}x (goal >= 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
