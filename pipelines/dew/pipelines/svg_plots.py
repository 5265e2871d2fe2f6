"""Inline SVG charts for the inspect report: written by hand, so the report needs no plotting library.

Every chart has a title, labelled axes with their units, tick labels with thousands separators (never an
offset like "1e7"), and a log scale for counts that span more than two decades, so the smallest bar (a
val split, a rare drop reason) stays visible beside the largest. Every string is escaped: labels come
from data (file names, reasons).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

_WIDTH = 720
_LEFT_TEXT = 7  # pixels a label character takes at the 12 px font
_BAR = 22
_PLOT_HEIGHT = 220
# Beyond this ratio of the largest to the smallest positive count a linear axis hides the small ones.
_LOG_SPAN = 100


def number(value: float) -> str:
    """A count or a size as a reader wants it: 1,234,567 or 0.25, never 1.2e6."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.1f}"


def wants_log(values: Sequence[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > _LOG_SPAN


def _ticks(top: float, log: bool) -> list[float]:
    if top <= 0:
        return [0.0]
    if log:
        return [10.0**k for k in range(math.floor(math.log10(top)) + 1)]
    step = 10 ** math.floor(math.log10(top))
    for factor in (1, 2, 5, 10):
        if top / (step * factor) <= 5:
            step *= factor
            break
    return [step * k for k in range(int(top // step) + 1)]


def _scale(value: float, top: float, log: bool, length: float) -> float:
    if value <= 0 or top <= 0:
        return 0.0
    if log:  # 1 sits at the axis: a count of one is a sliver, not nothing
        return length * (math.log10(value) + 0.3) / (math.log10(top) + 0.3)
    return length * value / top


def _svg(title: str, width: int, height: int, body: str) -> str:
    return (
        f'<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>{escape(title)}</title>'
        f'<text class="title" x="{width / 2}" y="18" text-anchor="middle">{escape(title)}</text>{body}</svg>'
    )


def bars(title: str, values: Mapping[str, float], *, axis: str) -> str:
    """Horizontal bars, one per label, each with its value written at its end; `axis` names the unit."""
    labels = list(values)
    log = wants_log(list(values.values()))
    left = min(320, 16 + _LEFT_TEXT * max((len(label) for label in labels), default=4))
    length = _WIDTH - left - 90
    top = max(values.values(), default=0) * (1 if log else 1.05)
    height = 40 + _BAR * len(labels) + 50
    parts = []
    for i, tick in enumerate(_ticks(top, log)):
        x = left + _scale(tick, top, log, length) if (tick > 0 or not log) else left
        if log and i == 0:
            x = left + _scale(1, top, log, length)
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="30" y2="{height - 45}"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{height - 32}" text-anchor="middle">{number(tick)}</text>')
    for i, label in enumerate(labels):
        y = 34 + _BAR * i
        w = _scale(values[label], top, log, length)
        shown = label if len(label) <= 44 else "…" + label[-43:]
        parts.append(
            f'<text class="label" x="{left - 6}" y="{y + 15}" text-anchor="end">{escape(shown)}</text>'
            f'<rect class="bar" x="{left}" y="{y + 3}" width="{max(w, 0.5):.1f}" height="{_BAR - 6}">'
            f"<title>{escape(label)}: {number(values[label])}</title></rect>"
            f'<text class="value" x="{left + w + 4:.1f}" y="{y + 15}">{number(values[label])}</text>'
        )
    scale = " (log scale)" if log else ""
    parts.append(
        f'<text class="axis" x="{left + length / 2}" y="{height - 10}" text-anchor="middle">'
        f"{escape(axis)}{scale}</text>"
    )
    return _svg(title, _WIDTH, height, "".join(parts))


def histogram(
    title: str,
    buckets: Sequence[tuple[float, float, int]],
    *,
    x_axis: str,
    y_axis: str,
    markers: Mapping[str, float] | None = None,
    percent: bool = False,
) -> str:
    """Vertical bars over buckets (low, high, count), equal widths whatever the bucket's span (so
    power-of-two buckets read as a log axis), with vertical markers at values such as p50 and max."""
    counts = [n for _, _, n in buckets]
    log = wants_log(counts)
    left, bottom, width = 80, 40 + _PLOT_HEIGHT, _WIDTH - 110
    top = max(counts, default=0) * (1 if log else 1.05)
    step = width / max(len(buckets), 1)
    parts = []
    for tick in _ticks(top, log):
        y = bottom - _scale(tick, top, log, _PLOT_HEIGHT)
        parts.append(
            f'<line class="grid" x1="{left}" x2="{left + width}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{number(tick)}</text>'
        )
    edge = (lambda v: f"{v:.0%}") if percent else number
    every = max(1, math.ceil(len(buckets) / 12))  # at most a dozen edge labels, so none overlap
    for i, (lo, hi, n) in enumerate(buckets):
        h = _scale(n, top, log, _PLOT_HEIGHT)
        parts.append(
            f'<rect class="bar" x="{left + i * step + 1:.1f}" y="{bottom - h:.1f}" width="{max(step - 2, 1):.1f}" '
            f'height="{h:.1f}"><title>[{edge(lo)}, {edge(hi)}): {number(n)}</title></rect>'
        )
        if i % every == 0:
            parts.append(
                f'<text class="tick" x="{left + i * step:.1f}" y="{bottom + 16}" text-anchor="middle">{edge(lo)}</text>'
            )
    parts.append(
        f'<text class="tick" x="{left + width:.1f}" y="{bottom + 16}" text-anchor="middle">'
        f"{edge(buckets[-1][1])}</text>"
        if buckets
        else ""
    )
    for k, (name, value) in enumerate((markers or {}).items()):
        x = left + _position(buckets, value) * step
        # Near the right edge a label reads leftwards, so it stays inside the chart.
        anchor, dx = ("end", -3) if x > left + width - 90 else ("start", 3)
        shown = f"{value:.0%}" if percent else number(round(value))
        parts.append(
            f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="34" y2="{bottom}"/>'
            f'<text class="marker-label" x="{x + dx:.1f}" y="{44 + 13 * k}" text-anchor="{anchor}">'
            f"{escape(name)} {shown}</text>"
        )
    scale = " (log scale)" if log else ""
    parts.append(
        f'<text class="axis" x="{left + width / 2}" y="{bottom + 38}" text-anchor="middle">{escape(x_axis)}</text>'
        f'<text class="axis" transform="translate(18 {bottom - _PLOT_HEIGHT / 2}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_axis)}{scale}</text>'
    )
    return _svg(title, _WIDTH, bottom + 50, "".join(parts))


def _position(buckets: Sequence[tuple[float, float, int]], value: float) -> float:
    """Where `value` falls along the bucket axis, in bucket widths (geometric inside power-of-two buckets)."""
    for i, (lo, hi, _) in enumerate(buckets):
        if lo <= value < hi or (i == len(buckets) - 1 and value >= lo):
            if lo > 0 and hi / lo > 1.5:
                return i + min(1.0, math.log(value / lo) / math.log(hi / lo))
            return i + min(1.0, (value - lo) / (hi - lo))
    return 0.0 if not buckets or value < buckets[0][0] else float(len(buckets))
