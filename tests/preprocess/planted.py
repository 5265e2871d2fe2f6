"""A real-text corpus with planted duplicates whose similarity is known: the clean job's test and benchmark input.

Base documents are CPython's pydoc topics and the docstrings of stdlib modules, classes and functions:
real text on every machine. Bases that already resemble one another (shingle Jaccard >= 0.3) are left
out, so every base is unique. Then some bases get exact copies (case and spacing changed, which
normalization undoes), some get near copies (words replaced until the copy's 5-gram Jaccard with its
base reaches a target, measured exactly), and some get a chain (a copy of the copy), which only
transitive clustering joins to its base.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import random
from pathlib import Path

from dew.preprocess.cleaning.minhash import jaccard, normalize

_MODULES = (
    "argparse", "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "email", "enum", "fractions", "functools", "gzip", "hashlib", "heapq", "http.client",
    "inspect", "io", "ipaddress", "itertools", "json", "logging", "mailbox", "multiprocessing", "os", "pathlib",
    "pickle", "platform", "queue", "random", "re", "shutil", "socket", "sqlite3", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "tkinter", "typing", "unittest", "urllib.request",
    "uuid", "xml.dom.minidom", "zipfile",
)  # fmt: skip
MIN_WORDS = 60


def _shingles(text: str, n: int = 5) -> frozenset[tuple[str, ...]]:
    words = normalize(text).split(" ")
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def candidate_texts() -> list[str]:
    """Every pydoc topic and the docstring of every stdlib module above and of their public names, in order."""
    from pydoc_data.topics import topics

    candidates = [topics[name] for name in sorted(topics)]
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        candidates.append(inspect.getdoc(module) or "")
        for attr in sorted(vars(module)):
            doc = inspect.getdoc(getattr(module, attr)) if not attr.startswith("_") else None
            if doc:
                candidates.append(doc)
    return candidates


def real_texts(limit: int) -> list[str]:
    """Up to `limit` unique real documents of at least MIN_WORDS words, none resembling another."""
    candidates = candidate_texts()
    kept: list[str] = []
    seen: list[frozenset[tuple[str, ...]]] = []
    for text in candidates:
        if len(normalize(text).split(" ")) < MIN_WORDS:
            continue
        shingles = _shingles(text)
        if any(len(shingles & other) / len(shingles | other) >= 0.3 for other in seen):
            continue
        kept.append(text)
        seen.append(shingles)
        if len(kept) == limit:
            break
    return kept


def near_copy(text: str, target: float, rng: random.Random) -> tuple[str, float]:
    """`text` with words replaced until its shingle Jaccard with `text` is the largest value <= target."""
    words = text.split()
    order = rng.sample(range(len(words)), len(words))

    def replaced(k: int) -> str:
        out = list(words)
        for i in order[:k]:
            out[i] = f"zq{rng_words[i]}"
        return " ".join(out)

    rng_words = [rng.randrange(10**6) for _ in words]
    lo, hi = 1, len(words)
    while lo < hi:  # the fewest replacements that bring the similarity down to the target
        mid = (lo + hi) // 2
        if jaccard(text, replaced(mid), 5) <= target:
            hi = mid
        else:
            lo = mid + 1
    copy = replaced(lo)
    return copy, jaccard(text, copy, 5)


def exact_copy(text: str) -> str:
    """The same normalized text: other case and spacing."""
    return "  " + text.upper().replace(" ", "   ") + "\n"


@dataclasses.dataclass
class Planted:
    """Documents in file order, and which of them belong together."""

    texts: list[str]
    families: list[list[int]]  # indexes into texts: a base and its copies
    kinds: list[str]  # per family: unique, exact, near or chain
    similarity: dict[int, float]  # a near copy's index → its Jaccard with its base


def planted_corpus(bases: int = 160, seed: int = 0) -> Planted:
    rng = random.Random(seed)
    texts = real_texts(bases)
    families = [[i] for i in range(len(texts))]
    kinds = ["unique"] * len(texts)
    similarity: dict[int, float] = {}
    for f, family in enumerate(families):
        base = texts[family[0]]
        kind = ("unique", "exact", "near", "near", "chain")[f % 5]
        if kind == "exact":
            family.append(len(texts))
            texts.append(exact_copy(base))
        elif kind in ("near", "chain"):
            copy, j = near_copy(base, rng.uniform(0.85, 0.97), rng)
            family.append(len(texts))
            similarity[len(texts)] = j
            texts.append(copy)
            if kind == "chain":
                second, _ = near_copy(copy, rng.uniform(0.9, 0.97), rng)
                family.append(len(texts))
                texts.append(second)
        kinds[f] = kind
    order = list(range(len(texts)))
    rng.shuffle(order)  # copies are spread over the files, not next to their bases
    where = {old: new for new, old in enumerate(order)}
    return Planted(
        texts=[texts[i] for i in order],
        families=[[where[i] for i in family] for family in families],
        kinds=kinds,
        similarity={where[i]: j for i, j in similarity.items()},
    )


def write_files(corpus: Planted, directory: Path, files: int = 3) -> dict[tuple[str, int], int]:
    """The corpus in `files` jsonl files; returns (file name, row) → index into corpus.texts."""
    directory.mkdir(parents=True, exist_ok=True)
    place: dict[tuple[str, int], int] = {}
    per = -(-len(corpus.texts) // files)
    for f in range(files):
        name = f"part-{f}.jsonl"
        chunk = list(range(f * per, min(len(corpus.texts), (f + 1) * per)))
        (directory / name).write_text("".join(json.dumps({"text": corpus.texts[i]}) + "\n" for i in chunk))
        place.update({(name, row): i for row, i in enumerate(chunk)})
    return place
