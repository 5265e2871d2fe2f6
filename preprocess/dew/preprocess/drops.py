"""The last check before a corpus commits: did the job write enough of what it read?

Dropping a bad row is normal; dropping most rows is a mistake upstream (a wrong --text_field, a file
of another format, a broken export) that counting alone would commit as a tiny or empty corpus. So a
job that wrote no document, or dropped more than `max_drop_fraction` of what it read, fails before
meta.json, naming its top reasons with the file and row of an example for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dew.preprocess.job_errors import TooManyDropsError
from dew.preprocess.quiet import user_error

# What to check for a reason whose usual cause is a flag rather than the data.
_HINTS = {
    "missing_field": "is the text under --text_field?",
    "too_long": "see --max_document_bytes",
    "malformed_json": "is the file jsonl, one JSON object a line?",
    "invalid_utf8": "is the text UTF-8?",
}
_SHOWN = 3


def check_drops(
    stats: Mapping[str, Any],
    max_drop_fraction: float,
    *,
    unit: str = "documents",
    hints: Mapping[str, str] = _HINTS,
) -> None:
    """Raises TooManyDropsError when stats.json's books show nothing written or too much dropped.

    unit names what the job counts: stats holds `<unit>_in` and `<unit>_written`; hints are the flag
    to check for each reason whose usual cause is one.
    """
    read, written = stats[f"{unit}_in"], stats[f"{unit}_written"]
    dropped = sum(stats["dropped"].values())
    if written and dropped <= max_drop_fraction * read:
        return
    if not read:
        nothing = f"the inputs hold no {unit.removesuffix('s')}: nothing to commit. Are they the files you meant?"
        raise user_error(TooManyDropsError(nothing))
    if written:
        what = f"dropped {dropped / read:.1%} of {read:,} {unit} (--max_drop_fraction {max_drop_fraction})"
    else:
        what = f"wrote none of {read:,} {unit}"
    lines = [f"the job {what}. Nothing was committed. Top drop reasons:"]
    top = sorted(((-n, reason) for reason, n in stats["dropped"].items() if n))[:_SHOWN]
    examples = stats.get("drop_examples", {})
    for minus, reason in top:
        n = -minus
        line = f"  {reason}: {n:,} ({n / read:.1%})"
        if reason in examples:
            line += f", e.g. {examples[reason]['path']} row {examples[reason]['row']}"
        if reason in hints:
            line += f" — {hints[reason]}"
        lines.append(line)
    raise user_error(TooManyDropsError("\n".join(lines)))


def check_books(what: str, read_in: int, written: int, dropped: Mapping[str, int], *, read: str = "read in") -> None:
    """Refuses a run whose books do not balance: every `what` read in was written or dropped under a reason.

    A mismatch is dew's bug (a record counted twice, or lost between steps), never the user's input, so it
    stops the commit with the counts rather than being counted itself.
    """
    if read_in != written + sum(dropped.values()):
        raise RuntimeError(
            f"{what} accounting is off: {read_in} {read}, {written} written, "
            f"{sum(dropped.values())} dropped ({dict(dropped)})"
        )
