"""X-Robots-Tag as crawlers read it: which directives of a response's headers bind a given crawler.

Google's and Bing's published rules: a header holds comma-separated directives, names compared without
regard to case; a directive list may start with a crawler's name and a colon (`otherbot: noindex`), which
binds the directives after it, up to the next name, to that crawler alone; directives without a name bind
every crawler. Several headers each start unnamed. A few directives carry a value after a colon of their
own (`max-image-preview: large`, `unavailable_after: <date>`, whose date may hold commas): those names are
directives, never crawlers, and the pieces of a date are no directives at all.
"""

from __future__ import annotations

from collections.abc import Iterable

# Directives whose name is followed by a colon and a value: the colon names no crawler.
VALUED = frozenset({"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"})
OPTOUT = frozenset({"noai", "noimageai"})  # the AI opt-outs img2dataset honours


def directives(values: Iterable[str], crawler: str) -> set[str]:
    """The directive names (lower case) of X-Robots-Tag `values` that bind `crawler` (its product token)."""
    crawler = crawler.strip().lower()
    bound: set[str] = set()
    for value in values:
        scope: str | None = None
        for piece in value.split(","):
            name, colon, rest = piece.strip().partition(":")
            name = name.strip().lower()
            if not name or not _token(name):
                continue  # empty, or the rest of a value (a date's "25 Jun 2010 15:00:00 GMT")
            if colon and name not in VALUED:
                scope = name  # a crawler's name: what follows binds it alone
                name = rest.strip().partition(":")[0].strip().lower()
                if not name or not _token(name):
                    continue
            if scope is None or scope == crawler:
                bound.add(name)
    return bound


def opted_out(values: Iterable[str], crawler: str) -> bool:
    """Whether `values` opt the response out of AI use for `crawler`."""
    return bool(OPTOUT & directives(values, crawler))


def _token(name: str) -> bool:
    return all(c.isalnum() or c in "-_.*" for c in name)
