"""Derived files: what a reader could compute from a corpus itself, written ahead beside its shards.

`<split>.<role>.npz` (derived_path) holds arrays stamped with the fingerprint of the corpus they were
derived from, and the split and role their name gives them (save_derived); load_derived hands them back
only for that corpus, checks the file's bytes first, and refuses one copied or renamed into place.
"""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Iterable, Mapping

import numpy as np

from dew.data import integrity, npz, paged, remote, shard_cache
from dew.data.remote import DamagedError

_log = logging.getLogger("dew.data")


def derived_path(directory: str, split: str, name: str) -> str:
    """Where an offline derived file lives: `<split>.<name>.npz` beside the shards."""
    return os.path.join(directory, f"{split}.{name}.npz")


def _derived_role(path: str) -> tuple[str, str]:
    """(split, role) a derived file's name says it is: `train.packing-bf1-1025-8.npz` → (train, packing-bf1-1025-8).

    Roles hold no dot, so the split (which may) is everything before the last one.
    """
    split, _, role = os.path.basename(path).removesuffix(".npz").rpartition(".")
    return split, role


def save_derived(path: str, fingerprint: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Saves arrays derived from a corpus, stamped with that corpus's fingerprint and the split and role
    its name gives it (formats.derived_path), atomically, laid out to be read in place (dew.data.npz)."""
    split, role = _derived_role(path)
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    stamps = {"fingerprint": np.array(fingerprint), "split": np.array(split), "role": np.array(role)}
    npz.write_arrays(tmp, {**stamps, **arrays})
    os.replace(tmp, path)


def load_derived(path: str, fingerprint: str, names: Iterable[str]) -> dict[str, np.ndarray] | None:
    """The arrays of a derived file if it exists and was derived from this corpus; None otherwise.

    Large arrays are read in place (dew.data.paged): opening costs O(1) in their size, a process holds
    only a bounded cache of the blocks it read, and the host's processes share the file's page cache. The
    file's bytes are checked against its zip CRC-32s the first time a host opens it (one read of the
    file; dew.data.integrity caches the verdict), so damage is refused before anything is read from it.
    A file of this corpus that another split or role wrote is refused rather than recomputed: it is
    there because someone copied or renamed it, and silently planning anew would hide that mistake
    and cost every host the scan the file exists to avoid. A file without its split and role (written
    by an older dew) cannot show where it belongs, so it is ignored and the runtime recomputes it.
    """
    path = remote.resolve(path)
    cached = remote.is_remote(path)
    hold = shard_cache.Hold()
    if cached:
        if not remote.exists(path):
            return None
        path = shard_cache.fetch(path, holder=hold)  # its fingerprint says whether it belongs to the corpus
    elif not os.path.exists(path):
        return None
    fix = "delete it and the runtime computes it from the shards, or rerun the preprocess job to rewrite it"
    try:
        recorded = npz.recorded_crcs(path)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise DamagedError(f"{path} is not a readable derived file ({error}); {fix}") from None
    check = f"against its zip directory: the file was damaged after it was written; {fix}"
    integrity.verify_once(path, "zip-crc32", recorded, lambda: npz.member_crcs(path), fix=check, ctime=not cached)
    try:
        data = npz.open_arrays(path)
        if _text(data["fingerprint"]) != fingerprint:
            return None
        if "split" not in data or "role" not in data:
            _log.warning("%s has no split and role (an older dew wrote it); ignored: %s", path, fix)
            return None
        found = (_text(data["split"]), _text(data["role"]))
        arrays = {name: data[name] for name in names}
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise DamagedError(f"{path} is not a readable derived file ({error!r}); {fix}") from None
    if found != _derived_role(path):
        raise ValueError(
            f"{path} holds the {found[1]} of split {found[0]!r}, not the {_derived_role(path)[1]} of split "
            f"{_derived_role(path)[0]!r}: it was copied or renamed into place; {fix}"
        )
    if cached:  # an array paged from the cached copy keeps it on disk while it lives
        for array in arrays.values():
            if isinstance(array, paged.FileArray):
                shard_cache.pin(path, array)
    return arrays


def _text(array: np.ndarray) -> str:
    return str(array[()])
