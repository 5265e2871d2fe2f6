"""dew-preprocess inspect: what a committed directory (any kind) or a mixture plan holds, without Beam.

    dew-preprocess inspect corpus/ --seq_len 1024 --samples 3 --html report.html

Prints the format and kind, each split's shards, records, units and bytes, the kind's section (the
tokenizer of a token corpus), the drop reasons stats.json recorded, a histogram of document lengths
and the packing fill at --seq_len (token corpora), and the first few records; for a mixture.json, each
corpus's share and epochs. The numbers come from dew.pipelines.inspection.summarize; --html writes
them as one self-contained page (inline CSS and SVG charts, image thumbnails and clip frames as data:
URIs) to paste into a review.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from dew.pipelines import flags
from dew.pipelines.inspection import SAMPLE_RECORDS, Summary, summarize
from dew.pipelines.jobs import Job

JOB = Job(
    name="inspect",
    place=9,
    summary="a committed directory or mixture.json → its splits, drops, lengths, fill and samples (no Beam)",
    beam=False,
)

_TEXT_WIDTH = 160
_BAR = 40


def parser() -> argparse.ArgumentParser:
    """The inspect job's flags: the directory or mixture.json, the window, the samples and the page.

    Returns:
        The parser of `dew-preprocess inspect --help`; inspect runs no Beam, so it takes nothing else.

    Examples:
        >>> parser().parse_args(["corpus/", "--seq_len", "1024"]).seq_len
        1024
    """
    p = flags.parser("dew-preprocess inspect", __doc__.split("\n\n")[0])
    p.add_argument("path", help="a committed directory (local or gs://) or a mixture.json")
    p.add_argument(
        "--seq_len", type=flags.positive_int, default=None, help="tokens; also show the packing fill at this window"
    )
    p.add_argument("--packing_bins", type=flags.positive_int, default=8, help="open windows of that packing")
    p.add_argument("--samples", type=int, default=3, help="records to show from the train split")
    p.add_argument(
        "--sample",
        type=flags.positive_int,
        default=SAMPLE_RECORDS,
        help="records (64 MiB at most) read for a packed-dict directory's field and caption statistics",
    )
    p.add_argument(
        "--removals",
        type=flags.positive_int,
        default=3,
        help="removed documents explained a reason (a documents directory), read from its removal tables",
    )
    p.add_argument("--html", default=None, help="also write a self-contained HTML report here")
    return p


def main(argv: Sequence[str] | None = None) -> Summary:
    """Prints what the directory or mixture plan holds, and writes it as one page with --html.

    Args:
        argv: The inspect flags; None for the command line.

    Returns:
        The summary the text and the page were made from (dew.pipelines.inspection.summarize).
    """
    args, _ = flags.parse(parser(), argv, beam=False)
    summary = summarize(
        args.path,
        seq_len=args.seq_len,
        packing_bins=args.packing_bins,
        samples=args.samples,
        sample=args.sample,
        removals=args.removals,
    )
    render(summary, sys.stdout)
    if args.html:
        from dew.pipelines.inspect_html import write_html  # Pillow, for the thumbnails, loads only here

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
    if summary.config:
        say("  config: " + ", ".join(f"{key} {value}" for key, value in sorted(summary.config.items())))
    stats = summary.stats
    if stats:
        if "read" in stats:
            read, written = stats["read"], stats["written"]
            of = "" if read["unit"] == written["unit"] else f" {read['unit']}"
            say(f"  {written['unit']}: {written['count']:,} written of {read['count']:,}{of} read")
        if "documents_edited" in stats:  # a documents directory: C4's line removal edits some kept texts
            say(
                f"  documents: {stats['documents_written']:,} written of {stats['documents_in']:,} read, "
                f"{stats['documents_edited']:,} with lines removed by C4"
            )
        for reason, n in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]):
            example = stats.get("drop_examples", {}).get(reason)
            say(f"    dropped {reason}: {n:,}{_example(example)}")
            for i, removal in enumerate(stats.get("removal_examples", {}).get(reason, ())):
                if i:
                    say(f"      and {_where(removal)}:")
                _removal(removal, summary.path, say)
        for problem in stats.get("removal_problems", ()):
            say(f"    removal table not read: {problem}")
    else:
        say("  no stats.json: drop reasons unknown")
    if summary.kind == "tokens" and summary.section.get("eos_id") is None:
        say("  no eos id: the stream has no document boundaries, so no lengths or packing (PackedTokens refuses it)")
    if summary.documents:
        d = summary.documents
        if d["count"]:
            say(
                f"  train documents: {d['count']:,}, tokens mean {d['mean']:,.1f}, p50 {d['p50']:,.0f}, "
                f"p90 {d['p90']:,.0f}, p99 {d['p99']:,.0f}, max {d['max']:,}"
            )
        _bars(say, [(f"[{lo:>8,}, {hi:>8,})", n) for lo, hi, n in summary.lengths])
    if summary.packing:
        p = summary.packing
        say(
            f"  packing at seq_len {p['seq_len']} (bins {p['bins']}): {p['windows']:,} windows, fill {p['fill']:.1%}, "
            f"{p['full_windows']:,} windows full ({p['source']})"
        )
        _bars(say, [(f"fill [{lo:>4.0%}, {hi:>4.0%})", n) for lo, hi, n in p["fill_histogram"] if n])
    if summary.sample:
        _sample_stats(summary.sample, say)
    for i, sample in enumerate(summary.samples):
        say(f"  sample {i}: {_sample(sample)}")


def _bars(say: Callable[..., None], rows: list[tuple[str, int]]) -> None:
    peak = max((n for _, n in rows), default=1) or 1
    for label, n in rows:
        say(f"    {label}  {n:>9,}  {'#' * (max(1, round(_BAR * n / peak)) if n else 0)}")


def _percentiles(d: dict[str, Any]) -> str:
    return f"p50 {d['p50']:,.0f}, p90 {d['p90']:,.0f}, p99 {d['p99']:,.0f}, max {d['max']:,}"


def _sample_stats(s: dict[str, Any], say: Callable[..., None]) -> None:
    say(f"  sample: {s['records']:,} records spread over the {s['of']:,} of {s['shard']}")
    for name, d in s["fields"].items():
        if d.get("count"):
            say(f"    {name} bytes: {_percentiles(d)}")
    for name in ("image_width", "image_height"):
        if name in s:
            say(f"    {name.replace('_', ' ')} (pixels): {_percentiles(s[name])}")
    if "caption_chars" in s:
        say(f"    caption characters: {_percentiles(s['caption_chars'])}")


def _example(example: dict[str, Any] | None) -> str:
    if example is None:
        return ""
    if "row" in example:
        return f" (e.g. {_where(example)})"
    path, error = example["path"], example["error"]
    return f" (e.g. {error})" if error.startswith(path) else f" (e.g. {path}: {error})"


def _where(example: dict[str, Any]) -> str:
    """Where a dropped row was, and for a duplicate the id of the document it duplicates."""
    of = f", a duplicate of {example['duplicate_of']}" if example.get("duplicate_of") else ""
    if of and example.get("duplicate_in"):
        of += f" in {example['duplicate_in']}"
    return f"{example['path']} row {example['row']}{of}"


def _removal(example: dict[str, Any], path: str, say: Callable[..., None]) -> None:
    """The removed document's text, above the one it duplicates and where that one came from."""
    say(f"      removed: {_shown(example['removed'])}")
    kept = example.get("kept")
    if kept is None:
        return
    if "missing" in kept:
        say(f"      kept {kept['id']}: not found: {kept['missing']}")
        return
    corpus = "this directory" if kept["corpus"] == path else f"--against {kept['corpus']}"
    say(f"      kept {kept['id']}: {kept['source']} row {kept['row']}, in {corpus}")
    say(f"        {_shown(kept)}")


def _shown(found: dict[str, Any]) -> str:
    return repr(found["excerpt"]) if "excerpt" in found else f"text not read: {found['missing']}"


def _mixture(summary: Summary, say: Callable[..., None]) -> None:
    s = summary.section
    say(
        f"  {s['tokens']:,} tokens = {s['windows']:,} windows of seq_len {s['seq_len']} + 1, split {s['split']}, "
        f"tokenizer {s['tokenizer']}"
    )
    say(f"  {'weight':>8}{'windows':>12}{'available':>12}{'epochs':>9}  corpus")
    for c in summary.corpora:
        say(f"  {c['weight']:>8.3f}{c['windows']:>12,}{c['windows_available']:>12,}{c['epochs']:>9.2f}  {c['path']}")
    for c in summary.corpora:
        if c["state"] != "as planned":
            say(f"  {c['path']}: {c['state']}")


def _sample(sample: dict[str, Any]) -> str:
    if "fields" in sample:
        sizes = ", ".join(f"{name}: {size:,} bytes" for name, size in sample["fields"].items())
        caption = sample.get("caption")
        return sizes if caption is None else f"{sizes} — {_clipped(caption)}"
    if sample["text"] is None:
        return f"{sample['tokens']:,} tokens, ids {sample['ids']}"
    return f"{sample['tokens']:,} tokens: {_clipped(sample['text'])}"


def _clipped(text: str) -> str:
    text = " ".join(text.split())
    return f"{text[:_TEXT_WIDTH]!r}" + ("…" if len(text) > _TEXT_WIDTH else "")


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["inspect", *sys.argv[1:]]))
