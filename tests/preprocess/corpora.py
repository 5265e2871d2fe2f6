"""Tiny real-text inputs for the preprocess tests, and a reference of what a corpus must hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def topics(count: int = 40) -> list[str]:
    """Real text present on every machine: CPython's pydoc topics, in a fixed order."""
    from pydoc_data.topics import topics as table

    return [table[name] for name in sorted(table)[:count]]


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def reference_stream(texts: list[str], tokenizer, eos: int | None, dtype) -> np.ndarray:
    """The corpus a tokenize job must write: every text encoded on its own, eos after each, in order."""
    parts = [np.asarray(ids + ([eos] if eos is not None else []), dtype=dtype) for ids in tokenizer.encode_batch(texts)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)
