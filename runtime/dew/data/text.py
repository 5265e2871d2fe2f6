"""Tokenizers by name: dew's own byte vocabulary, or any Hugging Face tokenizer loaded on first use."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dew.data import reach
from dew.data.extras import require


class ByteTokenizer:
    """One id per UTF-8 byte over a vocabulary of 256; no training and no download.

    decode inverts encode for any unicode text, so text that went through encode comes back byte for byte.
    Ids that are not UTF-8, which a model can generate, decode with U+FFFD in place of each bad sequence.
    It has no eos id of its own: a corpus packed with it records the eos the job chose.

    Examples:
        >>> from dew.data import ByteTokenizer
        >>> tokenizer = ByteTokenizer()
        >>> tokenizer.encode("hé")
        [104, 195, 169]
        >>> tokenizer.decode([104, 195, 169]), tokenizer.vocab_size, tokenizer.eos_id
        ('hé', 256, None)
    """

    name = "byte"
    vocab_size = 256
    eos_id: int | None = None
    bos_id: int | None = None

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(t.encode("utf-8")) for t in texts]

    def decode(self, ids: ArrayLike | Sequence[int]) -> str:
        return bytes(np.asarray(ids, dtype=np.int64).astype(np.uint8).tolist()).decode("utf-8", errors="replace")

    def fingerprint(self) -> str:
        return hashlib.sha256(b"dew.byte/1").hexdigest()


class HFTokenizer:
    """A Hugging Face tokenizer from a hub name or a local directory, loaded on first use.

    Loading lazily keeps `import dew.data` free of transformers and of any hub lookup nobody asked for.

    Args:
        name: A hub repository ("gpt2") or a local directory that save_pretrained wrote.
        local_files_only: Never reach the hub: the tokenizer must be in the local cache or directory.

    Examples:
        >>> from dew.data import HFTokenizer
        >>> tokenizer = HFTokenizer("gpt2")  # nothing is loaded yet
        >>> tokenizer.name
        'gpt2'
    """

    def __init__(self, name: str, *, local_files_only: bool = False) -> None:
        self.name = name
        self.local_files_only = local_files_only
        self._tokenizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "local_files_only": self.local_files_only, "_tokenizer": None}

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            auto = require("transformers", for_what=f"HFTokenizer {self.name!r}").AutoTokenizer
            try:
                if self.local_files_only:
                    self._tokenizer = auto.from_pretrained(self.name, local_files_only=True)
                else:
                    self._tokenizer = reach.from_hub(auto.from_pretrained, self.name, what="tokenizer")
            except reach.Unreachable:
                raise
            except OSError as error:
                raise OSError(
                    f"cannot load tokenizer {self.name!r}: {error}. Give a local directory holding "
                    "tokenizer.json (save_pretrained writes one), or a hub name on a host with network."
                ) from None
        return self._tokenizer

    @property
    def eos_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    @property
    def bos_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Encodes many texts in one call, which the Rust backend runs far faster than one at a time."""
        return [list(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def decode(self, ids: ArrayLike | Sequence[int]) -> str:
        return self.tokenizer.decode(np.asarray(ids).tolist())

    def apply_chat_template(self, conversation: Sequence[Any], **options: Any) -> Any:
        """The tokenizer's own chat template over `conversation`, with transformers' options unchanged.

        tools=, add_generation_prompt=, tokenize= and template switches such as enable_thinking= pass through.
        """
        return self.tokenizer.apply_chat_template(list(conversation), **options)

    def save_pretrained(self, directory: str | os.PathLike[str]) -> None:
        """Writes the tokenizer's own files (tokenizer.json, tokenizer_config.json, vocabulary)."""
        self.tokenizer.save_pretrained(os.fspath(directory))

    def fingerprint(self) -> str:
        """A hash of what the tokenizer maps text to, the same wherever its files were loaded from."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        content = backend.to_str() if backend is not None else repr(sorted(self.tokenizer.get_vocab().items()))
        return hashlib.sha256(content.encode()).hexdigest()


def tokenizer_for(name: str, *, local_files_only: bool = False) -> ByteTokenizer | HFTokenizer:
    """The tokenizer `name` asks for: "byte" is dew's own, anything else an HF repo or local directory.

    Resolving names in this one place keeps training and export reading one name the same way.

    Args:
        name: "byte", a hub repository or a local tokenizer directory.
        local_files_only: For an HF tokenizer, never reach the hub.

    Returns:
        A ByteTokenizer for "byte", else an HFTokenizer (which loads on first use).

    Examples:
        >>> from dew.data import tokenizer_for
        >>> type(tokenizer_for("byte")).__name__, type(tokenizer_for("gpt2")).__name__
        ('ByteTokenizer', 'HFTokenizer')
    """
    if not name:
        raise ValueError("a tokenizer name is required: 'byte', an HF hub name, or a local directory")
    if name == "byte":
        return ByteTokenizer()
    return HFTokenizer(name, local_files_only=local_files_only)
