"""The on-disk contract between the preprocess jobs (writers) and this runtime (reader).

A committed directory holds records of one kind (token ids, images, clips, ...) in shards named
`<split>-SSSSS-of-NNNNN.<ext>`, plus `meta.json`, which the writer commits last: a directory without it
is not readable yet. meta.json is one envelope for every kind (`Meta`): its format tag, per split each
shard's record count, length in the kind's unit, byte size and sha256, the writing job's config and
input fingerprint, and the kind's own section (dew.data.sections), plus a checksum over the rest of
itself. Derived files (piece index, document index, packing plan) record the fingerprint of the
directory they came from, and the split and role they were written as.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from dew.data import committed, integrity, remote, shard_cache

# The derived files' contract lives in dew.data.derived; readers and writers reach it through here too.
from dew.data.derived import derived_path as derived_path
from dew.data.derived import load_derived as load_derived
from dew.data.derived import save_derived as save_derived
from dew.data.errors import UserError, adopt
from dew.data.sections import SECTIONS, Section, TokensSection

# meta.json's entry of one shard lives in dew.data.shard_entry; readers and writers reach it through here too.
from dew.data.shard_entry import NewerFormatError as NewerFormatError
from dew.data.shard_entry import Shard as Shard
from dew.data.shard_entry import newer_version

# How shards are named lives in dew.data.shard_names; readers and writers reach it through here too.
from dew.data.shard_names import BLOCKS_SUFFIX as BLOCKS_SUFFIX
from dew.data.shard_names import MAX_SHARDS as MAX_SHARDS
from dew.data.shard_names import SHARD_EXTENSIONS as SHARD_EXTENSIONS
from dew.data.shard_names import parse_shard_name as parse_shard_name
from dew.data.shard_names import shard_extension as shard_extension
from dew.data.shard_names import shard_name as shard_name

SectionT = TypeVar("SectionT", bound=Section)

META = committed.META
# Token corpora written before the shared envelope; still read, never written.
LEGACY_TOKENS_FORMAT = "dew.tokens/1"
_OVERWRITE = remote.OVERWRITE
# A damaged file is the user's to replace, not a bug; remote.py defines it, formats counts it a user error.
DamagedError = adopt(remote.DamagedError)
_log = logging.getLogger("dew.data")


def sha256_file(path: str) -> str:
    return integrity.digest_file(path, "sha256")


class WrongKindError(UserError, ValueError):
    """A reader of one kind of record was pointed at a directory holding another."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Meta:
    """meta.json of a committed directory: the envelope every kind shares, plus the kind's own section.

    splits maps each split to its shards in index order (every one of its `-of-N`); config is the
    writing job's config and inputs the fingerprint of what it read, which a rerun compares against.
    """

    section: Section
    splits: Mapping[str, tuple[Shard, ...]]
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    inputs: str = ""

    def __post_init__(self) -> None:
        for split, shards in self.splits.items():
            parsed = [p for p in map(parse_shard_name, (shard.name for shard in shards)) if p and p[0] == split]
            if len(parsed) != len(shards):
                raise ValueError(f"split {split!r} lists shards of another split: {[s.name for s in shards]}")
            if any(p[1] != i or p[2] != len(shards) or p[3] != parsed[0][3] for i, p in enumerate(parsed)):
                raise ValueError(
                    f"split {split!r} must list shards 0..N-1 of N, all of one extension; it lists "
                    f"{[s.name for s in shards]}"
                )

    @property
    def kind(self) -> str:
        return self.section.KIND

    @property
    def format(self) -> str:
        return self.section.format_tag()

    def expect(self, kind: str, where: str) -> Section:
        """This directory's section, refusing a directory of another kind by name."""
        if self.kind != kind:
            raise WrongKindError(
                f"{where} holds {self.kind} ({self.format}), not {kind}: read it with "
                f"{self.section.READERS or 'a reader of ' + self.kind}"
            )
        return self.section

    @property
    def tokens(self) -> TokensSection:
        """The tokens section; a directory of another kind is refused."""
        return self.section_as(TokensSection)

    def section_as(self, cls: type[SectionT]) -> SectionT:
        """The section, typed as the kind `cls` declares; a directory of another kind is refused."""
        section = self.expect(cls.KIND, "this directory")
        assert isinstance(section, cls)
        return section

    def shards(self, split: str) -> tuple[Shard, ...]:
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"the directory has no split {split!r}; splits: {', '.join(sorted(self.splits))}") from None

    @property
    def record_count(self) -> int:
        """The records of every split together: what a job wrote, for its books."""
        return sum(shard.records for shards in self.splits.values() for shard in shards)

    def fingerprint(self) -> str:
        """Identifies the content: the section's meaning plus every shard's checksum, split by split."""
        digest = hashlib.sha256(self.section.identity().encode())
        for split in sorted(self.splits):
            for shard in self.splits[split]:
                digest.update(f"{split}/{shard.name}/{shard.sha256}".encode())
        return digest.hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "splits": {s: [x.to_json() for x in shards] for s, shards in self.splits.items()},
            "config": dict(self.config),
            "inputs": self.inputs,
            self.kind: self.section.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = META) -> Meta:
        tag = data.get("format") if isinstance(data, Mapping) else None
        try:
            if isinstance(data, Mapping) and "checksum" in data and data["checksum"] != meta_checksum(data):
                raise DamagedError(
                    f"its checksum does not match its content, so it was edited after the commit; {_OVERWRITE} "
                    "to rewrite the directory"
                )
            if tag == LEGACY_TOKENS_FORMAT:
                return _from_tokens_v1(data)
            kind, _, version = str(tag).removeprefix("dew.").partition("/")
            section_type = SECTIONS.get(kind)
            if section_type is None or not str(tag).startswith("dew."):
                known = ", ".join(c.format_tag() for c in SECTIONS.values())
                raise ValueError(f"format {tag!r} is not a dew format this version reads ({known})")
            if version.isdigit() and int(version) > section_type.VERSION:
                raise newer_version(f"format {tag!r}", version, section_type.VERSION)
            if version != str(section_type.VERSION):
                raise ValueError(
                    f"format {tag!r} is version {version} of {kind}, and this dew reads version "
                    f"{section_type.VERSION} only: rerun the preprocess job with this dew"
                )
            extra = sorted(set(data) - {"format", "splits", "config", "inputs", "checksum", kind})
            if extra:
                raise ValueError(f"unknown field(s) {extra}")
            return cls(
                section=section_type.from_json(data[kind]),
                splits=_splits(data["splits"], lambda s: Shard(**s)),
                config=data.get("config", {}),
                inputs=data.get("inputs", ""),
            )
        except NewerFormatError as error:
            raise NewerFormatError(f"{where}: written by a newer dew: {error}") from None
        except (KeyError, TypeError, ValueError) as error:
            # Damage keeps its kind, so a caller can tell an edited meta.json from a format it cannot read.
            kind_of = DamagedError if isinstance(error, DamagedError) else ValueError
            raise kind_of(f"{where}: not a valid dew meta.json: {error}") from None


def _splits(data: Mapping[str, Any], shard: Any) -> dict[str, tuple[Shard, ...]]:
    return {split: tuple(shard(s) for s in shards) for split, shards in data.items()}


def _from_tokens_v1(data: Mapping[str, Any]) -> Meta:
    """A token corpus committed before the shared envelope: flat tokenizer fields, shards counting
    `documents` and `tokens`. Read as the same corpus, with the same fingerprint."""
    fields = ("tokenizer", "tokenizer_hash", "vocab_size", "dtype", "eos_id", "bos_id")
    section = TokensSection(**{name: data[name] for name in fields})

    def shard(s: Mapping[str, Any]) -> Shard:
        return Shard(name=s["name"], records=s["documents"], units=s["tokens"], bytes=s["bytes"], sha256=s["sha256"])

    splits = _splits(data["splits"], shard)
    return Meta(section=section, splits=splits, config=data.get("config", {}), inputs=data.get("inputs", ""))


def meta_checksum(data: Mapping[str, Any]) -> str:
    """sha256 of meta.json's canonical JSON (sorted keys, no spaces) without its `checksum` field."""
    body = {key: value for key, value in data.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_meta(directory: str, meta: Meta) -> None:
    """Writes meta.json, with its checksum, atomically (temporary name, then rename): the commit of a
    local corpus."""
    path = os.path.join(directory, META)
    tmp = f"{path}.tmp-{os.getpid()}"
    data = meta.to_json()
    with open(tmp, "w") as f:
        json.dump({**data, "checksum": meta_checksum(data)}, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# Within one load (read_once), each directory's meta.json is read and parsed once, however many of the
# load's parts ask for it: its splits, its section, its derived files' fingerprint, the held-out split.
_READ_ONCE: contextvars.ContextVar[dict[str, Meta] | None] = contextvars.ContextVar("dew_meta_read_once", default=None)


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Makes read_meta read each directory's meta.json once while the block runs (nested: the outer block's)."""
    if _READ_ONCE.get() is not None:
        yield
        return
    token = _READ_ONCE.set({})
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def read_meta(directory: str, kind: str | None = None) -> Meta:
    """The committed meta.json of a directory, refusing an uncommitted one by path, and one holding
    records of another kind than `kind` (when given) by the kind it holds."""
    seen = _READ_ONCE.get()
    key = os.path.join(remote.resolve(directory), META)
    meta = seen.get(key) if seen is not None else None
    if meta is None:
        meta = _read_meta(directory, kind)
        if seen is not None:
            seen[key] = meta
    if kind is not None:
        meta.expect(kind, directory)
    return meta


def _read_meta(directory: str, kind: str | None = None) -> Meta:
    path = os.path.join(remote.resolve(directory), META)
    if remote.is_remote(path):
        try:
            return Meta.from_json(json.loads(remote.read_bytes(path)), where=path)
        except FileNotFoundError:
            pass  # reported below, as for a local directory
        except json.JSONDecodeError as error:
            raise DamagedError(f"{path} is not valid JSON ({error}); rerun the preprocess job") from None
    if remote.is_remote(path) and remote.bucket_missing(path):
        bucket = path[len("gs://") :].partition("/")[0]
        raise FileNotFoundError(
            f"{directory}: bucket gs://{bucket} does not exist (or is in a project this account cannot see); "
            "check the bucket name, e.g. `terraform output -raw processed_bucket`"
        )
    if remote.is_remote(path) or not os.path.exists(path):
        writer = SECTIONS[kind].WRITER if kind in SECTIONS else "the preprocess job"
        raise committed.not_committed(directory, writer)
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as error:
        raise DamagedError(f"{path} is not valid JSON ({error}); rerun the preprocess job to rewrite it") from None
    return Meta.from_json(data, where=path)


def verify_shard(
    directory: str,
    shard: Shard,
    *,
    checksum: bool = False,
    holder: object | None = None,
    close: Callable[[], None] | None = None,
    also: integrity.Pass | None = None,
    own_records: bool = False,
) -> str:
    """The local path of a committed shard, after checking its size, and with `checksum` its content
    (and, for a local shard, `also` in the same read: dew.data.integrity.verify_file). With
    `own_records`, also its own footer's record count against meta.json's, as a job reading a committed
    directory asks (dew.data.committed.check_own_records).

    Readers ask for the checksum when they first open a shard: it costs a full read the first time a
    host sees the file, and nothing after (dew.data.integrity caches the verdict; DEW_VERIFY=0 skips it).
    A gs:// shard is fetched into the local cache and always checked against its sha256 there; it stays
    there while `holder` lives (dew.data.shard_cache.pin, with `close`).
    """
    path = os.path.join(remote.resolve(directory), shard.name)
    if remote.is_remote(path):
        local = shard_cache.fetch(path, size=shard.bytes, sha256=shard.sha256, holder=holder, close=close)
    elif not os.path.exists(path):
        raise FileNotFoundError(f"{path} is listed in {META} but missing; {_OVERWRITE}")
    else:
        check_size(path, shard)
        if checksum:
            integrity.verify_file(path, sha256=shard.sha256, crc32c=shard.crc32c, also=also)
        local = path
    if own_records:
        committed.check_own_records(local, shard, where=path)
    return local


def check_size(copy: str, shard: Shard, *, where: str | None = None) -> None:
    """Refuses a local file (a shard, or a copy of the one at `where`) whose size is not the one meta.json
    records for `shard`: it was truncated or rewritten after the commit."""
    size = os.path.getsize(copy)
    if size != shard.bytes:
        raise DamagedError(
            f"{where or copy} holds {size} bytes but {META} records {shard.bytes}: the shard is truncated or "
            f"was rewritten after the commit; {_OVERWRITE}"
        )


def check_local_sizes(directory: str, meta: Meta, splits: Iterable[str] | None = None) -> None:
    """Checks every shard of `splits` (all by default) of a local committed directory by size, one stat a
    shard, naming the first missing or truncated one; a gs:// directory is checked as its shards are fetched."""
    if "://" in directory:
        return
    for split in meta.splits if splits is None else splits:
        for shard in meta.shards(split):
            verify_shard(directory, shard)
