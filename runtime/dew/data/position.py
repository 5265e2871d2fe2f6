"""The two kinds of saved data position, and how to tell them apart.

A *global* position is a record count over a global order plus a description of what that order reads:
it resumes on any share count that divides the batch. A *share* position is one share's own Grain
iterator state: it resumes only on a reader of that same share.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from dew.data import validate

GLOBAL = "dew.global/1"
SHARE = "dew.share/1"

# What get_state returns: plain JSON-able data, so any checkpointer can store it.
Position = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class GlobalPosition:
    """`records` global records handed over so far, of the order `reads` describes."""

    records: int
    reads: Mapping[str, Any]
    tokens: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def to_state(self) -> Position:
        return {"kind": GLOBAL, "records": self.records, "reads": dict(self.reads), "tokens": dict(self.tokens)}


@dataclasses.dataclass(frozen=True)
class SharePosition:
    """Grain's own iterator state for share `index` of `count`, over the pipeline `reads` names."""

    index: int
    count: int
    reads: Mapping[str, Any]
    state: Mapping[str, Any]

    def to_state(self) -> Position:
        return {
            "kind": SHARE,
            "index": self.index,
            "count": self.count,
            "reads": dict(self.reads),
            "state": dict(self.state),
        }


def parse(state: Mapping[str, Any]) -> GlobalPosition | SharePosition:
    """Which kind of position `state` is, refusing anything that is neither."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a data position is a mapping, got {type(state).__name__}")
    kind = state.get("kind")
    try:
        if kind == GLOBAL:
            records = state["records"]
            validate.non_negative_int("records", records)
            return GlobalPosition(records=records, reads=state["reads"], tokens=state.get("tokens", {}))
        if kind == SHARE:
            return SharePosition(index=state["index"], count=state["count"], reads=state["reads"], state=state["state"])
    except KeyError as missing:
        raise ValueError(f"data position of kind {kind!r} lacks the field {missing}") from None
    raise ValueError(f"not a dew data position: kind={kind!r} (expected {GLOBAL!r} or {SHARE!r})")


def describe(reads: Mapping[str, Any]) -> str:
    """A description as one stable line, for error messages."""
    return json.dumps(reads, sort_keys=True, default=str)
