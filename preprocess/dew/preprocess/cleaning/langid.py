"""Language id with a local fastText model, as datatrove's LanguageFilter decides with it.

fastText is an optional dependency (the `langid` extra: fasttext-numpy2-wheel, the build datatrove uses);
nothing is downloaded: the model is a path the user gives. It loads once per process, on first use.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from dew.preprocess.cleaning.quality_config import QualityConfig


@cache
def _model(path: str) -> Any:
    try:
        from fasttext.FastText import _FastText
    except ImportError as error:
        raise RuntimeError(
            f"--language-model {path}: language id needs fastText; install dew[langid] "
            "(fasttext-numpy2-wheel), or leave --language-model empty to skip the language filter"
        ) from error
    try:
        return _FastText(path)
    except ValueError as error:
        raise ValueError(f"--language-model {path}: not a fastText model ({error})") from error


def language_scores(text: str, model_path: str) -> dict[str, float]:
    """Every label's probability for `text` (newlines read as spaces), keyed without fastText's __label__."""
    labels, scores = _model(model_path).predict(text.replace("\n", " "), k=-1)
    return {label.split("__")[2]: float(score) for label, score in zip(labels, scores, strict=True)}


def language_failure(text: str, config: QualityConfig) -> str | None:
    """'language' when no kept language scores above the threshold (any language when none are listed)."""
    scores = language_scores(text, config.language_model)
    wanted = config.language_labels
    if wanted:
        passed = any(scores.get(label, 0.0) > config.language_threshold for label in wanted)
    else:
        passed = max(scores.values()) > config.language_threshold
    return None if passed else "language"
