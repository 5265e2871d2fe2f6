"""The on-disk contract between the preprocess jobs (writers) and this runtime (reader).

A corpus is a directory of shards named `<split>-SSSSS-of-NNNNN.<ext>` plus `meta.json`, which the
writer commits last: a directory without it is not readable yet. meta.json records the tokenizer,
dtype, eos/bos ids and, per split, each shard's token and document counts, byte size and sha256.
Derived files (document index, packing plan) record the fingerprint of the corpus they came from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from dew.data import remote

META = "meta.json"
TOKENS_FORMAT = "dew.tokens/1"
SHARD_EXTENSIONS = ("bin", "array_record", "parquet")
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.(?P<ext>[a-z_]+)$")


def shard_name(split: str, index: int, count: int, ext: str) -> str:
    """`train-00003-of-00016.bin`: the name every writer gives shard `index` of `count`."""
    if ext not in SHARD_EXTENSIONS:
        raise ValueError(f"shard extension {ext!r} is not one of {SHARD_EXTENSIONS}")
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} is outside 0..{count - 1}")
    return f"{split}-{index:05d}-of-{count:05d}.{ext}"


def parse_shard_name(name: str) -> tuple[str, int, int, str] | None:
    """(split, index, count, ext) of a shard file name, or None for any other file."""
    match = _SHARD.match(os.path.basename(name))
    if not match:
        return None
    return match["split"], int(match["index"]), int(match["count"]), match["ext"]


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """uint16 while every id fits in it, uint32 beyond."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def sha256_file(path: str, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class Shard:
    """One committed shard as meta.json records it."""

    name: str
    tokens: int
    documents: int
    bytes: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class CorpusMeta:
    """meta.json of a token corpus."""

    tokenizer: str
    tokenizer_hash: str
    vocab_size: int
    dtype: str
    eos_id: int | None
    bos_id: int | None
    splits: Mapping[str, tuple[Shard, ...]]
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    inputs: str = ""
    format: str = TOKENS_FORMAT

    def __post_init__(self) -> None:
        if self.format != TOKENS_FORMAT:
            raise ValueError(f"meta.json format {self.format!r} is not {TOKENS_FORMAT!r}")
        if np.dtype(self.dtype) not in (np.dtype(np.uint16), np.dtype(np.uint32)):
            raise ValueError(f"meta.json dtype {self.dtype!r} must be uint16 or uint32")
        if np.dtype(self.dtype).itemsize < dtype_for_vocab(self.vocab_size).itemsize:
            raise ValueError(f"meta.json dtype {self.dtype} cannot hold ids of a {self.vocab_size}-token vocabulary")
        for name in ("eos_id", "bos_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(f"meta.json {name} {value} is outside the vocabulary of {self.vocab_size}")

    def shards(self, split: str) -> tuple[Shard, ...]:
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"the corpus has no split {split!r}; splits: {', '.join(sorted(self.splits))}") from None

    def fingerprint(self) -> str:
        """Identifies the corpus content: tokenizer plus every shard's checksum, split by split."""
        digest = hashlib.sha256(f"{self.tokenizer_hash}:{self.dtype}:{self.eos_id}".encode())
        for split in sorted(self.splits):
            for shard in self.splits[split]:
                digest.update(f"{split}/{shard.name}/{shard.sha256}".encode())
        return digest.hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["splits"] = {s: [dataclasses.asdict(x) for x in shards] for s, shards in self.splits.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = META) -> CorpusMeta:
        try:
            fields = dict(data)
            fields["splits"] = {
                split: tuple(Shard(**shard) for shard in shards) for split, shards in data["splits"].items()
            }
            return cls(**fields)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{where}: not a valid {TOKENS_FORMAT} meta.json: {error}") from None


def write_meta(directory: str, meta: CorpusMeta) -> None:
    """Writes meta.json atomically (temporary name, then rename): the commit of a local corpus."""
    path = os.path.join(directory, META)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(meta.to_json(), f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_meta(directory: str) -> CorpusMeta:
    """The committed meta.json of a corpus directory, refusing an uncommitted one by path."""
    path = os.path.join(directory, META)
    if remote.is_remote(path):
        try:
            return CorpusMeta.from_json(json.loads(remote.read_bytes(path)), where=path)
        except FileNotFoundError:
            pass  # reported below, as for a local directory
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); rerun the preprocess job") from None
    if remote.is_remote(path) or not os.path.exists(path):
        raise FileNotFoundError(
            f"{directory} has no {META}: the corpus was never committed (a preprocess job still running, "
            "or one that crashed). Rerun `dew-preprocess tokenize ... --output "
            f"{directory}`; it skips shards already committed."
        )
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); rerun the preprocess job to rewrite it") from None
    return CorpusMeta.from_json(data, where=path)


def is_directory(path: str) -> bool:
    """Whether `path` names a corpus directory rather than one data file (gs:// has no real directories)."""
    if remote.is_remote(path):
        return not path.rstrip("/").endswith(tuple(f".{ext}" for ext in SHARD_EXTENSIONS))
    return os.path.isdir(path)


def exists(path: str) -> bool:
    if remote.is_remote(path):
        return remote.exists(path) or (is_directory(path) and remote.exists(os.path.join(path, META)))
    return os.path.exists(path)


def local_file(path: str) -> str:
    """A local path holding the data file `path`: itself, or a gs:// file's copy in the local cache."""
    return remote.fetch(path) if remote.is_remote(path) else path


def read_sibling_meta(path: str) -> dict[str, Any] | None:
    """meta.json beside a plain data file as raw JSON, or None: a nanoGPT-style .bin has none."""
    meta = os.path.join(os.path.dirname(path) or ".", META)
    if remote.is_remote(meta):
        try:
            return json.loads(remote.read_bytes(meta))
        except FileNotFoundError:
            return None
    if not os.path.exists(meta):
        return None
    with open(meta) as f:
        return json.load(f)


def verify_shard(directory: str, shard: Shard, *, checksum: bool = False) -> str:
    """The local path of a committed shard, after checking its size (and sha256 when asked).

    A gs:// shard is fetched into the local cache and always checked against its sha256 there.
    """
    path = os.path.join(directory, shard.name)
    if remote.is_remote(path):
        return remote.fetch(path, size=shard.bytes, sha256=shard.sha256)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is listed in {META} but missing; rerun the preprocess job")
    size = os.path.getsize(path)
    if size != shard.bytes:
        raise ValueError(
            f"{path} holds {size} bytes but {META} records {shard.bytes}: the shard is truncated or "
            "was rewritten after the commit; rerun the preprocess job with --overwrite"
        )
    if checksum and sha256_file(path) != shard.sha256:
        raise ValueError(f"{path} fails its sha256 check against {META}; rerun the preprocess job with --overwrite")
    return path


def check_same_tokenizer(metas: Mapping[str, CorpusMeta]) -> None:
    """Refuses to mix corpora whose ids mean different tokens."""
    kinds = {(m.tokenizer, m.tokenizer_hash, m.vocab_size) for m in metas.values()}
    if len(kinds) > 1:
        listing = "; ".join(f"{path}: {m.tokenizer} ({m.tokenizer_hash[:12]})" for path, m in sorted(metas.items()))
        raise ValueError(
            f"these corpora come from different tokenizers, so their ids mean different tokens: {listing}. "
            "Tokenize every corpus of a mixture with one tokenizer."
        )


def derived_path(directory: str, split: str, name: str) -> str:
    """Where an offline derived file lives: `<split>.<name>.npz` beside the shards."""
    return os.path.join(directory, f"{split}.{name}.npz")


def save_derived(path: str, fingerprint: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Saves arrays derived from a corpus, stamped with that corpus's fingerprint, atomically."""
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    np.savez(tmp, fingerprint=np.array(fingerprint), **arrays)
    os.replace(tmp, path)


def load_derived(path: str, fingerprint: str, names: Iterable[str]) -> dict[str, np.ndarray] | None:
    """The arrays of a derived file if it exists and was derived from this corpus; None otherwise."""
    if remote.is_remote(path):
        if not remote.exists(path):
            return None
        path = remote.fetch(path)  # the fingerprint inside says whether it still belongs to the corpus
    elif not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as data:
        if str(data["fingerprint"]) != fingerprint:
            return None
        return {name: data[name] for name in names}
