"""A `.bin` shard's documents counted by its own ids and held against meta.json's record count.

A `.bin` shard keeps no framing: the tokenize job writes each document's ids followed by the corpus's
eos, and meta.json records how many documents went into the shard. The only index the shard itself
holds is therefore its eos ids, counted the way the reader cuts documents (dew.data.packing.document_ends:
a document runs through its eos, and a tail after the last eos is a document too).

Which rule holds depends on what text can encode to. A tokenizer with the eos among its added tokens
(GPT-2's `<|endoftext|>`, say) turns that literal string inside a document into the eos id, so a shard can
hold more eos ids than documents: meta.json's count must then be at most the shard's. dew's byte
tokenizer encodes text to ids 0..255, so with its eos above them (256, its own) no text can make one,
and the counts must be equal. A corpus written without an eos keeps no boundaries, and has none to count.

Counting costs a read of the shard, like its checksum, so it is done once per host per file state
(dew.data.integrity caches the verdict) and skipped with DEW_VERIFY=0.
"""

from __future__ import annotations

import numpy as np

from dew.data import formats, integrity, remote

_CHUNK = 1 << 24  # ids compared at a time: a bounded temporary whatever the shard's size
BYTE_TOKENIZER, BYTE_RANGE = "byte", 256


def exact_rule(tokenizer: str | None, eos_id: int) -> bool:
    """Whether no text can encode to `eos_id`, so that a shard's eos ids are exactly its documents."""
    return tokenizer == BYTE_TOKENIZER and eos_id >= BYTE_RANGE


def documents_of(ids: np.ndarray, eos_id: int) -> int:
    """The documents a reader cuts from `ids`: one per eos, and one more for a tail after the last."""
    found = sum(int(np.count_nonzero(ids[at : at + _CHUNK] == eos_id)) for at in range(0, len(ids), _CHUNK))
    return found + int(len(ids) > 0 and int(ids[-1]) != eos_id)


def check_documents(
    path: str,
    ids: np.ndarray,
    *,
    directory: str,
    split: str,
    shard: formats.Shard,
    eos_id: int | None,
    tokenizer: str | None,
) -> None:
    """Refuses the local copy `path` of a committed `.bin` shard (its ids `ids`) whose document count
    disagrees with meta.json's, naming the directory, shard, split and both counts."""
    if eos_id is None or not integrity.enabled():
        return
    exact = exact_rule(tokenizer, eos_id)

    def count() -> str:
        found = documents_of(ids, eos_id)
        if found == shard.records or (found > shard.records and not exact):
            return str(shard.records)
        rule = "exactly its documents" if exact else "at least its documents"
        raise formats.DamagedError(
            f"{directory}: shard {shard.name} of split {split!r} holds {found} documents by its eos ids (id "
            f"{eos_id}, {rule}), but {formats.META} records {shard.records}: the shard or {formats.META} was "
            f"changed after the commit; {remote.OVERWRITE}"
        )

    rule = "exact" if exact else "at-least"
    # A gs:// shard's cached copy has its times touched on every use; it is replaced, never rewritten.
    integrity.verify_once(
        path, f"documents-{eos_id}-{rule}", str(shard.records), count, fix="", ctime=not remote.is_remote(directory)
    )
