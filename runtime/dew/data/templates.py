"""Chat messages checked and rendered through a tokenizer's own chat template, with per-token provenance.

Prompts renders a prompt up to the generation header; ChatMessages renders whole conversations and needs
to know which message wrote each token and which tokens are the assistant's. Templates without
{% generation %} markers say nothing about that, so it is derived the way any template allows: the
rendering of the first i messages must begin the rendering of the whole conversation, which makes its
length the character where message i starts; an assistant message's own text starts where the prompt
for it (the first i messages plus the generation header) stops agreeing with the whole rendering.
Characters map to tokens through the fast tokenizer's offsets: a token belongs to the message its first
character does, and is the assistant's to predict if it holds any of the assistant's text, so a BPE merge
across a boundary cannot shift a span.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from dew.data import rows as _rows
from dew.data.rows import check_source
from dew.data.spec import IndexedSpec, Tokenize

RecordsT = TypeVar("RecordsT")

ROLES = ("system", "user", "assistant", "tool")


def messages_of(value: Any, where: str, column: str = "messages") -> list[dict[str, Any]]:
    """A conversation as the template reads it, refusing a malformed one by row and message."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise ValueError(
            f"{where}: {column} must be a list of chat messages ({{'role', 'content'}} objects), "
            f"got {type(value).__name__} {value!r:.60}"
        )
    if not value:
        raise ValueError(f"{where}: {column} is an empty conversation")
    messages = []
    for j, message in enumerate(value):
        if not isinstance(message, Mapping):
            raise ValueError(f"{where}: {column}[{j}] must be an object with role and content, got {message!r:.60}")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"{where}: {column}[{j}] has role {role!r}; a role is one of {', '.join(ROLES)}")
        if not isinstance(message.get("content"), str) and not (role == "assistant" and message.get("tool_calls")):
            raise ValueError(f"{where}: {column}[{j}] ({role}) has no text content")
        # parquet gives every struct field of every message; an absent one is None, which a template's
        # `is defined` test would read as present.
        messages.append({key: item for key, item in message.items() if item is not None})
    return messages


def tools_of(value: Any, where: str) -> list[dict[str, Any]] | None:
    """Tool schemas given as a list or as its JSON text; None or empty means the prompt has no tools."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if value is None or (isinstance(value, str | list | tuple) and not value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: tools is not valid JSON: {error}") from None
    if not isinstance(value, list | tuple) or not all(isinstance(tool, Mapping) for tool in value):
        raise ValueError(f"{where}: tools must be a list of tool schemas (objects), got {value!r:.60}")
    return [dict(tool) for tool in value] or None


@dataclasses.dataclass(frozen=True)
class TemplateRows:
    """The rows a chat template renders: each row, how an error names it, its conversation and its tools."""

    rows: list[dict[str, Any]]
    wheres: list[str]
    conversations: list[list[dict[str, Any]]]
    tools: list[list[dict[str, Any]] | None]

    @classmethod
    def read(
        cls,
        path: str | None,
        json_records: Sequence[str],
        column: str,
        required: Sequence[str],
        optional: Sequence[str],
    ) -> TemplateRows:
        """The rows of a parquet file at `path` (its `required` and any `optional` columns), or else the JSON
        records, with `column` checked as each row's conversation and `tools` as its tool schemas."""
        rows = (
            _rows.read_table(path, required, optional).to_pylist()
            if path is not None
            else _rows.json_rows(json_records, required)
        )
        wheres = [_rows.where(path, i) for i in range(len(rows))]
        conversations = [messages_of(row[column], at, column) for row, at in zip(rows, wheres, strict=True)]
        tools = [tools_of(row.get("tools"), at) for row, at in zip(rows, wheres, strict=True)]
        return cls(rows, wheres, conversations, tools)


@dataclasses.dataclass(frozen=True)
class Rendered:
    """One conversation as tokens: ids, the message each token came from, and 1 on assistant text."""

    ids: np.ndarray
    message: np.ndarray
    completion: np.ndarray


class ChatTemplate:
    """A tokenizer's chat template, called with the same switches for every conversation."""

    def __init__(self, tokenizer: str, *, thinking: bool | None = None) -> None:
        from dew.data.text import HFTokenizer, tokenizer_for

        self.name = tokenizer
        chosen = tokenizer_for(tokenizer)
        # Only an HF tokenizer carries a chat template (ByteTokenizer has none).
        if not isinstance(chosen, HFTokenizer):
            raise ValueError(f"tokenizer {tokenizer!r} has no chat template; name an HF tokenizer that has one")
        self.tokenizer = chosen
        hf = self.tokenizer.tokenizer
        if not getattr(hf, "chat_template", None):
            raise ValueError(
                f"tokenizer {tokenizer!r} has no chat_template; save one with it (tokenizer.chat_template = ...; "
                "save_pretrained) or name a chat model's tokenizer"
            )
        # None leaves enable_thinking undefined, so the template's own default applies.
        self.switches = {} if thinking is None else {"enable_thinking": thinking}
        # The rendering is tokenized whole, so a special token's text inside a message would become the
        # special token itself: a user could forge a turn boundary, an assistant reply would end mid-way.
        # One pattern of them all, longest first: a message is searched once, not once a special token
        # (a tokenizer may have hundreds of them), on every record read.
        specials = sorted(
            {t.content for t in hf.added_tokens_decoder.values() if t.special}, key=lambda t: (-len(t), t)
        )
        self.specials = re.compile("|".join(map(re.escape, specials))) if specials else None

    def check_text(self, messages: list[dict[str, Any]], where: str) -> None:
        """Refuses a message whose text holds a special token, which rendering would turn into markup."""
        if self.specials is None:
            return
        for j, message in enumerate(messages):
            content = message.get("content")
            found = self.specials.search(content) if isinstance(content, str) else None
            if found is not None:
                raise ValueError(
                    f"{where}: message {j} ({message['role']}) holds {found.group()!r}, a special token of "
                    f"{self.name!r}; tokenized with the rendering it would be that token, not text, and could "
                    "forge the template's markers (a turn boundary); remove or escape it"
                )

    def render(self, messages: list[dict[str, Any]], tools: list | None, *, prompt: bool, where: str) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=prompt, tokenize=False, **self.switches
            )
        except Exception as error:  # jinja raises its own types, and templates raise_exception(...)
            raise ValueError(f"{where}: the chat template of {self.name!r} failed: {error}") from error

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        # The template wrote every special token it wants, so the tokenizer must add none of its own.
        return self.tokenizer.encode_batch(texts)

    def prompts(self, conversations: Sequence[list], tools: Sequence[list | None], wheres: Sequence[str]) -> list:
        """Token ids of each conversation followed by the generation header: what a policy continues."""
        texts = []
        for messages, tool, where in zip(conversations, tools, wheres, strict=True):
            self.check_text(messages, where)
            texts.append(self.render(messages, tool, prompt=True, where=where))
        return self.encode(texts)

    def conversations(
        self, conversations: Sequence[list], tools: Sequence[list | None], wheres: Sequence[str]
    ) -> list[Rendered]:
        """Each whole conversation as tokens, with the message behind each token and the assistant's marks."""
        texts, charmaps = [], []
        for messages, tool, where in zip(conversations, tools, wheres, strict=True):
            self.check_text(messages, where)
            text, message, completion = self._spans(messages, tool, where)
            texts.append(text)
            charmaps.append((message, completion))
        encoded = self.tokenizer.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        out = []
        for ids, offsets, (message, completion) in zip(
            encoded["input_ids"], encoded["offset_mapping"], charmaps, strict=True
        ):
            spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
            starts = np.minimum(spans[:, 0], len(message) - 1)
            # A token that holds any of the assistant's text is the assistant's to predict, even where a
            # merge joined it to the header before (assistant\n plus leading spaces is one token).
            ends = np.clip(spans[:, 1], starts + 1, len(message))
            marked = np.concatenate([[0], np.cumsum(completion)])
            owned = (marked[ends] > marked[starts]).astype(np.int32)
            out.append(Rendered(np.asarray(ids, dtype=np.int32), message[starts], owned))
        return out

    def _spans(self, messages: list, tools: list | None, where: str) -> tuple[str, np.ndarray, np.ndarray]:
        """The rendering, and per character the message that wrote it and whether it is assistant text."""
        full = self.render(messages, tools, prompt=False, where=where)
        bounds = [0]
        for i in range(1, len(messages)):
            head = self.render(messages[:i], tools, prompt=False, where=where)
            if not full.startswith(head) or len(head) < bounds[-1]:
                raise ValueError(
                    f"{where}: the chat template of {self.name!r} renders the first {i} messages as text that "
                    "does not begin the whole conversation, so message spans cannot be found from prefixes "
                    "(it rewrites earlier turns, e.g. drops their reasoning); split the conversation at that turn"
                )
            bounds.append(len(head))
        bounds.append(len(full))
        completion = np.zeros(len(full), dtype=np.int32)
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            if i == 0:
                raise ValueError(f"{where}: the conversation opens with an assistant message, which nothing prompts")
            header = self.render(messages[:i], tools, prompt=True, where=where)
            start = min(_agreeing(header, full, bounds[i]), bounds[i + 1])
            completion[start : bounds[i + 1]] = 1
        message_of = np.repeat(np.arange(len(messages), dtype=np.int32), np.diff(bounds))
        if not len(full):
            raise ValueError(f"{where}: the chat template rendered the conversation as no text at all")
        return full, message_of, completion


def _agreeing(header: str, full: str, start: int) -> int:
    """Where the generation prompt stops agreeing with the whole rendering, scanning on from `start`.

    A thinking switch may add text after the header that the rendered turn lacks, so the assistant's
    own text begins where the two part, not where the header ends.
    """
    if not header.startswith(full[:start]):
        return start
    end = min(len(header), len(full))
    while start < end and header[start] == full[start]:
        start += 1
    return start


@dataclasses.dataclass(frozen=True)
class TemplatedSpec(IndexedSpec):
    """The fields and the load opening of the kinds whose rows a tokenizer's chat template renders.

    ChatMessages and Prompts: a tokenizer, then exactly one of path (parquet) and records (the same rows
    as JSON objects), then val_path; each kind declares its own fields after these, val_batches among them.
    """

    tokenizer: str
    path: str | None = None
    records: tuple[str, ...] = ()
    val_path: str | None = None

    def __post_init__(self) -> None:
        if not self.tokenizer:
            raise ValueError(
                f"{type(self).__name__} needs tokenizer=: an HF tokenizer name or directory with a chat template"
            )
        check_source(type(self).__name__, self.path, self.records)
        super().__post_init__()

    def rendered(
        self,
        tokenize: Tokenize | None,
        read: Callable[[ChatTemplate, str | None, tuple[str, ...]], RecordsT],
        *,
        thinking: bool | None = None,
    ) -> tuple[RecordsT, RecordsT | None]:
        """(the training rows, the val_path rows or None without one), each `read(template, path, records)`
        through the tokenizer's chat template; a caption reader is refused, as this kind has no captions."""
        self.uncaptioned(tokenize)
        template = ChatTemplate(self.tokenizer, thinking=thinking)
        train = read(template, self.path, self.records)
        return train, None if self.val_path is None else read(template, self.val_path, ())
