"""The clean job's pieces on their own: normalization, MinHash signatures, connected components, the section."""

from __future__ import annotations

import random
import sys
import unicodedata

import numpy as np
import pytest

from dew.data.formats import Meta, Shard
from dew.data.sections import DocumentsSection
from dew.preprocess.cleaning.components import SEEN, ConnectedComponents, NotConvergedError, large_star, small_star
from dew.preprocess.cleaning.minhash import MinHashConfig, Signer, exact_key, jaccard, normalize
from tests.preprocess.planted import exact_copy, near_copy, real_texts


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return real_texts(40)


def test_normalization_undoes_case_spacing_and_punctuation(texts: list[str]) -> None:
    assert normalize("  Hello,   WORLD!\n\tIt's  ok_ ") == "hello world it s ok"
    for text in texts:
        assert exact_key(normalize(exact_copy(text))) == exact_key(normalize(text))
    assert len({exact_key(normalize(t)) for t in texts}) == len(texts)


def test_combining_marks_on_a_letter_stay_in_its_word() -> None:
    """Python's \\w holds no combining mark: taken for punctuation, Devanagari's vowel signs split words, and
    these two sentences (a boy, a girl reading a book) both normalized to "लड क क त ब पढ रह थ"."""
    boy, girl = "लड़का किताब पढ़ रहा था", "लड़की किताब पढ़ रही थी"
    assert normalize(boy) == unicodedata.normalize("NFKC", boy) and normalize(girl).split(" ")[0] == "लड़की"
    assert exact_key(normalize(boy), boy) != exact_key(normalize(girl), girl)
    assert normalize("กินข้าว แล้ว") == "กินข้าว แล้ว"  # Thai: marks above and below its letters
    marks = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)).startswith("M")]
    assert len(marks) > 2000 and all(normalize("x" + m + "!") != "x" for m in marks)
    # A mark on a symbol, on "_" or on nothing goes with it: an emoji with its variation selector is wordless.
    spaced = ("\u2764\ufe0f", "a_\u0301b", "\u0301abc", "!\u0301\u0302a")
    assert [normalize(t) for t in spaced] == ["", "a b", "abc", "a"]


def test_invisible_format_characters_are_deleted(texts: list[str]) -> None:
    """A soft hyphen (or a zero-width joiner, a byte order mark) renders as nothing; made a space, it split
    its word, and a page hyphenated with soft hyphens was neither an exact nor a near duplicate of itself."""
    text = texts[0]
    hyphenated = " ".join(w[:4] + "\u00ad" + w[4:] if len(w) >= 8 else w for w in text.split(" "))
    assert hyphenated != text and exact_key(normalize(hyphenated)) == exact_key(normalize(text))
    formats = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(formats) > 100 and all(normalize("ab" + c + "cd") == "abcd" for c in formats)
    assert normalize("क्\u200dष") == "क्ष" and normalize("\u200b") == "" and normalize("a\u00ad!b") == "a b"


def test_signature_agreement_estimates_jaccard(texts: list[str]) -> None:
    signer = Signer(MinHashConfig())
    rng = random.Random(3)
    errors = []
    for text in texts:
        copy, similarity = near_copy(text, rng.uniform(0.5, 0.95), rng)
        a, b = signer.signature(normalize(text)), signer.signature(normalize(copy))
        errors.append(float(np.mean(a == b)) - similarity)
    # Each agreement rate is an unbiased estimate of the Jaccard similarity, off by ~0.04 alone (112 hashes).
    assert abs(np.mean(errors)) < 0.02
    assert np.std(errors) < 0.08


def test_signatures_depend_on_the_text_and_config_only(texts: list[str]) -> None:
    one, again, other = Signer(MinHashConfig()), Signer(MinHashConfig()), Signer(MinHashConfig(seed=2))
    text = normalize(texts[0])
    assert np.array_equal(one.signature(text), again.signature(text))
    assert not np.array_equal(one.signature(text), other.signature(text))
    keys = one.band_keys(one.signature(text))
    assert len(keys) == 14 and len(set(keys)) == 14 and all(len(k) == 12 for k in keys)
    assert one.signature("") is None
    assert one.shingles("two words").size == 1  # shorter than an n-gram: the whole text is the shingle
    assert jaccard(texts[0], texts[0], 5) == 1.0


def test_wordless_texts_are_exact_duplicates_only_of_the_same_text() -> None:
    wordless = ["***", "?! ...", "\U0001f600\U0001f389", "   \n\t ", "--- * ---"]
    assert {normalize(t) for t in wordless} == {""}  # every one normalizes to nothing
    keys = [exact_key(normalize(t), t) for t in wordless]
    assert len(set(keys)) == len(wordless)  # all "" normalized, yet no two the same document
    assert exact_key(normalize("***"), "***") == keys[0]  # the same text is still its own duplicate
    words = [exact_key(normalize(t), t) for t in ["a", "a b", "0"]]
    assert not set(words) & set(keys)
    assert Signer(MinHashConfig()).signature(normalize("***")) is None  # and no band to be near in


def test_a_huge_document_is_signed_in_memory_bounded_by_a_block() -> None:
    import tracemalloc

    signer = Signer(MinHashConfig())
    text = " ".join(f"w{i}" for i in range(100_000))  # 10^5 distinct shingles: 86 MiB hashed at once
    small = signer.signature(" ".join(f"w{i}" for i in range(100)))
    tracemalloc.start()
    try:
        signature = signer.signature(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"signing 10^5 shingles peaked at {peak / 2**20:.0f} MiB"
    # Blocked, it is still the minimum over every shingle: each hash at most the first 100 words' one.
    assert signature is not None and small is not None and (signature <= small).all()
    shingles = signer.shingles(text)
    with np.errstate(over="ignore"):
        whole = ((shingles[:2000, None] * signer.a + signer.b) >> np.uint64(32)).min(axis=0)
    assert (signature <= whole).all()


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="ngram"):
        MinHashConfig(ngram=0)
    with pytest.raises(ValueError, match="255 bands"):
        MinHashConfig(bands=300, rows=1)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        MinHashConfig(seed=-1)


def _union_find(edges: list[tuple[str, str]]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for e in edges for n in e}


def test_star_steps_keep_components_and_point_at_the_smallest() -> None:
    assert sorted(large_star(("c", ["a", "d", "e"]))) == [("a", "d"), ("a", "e")]
    assert sorted(small_star(("d", ["b", "c", "e"]))) == [("b", "c"), ("b", "d")]


def test_star_steps_on_a_hub_send_its_edges_once_while_they_remember_and_lose_none() -> None:
    few = ["c", "a", "e", "c", "a", "d", "e"]
    assert sorted(large_star(("b", few))) == [("a", "c"), ("a", "d"), ("a", "e")]
    assert sorted(small_star(("d", few))) == [("a", "c"), ("a", "d")]
    hub = [f"n{i:05d}" for i in range(SEEN + 10)] * 2  # more neighbours than a step remembers, each twice
    edges = list(large_star(("a", hub)))
    assert set(edges) == {("a", v) for v in hub} and len(edges) == SEEN + 2 * 10


def test_connected_components_match_union_find_and_refuse_too_few_rounds() -> None:
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    rng = random.Random(0)
    nodes = [f"{i:04d}" for i in range(200)]
    path = [(nodes[i], nodes[i + 1]) for i in range(40)]  # a long chain: the slowest to settle
    edges = path + [tuple(sorted(rng.sample(nodes[40:], 2))) for _ in range(80)]
    rng.shuffle(edges)
    truth = sorted(_union_find(edges).items())
    with beam.Pipeline() as p:
        assert_that(p | beam.Create(edges) | ConnectedComponents(8), equal_to(truth))
    with pytest.raises(Exception, match="rerun with a larger --cc_rounds"), beam.Pipeline() as p:
        _ = p | beam.Create(path) | ConnectedComponents(1)
    assert NotConvergedError.__module__ == "dew.preprocess.cleaning.components"


def test_documents_section_round_trips_through_meta() -> None:
    shard = Shard(name="train-00000-of-00001.parquet", records=2, units=10, bytes=100, sha256="0" * 64)
    meta = Meta(section=DocumentsSection(), splits={"train": (shard,)}, config={"job": "clean"})
    again = Meta.from_json(meta.to_json())
    assert again.format == "dew.documents/1" and again.section == DocumentsSection()
    with pytest.raises(ValueError, match="must hold the field"):
        DocumentsSection(fields=("id", "text"))
