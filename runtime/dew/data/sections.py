"""The kind-specific section of meta.json: what the records of one kind of committed directory are.

The envelope (dew.data.formats.Meta) is the same for every kind: splits, shards, checksums, the job's
config and inputs. Beside it sits one section named after the kind, holding what a reader of that kind
needs and a reader of any other kind must not guess: a tokenizer and dtype for tokens, an encoding and
size policy for images, a frame and audio layout for clips. A new kind of record is a new Section
subclass with its KIND, which registers itself in SECTIONS; nothing else in the contract changes.

Each section says what one unit of its records is (`UNIT`): a shard's `units` and the piece index count
token ids for tokens and record bytes for every kind whose records are packed dicts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

TOKEN_DTYPES = ("uint16", "uint32")
IMAGE_ENCODINGS = ("jpeg", "png", "webp")
RESIZE_POLICIES = ("keep", "shorter_side", "center_crop")
FRAME_ENCODINGS = ("raw", "jpeg")
AUDIO_DTYPES = ("float32", "int16")


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """uint16 while every id fits in it, uint32 beyond."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


# Every kind a committed directory can hold, by the name its section has in meta.json: each Section
# subclass with a KIND registers itself as it is defined.
SECTIONS: dict[str, type[Section]] = {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    """Base of every kind's section: its name in meta.json, its format version, its unit and its readers."""

    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    UNIT: ClassVar[str] = "bytes"
    # Named in the refusal a reader of another kind gives, so the user learns what reads this directory.
    READERS: ClassVar[str] = ""
    # The command that writes a directory of this kind, named when a reader finds one never committed.
    WRITER: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            if SECTIONS.get(cls.KIND, cls).__qualname__ != cls.__qualname__:
                raise TypeError(f"kind {cls.KIND!r} is taken by {SECTIONS[cls.KIND].__qualname__}")
            SECTIONS[cls.KIND] = cls

    @classmethod
    def format_tag(cls) -> str:
        return f"dew.{cls.KIND}/{cls.VERSION}"

    def identity(self) -> str:
        """The part of the section that changes what the records mean; it enters the corpus fingerprint."""
        text = json.dumps(self.to_json(), sort_keys=True)
        return f"{self.KIND}:{hashlib.sha256(text.encode()).hexdigest()}"

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in dataclasses.fields(self)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Section:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown {cls.KIND} field(s) {unknown}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _fields(kind: str, fields: tuple[str, ...], required: tuple[str, ...]) -> None:
    if len(set(fields)) != len(fields) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"{kind} fields must be unique non-empty names, got {list(fields)}")
    missing = [f for f in required if f not in fields]
    if missing:
        raise ValueError(f"{kind} records must hold the field(s) {missing}; they hold {list(fields)}")


def _positive(kind: str, **values: int | None) -> None:
    for name, value in values.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{kind} {name} must be a positive int, got {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokensSection(Section):
    """Token ids: the tokenizer that wrote them (name and a hash of its files), its vocabulary and ids."""

    KIND: ClassVar[str] = "tokens"
    VERSION: ClassVar[int] = 2
    UNIT: ClassVar[str] = "ids"
    READERS: ClassVar[str] = "TokenWindows or PackedTokens"
    WRITER: ClassVar[str] = "dew-preprocess tokenize"

    tokenizer: str
    tokenizer_hash: str
    vocab_size: int
    dtype: str
    eos_id: int | None = None
    bos_id: int | None = None

    def __post_init__(self) -> None:
        _positive("tokens", vocab_size=self.vocab_size)
        if self.dtype not in TOKEN_DTYPES:
            raise ValueError(f"tokens dtype {self.dtype!r} must be one of {TOKEN_DTYPES}")
        if np.dtype(self.dtype).itemsize < dtype_for_vocab(self.vocab_size).itemsize:
            raise ValueError(f"tokens dtype {self.dtype} cannot hold ids of a {self.vocab_size}-token vocabulary")
        for name in ("eos_id", "bos_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(f"tokens {name} {value} is outside the vocabulary of {self.vocab_size}")

    def identity(self) -> str:
        # Unchanged since dew.tokens/1, so derived files and saved positions of older corpora still match.
        return f"{self.tokenizer_hash}:{self.dtype}:{self.eos_id}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImagesSection(Section):
    """Encoded images with their captions, one packed dict a record.

    encoding is how the image bytes are stored; resize says what the writer did to the pixels (`keep`
    them, scale the `shorter_side` to size, or scale and `center_crop` to size × size); fields names
    every field of a record, `image` and `caption` always among them.

    Captions tokenized offline (the caption-tokenize job) add `input_ids` and `attention_mask` to every
    record, each caption_length little-endian int32 values, written by the tokenizer named here (its
    name and the hash of its files), so a reader knows which text encoder the ids are for.
    """

    KIND: ClassVar[str] = "images"
    READERS: ClassVar[str] = "ArrayRecordImages"
    WRITER: ClassVar[str] = "dew-preprocess images"  # or ingest-urls, which ends in the same directory

    encoding: str
    resize: str = "keep"
    size: int | None = None
    fields: tuple[str, ...] = ("image", "caption")
    caption_tokenizer: str | None = None
    caption_tokenizer_hash: str | None = None
    caption_length: int | None = None

    def __post_init__(self) -> None:
        tokenized = (self.caption_tokenizer, self.caption_tokenizer_hash, self.caption_length)
        if any(v is None for v in tokenized) and any(v is not None for v in tokenized):
            raise ValueError("images caption_tokenizer, caption_tokenizer_hash and caption_length are set together")
        if self.caption_length is not None:
            _positive("images", caption_length=self.caption_length)
            _fields("images", self.fields, ("input_ids", "attention_mask"))
        if self.encoding not in IMAGE_ENCODINGS:
            raise ValueError(f"images encoding {self.encoding!r} must be one of {IMAGE_ENCODINGS}")
        if self.resize not in RESIZE_POLICIES:
            raise ValueError(f"images resize {self.resize!r} must be one of {RESIZE_POLICIES}")
        if (self.resize == "keep") != (self.size is None):
            raise ValueError("images size is set exactly when resize is not 'keep'")
        _positive("images", size=self.size)
        _fields("images", self.fields, ("image", "caption"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipsSection(Section):
    """Decoded video clips with their audio, one packed dict a record.

    Every clip holds `frames` frames of frame_size × frame_size RGB at frame_rate, stored raw (uint8) or
    as one JPEG a frame, and the audio spanning them at audio_rate in audio_dtype. `fields` says which
    fields a record holds: `has_audio` beside `audio` says whether the clip's video has an audio stream
    at all (directories written before it was recorded lack the field, and stay version 1: a reader that
    ignores the field reads every other byte as before).
    """

    KIND: ClassVar[str] = "clips"
    # VideoDataset reads raw video files; a committed clips directory needs no decoding.
    READERS: ClassVar[str] = "ClipShards (dew.data.video.clip_shards, registered as clip_shards)"
    WRITER: ClassVar[str] = "dew-preprocess decode-clips"

    frames: int
    frame_size: int
    frame_rate: float
    frame_encoding: str = "raw"
    audio_rate: int | None = None
    audio_dtype: str = "float32"
    fields: tuple[str, ...] = ("frames", "audio", "caption")

    def __post_init__(self) -> None:
        _positive("clips", frames=self.frames, frame_size=self.frame_size, audio_rate=self.audio_rate)
        if not isinstance(self.frame_rate, int | float) or self.frame_rate <= 0:
            raise ValueError(f"clips frame_rate must be positive, got {self.frame_rate!r}")
        if self.frame_encoding not in FRAME_ENCODINGS:
            raise ValueError(f"clips frame_encoding {self.frame_encoding!r} must be one of {FRAME_ENCODINGS}")
        if self.audio_dtype not in AUDIO_DTYPES:
            raise ValueError(f"clips audio_dtype {self.audio_dtype!r} must be one of {AUDIO_DTYPES}")
        _fields("clips", self.fields, ("frames", "caption"))
        if "has_audio" in self.fields and "audio" not in self.fields:
            raise ValueError("clips has_audio describes the clips' audio: it is a field only beside audio")


DOCUMENT_FIELDS = ("id", "text", "source", "row")


def document_shard(doc_id: str, shards: int) -> int:
    """The shard of a documents split of `shards` shards that holds document `doc_id` (or, for a removed
    one, its removal table): where the id, read as a fraction of 2**64, falls. The writer places each
    document by this alone, so a reader finds one by id in a single shard."""
    return min(shards - 1, int(int(doc_id, 16) / float(1 << 64) * shards))


@dataclasses.dataclass(frozen=True, kw_only=True)
class DocumentsSection(Section):
    """Raw text documents, one packed dict a record, every field UTF-8 bytes (a parquet binary column).

    `id` is the document's stable id (16 hex digits drawn from its source and row), `text` the document
    as it was read, `source` the input file it came from and `row` its row (line, parquet row) there in
    decimal. The writing job's stats.json and removal tables say why every other document of its inputs
    is not here.
    """

    KIND: ClassVar[str] = "documents"
    READERS: ClassVar[str] = "dew-preprocess tokenize --input DIR"
    WRITER: ClassVar[str] = "dew-preprocess clean"

    fields: tuple[str, ...] = DOCUMENT_FIELDS

    def __post_init__(self) -> None:
        _fields("documents", self.fields, DOCUMENT_FIELDS)
