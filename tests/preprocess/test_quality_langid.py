"""Language id with a fastText model trained here on three languages (no model is downloaded)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from dew.preprocess.cleaning import langid
from dew.preprocess.cleaning.quality import QualityConfig, first_failure
from tests.preprocess.quality_corpus import base

fasttext = pytest.importorskip("fasttext", reason="language id needs the langid extra (fasttext-numpy2-wheel)")

FRENCH = [
    "Une exception interrompt le déroulement normal du programme quand une erreur se produit.",
    "Le gestionnaire peut reprendre l'exécution à un niveau plus élevé, mais il ne peut pas réparer la cause.",
    "Quand une exception n'est pas traitée, l'interpréteur arrête le programme et affiche la pile des appels.",
    "Les exceptions sont identifiées par des instances de classes, et la clause choisie dépend de la classe.",
    "Nous avons marché le long de la rivière pendant que les enfants jouaient dans le jardin de leur grand-mère.",
    "Il faut toujours lire la documentation avant de modifier la configuration du serveur de production.",
    "La bibliothèque municipale ouvre ses portes le samedi matin et ferme tard le jeudi soir.",
    "Cette fonction renvoie une nouvelle liste qui contient les éléments triés dans l'ordre croissant.",
    "Elle a répondu qu'elle viendrait demain si le train n'était pas en retard à cause de la neige.",
    "Le fichier est fermé automatiquement à la fin du bloc, même si une erreur survient entre-temps.",
]
GERMAN = [
    "Eine Ausnahme unterbricht den normalen Ablauf des Programms, wenn ein Fehler auftritt.",
    "Der Behandler kann die Ausführung auf einer höheren Ebene fortsetzen, aber die Ursache nicht beheben.",
    "Wird eine Ausnahme nicht behandelt, beendet der Interpreter das Programm und zeigt den Aufrufstapel.",
    "Ausnahmen werden durch Instanzen von Klassen bezeichnet, und die gewählte Klausel hängt von der Klasse ab.",
    "Wir sind am Fluss entlang gegangen, während die Kinder im Garten ihrer Großmutter gespielt haben.",
    "Man sollte immer die Dokumentation lesen, bevor man die Konfiguration des Servers ändert.",
    "Die Stadtbibliothek öffnet am Samstagmorgen und schließt am Donnerstagabend erst spät.",
    "Diese Funktion gibt eine neue Liste zurück, die die Elemente in aufsteigender Reihenfolge enthält.",
    "Sie hat geantwortet, dass sie morgen kommt, wenn der Zug wegen des Schnees nicht verspätet ist.",
    "Die Datei wird am Ende des Blocks automatisch geschlossen, auch wenn zwischendurch ein Fehler auftritt.",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("langid")
    english = [line.strip() for line in base().splitlines() if len(line.split()) > 6]
    rows = [f"__label__en {t}" for t in english] + [f"__label__fr {t}" for t in FRENCH]
    rows += [f"__label__de {t}" for t in GERMAN]
    train = folder / "train.txt"
    train.write_text("\n".join(rows * 5) + "\n", encoding="utf-8")
    trained = fasttext.train_supervised(str(train), epoch=30, lr=0.5, dim=16, minn=2, maxn=4, thread=1, verbose=0)
    path = folder / "lid.bin"
    trained.save_model(str(path))
    return str(path)


def _config(model: str, **changes) -> QualityConfig:
    # Language id alone: the other families off, so a verdict is the language filter's.
    off = dict(gopher_repetition=False, gopher_quality=False, c4=False, fineweb=False)
    return QualityConfig(language_model=model, **{**off, **changes})


FRENCH_DOC = " ".join(FRENCH[:3])
GERMAN_DOC = " ".join(GERMAN[:3])


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
