"""dew-preprocess inspect: what a committed directory (any kind) or a mixture plan holds, without Beam.

    dew-preprocess inspect corpus/ --seq_len 1024 --samples 3 --html report.html

Prints the format and kind, each split's shards, records, units and bytes, the kind's section (the
tokenizer of a token corpus), the drop reasons stats.json recorded, a histogram of document lengths
and the packing fill at --seq_len (token corpora), and the first few records; for a mixture.json, each
corpus's share and epochs. The numbers come from dew.pipelines.inspection.summarize; --html writes
them with plots as one self-contained file.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from dew.pipelines import flags
from dew.pipelines.inspection import Summary, summarize

_TEXT_WIDTH = 160
_BAR = 40


def parser() -> argparse.ArgumentParser:
    p = flags.parser("dew-preprocess inspect", __doc__.split("\n\n")[0])
    p.add_argument("path", help="a committed directory (local or gs://) or a mixture.json")
    p.add_argument(
        "--seq_len", type=flags.positive_int, default=None, help="tokens; also show the packing fill at this window"
    )
    p.add_argument("--packing_bins", type=flags.positive_int, default=8, help="open windows of that packing")
    p.add_argument("--samples", type=int, default=3, help="records to show from the train split")
    p.add_argument("--html", default=None, help="also write a self-contained HTML report with plots here")
    return p


def main(argv: Sequence[str] | None = None) -> Summary:
    args, _ = flags.parse(parser(), argv, beam=False)
    summary = summarize(args.path, seq_len=args.seq_len, packing_bins=args.packing_bins, samples=args.samples)
    render(summary, sys.stdout)
    if args.html:
        write_html(summary, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    return summary


def render(summary: Summary, out: TextIO) -> None:
    """The summary as terminal text."""
    say: Callable[..., None] = lambda *parts: print(*parts, file=out)  # noqa: E731
    say(f"{summary.path}: {summary.format} ({summary.kind})")
    if summary.kind == "mixture":
        _mixture(summary, say)
        return
    # A record's length in bytes is not the shard's size in bytes (ArrayRecord compresses, parquet encodes).
    unit = "tokens" if summary.kind == "tokens" else "record bytes" if summary.unit == "bytes" else summary.unit
    say(f"  {'split':<12}{'shards':>8}{'records':>14}{unit:>16}{'file bytes':>16}")
    for split, row in summary.splits.items():
        say(f"  {split:<12}{row['shards']:>8,}{row['records']:>14,}{row['units']:>16,}{row['bytes']:>16,}")
    say(f"  {summary.kind}: " + ", ".join(f"{key} {value}" for key, value in summary.section.items()))
    stats = summary.stats
    if stats:
        if "read" in stats:
            read, written = stats["read"], stats["written"]
            of = "" if read["unit"] == written["unit"] else f" {read['unit']}"
            say(f"  {written['unit']}: {written['count']:,} written of {read['count']:,}{of} read")
        for reason, n in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]):
            say(f"    dropped {reason}: {n:,}{_example(stats.get('drop_examples', {}).get(reason))}")
    else:
        say("  no stats.json: drop reasons unknown")
    if summary.documents:
        d = summary.documents
        if d["count"]:
            say(
                f"  train documents: {d['count']:,}, tokens mean {d['mean']:,.1f}, p50 {d['p50']:,.0f}, "
                f"p90 {d['p90']:,.0f}, p99 {d['p99']:,.0f}, max {d['max']:,}"
            )
        peak = max((n for _, _, n in summary.lengths), default=1)
        for lo, hi, n in summary.lengths:
            say(f"    [{lo:>8,}, {hi:>8,})  {n:>9,}  {'#' * max(1, round(_BAR * n / peak))}")
    if summary.packing:
        p = summary.packing
        say(f"  packing at seq_len {p['seq_len']} (bins {p['bins']}): {p['windows']:,} windows, fill {p['fill']:.1%}")
    for i, sample in enumerate(summary.samples):
        say(f"  sample {i}: {_sample(sample)}")


def _example(example: dict[str, Any] | None) -> str:
    if example is None:
        return ""
    if "row" in example:
        return f" (e.g. {example['path']} row {example['row']})"
    path, error = example["path"], example["error"]
    return f" (e.g. {error})" if error.startswith(path) else f" (e.g. {path}: {error})"


def _mixture(summary: Summary, say: Callable[..., None]) -> None:
    s = summary.section
    say(
        f"  {s['tokens']:,} tokens = {s['windows']:,} windows of seq_len {s['seq_len']} + 1, split {s['split']}, "
        f"tokenizer {s['tokenizer']}"
    )
    say(f"  {'weight':>8}{'windows':>12}{'available':>12}{'epochs':>9}  corpus")
    for c in summary.corpora:
        say(f"  {c['weight']:>8.3f}{c['windows']:>12,}{c['windows_available']:>12,}{c['epochs']:>9.2f}  {c['path']}")


def _sample(sample: dict[str, Any]) -> str:
    if "fields" in sample:
        return ", ".join(f"{name}: {size:,} bytes" for name, size in sample["fields"].items())
    if sample["text"] is None:
        return f"{sample['tokens']:,} tokens, ids {sample['ids']}"
    text = " ".join(sample["text"].split())
    return f"{sample['tokens']:,} tokens: {text[:_TEXT_WIDTH]!r}" + ("…" if len(text) > _TEXT_WIDTH else "")


def write_html(summary: Summary, path: str) -> None:
    """One HTML file: the text summary and its plots as PNGs embedded in base64, nothing to fetch."""
    text = io.StringIO()
    render(summary, text)
    images = "".join(
        f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" src="data:image/png;base64,{png}">'
        for title, png in _plots(summary)
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(summary.path)}</title></head>"
        f"<body><h1>{html.escape(summary.path)}</h1><pre>{html.escape(text.getvalue())}</pre>{images}</body></html>"
    )
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


def _plots(summary: Summary) -> list[tuple[str, str]]:
    bars: list[tuple[str, list[str], list[float]]] = []
    if summary.kind == "mixture":
        bars.append(("share of windows", [c["path"] for c in summary.corpora], [c["weight"] for c in summary.corpora]))
        bars.append(("epochs", [c["path"] for c in summary.corpora], [c["epochs"] for c in summary.corpora]))
    else:
        bars.append((f"{summary.unit} per split", list(summary.splits), [r["units"] for r in summary.splits.values()]))
    if summary.lengths:
        labels = [f"<{hi:,}" for _, hi, _ in summary.lengths]
        bars.append(("train documents by length (tokens)", labels, [n for _, _, n in summary.lengths]))
    if summary.stats.get("dropped"):
        dropped = summary.stats["dropped"]
        bars.append(("documents dropped by reason", list(dropped), list(dropped.values())))
    return [(title, _bar_png(title, labels, values)) for title, labels, values in bars]


def _bar_png(title: str, labels: list[str], values: list[float]) -> str:
    from dew.data.extras import require

    matplotlib = require("matplotlib", for_what="dew-preprocess inspect --html")
    matplotlib.use("Agg")  # no display on a launcher or a TPU host
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3))
    try:
        axes.bar(range(len(values)), values)
        axes.set_xticks(range(len(values)), labels, rotation=30, ha="right", fontsize=8)
        axes.set_title(title)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=80)
    finally:
        plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["inspect", *sys.argv[1:]]))
