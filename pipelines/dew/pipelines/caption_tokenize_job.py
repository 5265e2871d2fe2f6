"""dew-preprocess caption-tokenize: a committed images directory → a new one with every caption's token ids.

    dew-preprocess caption-tokenize --input images/ --output images-clip/ \\
        --tokenizer openai/clip-vit-base-patch32 --max_length 77

The images are copied through as stored, never decoded. The input is checked against its meta.json as
the runtime checks it (each shard's size, checksum and record count), naming the first damaged shard,
before anything is committed. Unclaimed flags go to Beam, as for every job.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import apache_beam as beam

from dew.data import formats
from dew.data.sections import ImagesSection
from dew.pipelines import common, flags
from dew.pipelines.jobs import Job
from dew.preprocess.commit import JobIdentity
from dew.preprocess.progress import Phase
from dew.preprocess.tokenize_captions import TOKENIZE, TokenizeCaptions, describe, ranges, tokenized_section
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="caption-tokenize",
    place=7,
    summary="committed image shards + an HF tokenizer → a new directory with caption token ids",
    extras=("hf", "parquet"),
)


def parser() -> argparse.ArgumentParser:
    """The caption-tokenize job's flags: the committed images, the new directory, the tokenizer.

    Returns:
        The parser printing `dew-preprocess caption-tokenize --help`; the rest is Beam's.
    """
    p = flags.parser("dew-preprocess caption-tokenize", __doc__.split("\n\n")[0])
    flags.committed_io(
        p, inputs="the committed images directory (one)", output="the new images directory (local or gs://)"
    )
    p.add_argument("--tokenizer", required=True, help="an HF hub name or a local tokenizer directory")
    p.add_argument(
        "--max_length", type=int, default=None, help="ids per caption, padded or cut; default the model's, else 77"
    )
    p.add_argument("--batch_size", type=int, default=256, help="captions per tokenizer call")
    flags.overwrite(p)
    return p


def _one_input(args: argparse.Namespace) -> None:
    if len(args.input) != 1:
        raise flags.UsageError(f"caption-tokenize reads one committed images directory, got --input {args.input}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Copies a committed images directory to --output with each caption's token ids added.

    Args:
        argv: Its flags (one --input), then options for Beam; None uses sys.argv.

    Returns:
        The counters (captions_tokenized, records_written, ...), or {} for an output this same
        job committed already.
    """
    args, options = common.start(parser(), argv, check=_one_input)
    try:
        # A tokenizer that does not load or cannot pad, an input of another kind or one tokenized already
        # is the user's to fix: refused here as a usage error, not as a traceback from inside pipeline
        # construction.
        plan = describe(args.input[0], args.output, args.tokenizer, args.max_length, args.batch_size)
        source = formats.read_meta(plan.input, kind="images")
        tokenized_section(source.section_as(ImagesSection), plan)
        # A missing or truncated shard, one stat each; checksums and record counts are read on the workers.
        formats.check_local_sizes(plan.input, source)
    except (ValueError, OSError) as error:
        raise flags.UsageError(str(error)) from None
    identity = JobIdentity(config=plan.config(), inputs=source.fingerprint())
    records = sum(shard.records for shards in source.splits.values() for shard in shards)

    def build(pipeline: beam.Pipeline) -> object:
        ranged = pipeline | "Ranges" >> beam.Create(ranges(source, plan.batch_size))
        return ranged | "TokenizeCaptions" >> TokenizeCaptions(plan, source, identity)

    return common.run_committed(
        plan.output,
        identity,
        options,
        build,
        overwrite=args.overwrite,
        rate=lambda found, seconds: f"captions/s: {found.get('captions_tokenized', 0) / seconds:,.1f}, wall clock",
        phases=(
            Phase(name=TOKENIZE, unit="captions", total=records),
            Phase(name=WRITE, unit="records", total=records),
            Phase(name=COMMIT),
        ),
    )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["caption-tokenize", *sys.argv[1:]]))
