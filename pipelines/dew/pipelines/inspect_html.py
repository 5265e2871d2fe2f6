"""The HTML report of `dew-preprocess inspect --html`: one self-contained file to paste into a review.

Inline CSS, inline SVG charts (dew.pipelines.svg_plots) and pictures as JPEG data: URIs: the page
fetches nothing and runs no script. Every string that comes from the data (paths, captions, reasons,
config values) is escaped, since a caption or a file name can hold any markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from dew.data import formats
from dew.pipelines import svg_plots
from dew.pipelines.inspect_sample import clip_frames, read_sample, text_of, thumbnail
from dew.pipelines.inspection import Summary

THUMBNAILS = 36
CLIPS = 8
FRAMES_PER_CLIP = 5
_CAPTION_CHARS = 120

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;margin:0;background:#f4f6f9}
main{max-width:1100px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 4px;word-break:break-all}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:2px solid #dde3ec}
.sub{color:#5b6577;margin:0 0 16px}
section{background:#fff;border:1px solid #dde3ec;border-radius:8px;padding:6px 18px 16px;margin:16px 0}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:4px 12px;border-bottom:1px solid #e8ecf2;text-align:left;vertical-align:top}
th{background:#f0f3f8;font-weight:600}
td.n,th.n{text-align:right}
code,.mono{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.note{color:#5b6577;font-size:13px}
svg.chart{display:block;margin:10px 0;max-width:100%;height:auto;font:12px system-ui,sans-serif}
svg .title{font-weight:600;font-size:13px}
svg .bar{fill:#4a78c2}
svg .grid{stroke:#e3e8ef}
svg .tick,svg .value{fill:#4b5565}
svg .axis{fill:#1d2330;font-weight:600}
svg .marker{stroke:#d1495b;stroke-dasharray:4 3}
svg .marker-label{fill:#d1495b;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
.grid-thumbs{display:grid;grid-template-columns:repeat(auto-fill,minmax(140px,1fr));gap:10px}
figure{margin:0;background:#f7f9fc;border:1px solid #e3e8ef;border-radius:6px;padding:6px}
figure img{display:block;max-width:128px;max-height:128px;margin:0 auto}
figcaption{font-size:12px;color:#3a4355;margin-top:4px;overflow-wrap:anywhere}
.strip{display:flex;gap:4px;margin:6px 0}
.strip img{width:112px;height:auto;border-radius:3px}
.clip{margin:12px 0;padding-bottom:10px;border-bottom:1px solid #e8ecf2}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px;margin-top:6px}
.pair p{margin:0 0 2px}
.removal+.removal{border-top:1px solid #ddd;margin-top:8px;padding-top:8px}
pre.sample{white-space:pre-wrap;background:#f7f9fc;border:1px solid #e3e8ef;padding:8px;border-radius:6px}
"""


def write_html(summary: Summary, path: str) -> None:
    """Writes the report of `summary` (pictures read again from its directory's first train shard)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(page(summary))


def page(summary: Summary) -> str:
    parts = [f"<h1>{escape(summary.path)}</h1><p class='sub'>{escape(summary.format)} · {escape(summary.kind)}</p>"]
    if summary.kind == "mixture":
        parts.append(_mixture(summary))
    else:
        parts += [_overview(summary), _books(summary), _lengths(summary), _packing(summary), _sample(summary)]
        parts += [_pictures(summary), _samples(summary)]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'><title>{escape(summary.path)} · dew inspect</title>"
        f"<style>{_CSS}</style></head><body><main>{''.join(parts)}</main></body></html>"
    )


def _table(head: Iterable[str], rows: Iterable[Iterable[Any]], numeric: Iterable[int] = ()) -> str:
    right = set(numeric)
    cells = "".join(f"<th{' class=n' if i in right else ''}>{escape(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in right else ''}>{_cell(v)}</td>" for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


class _Markup(str):
    """A table cell already written as HTML (its data escaped where it was written)."""


def _cell(value: Any) -> str:
    if isinstance(value, _Markup):
        return value
    if isinstance(value, bool) or value is None:
        return escape(str(value))
    if isinstance(value, int | float):
        return svg_plots.number(value)
    if isinstance(value, list | dict):
        return f"<code>{escape(json.dumps(value))}</code>"
    return escape(str(value))


def _unit(summary: Summary) -> str:
    return "tokens" if summary.kind == "tokens" else "record bytes" if summary.unit == "bytes" else summary.unit


def _overview(summary: Summary) -> str:
    unit = _unit(summary)
    rows = [(s, r["shards"], r["records"], r["units"], r["bytes"]) for s, r in summary.splits.items()]
    splits = _table(("split", "shards", "records", unit, "file bytes"), rows, numeric=(1, 2, 3, 4))
    section = _table(("field", "value"), summary.section.items())
    config = _table(("flag", "value"), sorted(summary.config.items())) if summary.config else "<p>none recorded</p>"
    records = {split: row["records"] for split, row in summary.splits.items()}
    units = {split: row["units"] for split, row in summary.splits.items()}
    return (
        f"<section><h2>Summary</h2>{splits}"
        + svg_plots.bars("records per split", records, axis="records")
        + svg_plots.bars(f"{unit} per split", units, axis=unit)
        + f"<h2>{escape(summary.kind)} section</h2>{section}"
        + f"<details><summary>job config ({len(summary.config)} flags)</summary>{config}</details></section>"
    )


def _books(summary: Summary) -> str:
    stats = summary.stats
    if not stats:
        return "<section><h2>Drops</h2><p>no stats.json: what the job read and dropped is unknown</p></section>"
    parts = ["<section><h2>What the job read, wrote and dropped</h2>"]
    if "read" in stats:
        read, written = stats["read"], stats["written"]
        parts.append(
            f"<p>{svg_plots.number(written['count'])} {escape(written['unit'])} written of "
            f"{svg_plots.number(read['count'])} {escape(read['unit'])} read</p>"
        )
    dropped = dict(sorted(stats["dropped"].items(), key=lambda kv: -kv[1]))
    if dropped:
        examples, removals = stats.get("drop_examples", {}), stats.get("removal_examples", {})
        rows = [
            (reason, n, _examples(removals.get(reason)) if reason in removals else _example(examples.get(reason)))
            for reason, n in dropped.items()
        ]
        parts.append(_table(("reason", "dropped", "examples"), rows, numeric=(1,)))
        for problem in stats.get("removal_problems", ()):
            parts.append(f"<p class='note'>removal table not read: {escape(problem)}</p>")
        parts.append(
            svg_plots.bars("dropped by reason", dropped, axis=f"{stats.get('read', {}).get('unit', 'records')}")
        )
    else:
        parts.append("<p>nothing dropped</p>")
    return "".join(parts) + "</section>"


def _example(example: Mapping[str, Any] | None) -> _Markup:
    if example is None:
        return _Markup("")
    where = example.get("path", "")
    if "row" in example:
        where = f"{where} row {example['row']}"
    error = example.get("error", "")
    shown = f"<span class='mono'>{escape(where)}</span>" + (f"<br>{escape(error)}" if error else "")
    if "kept" in example:
        shown += _duplicate(example["removed"], example["kept"])
    elif "removed" in example:
        shown += _excerpt(example["removed"])
    return _Markup(shown)


def _examples(examples: list[Mapping[str, Any]]) -> _Markup:
    """Each removal of a reason inspect explains, one after another."""
    return _Markup("".join(f"<div class='removal'>{_example(example)}</div>" for example in examples))


def _duplicate(removed: Mapping[str, Any], kept: Mapping[str, Any]) -> str:
    """The removed text beside the kept one's, and where the kept document came from."""
    if "missing" in kept:
        where = f"not found: {kept['missing']}"
    else:
        where = f"{kept['source']} row {kept['row']}, in {kept['corpus']}"
    return (
        "<div class='pair'>"
        + f"<div><p class='note'>removed</p>{_excerpt(removed)}</div>"
        + f"<div><p class='note'>kept <span class='mono'>{escape(kept['id'])}</span>: "
        + f"<span class='mono'>{escape(where)}</span></p>{_excerpt(kept) if 'excerpt' in kept else ''}</div></div>"
    )


def _excerpt(found: Mapping[str, Any]) -> str:
    if "excerpt" in found:
        return f"<pre class='sample'>{escape(found['excerpt'])}</pre>"
    return f"<p class='note'>text not read: {escape(found['missing'])}</p>"


def _markers(d: Mapping[str, Any]) -> dict[str, float]:
    return {name: d[name] for name in ("p50", "p90", "p99", "max")}


def _lengths(summary: Summary) -> str:
    d = summary.documents
    if not d.get("count"):
        return ""
    line = ", ".join(f"{k} {svg_plots.number(round(d[k]))}" for k in ("p50", "p90", "p99", "max"))
    chart = svg_plots.histogram(
        "train documents by length",
        summary.lengths,
        x_axis="document length (tokens, power-of-two buckets)",
        y_axis="documents",
        markers=_markers(d),
    )
    return (
        f"<section><h2>Document lengths</h2><p>{svg_plots.number(d['count'])} train documents, "
        f"mean {d['mean']:,.1f} tokens; {line} (every document, from the document index)</p>{chart}</section>"
    )


def _packing(summary: Summary) -> str:
    p = summary.packing
    if not p:
        return ""
    chart = svg_plots.histogram(
        f"windows by fill at seq_len {p['seq_len']:,}",
        p["fill_histogram"],
        x_axis="window fill (tokens held / seq_len + 1)",
        y_axis="windows",
        percent=True,
    )
    return (
        f"<section><h2>Packing fill</h2><p>train split at seq_len {p['seq_len']:,}, {p['bins']} open bins "
        f"({escape(p['source'])}): {p['windows']:,} windows, {p['fill']:.1%} of their tokens are documents, "
        f"{p['full_windows']:,} windows full</p>{chart}</section>"
    )


def _sample(summary: Summary) -> str:
    s = summary.sample
    if not s:
        return ""
    rows = [(name, round(d["p50"]), round(d["p90"]), d["max"]) for name, d in s["fields"].items() if d.get("count")]
    parts = [
        f"<section><h2>Sample</h2><p>{s['records']:,} records spread over {s['of']:,} in "
        f"<span class='mono'>{escape(s['shard'])}</span> (the first train shard)</p>",
        _table(("field", "bytes p50", "bytes p90", "bytes max"), rows, numeric=(1, 2, 3)),
    ]
    if "image_width" in s:
        w, h = s["image_width"], s["image_height"]
        parts.append(
            f"<p>image sides: width p50 {w['p50']:,.0f} (max {w['max']:,}), height p50 {h['p50']:,.0f} "
            f"(max {h['max']:,}) pixels</p>"
        )
    if "caption_chars" in s:
        c = s["caption_chars"]
        parts.append(
            svg_plots.histogram(
                f"captions by length (sample of {s['records']:,})",
                c["histogram"],
                x_axis="caption length (characters, power-of-two buckets)",
                y_axis="records",
                markers=_markers(c),
            )
        )
    return "".join(parts) + "</section>"


def _pictures(summary: Summary) -> str:
    if summary.kind not in ("images", "clips") or not summary.sample:
        return ""
    meta = formats.read_meta(summary.path)
    count = THUMBNAILS if summary.kind == "images" else CLIPS
    read = read_sample(summary.path, meta, count)
    if read is None:
        return ""
    where = f"{len(read.rows):,} records spread over {read.of:,} in {read.shard}"
    if summary.kind == "images":
        figures = "".join(_figure(row, i) for row, i in zip(read.rows, read.indices, strict=True))
        grid = f"<div class='grid-thumbs'>{figures}</div>"
        return f"<section><h2>Images</h2><p class='note'>{escape(where)}</p>{grid}</section>"
    clips = "".join(_clip(row, i, summary.section) for row, i in zip(read.rows, read.indices, strict=True))
    note = f"{escape(where)}; {FRAMES_PER_CLIP} frames spread over each clip"
    return f"<section><h2>Clips</h2><p class='note'>{note}</p>{clips}</section>"


def _caption(row: dict[str, bytes]) -> str:
    text = text_of(row) or ""
    return escape(text[:_CAPTION_CHARS] + ("…" if len(text) > _CAPTION_CHARS else ""))


def _figure(row: dict[str, bytes], index: int) -> str:
    uri = thumbnail(row["image"]) if "image" in row else None
    picture = f"<img alt='record {index}' src='{uri}'>" if uri else "<p class='note'>not decodable</p>"
    return f"<figure>{picture}<figcaption>#{index:,} · {_caption(row)}</figcaption></figure>"


def _clip(row: dict[str, bytes], index: int, section: dict[str, Any]) -> str:
    uris = [thumbnail(frame) for frame in clip_frames(row, section, FRAMES_PER_CLIP)]
    strip = "".join(f"<img alt='record {index} frame {k}' src='{u}'>" for k, u in enumerate(uris) if u)
    source = escape(text_of(row, "source") or "")
    return (
        f"<div class='clip'><div class='strip'>{strip}</div><div>#{index:,} · {_caption(row)}</div>"
        f"<div class='note mono'>{source}</div></div>"
    )


def _samples(summary: Summary) -> str:
    if summary.kind != "tokens" or not summary.samples:
        return ""
    shown = []
    bounded = summary.section.get("eos_id") is not None  # without an eos a sample is the stream's head
    for i, sample in enumerate(summary.samples):
        body = sample["text"] if sample["text"] is not None else f"ids {sample['ids']}"
        title = f"document {i}" if bounded else "the stream's head (no eos: no document boundaries)"
        shown.append(f"<h3>{title} · {sample['tokens']:,} tokens</h3><pre class='sample'>{escape(body)}</pre>")
    heading = "First documents" if bounded else "Head of the stream"
    return f"<section><h2>{heading}</h2>{''.join(shown)}</section>"


def _mixture(summary: Summary) -> str:
    s = summary.section
    rows = [
        (c["path"], c["weight"], c["windows"], c["windows_available"], c["epochs"], c["state"]) for c in summary.corpora
    ]
    table = _table(("corpus", "weight", "windows", "available", "epochs", "state"), rows, numeric=(1, 2, 3, 4))
    return (
        f"<section><h2>Mixture</h2><p>{s['tokens']:,} tokens = {s['windows']:,} windows of seq_len "
        f"{s['seq_len']:,} + 1, split {escape(str(s['split']))}, tokenizer {escape(str(s['tokenizer']))}</p>{table}"
        + svg_plots.bars("share of windows", {c["path"]: c["weight"] for c in summary.corpora}, axis="weight")
        + svg_plots.bars("epochs of each corpus", {c["path"]: c["epochs"] for c in summary.corpora}, axis="epochs")
        + "</section>"
    )
