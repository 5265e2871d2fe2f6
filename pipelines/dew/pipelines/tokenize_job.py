"""dew-preprocess tokenize: raw text files → a committed token corpus (shards + meta.json).

    dew-preprocess tokenize --input 'data/*.jsonl.gz' --output corpus/ --tokenizer byte --pack \\
        --val_fraction 0.01 --seq_len 1024

Unclaimed flags go to Beam, so the same command runs on Dataflow with
`--runner DataflowRunner --project P --region R --temp_location gs://B/tmp` and gs:// paths.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from dew.pipelines import common, flags, text_jobs
from dew.pipelines.jobs import Job
from dew.pipelines.text_jobs import add_read_flags, read_options, text_inputs
from dew.preprocess import read_documents, tokenizing
from dew.preprocess.cleaning.against import committed_shards
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import InputFile, manifest_fingerprint
from dew.preprocess.pack import INDEX, PLAN
from dew.preprocess.progress import Phase
from dew.preprocess.tokenize_corpus import CorpusPlan, TokenizeCorpus
from dew.preprocess.tokenizing import describe_tokenizer
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="tokenize",
    place=1,
    summary="raw text files → a committed token corpus (shards, meta.json, packing plans)",
    extras=("hf", "parquet"),
)


def parser() -> argparse.ArgumentParser:
    """The tokenize job's flags: its inputs, the tokenizer, the held-out split and the packing plans.

    Returns:
        The parser `dew-preprocess tokenize --help` prints; main passes what it leaves to Beam.
    """
    p = flags.parser("dew-preprocess tokenize", __doc__.split("\n\n")[0])
    flags.committed_io(
        p,
        inputs="file, glob or gs:// pattern, or a committed documents directory (dew-preprocess clean); repeatable",
        output="corpus directory (local or gs://)",
    )
    p.add_argument("--tokenizer", default="byte", help="'byte', an HF hub name, or a local tokenizer directory")
    flags.switch(p, "--pack", "write the eos id after every document")
    p.add_argument("--eos_id", type=int, default=None, help="eos id to use instead of the tokenizer's own")
    p.add_argument("--format", default="bin", choices=("bin", "array_record", "parquet"), help="shard file kind")
    p.add_argument("--val_fraction", type=float, default=0.0, help="share of tokens, from the end, held out as val")
    flags.shard_sizing(p, size="target shard size, MiB", count="train shard count, instead of by size")
    p.add_argument(
        "--seq_len",
        type=flags.positive_int,
        action="append",
        default=[],
        help="tokens; also write a packing plan; repeatable",
    )
    p.add_argument("--packing_bins", type=flags.positive_int, default=8, help="open windows of the packing plans")
    add_read_flags(p)
    p.add_argument("--batch_size", type=flags.positive_int, default=512, help="documents per tokenizer call")
    flags.max_drop_fraction(p, default=0.5, dropped="dropped")
    flags.overwrite(p)
    return p


def _plan_inputs(args: argparse.Namespace) -> tuple[CorpusPlan, JobIdentity, Sequence[InputFile]]:
    inputs = text_inputs(args)
    try:
        plan = _plan(args)
    except (ValueError, OSError) as error:  # OSError: a --tokenizer that does not load, named by HFTokenizer
        raise flags.UsageError(str(error)) from None
    return plan, JobIdentity(config=plan.config(), inputs=manifest_fingerprint(inputs)), inputs


def _plan(args: argparse.Namespace) -> CorpusPlan:
    return CorpusPlan(
        output=args.output.rstrip("/"),
        tokenizer=describe_tokenizer(args.tokenizer, pack=args.pack, eos_id=args.eos_id),
        read=read_options(args),
        ext=args.format,
        val_fraction=args.val_fraction,
        shard_bytes=flags.shard_bytes(args),
        num_shards=args.num_shards,
        windows=tuple((seq_len, args.packing_bins) for seq_len in sorted(set(args.seq_len))),
        batch_size=args.batch_size,
        max_drop_fraction=args.max_drop_fraction,
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Tokenizes the input text into a committed token corpus at --output.

    Args:
        argv: The job's flags followed by Beam's pipeline options; None reads the process's own.

    Returns:
        Beam's counters by name (`documents_tokenized`, `tokens`, `packed_windows_<split>`, ...), or {}
        when this same job already committed the output over these inputs.
    """
    args, options = common.start(parser(), argv)
    plan, identity, inputs = _plan_inputs(args)
    return text_jobs.run_text_job(
        lambda paths: TokenizeCorpus(plan, identity, committed_shards(inputs)),
        output=plan.output,
        identity=identity,
        inputs=inputs,
        options=options,
        overwrite=args.overwrite,
        phases=phases(packed=plan.tokenizer.eos_id is not None),
    )


def phases(*, packed: bool) -> tuple[Phase, ...]:
    """After reading: tokenize, write, the document index and packing plans of a packed corpus (their
    totals come from the layout), commit."""
    pack = (Phase(name=INDEX, unit="shards"), Phase(name=PLAN, unit="splits"))
    return (
        Phase(name=tokenizing.TOKENIZE, unit="documents", total_of=read_documents.READ),
        Phase(name=WRITE, unit="pieces", measured_in="bytes"),
        *(pack if packed else ()),
        Phase(name=COMMIT),
    )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["tokenize", *sys.argv[1:]]))
