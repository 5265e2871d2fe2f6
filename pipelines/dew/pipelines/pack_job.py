"""dew-preprocess pack: write a committed corpus's document index and packing plans ahead of training.

    dew-preprocess pack --corpus corpus/ --seq_len 1024 --seq_len 2048 --packing_bins 8

The files are what PackedTokens would compute at startup, stamped with the corpus fingerprint; with
them its startup reads two small arrays instead of scanning the corpus.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import apache_beam as beam

from dew.data import formats
from dew.pipelines import common, flags
from dew.pipelines.jobs import Job
from dew.preprocess.pack import PackCorpus
from dew.preprocess.plan_mixture import read_corpus_meta

JOB = Job(
    name="pack",
    place=3,
    summary="a committed corpus → its document index and packing plans, ahead of training",
    extras=("parquet",),
)


def parser() -> argparse.ArgumentParser:
    """The pack job's flags: the committed corpus and each window (seq_len) to plan at.

    Returns:
        The parser of `dew-preprocess pack --help`; Beam takes the flags it does not.
    """
    p = flags.parser("dew-preprocess pack", __doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="a committed corpus directory (local or gs://)")
    p.add_argument(
        "--seq_len",
        type=flags.positive_int,
        action="append",
        required=True,
        help="tokens; a window is seq_len + 1; repeatable",
    )
    p.add_argument("--packing_bins", type=flags.positive_int, default=8, help="windows the plan keeps open at once")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, int]:
    """Writes the corpus's document index and a packing plan per split and seq_len, printing each one's fill.

    Args:
        argv: The pack flags, Beam's options after them; None stands for the process's arguments.

    Returns:
        The counters the run reported (`packed_windows_<split>`, ...).
    """
    args, options = common.start(parser(), argv)
    corpus = args.corpus.rstrip("/")
    meta = read_corpus_meta(corpus)
    formats.check_local_sizes(corpus, meta)
    if meta.tokens.eos_id is None:
        print(
            f"{corpus} records no eos id: its index holds one document a split, and PackedTokens refuses it "
            "(no document boundaries to pack at); tokenize with --pack, or read it with TokenWindows",
            file=sys.stderr,
        )
    windows = [(seq_len, args.packing_bins) for seq_len in sorted(set(args.seq_len))]
    pipeline = common.make_pipeline(options)
    pack = PackCorpus(corpus, windows)
    (
        pipeline
        | "Meta" >> beam.Create([meta])
        | "Pack" >> pack
        | "Collect" >> beam.combiners.ToList()
        | "Report" >> beam.Map(_print)
    )
    shards = sum(len(shards) for shards in meta.splits.values())
    _, found, _ = common.run(pipeline, job="pack", phases=pack.phases(shards, len(meta.splits)))
    return found


def _print(found: list[dict[str, Any]]) -> None:
    for row in sorted(found, key=lambda r: (r["split"], r["seq_len"])):
        print(
            f"{row['split']}: seq_len {row['seq_len']}, {row['documents']:,} documents → "
            f"{row['windows']:,} windows, padding {row['padding']:.2%}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["pack", *sys.argv[1:]]))
