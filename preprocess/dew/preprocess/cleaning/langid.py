"""Language id with a fastText model, as datatrove's LanguageFilter decides with it.

fastText is an optional dependency (the `langid` extra: fasttext-numpy2-wheel, the build datatrove uses);
nothing is downloaded from the internet: the model is a path the user gives, local or gs:// (fastText
opens local files only, so a worker copies a gs:// model to its local disk first). It loads once per
process, on first use. The launcher records the model's sha256 (`model_sha256`) in the job's config,
so a model replaced at the same path is a new config, never mixed into a rerun's committed shards.
"""

from __future__ import annotations

import hashlib
import tempfile
from functools import cache
from typing import Any

from dew.preprocess import files
from dew.preprocess.cleaning.quality_config import QualityConfig


def model_sha256(path: str) -> str:
    """The sha256 of the model file at `path` (local or gs://), naming the path when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with files.open_read(path) as f:
            while block := f.read(1 << 22):
                digest.update(block)
    except (OSError, ValueError) as error:  # Beam's FileSystems raise BeamIOError, an OSError
        raise ValueError(f"--language_model {path}: cannot be read ({error})") from None
    return digest.hexdigest()


@cache
def _model(path: str) -> Any:
    try:
        from fasttext.FastText import _FastText
    except ImportError as error:
        raise RuntimeError(
            f"--language-model {path}: language id needs fastText; install dew[langid] "
            "(fasttext-numpy2-wheel), or leave --language-model empty to skip the language filter"
        ) from error
    local = path if files.is_local(path) else files.download(path, tempfile.mkdtemp(prefix="dew-langid-"))
    try:
        return _FastText(local)
    except ValueError as error:
        raise ValueError(f"--language-model {path}: not a fastText model ({error})") from error


def load(path: str, sha256: str) -> None:
    """Loads the model at `path` for this process, refusing one whose bytes are not the launcher's."""
    found = model_sha256(path)
    if found != sha256:
        raise RuntimeError(
            f"--language_model {path} on this worker hashes to {found[:12]}, not {sha256[:12]} as when the job "
            "started: the file changed, or workers see another file at that path; rerun the job"
        )
    _model(path)


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
