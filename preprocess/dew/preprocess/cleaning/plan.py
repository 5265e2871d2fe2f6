"""CleanPlan: everything that decides a cleaned documents directory's bytes, and its records.

A document's stable id is 16 hex digits of blake2b over its source path and row, so it names the same
document in every run over the same file, whatever other files are read beside it. Inside the job a
document is a node `RRid`: RR is its corpus's rank (each --against corpus in the order given, then the
corpus being cleaned), so sorting nodes sorts by corpus first and id second. Of a cluster of
duplicates the smallest node is kept: a document of an --against corpus whenever one is in the
cluster (it is committed already), else the document with the smallest id.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.formats import MAX_SHARDS, Shard
from dew.data.sections import DocumentsSection
from dew.preprocess.cleaning.minhash import MinHashConfig
from dew.preprocess.cleaning.removals import document_id as document_id  # Beam-free there, for inspect
from dew.preprocess.document_rows import ReadOptions
from dew.preprocess.files import join
from dew.preprocess.shard_files import ShardFormat

# Reasons a document of the inputs is removed as a duplicate.
EXACT_DUPLICATE = "exact_duplicate"
NEAR_DUPLICATE = "near_duplicate"
DUPLICATE_REASONS = (EXACT_DUPLICATE, NEAR_DUPLICATE)
MAX_AGAINST = 98
# The rules that decide each document's fate: normalizing a text, its shingles, the quality filters'
# words and lines. Raised when a change decides any document differently (2: a combining mark on a
# letter stays in its word, invisible format characters are deleted, not spaced). The config records it,
# so a run resumed after an upgrade refuses the shards the old rules wrote instead of mixing the two.
RULES_VERSION = 2


def node(rank: int, doc_id: str) -> bytes:
    return bytes((rank,)) + bytes.fromhex(doc_id)


def split_node(name: bytes) -> tuple[int, str]:
    """(corpus rank, document id) of a node."""
    return name[0], name[1:].hex()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Against:
    """A committed documents corpus to deduplicate against: its path, fingerprint and shards (as meta.json
    lists them, so a worker checks each against its sha256 before reading it)."""

    path: str
    fingerprint: str
    shards: tuple[Shard, ...]

    def paths(self) -> tuple[str, ...]:
        return tuple(join(self.path, shard.name) for shard in self.shards)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanPlan:
    """What the clean job does, and where it writes.

    quality: the quality filters' thresholds (a dew.preprocess.cleaning.quality.QualityConfig), None to
        run none; language_model_sha256: the sha256 of its language model file, when it names one (the
        path alone would let a model replaced there mix with the old one's shards on a rerun); exact /
        near: whether to remove exact and near duplicates; minhash: the near-duplicate test; cc_rounds:
        large-star/small-star round pairs the duplicate clusters may take to settle.
    max_drop_fraction: the most of the documents read that may be removed before the job fails
        uncommitted; it decides whether the directory commits, never a byte of it.
    """

    output: str
    read: ReadOptions = dataclasses.field(default_factory=ReadOptions)
    quality: Any = None
    language_model_sha256: str = ""
    exact: bool = True
    near: bool = True
    minhash: MinHashConfig = dataclasses.field(default_factory=MinHashConfig)
    cc_rounds: int = 10
    against: tuple[Against, ...] = ()
    shard_bytes: int = 256 << 20
    num_shards: int | None = None
    max_drop_fraction: float = 0.95

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drop_fraction <= 1.0:
            raise ValueError(f"max_drop_fraction must be in [0, 1], got {self.max_drop_fraction}")
        if self.cc_rounds < 1:
            raise ValueError(f"cc_rounds must be positive, got {self.cc_rounds}")
        if len(self.against) > MAX_AGAINST:
            raise ValueError(f"at most {MAX_AGAINST} --against corpora, got {len(self.against)}")
        if self.against and not (self.exact or self.near):
            raise ValueError("--against removes duplicates: it needs --exact or --near")
        if getattr(self.quality, "language_model", "") and len(self.language_model_sha256) != 64:
            raise ValueError("a plan with a language model records its sha256 (langid.model_sha256)")
        if self.shard_bytes < 1 or (self.num_shards is not None and not 1 <= self.num_shards <= MAX_SHARDS):
            raise ValueError(f"shard_bytes must be positive and num_shards in 1..{MAX_SHARDS}")

    @property
    def rank(self) -> int:
        """The corpus rank of the documents being cleaned: after every --against corpus."""
        return len(self.against)

    def section(self) -> DocumentsSection:
        return DocumentsSection()

    def shard_format(self) -> ShardFormat:
        return ShardFormat(ext="parquet", section=self.section())

    def config(self) -> dict[str, Any]:
        """The JSON config meta.json records: every field that changes a byte of output."""
        config = {
            "job": "clean",
            **dataclasses.asdict(self.read),
            "quality": None if self.quality is None else dataclasses.asdict(self.quality),
            "language_model_sha256": self.language_model_sha256,
            "exact": self.exact,
            "near": self.near,
            "rules": RULES_VERSION,
            "minhash": dataclasses.asdict(self.minhash) if self.near else None,
            "against": [{"path": a.path, "fingerprint": a.fingerprint} for a in self.against],
            "shard_bytes": self.shard_bytes,
            "num_shards": self.num_shards,
        }
        config.pop("strict")
        return json.loads(json.dumps(config))


def record(doc_id: str, text: str | bytes, source: str, row: int) -> bytes:
    """A documents record: the packed dict of its fields, in the section's order (text: a str, or its
    UTF-8 bytes)."""
    encoded = text if isinstance(text, bytes) else text.encode("utf-8")
    return pack_dict_of_byte_arrays(
        {"id": doc_id.encode(), "text": encoded, "source": source.encode("utf-8"), "row": b"%d" % row}
    )
