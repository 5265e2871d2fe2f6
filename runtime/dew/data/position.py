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

# Records past any run (at a million records a second, 146,000 years), below which a stream's 64-bit
# record indices and its step counter hold every step; a count beyond is a damaged position.
MAX_RECORDS = 1 << 62


@dataclasses.dataclass(frozen=True)
class GlobalPosition:
    """`records` global records handed over so far, of the order `reads` describes.

    The count is over the global order, not over one share's rows, so it resumes on any share count
    that divides the batch; `reads` is what a resume compares against this stream's own description.

    Args:
        records: Global records every share together has handed over.
        reads: The description of the order they came from.
        tokens: Real tokens each corpus has supplied so far, by corpus name.

    Examples:
        >>> from dew.data import position
        >>> state = position.GlobalPosition(records=64, reads={"source": "wiki"}).to_state()
        >>> state["kind"], state["records"]
        ('dew.global/1', 64)
    """

    records: int
    reads: Mapping[str, Any]
    tokens: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def to_state(self) -> Position:
        return {"kind": GLOBAL, "records": self.records, "reads": dict(self.reads), "tokens": dict(self.tokens)}


@dataclasses.dataclass(frozen=True)
class SharePosition:
    """Grain's own iterator state for share `index` of `count`, over the pipeline `reads` names.

    It resumes only on a reader of the same share over the same pipeline: the state is Grain's and
    says nothing about the records of any other share.

    Args:
        index: Which share saved it.
        count: How many shares there were.
        reads: The description of the pipeline the share reads.
        state: Grain's iterator state, as get_state returned it.

    Examples:
        >>> from dew.data import position
        >>> saved = position.SharePosition(index=1, count=4, reads={"grain": "mine"}, state={"step": 3})
        >>> saved.to_state()["kind"]
        'dew.share/1'
    """

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
    """Which kind of position `state` is, refusing anything that is neither, and any field of the wrong
    shape by name, so a damaged checkpoint fails where it is read rather than deep inside a stream.

    Args:
        state: What a stream's get_state returned, as a checkpoint gives it back.

    Returns:
        A GlobalPosition or a SharePosition.

    Raises:
        TypeError: `state` is not a mapping.
        ValueError: It is neither kind, lacks a field, or holds one of the wrong shape.

    Examples:
        >>> from dew.data import position
        >>> saved = position.parse({"kind": "dew.global/1", "records": 64, "reads": {"source": "wiki"}})
        >>> type(saved).__name__, saved.records
        ('GlobalPosition', 64)
        >>> position.parse({"kind": "dew.global/1", "records": -1, "reads": {}})
        Traceback (most recent call last):
        ...
        ValueError: data position records must be a non-negative int, got -1
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"a data position is a mapping, got {type(state).__name__}")
    kind = state.get("kind")
    try:
        if kind == GLOBAL:
            records, reads, tokens = state["records"], state["reads"], state.get("tokens", {})
            validate.non_negative_int("data position records", records)
            if records >= MAX_RECORDS:
                raise ValueError(f"data position records {records} is past the 2**62 records any stream reads")
            _mapping("reads", reads)
            _mapping("tokens", tokens)
            for name, count in tokens.items():
                validate.non_negative_int(f"data position tokens[{name!r}]", count)
            return GlobalPosition(records=records, reads=reads, tokens=tokens)
        if kind == SHARE:
            index, count, reads, grain_state = state["index"], state["count"], state["reads"], state["state"]
            validate.non_negative_int("data position index", index)
            validate.positive_int("data position count", count)
            if index >= count:
                raise ValueError(f"data position index {index} is not below its count {count}")
            _mapping("reads", reads)
            _mapping("state", grain_state)
            return SharePosition(index=index, count=count, reads=reads, state=grain_state)
    except KeyError as missing:
        raise ValueError(f"data position of kind {kind!r} lacks the field {missing}") from None
    raise ValueError(f"not a dew data position: kind={kind!r} (expected {GLOBAL!r} or {SHARE!r})")


def _mapping(field: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise ValueError(f"data position {field} must be a JSON object, got {type(value).__name__} {value!r:.60}")


def describe(reads: Mapping[str, Any]) -> str:
    """A description as one stable line, for error messages.

    Args:
        reads: A description of what a stream reads, as a position holds it.

    Returns:
        Its JSON with sorted keys.

    Examples:
        >>> from dew.data import position
        >>> position.describe({"source": "wiki", "seq_len": 128})
        '{"seq_len": 128, "source": "wiki"}'
    """
    return json.dumps(reads, sort_keys=True, default=str)


# Where a token source's description holds its window length (seq_len + 1).
_WINDOW_FIELDS = (".windows", ".window", ".packed[0]")


def differences(saved: Any, ours: Any, *, path: str = "", limit: int = 5) -> list[str]:
    """Where two descriptions differ, as "source.seq_len 128 -> 256" lines, at most `limit` of them.

    A refused resume names what changed rather than printing both descriptions whole: two nested
    objects of fingerprints hide the one field a user edited.

    Args:
        saved: The description a saved position holds.
        ours: The description of what this stream reads.
        path: Where in an enclosing description the two are, prefixed to each line.
        limit: The most lines returned.

    Returns:
        One "field old -> new" line per difference.

    Examples:
        >>> from dew.data import position
        >>> position.differences({"source": {"seq_len": 128}}, {"source": {"seq_len": 256}})
        ['source.seq_len 128 -> 256']
    """
    found: list[str] = []

    def walk(a: Any, b: Any, where: str) -> None:
        if len(found) >= limit or a == b:
            return
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for key in sorted(set(a) | set(b), key=str):
                inner = f"{where}.{key}" if where else str(key)
                if key not in b:
                    found.append(f"{inner} {_short(a[key])} -> (absent)")
                elif key not in a:
                    found.append(f"{inner} (absent) -> {_short(b[key])}")
                else:
                    walk(a[key], b[key], inner)
            return
        if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
            for index, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{where}[{index}]")
            return
        if where.endswith(_WINDOW_FIELDS) and isinstance(a, int) and isinstance(b, int):
            # Token sources record their window, seq_len + 1: name the field the user changed.
            found.append(f"seq_len {a - 1} -> {b - 1} ({where} {a} -> {b})")
            return
        found.append(f"{where or 'description'} {_short(a)} -> {_short(b)}")

    walk(saved, ours, path)
    return found


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
