"""Prompts: RL prompts in the verl layout, rendered with the chat template, with their reward context."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import validate
from dew.data.records import BatchRecords
from dew.data.registry import datasets
from dew.data.rows import Ragged, where
from dew.data.spec import VAL_BATCHES, Tokenize
from dew.data.templates import TemplatedSpec, TemplateRows

if TYPE_CHECKING:
    from dew.data.dataset import Dataset
    from dew.data.templates import ChatTemplate

REQUIRED = ("data_source", "prompt", "reward_model")
OPTIONAL = ("ability", "extra_info", "tools")
# Columns whose fields a reward function reads; each field becomes its own batch key.
NESTED = ("reward_model", "extra_info")


def as_bytes(value: Any) -> bytes:
    """A reward field as bytes: text as its UTF-8, anything else (numbers, lists) as its JSON text."""
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def reward_columns(rows: Sequence[Mapping[str, Any]], path: str | None) -> dict[str, np.ndarray]:
    """data_source, ability and every field of reward_model and extra_info, as [rows] object arrays of bytes."""
    columns: dict[str, list[bytes]] = {}
    for name in ("data_source", "ability"):
        if any(name in row for row in rows):
            columns[name] = [as_bytes(row.get(name)) for row in rows]
    for name in NESTED:
        keys: dict[str, None] = {}
        for i, row in enumerate(rows):
            value = row.get(name)
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(f"{where(path, i)}: {name} must be an object of fields, got {value!r:.60}")
            keys.update(dict.fromkeys(value or {}))
        for key in sorted(keys):
            columns[f"{name}.{key}"] = [as_bytes((row.get(name) or {}).get(key)) for row in rows]
    return {key: _objects(values) for key, values in columns.items()}


def _objects(values: list[bytes]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


class PromptSource(BatchRecords):
    """Rendered prompts by index; a batch left-pads them and gathers their reward fields."""

    def __init__(self, ids: Ragged, rewards: dict[str, np.ndarray], *, max_prompt_len: int, pad_id: int) -> None:
        self.ids, self.rewards = ids, rewards
        self.max_prompt_len, self.pad_id = max_prompt_len, pad_id

    @classmethod
    def read(
        cls,
        template: ChatTemplate,
        path: str | None,
        json_records: tuple[str, ...],
        *,
        max_prompt_len: int,
        pad_id: int,
    ) -> PromptSource:
        table = TemplateRows.read(path, json_records, "prompt", REQUIRED, OPTIONAL)
        rows, wheres = table.rows, table.wheres
        ids = Ragged.from_lists(template.prompts(table.conversations, table.tools, wheres), name="prompt", path=path)
        over = np.flatnonzero(ids.lengths > max_prompt_len)
        if over.size:
            row = int(over[0])
            raise ValueError(
                f"{wheres[row]}: the rendered prompt is {int(ids.lengths[row])} tokens, more than "
                f"max_prompt_len={max_prompt_len}; {over.size} of {len(rows)} prompts are too long: "
                "raise max_prompt_len or filter them out"
            )
        return cls(ids, reward_columns(rows, path), max_prompt_len=max_prompt_len, pad_id=pad_id)

    def __len__(self) -> int:
        return len(self.ids)

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        prompt = np.full((len(indices), self.max_prompt_len), self.pad_id, dtype=np.int32)
        self.ids.scatter(indices, prompt, right=True)
        batch = {"prompt": prompt, "prompt_length": self.ids.lengths[indices].astype(np.int32)}
        batch.update({key: column[indices] for key, column in self.rewards.items()})
        return batch

    def describe(self) -> dict[str, Any]:
        rewards = hashlib.sha256()
        for key in sorted(self.rewards):
            rewards.update(key.encode() + b"\0")
            for value in self.rewards[key]:
                rewards.update(len(value).to_bytes(8, "little") + value)
        return {
            "type": "prompts",
            "rows": len(self),
            "max_prompt_len": self.max_prompt_len,
            "pad_id": self.pad_id,
            "sha256": [self.ids.digest(), rewards.hexdigest()],
        }


@datasets("prompts")
@dataclasses.dataclass(frozen=True)
class Prompts(TemplatedSpec):
    """Prompts for RL rollouts, with what the reward function needs to score each one.

    path is a parquet file in verl's layout: data_source, prompt (a list of {role, content} messages),
    reward_model ({style, ground_truth}) and optionally ability and extra_info. records are the same rows
    as JSON objects, for tests and small sweeps. Exactly one of the two is set.

    Each prompt is rendered by tokenizer's chat template with the generation header, so a policy continues
    it as the assistant. A batch holds "prompt", int32 [B, max_prompt_len] left-padded with pad_id, and
    "prompt_length", int32 [B] real tokens. The reward context rides along as [B] numpy object arrays of
    bytes, one key per field: "data_source", "ability", and `"reward_model.<field>"` and `"extra_info.<field>"`
    for every field those hold. A text field is its UTF-8; a number, list or object its JSON text; a field a
    row lacks is b"". These are host-side values for the reward function, never for the device.

    An optional tools column holds tool schemas, as a list or as its JSON text; they are rendered into the
    prompt by the template and never copied into the batch. thinking sets the template's enable_thinking
    (Qwen3's switch); None leaves it undefined, so the template's default holds. A prompt rendered longer
    than max_prompt_len is refused at load, by row.

    The training stream reshuffles every prompt each epoch and saves a global prompt count, so it resumes
    on any process count the batch divides. val_path is a second parquet file read in order as one pass of
    at most val_batches batches (None reads all); without it there is no validation.

    Args:
        tokenizer: The HF tokenizer whose chat template renders the prompts.
        path: A parquet file in verl's layout.
        records: The same rows as JSON objects, instead of path.
        val_path: A parquet file to validate on.
        max_prompt_len: The width of "prompt"; a longer prompt is refused.
        pad_id: The id of empty places, on the left.
        val_batches: Batches a validation pass reads at most; None reads all.
        thinking: The template's enable_thinking; None leaves the template's default.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.Prompts(tokenizer="Qwen/Qwen3-0.6B", path="rl.parquet", max_prompt_len=256)
        >>> spec.thinking is None
        True
    """

    # tokenizer, path, records and val_path come first, from TemplatedSpec.
    max_prompt_len: int = 128
    pad_id: int = 0
    val_batches: int | None = VAL_BATCHES
    thinking: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("max_prompt_len",), non_negative=("pad_id",))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        read = functools.partial(PromptSource.read, max_prompt_len=self.max_prompt_len, pad_id=self.pad_id)
        train, val = self.rendered(tokenize, read, thinking=self.thinking)
        if val is not None and val.rewards.keys() != train.rewards.keys():
            raise ValueError(
                f"{self.val_path} carries reward fields {sorted(val.rewards)}, the training rows "
                f"{sorted(train.rewards)}; one reward function reads both, so they must match"
            )
        return self.global_dataset(batch, train=train, val=val)
