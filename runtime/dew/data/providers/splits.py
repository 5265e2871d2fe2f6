"""Whether a validation split expression reads records of the training one, from the two strings alone.

HF and TFDS share one split grammar: parts joined by "+", each a split name with an optional slice
"[from:to]" in records or percent and an optional rounding "(closest)". Two parts of the same split
overlap when their slices do; a bound this cannot place without the split's length (a negative one,
or percent against records) is left to the caller, so only a sure overlap is reported.
"""

from __future__ import annotations

import math
import re

_PART = re.compile(
    r"^(?P<name>[\w.-]+)(?:\[(?P<start>-?\d+)?(?P<start_pct>%)?:(?P<stop>-?\d+)?(?P<stop_pct>%)?\])?(?:\(\w+\))?$"
)


def overlap(split: str, val_split: str) -> str | None:
    """The part of `val_split` that surely shares records with a part of `split`, else None.

    Examples:
        >>> overlap("train[:90%]", "train[80%:]")
        'train[80%:]'
        >>> overlap("train[:90%]", "train[90%:]") is None
        True
    """
    held = [(part, _interval(part)) for part in val_split.split("+")]
    for part in split.split("+"):
        trained = _interval(part)
        for text, other in held:
            if trained is not None and other is not None and _meet(trained, other):
                return text.strip()
    return None


def _interval(part: str) -> tuple[str, str | None, float, float] | None:
    """(split, unit, start, stop) of one part; unit None for the whole split; None where unplaceable."""
    found = _PART.match(part.strip())
    if found is None:
        return None
    if "[" not in part:
        return found["name"], None, 0, math.inf
    bounds = [(found[b], found[f"{b}_pct"]) for b in ("start", "stop")]
    units = {"%" if pct else "records" for value, pct in bounds if value is not None}
    if len(units) > 1 or any(value is not None and int(value) < 0 for value, _ in bounds):
        return None  # percent against records, or counted from the end: the split's length decides
    unit = units.pop() if units else "records"
    start = 0 if bounds[0][0] is None else int(bounds[0][0])
    stop = math.inf if bounds[1][0] is None else int(bounds[1][0])
    return found["name"], unit, start, stop


def _meet(a: tuple[str, str | None, float, float], b: tuple[str, str | None, float, float]) -> bool:
    if a[0] != b[0] or a[2] >= a[3] or b[2] >= b[3]:
        return False
    if a[1] is None or b[1] is None:
        return True  # the whole split holds every record of any non-empty slice of it
    return a[1] == b[1] and max(a[2], b[2]) < min(a[3], b[3])
