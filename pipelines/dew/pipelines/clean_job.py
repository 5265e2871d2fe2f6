"""dew-preprocess clean: raw text files → a committed documents directory, filtered and deduplicated.

    dew-preprocess clean --input 'raw/*.jsonl.gz' --output clean/ --against last-month-clean/

Every document read is written or removed for one reason: a read problem, a quality filter's reason
code, exact_duplicate or near_duplicate (MinHash LSH, --ngram words a shingle, --bands x --rows hashes).
The removal tables beside the shards name each removed document and, for a duplicate, the kept
document it duplicates. `dew-preprocess tokenize --input clean/` reads the directory. Unclaimed flags
go to Beam, so the same command runs on Dataflow.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from dew.pipelines import common, flags, text_jobs
from dew.pipelines.jobs import Job
from dew.pipelines.text_jobs import add_read_flags, read_options, text_inputs
from dew.preprocess import read_documents
from dew.preprocess.cleaning import langid
from dew.preprocess.cleaning.against import committed_shards, documents_corpus
from dew.preprocess.cleaning.corpus import DESCRIBE, CleanCorpus
from dew.preprocess.cleaning.minhash import MinHashConfig
from dew.preprocess.cleaning.plan import CleanPlan
from dew.preprocess.cleaning.quality import QualityConfig
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import InputFile, manifest_fingerprint
from dew.preprocess.progress import Phase
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="clean",
    place=2,
    summary="raw text files → a committed documents directory without duplicates or low-quality text",
    extras=("parquet",),
)
# After reading (text_jobs.run_text_job's first phase): describe (quality verdict, hashes and signature of
# each document read), write (the kept documents), commit. The dedup shuffles between describe and write
# have no count of their own.
PHASES = (
    Phase(name=DESCRIBE, unit="documents", total_of=read_documents.READ),
    Phase(name=WRITE, unit="documents"),
    Phase(name=COMMIT),
)


def parser() -> argparse.ArgumentParser:
    """The clean job's flags: its inputs, the quality and duplicate filters, and the output.

    Returns:
        The parser behind `dew-preprocess clean --help`; what it does not claim is Beam's.
    """
    p = flags.parser("dew-preprocess clean", __doc__.split("\n\n")[0])
    flags.committed_io(
        p,
        inputs="file, glob or gs:// pattern, or a committed documents directory; repeatable",
        output="documents directory (local or gs://)",
    )
    p.add_argument(
        "--against",
        action="append",
        default=[],
        help="a committed documents directory: remove the documents duplicating one of its own; repeatable",
    )
    add_read_flags(p)
    flags.switch(p, "--exact", "remove documents whose normalized text another document has")
    flags.switch(p, "--near", "remove near duplicates found by MinHash LSH")
    p.set_defaults(exact=True, near=True)
    defaults = MinHashConfig()
    p.add_argument("--ngram", type=flags.positive_int, default=defaults.ngram, help="words a MinHash shingle")
    p.add_argument("--bands", type=flags.positive_int, default=defaults.bands, help="LSH bands of a signature")
    p.add_argument("--rows", type=flags.positive_int, default=defaults.rows, help="MinHash hashes a band")
    p.add_argument("--seed", type=int, default=defaults.seed, help="draws the MinHash hash functions")
    p.add_argument(
        "--cc_rounds", type=flags.positive_int, default=10, help="large-star/small-star rounds clusters may take"
    )
    flags.switch(p, "--quality", "run the quality filters (their thresholds below)")
    p.set_defaults(quality=True)
    for field in dataclasses.fields(QualityConfig):
        _quality_flag(p, field)
    flags.shard_sizing(p, size="target shard size, MiB", count="shard count, instead of by size")
    flags.max_drop_fraction(p, default=0.95, dropped="removed")
    flags.overwrite(p)
    return p


def _quality_flag(p: argparse.ArgumentParser, field: dataclasses.Field) -> None:
    """One flag a QualityConfig field, typed by its annotation (`float` fields may default to an int)."""
    help = field.metadata.get("help", field.name)
    kinds = {"bool": bool, "int": int, "float": float, "str": str}
    kind = kinds.get(field.type if isinstance(field.type, str) else getattr(field.type, "__name__", ""))
    if kind is None:
        raise TypeError(f"QualityConfig.{field.name}: a flag takes a bool, int, float or str, not {field.type}")
    if kind is bool:
        flags.switch(p, f"--{field.name}", help)
        p.set_defaults(**{field.name: field.default})
    else:
        p.add_argument(f"--{field.name}", type=kind, default=field.default, help=help)


def plan_from(args: argparse.Namespace) -> tuple[CleanPlan, JobIdentity, tuple[InputFile, ...]]:
    """The plan, its identity and the input files (sorted by path), all decided on the launcher."""
    inputs = text_inputs(args)
    try:
        against = tuple(documents_corpus(path) for path in args.against)
        quality, model_sha256 = None, ""
        if args.quality:
            quality = QualityConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(QualityConfig)})
            if quality.language_model:
                model_sha256 = langid.model_sha256(quality.language_model)
        plan = CleanPlan(
            output=args.output.rstrip("/"),
            read=read_options(args),
            quality=quality,
            language_model_sha256=model_sha256,
            exact=args.exact,
            near=args.near,
            minhash=MinHashConfig(ngram=args.ngram, bands=args.bands, rows=args.rows, seed=args.seed),
            cc_rounds=args.cc_rounds,
            against=against,
            shard_bytes=flags.shard_bytes(args),
            num_shards=args.num_shards,
            max_drop_fraction=args.max_drop_fraction,
        )
    except ValueError as error:
        raise flags.UsageError(str(error)) from None
    for corpus in against:
        refusal = flags.output_over_input(plan.output, [corpus.path], flag="--against")
        if refusal:
            raise flags.UsageError(refusal)
    return plan, JobIdentity(config=plan.config(), inputs=manifest_fingerprint(inputs)), inputs


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Filters and deduplicates the input text into a committed documents directory at --output.

    Args:
        argv: This job's flags, then any of Beam's options; None takes sys.argv's.

    Returns:
        The run's counters (documents_kept, documents_removed, ...), or {} when this same job
        already committed that output.
    """
    args, options = common.start(parser(), argv)
    plan, identity, inputs = plan_from(args)
    return text_jobs.run_text_job(
        lambda paths: CleanCorpus(plan, identity, paths, committed_shards(inputs)),
        output=plan.output,
        identity=identity,
        inputs=inputs,
        options=options,
        overwrite=args.overwrite,
        phases=PHASES,
        remote=[a.path for a in plan.against],
        rate=lambda found, seconds: f"documents/s: {found.get('documents_described', 0) / seconds:,.1f}, wall clock",
    )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["clean", *sys.argv[1:]]))
