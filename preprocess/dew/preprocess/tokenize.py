"""Tokenize: documents ((file, row), text) → ((file, row), ids), the tokenizer loaded once per worker.

Byte corpora: dew's ByteTokenizer maps text to ids 0..255 and has no end-of-document id, so a corpus
written with it reserves id 256 as its eos and records a vocabulary of 257 (BYTE_EOS, BYTE_VOCAB).
No UTF-8 byte can produce 256, so a boundary can never be forged by the text itself.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.formats import dtype_for_vocab
from dew.data.text import tokenizer_for
from dew.preprocess.documents import NAMESPACE

BYTE_EOS = 256
BYTE_VOCAB = 257
_PROGRESS_SECONDS = 10.0
_log = logging.getLogger(__name__)


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
    if name == "byte":
        vocab, own_eos, bos = BYTE_VOCAB, BYTE_EOS, None
    else:
        vocab, own_eos, bos = tokenizer.vocab_size, tokenizer.eos_id, tokenizer.bos_id
    eos = eos_id if eos_id is not None else own_eos
    if pack and eos is None:
        raise ValueError(f"tokenizer {name!r} has no eos token, which --pack writes between documents; pass --eos_id")
    if eos is not None and not 0 <= eos < vocab:
        raise ValueError(f"eos id {eos} is outside the {vocab}-token vocabulary of {name!r}")
    return TokenizerInfo(
        name=name, fingerprint=tokenizer.fingerprint(), vocab_size=vocab, eos_id=eos if pack else None, bos_id=bos
    )


class _Progress:
    """Logs this worker's documents/s and tokens/s every few seconds, so a local run shows it is alive."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.documents = self.tokens = 0

    def add(self, documents: int, tokens: int) -> None:
        self.documents += documents
        self.tokens += tokens
        now = time.monotonic()
        if now - self.last >= _PROGRESS_SECONDS:
            self.last = now
            seconds = now - self.start
            _log.warning(
                "tokenize: %d documents (%.0f/s), %d tokens (%.0f/s) on this worker",
                self.documents,
                self.documents / seconds,
                self.tokens,
                self.tokens / seconds,
            )


class _EncodeBatch(beam.DoFn):
    def __init__(self, info: TokenizerInfo) -> None:
        self.info = info
        self.tokenizer: Any = None

    def setup(self) -> None:
        self.tokenizer = tokenizer_for(self.info.name)
        if self.tokenizer.fingerprint() != self.info.fingerprint:
            # A worker that resolved the name to other files would write ids of another vocabulary.
            raise RuntimeError(
                f"tokenizer {self.info.name!r} on this worker hashes to {self.tokenizer.fingerprint()[:12]}, "
                f"not {self.info.fingerprint[:12]} as on the launcher; give workers the same tokenizer files"
            )
        self.documents = beam.metrics.Metrics.counter(NAMESPACE, "documents_tokenized")
        self.tokens = beam.metrics.Metrics.counter(NAMESPACE, "tokens")
        self.progress = _Progress()

        # The Rust backend directly, when there is one: transformers' __call__ around it costs a third of
        # the time in padding and dict building, for the very same ids (no special tokens either way).
        backend = getattr(getattr(self.tokenizer, "tokenizer", None), "backend_tokenizer", None)
        self.encode = (
            (lambda texts: [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)])
            if backend is not None
            else self.tokenizer.encode_batch
        )

    def process(self, batch: Sequence[tuple[Any, str]]) -> Iterator[tuple[Any, np.ndarray]]:
        encoded = self.encode([text for _, text in batch])
        dtype, eos = self.info.dtype, self.info.eos_id
        total = 0
        for (key, _), ids in zip(batch, encoded, strict=True):
            array = np.empty(len(ids) + (eos is not None), dtype=dtype)
            array[: len(ids)] = ids
            if eos is not None:
                array[-1] = eos
            total += len(array)
            yield key, array
        self.documents.inc(len(batch))
        self.tokens.inc(total)
        self.progress.add(len(batch), total)


class Tokenize(beam.PTransform):
    """((file, row), text) → ((file, row), ids as the corpus dtype), eos appended when the info has one.

    Texts are encoded in batches of up to `batch_size`, which the Rust tokenizers run far faster than one
    at a time; batching changes no id, since every text is encoded on its own.
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
            | "Encode" >> beam.ParDo(_EncodeBatch(self.info))
        )
