"""Documents for the quality filters' tests and benchmark: real text and degraded variants of it.

Real text present on every machine: CPython's pydoc topics and the stdlib's docstrings, cut at paragraph
boundaries into documents of about 2 KB. Each degraded variant is made to trip one family's rules.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path


def _documents(texts: list[str], size: int = 2048) -> list[str]:
    """Whole paragraphs gathered into documents of about `size` characters."""
    out: list[str] = []
    for text in texts:
        current = ""
        for paragraph in text.split("\n\n"):
            if current and len(current) + len(paragraph) > size:
                out.append(current)
                current = ""
            current = f"{current}\n\n{paragraph}" if current else paragraph
        if current.strip():
            out.append(current)
    return out


@cache
def real_texts() -> list[str]:
    import ast
    import sysconfig
    from pydoc_data.topics import topics

    texts = [topics[name] for name in sorted(topics)]
    modules = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    for path in [module for module in modules if module.stat().st_size <= 40_000]:  # parsing is the cost
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        docstrings = [
            ast.get_docstring(node)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        ]
        texts.append("\n\n".join(d for d in docstrings if d))
    return _documents(texts)


def prose(texts: list[str]) -> list[str]:
    """The documents that read as prose (most words are letters, maybe with a stop), the degraded ones' bases."""

    def wordy(text: str) -> bool:
        words = text.split()
        return bool(words) and sum(w.strip(".,;:()").isalpha() for w in words) >= 0.85 * len(words)

    return [text for text in texts if wordy(text)]


def degrade(text: str, rng: random.Random) -> str:
    """One degraded variant of `text`, each kind aimed at one family's rules."""
    lines = [line for line in text.splitlines() if line.strip()] or [text]
    sentences = [s.strip() + "." for s in text.replace("\n", " ").split(". ") if s.strip()]
    kind = rng.randrange(12)
    if kind == 0:  # repeated lines
        line = rng.choice(lines)
        return "\n".join(lines + [line] * rng.randint(2, 12))
    if kind == 1:  # short lines
        words = text.split()
        width = rng.randint(2, 6)
        return "\n".join(" ".join(words[i : i + width]) for i in range(0, len(words), width))
    if kind == 2:  # no punctuation
        return text.translate(str.maketrans("", "", ".!?,;:\"'"))
    if kind == 3:  # bullets
        share = rng.uniform(0.7, 1.0)
        return "\n".join(("- " if rng.random() < share else "") + s for s in sentences)
    if kind == 4:  # lorem ipsum
        at = rng.randrange(len(lines) + 1)
        return "\n".join([*lines[:at], "Lorem ipsum dolor sit amet, consectetur adipiscing elit.", *lines[at:]])
    if kind == 5:  # javascript and cookie notices on many lines
        notes = ["Please enable JavaScript to view this page.", "This site uses cookies to improve your experience."]
        return "\n".join(line if rng.random() < 0.5 else rng.choice(notes) for line in sentences)
    if kind == 6:  # curly braces
        return "\n".join(s if rng.random() < 0.8 else s.replace(" ", " { ", 1) for s in sentences)
    if kind == 7:  # ellipses
        return "\n".join(s[:-1] + ("..." if rng.random() < 0.5 else "") for s in sentences)
    if kind == 8:  # hashes
        return " ".join(f"#{w}" if rng.random() < 0.15 else w for w in text.split(" "))
    if kind == 9:  # few sentences
        return " ".join(sentences[: rng.randint(1, 6)])
    if kind == 10:  # repeated paragraph block
        return text + ("\n\n" + text.split("\n\n")[0]) * rng.randint(1, 4)
    return "\n".join(sentences)  # one sentence a line: FineWeb's and C4's own view of prose


def corpus(count: int) -> list[str]:
    """`count` documents: real ones (spread over the sources) and as many degraded variants."""
    rng = random.Random(27)
    real = real_texts()
    step = max(1, len(real) // max(1, count // 2))
    out = real[::step][: count // 2]
    bases = prose(real)
    while len(out) < count:
        out.append(degrade(rng.choice(bases), rng))
    return out


def recorded_sample() -> list[str]:
    """The documents whose datatrove verdicts tests/preprocess/datatrove_verdicts.json records."""
    rng = random.Random(2027)
    real = real_texts()
    bases = prose(real)
    return real[::4] + [degrade(rng.choice(bases), rng) for _ in range(300)]


def fingerprint(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


BASE_TOPIC = "exceptions"  # the pydoc topic datatrove keeps whole (the recorded verdicts check it)
STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


def base() -> str:
    from pydoc_data.topics import topics

    return topics[BASE_TOPIC]


def _sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in " ".join(text.split()).split(". ") if s.strip()]


def _unique_words(count: int, start: int = 0) -> list[str]:
    """Distinct made-up words of 8 letters (no digits: they must count as words with a letter)."""
    letters = "bcdfghjklmnpqrstvwxz"
    out = []
    for number in range(start, start + count):
        word = ""
        for _ in range(4):
            number, digit = divmod(number, 20)
            word += letters[digit] + "aeiou"[digit % 5]
        out.append(word)
    return out


def _padded(repeated: list[str], share: float) -> str:
    # Unique words, then `repeated` twice, so the repeated words' letters are `share` of the text.
    letters = len("".join(repeated))
    size = round(letters / share)
    body = " ".join(repeated)
    pad: list[str] = []
    filler = iter(_unique_words(100_000, start=50_000))
    while len(" ".join(pad)) + 2 * len(body) + 2 < size:
        pad.append(next(filler))
    return " ".join([*pad, body, body])


def _short_lines(words: list[str], width: int) -> list[str]:
    lines, line = [], ""
    for word in words:
        if line and len(line) + len(word) + 2 > width:
            lines.append(line + ".")
            line = ""
        line = f"{line} {word}" if line else word
    return lines


@cache
def crafted() -> dict[str, str]:
    """reason code -> a document that fails exactly that rule first (in datatrove's order, default thresholds)."""
    text = base()
    sentences = _sentences(text)
    prose = "\n".join(sentences)
    words = text.split()
    paragraphs = text.split("\n\n")
    longest = max(paragraphs, key=len)
    long_line = " ".join(sentences[6:10])
    quads = list(zip(*[iter(_unique_words(320))] * 4, strict=True))
    quads_b = list(zip(*[iter(_unique_words(160, start=7000))] * 4, strict=True))
    made_up = [" ".join(_unique_words(12, start=900 + 12 * i)) + "." for i in range(6)]
    docs = {
        "gopher_rep_empty": "",
        "gopher_rep_dup_para_frac": "\n\n".join(paragraphs[:3] + paragraphs[1:3] * 2),
        "gopher_rep_dup_para_char_frac": "\n\n".join([longest, *made_up[:6], longest]),
        "gopher_rep_dup_line_frac": "\n".join(sentences[:6] + ["Try again."] * 6),
        "gopher_rep_dup_line_char_frac": "\n".join([*sentences[:6], long_line, long_line]),
        "gopher_rep_top_2_gram": " ".join(f"the error {w}" for w in _unique_words(80)),
        "gopher_rep_top_3_gram": " ".join(f"aaaa bbbb cccc {a} {b} {c} {d}" for a, b, c, d in quads),
    }
    unique = _unique_words(640)
    docs["gopher_rep_top_4_gram"] = " ".join(
        "aaaa bbbb cccc dddd " + " ".join(unique[8 * i : 8 * i + 8]) for i in range(80)
    )
    thresholds = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
    for n, fraction in thresholds.items():
        above = thresholds.get(n - 1, 0.2)
        repeated = _unique_words(n * 12, start=20_000)
        docs[f"gopher_rep_duplicated_{n}_n_grams"] = _padded(repeated, (fraction + above) / 2 if n > 5 else 0.3)
    docs.update(
        {
            "gopher_short_doc": " ".join(_unique_words(40)) + " the and.",
            "gopher_long_doc": "\n".join(
                " ".join(chunk) + "." for chunk in zip(*[iter(_unique_words(100_010))] * 10, strict=True)
            ),
            "gopher_below_avg_threshold": "\n".join(" ".join(w[:2] for w in s.split()) + " the of" for s in sentences),
            "gopher_above_avg_threshold": " ".join(w + "ification" if w.isalpha() else w for w in words),
            "gopher_too_many_hashes": " ".join(f"#{w}" if i % 6 == 0 else w for i, w in enumerate(words)),
            "gopher_too_many_ellipsis": " ".join(f"{w}..." if i % 6 == 0 else w for i, w in enumerate(words)),
            "gopher_too_many_bullets": "\n".join(f"- {s}" for s in sentences),
            "gopher_too_many_end_ellipsis": "\n".join(
                s[:-1] + "…" if i % 2 == 0 else s for i, s in enumerate(sentences)
            ),
            "gopher_below_alpha_threshold": " ".join(f"{w} {i}" if i % 2 == 0 else w for i, w in enumerate(words)),
            "gopher_enough_stop_words": " ".join(w.upper() if w in STOP_WORDS else w for w in words),
            "c4_lorem_ipsum": prose + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit.",
            "c4_curly_bracket": prose + "\nSet the {name} field to the class of the exception.",
            "c4_too_few_sentences": "\n".join(s.rstrip(".!?\"'") for s in sentences[:-3])
            + "\n"
            + " ".join(sentences[-3:]),
            "fineweb_line_punct_ratio": "\n".join(f"{s[:-1]} as written'" for s in sentences),
            "fineweb_short_line_ratio": "\n".join(_short_lines([w for w in words if w.isalpha()], 30)),
            "fineweb_char_dup_ratio": "\n".join([*sentences, sentences[0]]),
            # Three words a line ("Inc." is one word), over 30 characters, mean word length under 10.
            "fineweb_list_ratio": "\n".join(f"{a}{b[:5]} {c}{d[:4]} Inc." for a, b, c, d in quads_b)
            + "\nThe class of the exception is raised.",
        }
    )
    return docs


# Sentences for a language-id model trained in the tests and the benchmark (written for them).
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


HELD_OUT = {"fr": " ".join(FRENCH[:3]), "de": " ".join(GERMAN[:3])}


def language_documents() -> list[str]:
    """French and German documents of three sentences each, for the language filter."""
    return [" ".join(group[i : i + 3]) for group in (FRENCH, GERMAN) for i in range(len(group) - 2)]


def train_language_model(folder: Path) -> str:
    """A fastText model of three languages (en from the base topic, fr, de) saved in `folder`; its path.

    Seven lines a language, so that none outweighs the others; the first three French and German sentences
    are held out: HELD_OUT documents are made of them."""
    import fasttext

    english = [line.strip() for line in base().splitlines() if len(line.split()) > 6]
    rows = [f"__label__en {t}" for t in english[:7]] + [f"__label__fr {t}" for t in FRENCH[3:]]
    rows += [f"__label__de {t}" for t in GERMAN[3:]]
    train = folder / "train.txt"
    train.write_text("\n".join(rows * 5) + "\n", encoding="utf-8")
    trained = fasttext.train_supervised(str(train), epoch=50, lr=1.0, dim=16, minn=2, maxn=5, thread=1, verbose=0)
    path = folder / "lid.bin"
    trained.save_model(str(path))
    return str(path)
