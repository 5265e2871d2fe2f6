"""Captions of every captioned kind: AutoTextTokenizer (captions to the fixed-width token ids a text
encoder reads) and Captions (what a batch's captions become: tokenized, taken from stored ids, or text)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import reach
from dew.data.extras import require
from dew.data.spec import Tokenize

# The fields the caption-tokenize job stores beside each caption, and a batch hands the model.
TEXT_FIELDS = ("input_ids", "attention_mask")
# transformers' stand-in for "no limit" (VERY_LARGE_INTEGER): a tokenizer that sets no context has it.
_NO_LIMIT = 10**12


class AutoTextTokenizer:
    """Tokenizes captions, padded and truncated to the text model's context.

    The context is the tokenizer's own model_max_length (77 for CLIP's), so a caption fits the text
    encoder the ids are for whatever model that is. modelname is a hub name or a local directory in
    the Hugging Face layout; transformers loads on the first call, in the process that makes it, so
    the tokenizer travels to grain workers as its name. tensor_type is what the arrays come back as;
    "np" gives int32 numpy arrays, which is what every dew reader hands on.

    Args:
        tensor_type: What the arrays come back as ("np": int32 numpy arrays).
        modelname: A hub name or a local tokenizer directory (docs/offline.md makes one).

    Examples:
        >>> from dew.data import AutoTextTokenizer
        >>> AutoTextTokenizer(modelname="local/clip-tokenizer")  # nothing loads until the first call
        AutoTextTokenizer(tensor_type='np', modelname='local/clip-tokenizer')
    """

    def __init__(self, tensor_type: str = "np", modelname: str = "openai/clip-vit-large-patch14") -> None:
        if not isinstance(modelname, str) or not modelname:
            raise ValueError(f"AutoTextTokenizer.modelname must name a tokenizer, got {modelname!r}")
        self.tensor_type, self.modelname = tensor_type, modelname
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"tensor_type": self.tensor_type, "modelname": self.modelname}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["tensor_type"], state["modelname"])

    def __repr__(self) -> str:
        return f"AutoTextTokenizer(tensor_type={self.tensor_type!r}, modelname={self.modelname!r})"

    @property
    def tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                transformers = require("transformers", for_what=f"AutoTextTokenizer {self.modelname!r}")
                self._tokenizer = reach.from_hub(
                    transformers.AutoTokenizer.from_pretrained, self.modelname, what="tokenizer"
                )
        return self._tokenizer

    @property
    def context_length(self) -> int:
        """The ids every caption is padded or cut to: the tokenizer's model_max_length."""
        length = self.tokenizer.model_max_length
        if not isinstance(length, int) or not 0 < length < _NO_LIMIT:
            raise ValueError(
                f"tokenizer {self.modelname!r} declares no context length (model_max_length {length!r}); "
                "set model_max_length in its tokenizer_config.json"
            )
        return length

    def fingerprint(self) -> str:
        """A hash of what this tokenizer maps text to: the hash the caption-tokenize job records, so the
        same tokenizer is recognised however its directory is spelt.

        Taken from a fresh load: a call sets padding and truncation on the loaded backend, which its
        serialised form, and so the hash, would then include.
        """
        from dew.data.text import HFTokenizer

        return HFTokenizer(self.modelname).fingerprint()

    def __call__(self, captions: str | Sequence[str]) -> dict[str, Any]:
        """{"input_ids", "attention_mask"}, each [len(captions), context_length] (one row for one caption)."""
        texts = [captions] if isinstance(captions, str) else list(captions)
        encoded = self.tokenizer(
            texts,
            padding="max_length",
            truncation=True,
            max_length=self.context_length,
            return_tensors=self.tensor_type,
        )
        out = {name: encoded[name] for name in ("input_ids", "attention_mask")}
        if self.tensor_type == "np":
            out = {name: np.asarray(value, dtype=np.int32) for name, value in out.items()}
        return out


@dataclasses.dataclass(frozen=True)
class Captions:
    """What becomes of a batch's captions: handed to `tokenize`, taken from stored ids, or kept as text.

    carried: the records hold stored ids that are not read (tokenize= asked for another length); they
    are taken out of the batch, as read ones are, so no second set of ids rides beside `text`.
    """

    tokenize: Tokenize | None = None
    stored: bool = False
    carried: bool = False

    def text(self, batch: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.stored:
            return {name: np.asarray(batch[name], dtype=np.int32) for name in TEXT_FIELDS}
        if self.tokenize is None:
            return None
        encoded = self.tokenize(list(batch["caption"]))
        return dict(encoded) if isinstance(encoded, Mapping) else encoded
