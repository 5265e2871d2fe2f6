"""ChatMessages: conversations rendered with the tokenizer's chat template and packed into windows."""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import validate
from dew.data.packed_batch import packed_batch
from dew.data.preference import MASK_KEY
from dew.data.records import BatchRecords
from dew.data.registry import datasets
from dew.data.rows import Ragged
from dew.data.spec import VAL_BATCHES, Tokenize
from dew.data.templates import TemplatedSpec, TemplateRows

if TYPE_CHECKING:
    from dew.data.dataset import Dataset
    from dew.data.packing import PackingPlan
    from dew.data.templates import ChatTemplate


class Role(enum.IntEnum):
    """Who wrote a token of a rendered conversation: the message it belongs to, or PAD for padding.

    A message's tokens include what the template wraps it in (its header and end marker), and any
    preamble the template writes before the first message belongs to that first message.

    Examples:
        >>> from dew.data import Role
        >>> Role(3).name, int(Role.PAD)
        ('ASSISTANT', 0)
    """

    PAD = 0
    SYSTEM = 1
    USER = 2
    ASSISTANT = 3
    TOOL = 4


def _role_codes(messages: list[dict[str, Any]]) -> np.ndarray:
    return np.array([Role[message["role"].upper()] for message in messages], dtype=np.int32)


class ChatWindows(BatchRecords):
    """seq_len + 1 windows of packed conversations by index, each cut from the plan in a few numpy calls."""

    def __init__(self, ids: Ragged, roles: Ragged, completion: Ragged, plan: PackingPlan, *, pad_id: int) -> None:
        self.ids, self.roles, self.completion, self.plan, self.pad_id = ids, roles, completion, plan, pad_id

    @classmethod
    def read(
        cls,
        template: ChatTemplate,
        path: str | None,
        json_records: tuple[str, ...],
        *,
        window: int,
        bins: int,
        pad_id: int,
    ) -> ChatWindows:
        from dew.data.packing import plan_packing

        table = TemplateRows.read(path, json_records, "messages", ("messages",), ("tools",))
        conversations = table.conversations
        rendered = template.conversations(conversations, table.tools, table.wheres)
        offsets = np.zeros(len(rendered) + 1, dtype=np.int64)
        np.cumsum([len(r.ids) for r in rendered], out=offsets[1:])

        def ragged(parts: list[np.ndarray]) -> Ragged:
            values = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
            return Ragged(values, offsets)

        ids = ragged([r.ids for r in rendered])
        roles = ragged([_role_codes(m)[r.message] for m, r in zip(conversations, rendered, strict=True)])
        completion = ragged([r.completion for r in rendered])
        return cls(ids, roles, completion, plan_packing(ids.lengths, window, bins), pad_id=pad_id)

    def __len__(self) -> int:
        return len(self.plan)

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        batch = packed_batch(self.plan, np.asarray(indices, dtype=np.int64), positions="document")
        starts = self.ids.offsets
        mask = batch.gather(self.completion.values, starts)
        # Nothing of its conversation precedes a piece's first token in the window: predicted one token
        # on, it would be predicted from another conversation's last token (or a cut one's, mid-reply).
        mask[batch.rows, batch.columns] = 0
        return {
            "text": batch.gather(self.ids.values, starts, fill=self.pad_id),
            "text_segment_ids": batch.segment_ids,
            "text_positions": batch.positions,
            MASK_KEY: mask,
            "roles": batch.gather(self.roles.values, starts),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "type": "chat_messages",
            "conversations": len(self.ids),
            "windows": len(self),
            "window": self.plan.window,
            "packing_bins": self.plan.bins,
            "pad_id": self.pad_id,
            "sha256": [self.ids.digest(), self.roles.digest(), self.completion.digest()],
        }


@datasets("chat_messages")
@dataclasses.dataclass(frozen=True)
class ChatMessages(TemplatedSpec):
    """Conversations for supervised fine-tuning, rendered with the tokenizer's chat template and packed.

    path is a parquet file with a `messages` column (a list of {role, content} messages, roles system,
    user, assistant and tool) and an optional `tools` column (tool schemas as a list or its JSON text);
    records are the same rows as JSON objects. Exactly one of the two is set.

    Each conversation is rendered whole, then packed with the other conversations into seq_len + 1 windows
    by dew.data.packing's best-fit plan over packing_bins open windows, in file order; one longer than a
    window is cut into window-sized pieces whose positions continue. A batch holds int32 [B, seq_len + 1]
    arrays: "text" (ids, pad_id where empty), "text_segment_ids" (1, 2, ... per piece in the window, 0 on
    padding), "text_positions" (the token's place in its conversation), MASK_KEY (1 on the assistant's own
    text and end marker, 0 on headers, other roles and padding, and 0 on each piece's first token, which
    nothing of its conversation precedes in the window) and "roles" (a Role per token).

    The assistant marks come from rendering prefixes of the conversation, so they are right for templates
    without {% generation %} markers; a template that rewrites earlier turns when more follow is refused by
    row. The training stream shuffles windows every epoch and saves a global window count, resuming on any
    process count the batch divides. val_path is a second parquet file, packed by its own plan and read in
    order as one pass of at most val_batches batches (None reads all); without it there is no validation.

    Args:
        tokenizer: The HF tokenizer whose chat template renders the conversations.
        path: A parquet file with a `messages` column.
        records: The same rows as JSON objects, instead of path.
        val_path: A parquet file to validate on.
        seq_len: Ids a window predicts; a window holds seq_len + 1.
        pad_id: The id of empty places.
        packing_bins: Open windows the best-fit plan chooses among.
        val_batches: Batches a validation pass reads at most; None reads all.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.ChatMessages(tokenizer="Qwen/Qwen3-0.6B", path="chats.parquet", seq_len=1024)
        >>> spec.packing_bins
        8
    """

    # tokenizer, path, records and val_path come first, from TemplatedSpec.
    seq_len: int = 256
    pad_id: int = 0
    packing_bins: int = 8
    val_batches: int | None = VAL_BATCHES

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("seq_len", "packing_bins"), non_negative=("pad_id",))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        read = functools.partial(ChatWindows.read, window=self.seq_len + 1, bins=self.packing_bins, pad_id=self.pad_id)
        train, val = self.rendered(tokenize, read)
        return self.global_dataset(batch, train=train, val=val)
