"""dew-preprocess toy-pairs: text files of `left<TAB>right` lines → a committed pairs directory."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from dew.pipelines import common, flags
from dew.pipelines.jobs import Job
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import expand_inputs, manifest_fingerprint
from dew.preprocess.progress import Phase
from dew.preprocess.write_pairs import write_pairs
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(name="toy-pairs", place=90, summary="tab-separated lines → committed pairs", extras=())


def parser() -> argparse.ArgumentParser:
    """The job's flags.

    Returns:
        The parser of `dew-preprocess toy-pairs`.
    """
    p = flags.parser("dew-preprocess toy-pairs", JOB.summary)
    p.add_argument("--input", action="append", required=True, help="text files of left<TAB>right lines")
    p.add_argument("--output", required=True, help="pairs directory")
    p.add_argument("--val_fraction", type=float, default=0.0, help="share of lines, drawn by a hash, held out")
    p.add_argument("--shard_size_mb", type=flags.positive_number, default=256.0, help="target shard size")
    flags.switch(p, "--overwrite", "replace an output written by another config")
    return p


def main(argv: Sequence[str] | None = None) -> Mapping[str, int]:
    """Runs the job.

    Args:
        argv: The job's flags, then Beam's.

    Returns:
        The job's counters.
    """
    args, options = common.start(parser(), argv)
    inputs = expand_inputs(args.input)
    shard_bytes = max(1, int(args.shard_size_mb * (1 << 20)))
    config = {"job": JOB.name, "val_fraction": args.val_fraction, "shard_bytes": shard_bytes}
    identity = JobIdentity(config=config, inputs=manifest_fingerprint(inputs))
    output = args.output.rstrip("/")
    build = functools.partial(
        _build, [i.path for i in inputs], output, identity, val_fraction=args.val_fraction, shard_bytes=shard_bytes
    )
    phases = (Phase(name="read", unit="lines"), Phase(name=WRITE, unit="pairs"), Phase(name=COMMIT))
    return common.run_committed(output, identity, options, build, overwrite=args.overwrite, phases=phases)


def _build(paths: list[str], output: str, identity: Any, pipeline: Any, **sizing: Any) -> Any:
    import apache_beam as beam

    return write_pairs(pipeline | "Inputs" >> beam.Create(list(enumerate(paths))), output, identity, **sizing)
