"""meta.json's one envelope for every kind: round trips, refusals by kind, version and shard name."""

from __future__ import annotations

import json

import pytest

from dew.data import formats
from dew.data.sections import ClipsSection, ImagesSection, TokensSection
from dew.data.tokens.opening import open_tokens

TOKENS = TokensSection(tokenizer="byte", tokenizer_hash="h" * 8, vocab_size=257, dtype="uint16", eos_id=256)
IMAGES = ImagesSection(encoding="jpeg", resize="center_crop", size=256, fields=("image", "caption", "url"))
CLIPS = ClipsSection(frames=16, frame_size=128, frame_rate=25.0, audio_rate=16000)


def shard(split: str, index: int, count: int, ext: str = "array_record", **counts: int) -> formats.Shard:
    name = formats.shard_name(split, index, count, ext)
    return formats.Shard(
        name=name, records=counts.get("records", 3), units=counts.get("units", 30), bytes=9, sha256="0"
    )


def meta(section, **splits: int) -> formats.Meta:
    shards = {split: tuple(shard(split, i, n) for i in range(n)) for split, n in splits.items()}
    return formats.Meta(section=section, splits=shards, config={"job": "test"}, inputs="abc")


@pytest.mark.parametrize("section", [TOKENS, IMAGES, CLIPS], ids=lambda s: s.KIND)
def test_every_kind_round_trips_through_json(section, tmp_path) -> None:
    written = meta(section, train=2, val=1)
    formats.write_meta(str(tmp_path), written)
    data = json.loads((tmp_path / formats.META).read_text())
    assert data["format"] == f"dew.{section.KIND}/{section.VERSION}"
    assert set(data) == {"format", "splits", "config", "inputs", "checksum", section.KIND}
    back = formats.read_meta(str(tmp_path), kind=section.KIND)
    assert back == written and back.fingerprint() == written.fingerprint()


def test_a_reader_of_one_kind_refuses_another_kinds_directory_by_name(tmp_path) -> None:
    formats.write_meta(str(tmp_path), meta(IMAGES, train=1))
    with pytest.raises(
        formats.WrongKindError, match=r"holds images \(dew.images/1\), not tokens: read it with ArrayRecordImages"
    ):
        formats.read_meta(str(tmp_path), kind="tokens")
    with pytest.raises(formats.WrongKindError, match="not tokens"):
        open_tokens(str(tmp_path))


def test_the_fingerprint_changes_with_what_records_mean_and_hold() -> None:
    base = meta(IMAGES, train=1)
    other_size = formats.Meta(section=ImagesSection(encoding="jpeg", resize="center_crop", size=128,
                                                    fields=IMAGES.fields), splits=base.splits)  # fmt: skip
    other_bytes = formats.Meta(section=IMAGES, splits={"train": (formats.Shard(
        name=base.splits["train"][0].name, records=3, units=30, bytes=9, sha256="1"),)})  # fmt: skip
    assert len({base.fingerprint(), other_size.fingerprint(), other_bytes.fingerprint()}) == 3


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d.update(format="dew.tokens/3"),
            "newer dew: format 'dew.tokens/3' is version 3, and this dew reads version 2: upgrade dew",
        ),
        (lambda d: d.update(format="dew.tokens/0"), "version 0 of tokens, and this dew reads version 2 only: rerun"),
        (lambda d: d.update(format="dew.sounds/1"), "not a dew format this version reads"),
        (lambda d: d["splits"]["train"][0].update(name="../train-00000-of-00002.array_record"), "inside the directory"),
        (lambda d: d["splits"]["train"][0].update(name="train-00000-of-00002.array_record/x"), "inside the directory"),
        (lambda d: d["splits"]["train"].pop(0), "must list shards 0..N-1 of N"),
        (lambda d: d["splits"]["train"][1].update(name="val-00001-of-00002.array_record"), "lists shards of another"),
        (lambda d: d["splits"]["train"][0].update(records=-1), "records must be a non-negative int"),
        (lambda d: d["tokens"].update(dtype="int64"), "dtype 'int64' must be one of"),
        (lambda d: d["tokens"].update(colour="blue"), "unknown tokens field"),
        (lambda d: d.update(extra=1), r"unknown field\(s\) \['extra'\]"),
    ],
)
def test_a_hand_edited_meta_json_is_refused_naming_the_file(edit, message, tmp_path) -> None:
    data = meta(TOKENS, train=2).to_json()
    edit(data)
    (tmp_path / formats.META).write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as error:
        formats.read_meta(str(tmp_path))
    assert str(tmp_path / formats.META) in str(error.value)


@pytest.mark.parametrize(
    ("section", "fields", "message"),
    [
        (ImagesSection, {"encoding": "gif"}, "encoding 'gif'"),
        (ImagesSection, {"encoding": "png", "resize": "center_crop"}, "size is set exactly when"),
        (ImagesSection, {"encoding": "png", "fields": ("image",)}, r"must hold the field\(s\) \['caption'\]"),
        (ClipsSection, {"frames": 0, "frame_size": 8, "frame_rate": 1.0}, "frames must be a positive int"),
        (ClipsSection, {"frames": 2, "frame_size": 8, "frame_rate": 0}, "frame_rate must be positive"),
        (
            TokensSection,
            {"tokenizer": "t", "tokenizer_hash": "h", "vocab_size": 70000, "dtype": "uint16"},
            "cannot hold",
        ),
    ],
)
def test_sections_validate_themselves(section, fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        section(**fields)


def test_a_shard_count_past_five_digits_is_refused_where_the_name_is_made() -> None:
    """`train-00000-of-100000.bin` does not parse back, so it used to be refused later, inside a worker."""
    last = formats.shard_name("train", formats.MAX_SHARDS - 1, formats.MAX_SHARDS, "bin")
    assert formats.parse_shard_name(last) == ("train", 99_998, 99_999, "bin")
    with pytest.raises(ValueError, match="at most 99999 shards, not 100000"):
        formats.shard_name("train", 0, formats.MAX_SHARDS + 1, "bin")


@pytest.mark.parametrize(
    ("edit", "field", "found", "reads"),
    [
        (lambda d: d.update(format="dew.tokens/3"), "format 'dew.tokens/3'", 3, 2),
        (lambda d: d["splits"]["train"][0].update(blocks_version=3), "blocks_version", 3, 2),
        (lambda d: d["splits"]["train"][0].update(index_version=2), "index_version", 2, 1),
    ],
    ids=["format", "blocks_version", "index_version"],
)
def test_a_version_from_a_newer_dew_says_upgrade_dew_not_invalid(edit, field, found, reads, tmp_path) -> None:
    """A committed corpus whose meta.json a newer dew wrote (its checksum matching, as that dew's would):
    the refusal names the field and both versions and says to upgrade, not that meta.json is invalid."""
    from tests.runtime.token_support import documents, write_corpus

    root = write_corpus(
        str(tmp_path / "corpus"), {"train": documents(20, seed=3, longest=50)}, kind="array_record", block_bytes=512
    )
    path = tmp_path / "corpus" / formats.META
    data = json.loads(path.read_text())
    assert data["splits"]["train"][0]["blocks_version"] == 2 and data["splits"]["train"][0]["index_version"] == 1
    edit(data)
    data["checksum"] = formats.meta_checksum(data)
    path.write_text(json.dumps(data))
    with pytest.raises(formats.NewerFormatError) as raised:
        open_tokens(root)
    message = str(raised.value)
    assert message.startswith(f"{path}: written by a newer dew: ")
    assert field in message and f"version {found}" in message and f"reads version {reads}" in message
    assert "upgrade dew" in message and "not a valid" not in message
