"""`tokenized(stream, tokenize)`: a batch iterator whose batches also hold their captions' token ids.

The reference page names this wrapper: it tokenizes what another iterator yields and forwards that
iterator's position. A Grain-backed stream carries get_state and set_state, and so does its tokenized
wrapper; a fetch-as-you-go stream (OnlineImages) carries neither, and neither does the wrapper, so a
checkpoint that needs a position is refused for it exactly as for the stream itself. Specs that take
`load(tokenize=)` tokenize inside their batches already; this is for iterators of your own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dew.data.spec import Tokenize


class TokenizedStream:
    """Batches of `stream` with `tokenize(batch[field])` added under `key`; closes what it wraps."""

    def __init__(self, stream: Iterator[Mapping[str, Any]], tokenize: Tokenize, *, field: str, key: str) -> None:
        if not callable(tokenize):
            raise TypeError(f"tokenized: tokenize must be a function of a list of captions, got {tokenize!r}")
        self.stream, self.tokenize, self.field, self.key = stream, tokenize, field, key

    def __iter__(self) -> TokenizedStream:
        return self

    def __next__(self) -> dict[str, Any]:
        batch = dict(next(self.stream))
        if self.field not in batch:
            raise KeyError(f"tokenized: the batch has no {self.field!r} to tokenize; its keys are {sorted(batch)}")
        if self.key in batch:
            raise KeyError(f"tokenized: the batch holds {self.key!r} already; pass key= to store the ids elsewhere")
        captions = [c.decode() if isinstance(c, bytes) else str(c) for c in batch[self.field]]
        batch[self.key] = self.tokenize(captions)
        return batch

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> TokenizedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CheckpointableTokenizedStream(TokenizedStream):
    """A TokenizedStream over a stream with a position: the position is the wrapped stream's."""

    def get_state(self) -> Any:
        return self.stream.get_state()  # type: ignore[attr-defined]

    def set_state(self, state: Any) -> None:
        self.stream.set_state(state)  # type: ignore[attr-defined]


def tokenized(
    stream: Iterator[Mapping[str, Any]], tokenize: Tokenize, *, field: str = "caption", key: str = "text"
) -> TokenizedStream:
    """`stream` with each batch's `field` (captions) tokenized into `key`, its position forwarded if it has one.

    Captions held as bytes are decoded as utf-8 first. The wrapper has get_state and set_state exactly
    when `stream` has both, so a run checkpoints over it exactly when it could over `stream`; closing
    it closes `stream`.

    Args:
        stream: Batches that hold a list of captions under `field`.
        tokenize: Turns a list of caption strings into the ids stored under `key`.
        field: The key of the captions in each batch.
        key: Where the ids go; a batch that holds it already is refused.

    Returns:
        An iterator of the batches with the ids added.

    Examples:
        >>> from dew.data import tokenized
        >>> batches = iter([{"caption": [b"a red cat", b"dog"]}])
        >>> with tokenized(batches, lambda captions: [len(c.split()) for c in captions]) as stream:
        ...     next(stream)["text"]
        [3, 1]
    """
    if hasattr(stream, "get_state") and hasattr(stream, "set_state"):
        return CheckpointableTokenizedStream(stream, tokenize, field=field, key=key)
    return TokenizedStream(stream, tokenize, field=field, key=key)
