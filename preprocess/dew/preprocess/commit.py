"""The commit protocol of an output directory: claim it, resume it, refuse it, and finally commit it.

A job first claims its output with a marker (`.dew-job.json`) naming its config, its inputs and the run
(a token of this launch). Shards are committed one by one under their final names as they finish;
meta.json, written last, commits the corpus. So a directory is in one of three states, and
`prepare_output` decides on the launcher:
- committed by this same job (meta.json with this config and inputs): nothing to do;
- claimed by this same job but not committed (a crash): resume, skipping the shards already there;
  the claim passes to the resuming run;
- anything else holding data (another config, another tool's files): refused unless `overwrite`,
  which decommits first (meta.json goes before anything else), then clears the directory.

The claim is one run's, not one job's: a run whose claim another took (a rerun of the same job, or an
`--overwrite` run, started while it still ran) changes nothing more there. `check_claim` refuses it
before each shard, status table and the commit (and before clearing the output), so of two runs on
one output only the last to claim it commits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from dew.data.committed import JOB_MARKER
from dew.data.formats import BLOCKS_SUFFIX, META, Meta, Shard, parse_shard_name, write_meta
from dew.data.record_index import INDEX_SUFFIX
from dew.preprocess import files
from dew.preprocess.constants import REMOVALS_SUFFIX, STATUS_SUFFIX
from dew.preprocess.job_errors import ClaimLostError, OutputConflictError
from dew.preprocess.piece_lengths import write_piece_indexes

# The job's claim on its output; dew.data.committed reads it to name an uncommitted directory.
MARKER = JOB_MARKER
STATS = "stats.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobIdentity:
    """A job's config and the fingerprint of its inputs: equal identities write equal bytes."""

    config: Mapping[str, Any]
    inputs: str
    # This launch's own token, which its claim names (no part of what it writes, nor of equality).
    run: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex, compare=False)

    @property
    def fingerprint(self) -> str:
        text = json.dumps({"config": self.config, "inputs": self.inputs}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def _ours(name: str) -> bool:
    """Files a job writes into its output: shards, their block checksums and record indexes, meta,
    stats, derived .npz files, status and removal tables, the marker."""
    ours = name in (META, STATS, MARKER) or name.endswith((".npz", STATUS_SUFFIX, REMOVALS_SUFFIX))
    return ours or parse_shard_name(_shard_of(name)) is not None


def _shard_of(name: str) -> str:
    """The shard a file is or belongs to: `train-00000-of-00004.bin.blocks`, `….array_record.index` → its
    shard's name."""
    return name.removesuffix(BLOCKS_SUFFIX).removesuffix(INDEX_SUFFIX)


def _read_json(path: str) -> dict[str, Any] | None:
    if not files.exists(path):
        return None
    try:
        return json.loads(files.read_bytes(path))
    except ValueError:
        return None  # a torn marker from a crash is no claim


def clear_output(output: str) -> None:
    """Decommits (meta.json first, so no reader sees a half-deleted corpus) and removes every file of ours."""
    files.delete([files.join(output, META)])
    files.delete([files.join(output, name) for name in files.listing(output) if _ours(name)])
    files.delete_tree(files.join(output, files.TEMP_DIR))


def prepare_output(output: str, identity: JobIdentity, *, overwrite: bool) -> bool:
    """Claims `output` for this job; True when it is already committed by the very same job.

    Raises OutputConflictError, naming the directory and the flag, when the directory holds another run,
    and FileNotFoundError when its bucket does not exist.
    """
    files.require_bucket(output)
    meta = _read_json(files.join(output, META))
    marker = _read_json(files.join(output, MARKER))
    present = [name for name in files.listing(output) if _ours(name)]
    if meta is not None and meta.get("config") == identity.config and meta.get("inputs") == identity.inputs:
        if not overwrite:
            _release(output)
            return True
    elif marker is not None and marker.get("fingerprint") == identity.fingerprint:
        _claim(output, identity)  # our own unfinished run: resume it, the claim now this run's
        return False
    elif present and not overwrite:
        what = (
            f"a committed corpus with another config or inputs ({_difference(meta, identity)})"
            if meta is not None
            else f"files of an unfinished run with another config or inputs ({_difference(marker, identity)})"
            if marker is not None
            else f"files this job did not write ({', '.join(present[:3])})"
        )
        raise OutputConflictError(f"{output} holds {what}. Pass --overwrite to replace it, or choose another --output.")
    clear_output(output)
    _claim(output, identity)
    return False


def reopen_output(output: str, identity: JobIdentity) -> None:
    """Uncommits a directory this same job committed, for a run that rewrites some of its shards in place.

    The claim goes first, so a kill before meta.json is gone leaves a directory its rerun resumes (not
    shards with neither meta.json nor claim, which every run refuses as files it did not write); meta.json
    then goes before any shard changes, so no reader sees the shards change under a committed corpus.
    """
    _claim(output, identity)
    files.delete([files.join(output, META)])


def _claim(output: str, identity: JobIdentity) -> None:
    claim = {
        "fingerprint": identity.fingerprint,
        "config": identity.config,
        "inputs": identity.inputs,
        "run": identity.run,
    }
    files.write_atomic(files.join(output, MARKER), json.dumps(claim, sort_keys=True).encode(), output)


def holds_claim(output: str, identity: JobIdentity) -> bool:
    """Whether `output`'s claim is still this run's."""
    marker = _read_json(files.join(output, MARKER))
    return marker is not None and marker.get("run") == identity.run


def check_claim(output: str, identity: JobIdentity) -> None:
    """Refuses to go on writing into `output` once its claim is no longer this run's (ClaimLostError)."""
    marker = _read_json(files.join(output, MARKER))
    if marker is not None and marker.get("run") == identity.run:
        return
    if marker is None:
        holder = f"its claim {MARKER} is gone (the directory was cleared or committed by another run)"
    else:
        job = (marker.get("config") or {}).get("job", "job")
        flags = "the same" if marker.get("fingerprint") == identity.fingerprint else "other"
        holder = f"another run of dew-preprocess {job}, with {flags} flags and inputs, holds its claim {MARKER} now"
    raise ClaimLostError(
        f"{output} was claimed by another run after this one began: {holder}. This run stops without "
        "committing, so the two never mix; the run holding the claim commits the directory. Run one job "
        "on an output at a time."
    )


def _release(output: str) -> None:
    """Removes what a run killed between committing meta.json and releasing its claim left behind.

    meta.json is the commit: once it is there the marker and temporaries are leftovers that no reader
    looks at, and no run of another job can have made them (claiming the directory deletes meta.json).
    """
    files.delete([files.join(output, MARKER)])
    files.delete_tree(files.join(output, files.TEMP_DIR))


def _difference(recorded: Mapping[str, Any], identity: JobIdentity) -> str:
    """Which config keys (and whether the inputs) of a committed meta.json or a run's claim differ from ours."""
    old = recorded.get("config") or {}
    changed = sorted(k for k in set(old) | set(identity.config) if old.get(k) != identity.config.get(k))
    if recorded.get("inputs") != identity.inputs:
        changed.append("inputs")
    return "differs in " + ", ".join(changed) if changed else "unknown difference"


def remove_stale(output: str, keep: Iterable[str]) -> list[str]:
    """Deletes shard files not in `keep` (a different -of-N count, another format, another split)."""
    keep = set(keep)
    stale = [n for n in files.listing(output) if parse_shard_name(_shard_of(n)) and _shard_of(n) not in keep]
    files.delete([files.join(output, name) for name in stale])
    return stale


def write_meta_file(output: str, meta: Meta) -> None:
    """meta.json through the runtime's own writer (one format, one owner), then committed in place."""
    with tempfile.TemporaryDirectory(prefix="dew-meta-") as local:
        write_meta(local, meta)
        files.upload(os.path.join(local, META), files.join(output, META), output, replace=True)


def commit_corpus(output: str, meta: Meta, stats: Mapping[str, Any], claim: JobIdentity) -> None:
    """The last step of a job: drop stale shards, write piece indexes and stats.json, meta.json, release the claim.

    Only while `claim` (this run) still holds the output: a run that lost it deletes and commits nothing.
    """
    check_claim(output, claim)
    keep = [shard.name for shards in meta.splits.values() for shard in shards]
    remove_stale(output, keep)
    write_piece_indexes(output, meta)
    files.write_atomic(files.join(output, STATS), json.dumps(stats, indent=1, sort_keys=True).encode(), output)
    check_claim(output, claim)
    write_meta_file(output, meta)
    _release(output)


def split_stats(meta: Meta, records: str, units: str | None = None) -> dict[str, dict[str, int]]:
    """stats.json's per-split totals: records (named as the kind counts them), units if named, shards, bytes."""
    out = {}
    for split, shards in meta.splits.items():
        entry = {records: sum(s.records for s in shards)}
        if units is not None:
            entry[units] = sum(s.units for s in shards)
        out[split] = {**entry, "shards": len(shards), "bytes": sum(s.bytes for s in shards)}
    return out


def ordered_shards(shards: Iterable[tuple[str, Shard]], expected: Mapping[str, int]) -> dict[str, tuple[Shard, ...]]:
    """Shards by split in index order, checking that every one of each split's `-of-N` is there once."""
    by_split: dict[str, dict[int, Shard]] = {split: {} for split in expected}
    for split, shard in shards:
        parsed = parse_shard_name(shard.name)
        if parsed is None or split not in expected:
            raise RuntimeError(f"shard {shard.name} of split {split!r} is not one this job planned")
        by_split[split][parsed[1]] = shard
    for split, count in expected.items():
        if sorted(by_split[split]) != list(range(count)):
            raise RuntimeError(f"split {split!r} has shards {sorted(by_split[split])}, expected 0..{count - 1}")
    return {split: tuple(by_split[split][i] for i in range(count)) for split, count in expected.items()}
