"""Tokenize: documents ((file, row), text) → ((file, row), ids), the tokenizer loaded once per worker.

TokenizeBatches is the same work with the ids of each batch kept together (TokenBatch), which is cheaper
to move between steps; Tokenize hands out one element per document.

Byte corpora: dew's ByteTokenizer maps text to ids 0..255 and has no end-of-document id, so a corpus
written with it reserves id 256 as its eos and records a vocabulary of 257 (BYTE_EOS, BYTE_VOCAB).
No UTF-8 byte can produce 256, so a boundary can never be forged by the text itself.

HF corpora keep the same promise: a special token's text inside a document ("<|endoftext|>" quoted in a
web page) is encoded as the text it is, as tiktoken's encode_ordinary does, and the eos must be a special
token, so the only eos ids in a corpus are the ones the job writes after each document.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.extras import require
from dew.data.sections import dtype_for_vocab
from dew.data.text import tokenizer_for
from dew.preprocess import progress
from dew.preprocess.constants import NAMESPACE

BYTE_EOS = 256
BYTE_VOCAB = 257
# The progress phase documents are tokenized in.
TOKENIZE = "tokenize"
Key = tuple[int, int]  # (file index, row)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenizerInfo:
    """What a corpus records about its tokenizer: enough to check two corpora share one vocabulary."""

    name: str
    fingerprint: str
    vocab_size: int
    eos_id: int | None
    bos_id: int | None

    @property
    def dtype(self) -> np.dtype:
        return dtype_for_vocab(self.vocab_size)


def describe_tokenizer(name: str, *, pack: bool, eos_id: int | None = None) -> TokenizerInfo:
    """Loads the tokenizer once on the launcher to learn its vocabulary and the eos a packed corpus uses.

    eos_id overrides the tokenizer's own; a packed corpus needs one, an unpacked one records none.
    """
    tokenizer = tokenizer_for(name)
    own_eos: int | None
    bos: int | None
    if name == "byte":
        vocab, own_eos, bos = BYTE_VOCAB, BYTE_EOS, None
    else:
        vocab, own_eos, bos = tokenizer.vocab_size, tokenizer.eos_id, tokenizer.bos_id
    eos = eos_id if eos_id is not None else own_eos
    if pack and eos is None:
        raise ValueError(f"tokenizer {name!r} has no eos token, which --pack writes between documents; pass --eos_id")
    if eos is not None and not 0 <= eos < vocab:
        raise ValueError(f"eos id {eos} is outside the {vocab}-token vocabulary of {name!r}")
    if pack and eos is not None:
        _check_unforgeable(name, tokenizer, eos)
    return TokenizerInfo(
        name=name, fingerprint=tokenizer.fingerprint(), vocab_size=vocab, eos_id=eos if pack else None, bos_id=bos
    )


def _check_unforgeable(name: str, tokenizer: Any, eos: int) -> None:
    """Refuses an eos id that a document's text can encode to: each one would cut its document in two."""
    if name == "byte":
        if eos < 256:
            raise ValueError(
                f"eos id {eos} is a byte value, which any text holding that byte encodes to, cutting its document "
                f"there; byte corpora end documents with {BYTE_EOS}, above every byte: leave --eos_id out"
            )
        return
    added = getattr(tokenizer.tokenizer, "added_tokens_decoder", {})
    if not getattr(added.get(eos), "special", False):
        raise ValueError(
            f"eos id {eos} is not a special token of {name!r}, so a document's text can encode to it and be cut "
            "in two there; pass an --eos_id of one of its special tokens, or add one to the tokenizer"
        )


def _encoder(info: TokenizerInfo) -> Callable[[list[str]], Sequence[Sequence[int]]]:
    """texts → ids, for this worker, checked to map text exactly as the launcher's tokenizer did."""
    backend = _rust_backend(info)
    if backend is None:
        tokenizer = tokenizer_for(info.name)
        if tokenizer.fingerprint() != info.fingerprint:
            # A worker that resolved the name to other files would write ids of another vocabulary.
            raise RuntimeError(
                f"tokenizer {info.name!r} on this worker hashes to {tokenizer.fingerprint()[:12]}, "
                f"not {info.fingerprint[:12]} as on the launcher; give workers the same tokenizer files"
            )
        backend = getattr(getattr(tokenizer, "tokenizer", None), "backend_tokenizer", None)
        if backend is None:
            return tokenizer.encode_batch
    # The Rust backend directly: transformers' __call__ around it costs a third of the time in padding and
    # dict building. That call turns truncation and padding off first, and so does this, for the same ids.
    backend.no_truncation()
    backend.no_padding()
    # A special token's text inside a document is text: matched as a token, "<|endoftext|>" quoted in a
    # page would become the eos id and cut its document in two (transformers' split_special_tokens).
    backend.encode_special_tokens = True
    return lambda texts: [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]


def _rust_backend(info: TokenizerInfo) -> Any:
    """The `tokenizers` Tokenizer read straight from <directory>/tokenizer.json, or None.

    Importing transformers costs a fresh worker seconds (more than the whole start-up of Beam where no
    bytecode is cached). The file is used only when it hashes to the launcher's fingerprint, which is the
    hash of the transformers tokenizer's backend (HFTokenizer.fingerprint): the same mapping, byte for byte.
    """
    path = os.path.join(info.name, "tokenizer.json")
    if info.name == "byte" or not os.path.isfile(path):
        return None
    tokenizers = require("tokenizers", for_what=f"tokenizer {info.name!r}")
    backend = tokenizers.Tokenizer.from_file(path)
    return backend if hashlib.sha256(backend.to_str().encode()).hexdigest() == info.fingerprint else None


@dataclasses.dataclass(frozen=True, eq=False)
class TokenBatch:
    """Documents encoded together, moved between steps as one element.

    Beam pickles every element that crosses a step boundary; one element per document cost about half as
    much as the encoding itself, so the ids of a batch travel end to end in one array.
    keys: each document's (file, row); ends: where each document's ids stop in `ids`.
    """

    keys: list[Key]
    ends: np.ndarray
    ids: np.ndarray

    def documents(self) -> Iterator[tuple[Key, np.ndarray]]:
        start = 0
        for key, end in zip(self.keys, self.ends.tolist(), strict=True):
            yield key, self.ids[start:end]
            start = end

    def lengths_by_file(self) -> Iterator[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """(file, (rows, token counts)) for each file this batch holds documents of."""
        keys = np.array(self.keys, dtype=np.int64).reshape(-1, 2)
        lengths = np.diff(self.ends, prepend=0)
        for file in np.unique(keys[:, 0]).tolist():
            mine = keys[:, 0] == file
            yield file, (keys[mine, 1], lengths[mine])


class _EncodeBatch(beam.DoFn):
    def __init__(self, info: TokenizerInfo) -> None:
        self.info = info

    def setup(self) -> None:
        # The runner already keeps every core busy with one worker process each (the launcher's DirectRunner
        # default, and Dataflow's one SDK process per vCPU): the tokenizer's own thread pool in every worker
        # only oversubscribes the cores (measured 0.57 → 0.72 of raw encode_batch on 2 workers and 2 cores).
        # A user who runs fewer workers than cores can still ask for the pool by setting the variable.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.encode = _encoder(self.info)
        self.documents = beam.metrics.Metrics.counter(NAMESPACE, "documents_tokenized")
        self.tokens = beam.metrics.Metrics.counter(NAMESPACE, "tokens")
        self.progress = progress.Tally(TOKENIZE)

    def process(self, batch: Sequence[tuple[Key, str]]) -> Iterator[TokenBatch]:
        encoded = self.encode([text for _, text in batch])
        tail = () if self.info.eos_id is None else (self.info.eos_id,)
        # A document the tokenizer made no token of gets no eos either: it stays of length 0, which the layout
        # drops as no_tokens, packed or not, rather than writing a document of the eos alone.
        ends = np.cumsum([len(ids) + len(tail) if len(ids) else 0 for ids in encoded], dtype=np.int64)
        total = int(ends[-1]) if len(ends) else 0
        flat = itertools.chain.from_iterable(itertools.chain(ids, tail) for ids in encoded if len(ids))
        ids = np.fromiter(flat, dtype=self.info.dtype, count=total)
        if tail and np.count_nonzero(ids == tail[0]) != sum(1 for ids in encoded if len(ids)):
            # Only the eos written after each document may be one: another would forge a boundary.
            inside = next(key for (key, _), ids in zip(batch, encoded, strict=True) if tail[0] in ids)
            raise RuntimeError(f"document {inside} (file index, row) encodes to the eos id {tail[0]} in its text")
        yield TokenBatch(keys=[(file, row) for (file, row), _ in batch], ends=ends, ids=ids)
        self.documents.inc(len(batch))
        self.tokens.inc(total)
        self.progress.add(len(batch))

    def finish_bundle(self) -> None:
        self.progress.publish()


class TokenizeBatches(beam.PTransform):
    """((file, row), text) → TokenBatch elements: ids as the corpus dtype, eos appended when the info has one.

    Texts are encoded in batches of up to `batch_size`, which the Rust tokenizers run far faster than one
    at a time; batching changes no id, since every text is encoded on its own. The batches are spread over
    workers before encoding: reading fuses with what follows it, so without the spread one large input
    file would be tokenized by one worker alone.
    """

    def __init__(self, info: TokenizerInfo, *, batch_size: int = 512, label: str | None = None) -> None:
        super().__init__(label)
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.info = info
        self.batch_size = batch_size

    def expand(self, documents: beam.PCollection) -> beam.PCollection:
        return (
            documents
            | "Batch" >> beam.BatchElements(min_batch_size=min(64, self.batch_size), max_batch_size=self.batch_size)
            | "Spread" >> beam.Reshuffle()
            | "Encode" >> beam.ParDo(_EncodeBatch(self.info))
        )


class Tokenize(beam.PTransform):
    """((file, row), text) → ((file, row), ids): TokenizeBatches, one element per document again."""

    def __init__(self, info: TokenizerInfo, *, batch_size: int = 512, label: str | None = None) -> None:
        super().__init__(label)
        self.batches = TokenizeBatches(info, batch_size=batch_size)

    def expand(self, documents: beam.PCollection) -> beam.PCollection:
        return documents | "Batches" >> self.batches | "Documents" >> beam.FlatMap(TokenBatch.documents)
