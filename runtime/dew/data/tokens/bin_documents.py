"""A `.bin` shard's documents counted by its own ids and held against meta.json's record count.

A `.bin` shard keeps no framing: the tokenize job writes each document's ids followed by the corpus's
eos, and meta.json records how many documents went into the shard. The only index the shard itself
holds is therefore its eos ids, counted the way the reader cuts documents (dew.data.packing.document_ends:
a document runs through its eos, and a tail after the last eos is a document too).

Which rule holds depends on what text can encode to. A tokenizer with the eos among its added tokens
(GPT-2's `<|endoftext|>`, say) turns that literal string inside a document into the eos id, as the tokenize
job did before it encoded special tokens' text as text, so a shard written then (or by another tool) can
hold more eos ids than documents: meta.json's count must then be at most the shard's. dew's byte
tokenizer encodes text to ids 0..255, so with its eos above them (256, its own) no text can make one,
and the counts must be equal. A corpus written without an eos keeps no boundaries, and has none to count.

Counting costs a read of the shard, so a local shard is counted in the read that checks its checksum
(DocumentPass, an integrity.Pass), a gs:// shard's cached copy after its download; either once per host
per file state (dew.data.integrity caches the verdict), and neither with DEW_VERIFY=0.
"""

from __future__ import annotations

import dataclasses

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


@dataclasses.dataclass(frozen=True)
class Counted:
    """A `.bin` shard to count the documents of, as an error names it, and the eos that closes them."""

    directory: str
    split: str
    shard: formats.Shard
    eos_id: int
    tokenizer: str | None

    @property
    def name(self) -> str:
        """The verdict's name in dew.data.integrity's cache."""
        return f"documents-{self.eos_id}-{'exact' if exact_rule(self.tokenizer, self.eos_id) else 'at-least'}"

    def held(self, found: int) -> str:
        """meta.json's record count, after refusing a shard whose `found` documents disagree with it."""
        exact, records = exact_rule(self.tokenizer, self.eos_id), self.shard.records
        if found == records or (found > records and not exact):
            return str(records)
        rule = "exactly its documents" if exact else "at least its documents"
        raise formats.DamagedError(
            f"{self.directory}: shard {self.shard.name} of split {self.split!r} holds {found} documents by its "
            f"eos ids (id {self.eos_id}, {rule}), but {formats.META} records {records}: the shard or "
            f"{formats.META} was changed after the commit; {remote.OVERWRITE}"
        )


class DocumentPass:
    """The document count of a local `.bin` shard, taken in its checksum's read (an integrity.Pass)."""

    def __init__(self, dtype: np.dtype, counted: Counted) -> None:
        self.dtype, self.counted = dtype, counted
        self.name, self.expected = counted.name, str(counted.shard.records)
        self._found, self._last, self._carry = 0, -1, b""

    def update(self, chunk: bytes) -> None:
        data = self._carry + chunk
        whole = len(data) - len(data) % self.dtype.itemsize
        self._carry = data[whole:]
        ids = np.frombuffer(data[:whole], dtype=self.dtype)
        if len(ids):
            self._found += int(np.count_nonzero(ids == self.counted.eos_id))
            self._last = int(ids[-1])

    def finish(self) -> str:
        """As documents_of counts them: one per eos, and one more for a tail after the last."""
        return self.counted.held(self._found + int(self._last not in (-1, self.counted.eos_id)))


def counting(
    directory: str, split: str, shard: formats.Shard, eos_id: int | None, tokenizer: str | None
) -> Counted | None:
    """What to count a shard's documents by; None where none are counted (no eos, DEW_VERIFY=0)."""
    if eos_id is None or not integrity.enabled():
        return None
    return Counted(directory, split, shard, eos_id, tokenizer)


def check_documents(path: str, ids: np.ndarray, counted: Counted) -> None:
    """Refuses the cached copy `path` of a committed gs:// `.bin` shard (its ids `ids`) whose document
    count disagrees with meta.json's, naming the directory, shard, split and both counts. (A local shard
    is counted in its checksum's read: DocumentPass.)"""
    # A gs:// shard's cached copy has its times touched on every use; it is replaced, never rewritten.
    integrity.verify_once(
        path,
        counted.name,
        str(counted.shard.records),
        lambda: counted.held(documents_of(ids, counted.eos_id)),
        fix="",
        ctime=not remote.is_remote(counted.directory),
    )
