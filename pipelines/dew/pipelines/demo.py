"""`make demo`: tokenize a real corpus on Beam, pack it, and read it back as training batches.

The corpus is the Python reference documentation CPython ships in pydoc_data, one document per topic,
so the demo needs no download. Steps: write the topics as jsonl → `dew-preprocess tokenize --pack
--seq_len` (DirectRunner across the cores) → `PackedTokens(...).load(batch=)` → print a decoded row,
the read rate and how full the packed windows are.

    python -m dew.pipelines.demo [--tokenizer byte|HF name|local dir] [--seq_len 512] [--batch 8] [Beam flags]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dew.pipelines.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default="byte", help="'byte', an HF hub name, or a local tokenizer directory")
    p.add_argument("--seq_len", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=50, help="batches to read for the rate")
    p.add_argument("--workdir", default=None, help="where the corpus goes (a temporary directory by default)")
    return p


def write_topics(path: str) -> int:
    from pydoc_data.topics import topics

    with open(path, "w") as f:
        for name in sorted(topics):
            f.write(json.dumps({"text": topics[name]}) + "\n")
    return len(topics)


def render(ids: np.ndarray, segments: np.ndarray, tokenizer: Any, eos: int | None, width: int = 400) -> str:
    """One packed window as text: documents separated by ' ‖ ', padding left out."""
    parts = []
    for segment in np.unique(segments[segments > 0]):
        piece = ids[segments == segment]
        text = tokenizer.decode(piece[piece != eos] if eos is not None else piece)
        parts.append(" ".join(text.split()))
    shown = " ‖ ".join(parts)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args, beam_flags = parser().parse_known_args(argv)
    from dew.data import DataPartition, Loading, datasets, formats, tokenizer_for
    from dew.pipelines import tokenize_job

    workdir = args.workdir or tempfile.mkdtemp(prefix="dew-demo-")
    os.makedirs(workdir, exist_ok=True)
    source, corpus = os.path.join(workdir, "pydoc_topics.jsonl"), os.path.join(workdir, "corpus")
    documents = write_topics(source)
    print(f"[1/3] {documents} pydoc topics → {source}")

    print(f"[2/3] tokenize + pack on Beam (tokenizer {args.tokenizer!r}) → {corpus}")
    start = time.monotonic()
    flags = ["--input", source, "--output", corpus, "--tokenizer", args.tokenizer, "--pack"]
    flags += ["--val_fraction", "0.05", "--seq_len", str(args.seq_len), "--overwrite", *beam_flags]
    tokenize_job.main(flags)
    seconds = time.monotonic() - start
    meta = formats.read_meta(corpus)
    with open(os.path.join(corpus, "stats.json")) as f:
        stats = json.load(f)
    plan = next(p for p in stats["packing"] if p["split"] == "train")
    print(
        f"      {stats['documents_written']} documents, {stats['tokens']:,} tokens in {seconds:.1f} s; "
        f"train packs into {plan['windows']:,} windows of {args.seq_len + 1}, fill {1 - plan['padding']:.1%}"
    )

    print(f"[3/3] PackedTokens(path=..., seq_len={args.seq_len}).load(batch={args.batch})")
    spec = datasets.PackedTokens(
        path=corpus, seq_len=args.seq_len, val_batches=1, loading=Loading(workers=0, threads=2, read_buffer=8)
    )
    data = spec.load(batch=args.batch)
    stream = data.train(DataPartition(index=0, count=1))
    try:
        first = next(stream)
        start = time.monotonic()
        filled = np.count_nonzero(first["text_segment_ids"])
        for _ in range(args.steps):
            batch = next(stream)
            filled += np.count_nonzero(batch["text_segment_ids"])
        seconds = time.monotonic() - start
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    tokens = args.steps * args.batch * (args.seq_len + 1)
    rate = tokens / seconds
    fill = filled / ((args.steps + 1) * args.batch * (args.seq_len + 1))
    tokenizer = tokenizer_for(args.tokenizer)
    print(f"      batch keys {sorted(first)}, each {first['text'].shape} {first['text'].dtype}")
    print(f"      row 0: {render(first['text'][0], first['text_segment_ids'][0], tokenizer, meta.tokens.eos_id)}")
    print(f"      read {tokens:,} tokens in {seconds:.2f} s: {rate:,.0f} tokens/s; packing fill {fill:.1%}")
    print(f"      {data.steps_per_epoch} steps per epoch at batch {args.batch}")
    return {"rate": rate, "fill": fill, "windows": plan["windows"], "corpus": corpus}


if __name__ == "__main__":
    from dew.pipelines import zygotes

    zygotes.allow()  # a program in a process of its own: its job's workers can be forked (docs/preprocess.md)
    main()
    sys.exit(0)
