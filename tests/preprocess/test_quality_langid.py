"""Language id with a fastText model trained here on three languages (no model is downloaded)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from dew.preprocess.cleaning import langid
from dew.preprocess.cleaning.quality import QualityConfig, first_failure
from tests.preprocess.quality_corpus import HELD_OUT, base, train_language_model

fasttext = pytest.importorskip("fasttext", reason="language id needs the langid extra (fasttext-numpy2-wheel)")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return train_language_model(tmp_path_factory.mktemp("langid"))


def _config(model: str, **changes) -> QualityConfig:
    # Language id alone: the other families off, so a verdict is the language filter's.
    off = dict(gopher_repetition=False, gopher_quality=False, c4=False, fineweb=False)
    return QualityConfig(language_model=model, **{**off, **changes})


FRENCH_DOC = HELD_OUT["fr"]  # sentences the model was not trained on
GERMAN_DOC = HELD_OUT["de"]


def test_keeps_listed_languages_and_drops_others(model):
    english = _config(model, languages="en")
    assert first_failure(base(), english) is None
    assert first_failure(FRENCH_DOC, english) == "language"
    assert first_failure(GERMAN_DOC, english) == "language"
    french = _config(model, languages="fr,de")
    assert first_failure(FRENCH_DOC, french) is None
    assert first_failure(GERMAN_DOC, french) is None
    assert first_failure(base(), french) == "language"


def test_threshold_is_strict_as_datatrove(model):
    scores = langid.language_scores(FRENCH_DOC, model)
    assert set(scores) == {"en", "fr", "de"} and max(scores, key=scores.get) == "fr"
    at = scores["fr"]
    assert first_failure(FRENCH_DOC, _config(model, languages="fr", language_threshold=at)) == "language"
    assert first_failure(FRENCH_DOC, _config(model, languages="fr", language_threshold=at * 0.99)) is None
    # No languages listed: the best language's score decides.
    assert first_failure(FRENCH_DOC, _config(model, language_threshold=at * 0.99)) is None
    assert first_failure(FRENCH_DOC, _config(model, language_threshold=at)) == "language"


def test_language_runs_before_the_other_families(model):
    config = dataclasses.replace(QualityConfig(), language_model=model, languages="en")
    assert first_failure(FRENCH_DOC, config) == "language"  # Gopher would call it short: language comes first
    assert first_failure(FRENCH_DOC, QualityConfig()) == "gopher_short_doc"


def test_model_that_is_not_there_is_named(tmp_path):
    missing = str(tmp_path / "nowhere.bin")
    with pytest.raises(ValueError, match=r"nowhere\.bin"):
        first_failure("Some text.", _config(missing))


def test_without_fasttext_the_error_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "fasttext", None)
    monkeypatch.setitem(sys.modules, "fasttext.FastText", None)
    langid._model.cache_clear()
    with pytest.raises(RuntimeError, match=r"dew\[langid\]"):
        first_failure("Some text.", _config(str(tmp_path / "lid.bin")))
    langid._model.cache_clear()
