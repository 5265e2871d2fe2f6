"""dew-preprocess plan-mixture: how many windows, and epochs, each corpus of a weighted mixture gives.

    dew-preprocess plan-mixture --corpus web/=0.7 --corpus code/=0.3 --tokens 2e9 --seq_len 1024 \\
        --output mixture.json

Corpora from different tokenizers are refused. The plan lists, per corpus, the windows it contributes
to the token budget, the windows its train split packs into, and the epochs that makes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam

from dew.data import formats
from dew.data.tokens.opening import check_same_tokenizer
from dew.pipelines import common, flags
from dew.pipelines.jobs import Job
from dew.preprocess import files
from dew.preprocess.files import read_bytes
from dew.preprocess.plan_mixture import MixtureRequest, PlanMixture, epoch_warnings, read_corpus_meta, write_plan

JOB = Job(
    name="plan-mixture",
    place=4,
    summary="corpora, weights and a token budget → windows and epochs per corpus",
)


def _corpus(text: str) -> tuple[str, float]:
    path, sep, weight = text.rpartition("=")
    if not sep:
        return _where(text), 1.0
    try:
        return _where(path), flags.positive_number(weight)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"--corpus {text!r}: the weight after '=' must be a positive number (a share of the step)"
        ) from None


def _where(path: str) -> str:
    """The corpus as the plan records it: a local path made absolute, since the run that reads the plan
    starts in a working directory of its own."""
    path = path.rstrip("/")
    return os.path.abspath(path) if files.is_local(path) else path


def parser() -> argparse.ArgumentParser:
    """The plan-mixture job's flags: each corpus with its weight, the token budget, the window and the plan file.

    Returns:
        What `dew-preprocess plan-mixture --help` lists; anything else goes on to Beam.
    """
    p = flags.parser("dew-preprocess plan-mixture", __doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=_corpus, action="append", required=True, help="DIR=WEIGHT; repeatable")
    p.add_argument(
        "--tokens", type=flags.positive_number, required=True, help="the token budget of the run, tokens (2e9 is fine)"
    )
    p.add_argument("--seq_len", type=flags.positive_int, required=True, help="tokens; a window is seq_len + 1")
    p.add_argument("--packing_bins", type=flags.positive_int, default=8, help="open windows of the packing plan")
    p.add_argument("--split", default="train", help="the split the run trains on")
    p.add_argument("--output", required=True, help="where the plan JSON goes (local or gs://)")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Plans the windows and epochs each corpus of the mixture gives, writes the plan to --output, prints it.

    Args:
        argv: plan-mixture's flags and then Beam's; None reads sys.argv.

    Returns:
        The plan as written: per corpus, its share of the budget, the windows its split packs into
        and the epochs that makes.
    """
    args, options = common.start(parser(), argv)
    corpora = dict(args.corpus)
    if len(corpora) != len(args.corpus):
        raise flags.UsageError("a corpus is named twice")
    request = MixtureRequest(
        corpora=corpora, tokens=int(args.tokens), seq_len=args.seq_len, packing_bins=args.packing_bins, split=args.split
    )
    check_corpora(corpora, args.split)
    pipeline = common.make_pipeline(options)
    # The plan is written by the pipeline itself: on Dataflow the launcher never sees its elements.
    output = args.output
    pipeline | "PlanMixture" >> PlanMixture(request) | "Write" >> beam.Map(lambda plan: write_plan(output, plan))
    common.run(pipeline)
    plan = json.loads(read_bytes(output))
    json.dump(plan, sys.stdout, indent=1)
    print(file=sys.stdout)
    for line in epoch_warnings(plan):
        print(line, file=sys.stderr)
    return plan


def check_corpora(corpora: Iterable[str], split: str) -> None:
    """Refuses here, before the runner starts, what a worker would fail on: a corpus not committed or of
    another kind, a damaged meta.json or shard, corpora of different tokenizers, a split a corpus lacks;
    and a corpus without an eos, which the run the plan is for (PackedTokens) refuses."""
    metas = {path: read_corpus_meta(path) for path in corpora}
    try:
        check_same_tokenizer(metas)
        for path, meta in metas.items():
            if meta.tokens.eos_id is None:  # the plan is a PackedTokens run's, and that refuses it
                raise ValueError(
                    f"{path} records no eos id, so it has no document boundaries to pack at; "
                    "tokenize it with --pack to mix it in a plan"
                )
            if split not in meta.splits:
                raise ValueError(f"{path} has no split {split!r} (--split); it holds {', '.join(sorted(meta.splits))}")
            formats.check_local_sizes(path, meta, [split])
    except formats.DamagedError:
        raise
    except ValueError as error:
        raise flags.UsageError(str(error)) from None


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["plan-mixture", *sys.argv[1:]]))
