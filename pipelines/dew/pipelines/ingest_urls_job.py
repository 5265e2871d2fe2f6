"""dew-preprocess ingest-urls: url lists (parquet, jsonl, csv, a saved HF dataset) → fetched, committed image shards.

    dew-preprocess ingest-urls --input urls.parquet --output images/ --url_field url --caption_field caption \\
        --size 256 --per_host 8 --timeout 10 --retries 1
    dew-preprocess ingest-urls ... --refetch_failed --timeout 30   # later: only the rows that failed

Images are filtered, resized and encoded as the images job does (its flags, its pixels); each shard
gets a status table of every row's outcome. Unclaimed flags go to Beam, so the same command runs on
Dataflow with `--runner DataflowRunner --project P --region R --temp_location gs://B/tmp`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam

from dew.data.images.fetch import FetchPolicy
from dew.pipelines import common, flags, image_flags
from dew.pipelines.jobs import Job
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import manifest_fingerprint
from dew.preprocess.image_reading import ImageReadOptions
from dew.preprocess.image_sources import Source, reads
from dew.preprocess.ingest_plan import URL_FIELDS, IngestPlan
from dew.preprocess.ingest_urls import IngestUrls
from dew.preprocess.progress import Phase
from dew.preprocess.url_reading import find_url_sources
from dew.preprocess.write_images import ImagesPlan
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="ingest-urls",
    place=6,
    summary="url lists with captions → fetched, filtered, resized images in committed shards with status tables",
    extras=("images", "parquet"),
)


def parser() -> argparse.ArgumentParser:
    """The ingest-urls job's flags: the url lists and their columns, the fetching, and the images written.

    Returns:
        The parser of `dew-preprocess ingest-urls --help`, which leaves Beam's flags to Beam.
    """
    p = flags.parser("dew-preprocess ingest-urls", __doc__.split("\n\n")[0])
    flags.committed_io(
        p,
        inputs="url lists (.parquet/.jsonl/.csv, globs) or a save_to_disk dir",
        output="images directory (local or gs://)",
    )
    p.add_argument("--url_field", default="url", help="row column of the image url")
    p.add_argument("--caption_field", default="caption", help="row column of the caption")
    p.add_argument("--extra_field", action="append", default=[], help="row column passed through; repeatable")
    image_flags.add(p)
    p.add_argument("--val_fraction", type=float, default=0.0, help="share of rows, drawn by a hash, held out")
    p.add_argument("--rows_per_shard", type=int, default=10_000, help="input rows per shard (before drops)")
    flags.shard_sizing(p, count="train shard count, instead of by rows")
    p.add_argument("--threads", type=int, default=64, help="concurrent fetches per worker process")
    p.add_argument("--per_host", type=int, default=16, help="most requests in flight to one host, per worker process")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one attempt may take, body included")
    p.add_argument("--retries", type=int, default=1, help="further attempts after a timeout, 429 or 5xx")
    p.add_argument("--max_wait", type=float, default=60.0, help="longest Retry-After honoured; longer drops the url")
    p.add_argument("--max_redirects", type=int, default=5, help="redirects followed before redirect_loop")
    p.add_argument("--max_bytes", type=int, default=32 << 20, help="larger bodies are dropped as too_large")
    p.add_argument("--user_agent", default="dew-data/1", help="User-Agent sent, and the name X-Robots-Tag may address")
    flags.switch(p, "--ignore_optout", "fetch images whose X-Robots-Tag says noai or noimageai")
    flags.switch(p, "--refetch_failed", "in a committed output, fetch again only rows dropped as timeout or http_error")
    flags.overwrite(p)
    return p


def plan_from(args: argparse.Namespace) -> tuple[IngestPlan, JobIdentity, tuple[Source, ...]]:
    """The plan, its identity and the numbered url lists; a plan that cannot run is a usage error, now."""
    try:
        sources, manifest = find_url_sources(args.input)
        clash = set(args.extra_field) & {"image", "caption", *URL_FIELDS}
        if clash:
            raise ValueError(f"--extra_field {sorted(clash)} would overwrite a field every record holds")
        images = ImagesPlan(
            output=args.output.rstrip("/"),
            read=ImageReadOptions(
                image_field=args.url_field, caption_field=args.caption_field, extra_fields=tuple(args.extra_field)
            ),
            extras=(*URL_FIELDS, *args.extra_field),
            **image_flags.plan_fields(args),
            val_fraction=args.val_fraction,
            num_shards=args.num_shards,
        )
        policy = FetchPolicy(
            per_host=args.per_host,
            max_redirects=args.max_redirects,
            max_bytes=args.max_bytes,
            max_wait=args.max_wait,
            respect_optout=not args.ignore_optout,
            user_agent=args.user_agent,
        )
        plan = IngestPlan(
            images=images,
            rows_per_shard=args.rows_per_shard,
            timeout=args.timeout,
            retries=args.retries,
            threads=args.threads,
            policy=policy,
        )
    except ValueError as error:
        raise flags.UsageError(str(error)) from None
    return plan, JobIdentity(config=plan.config(), inputs=manifest_fingerprint(manifest)), sources


def build(
    pipeline: beam.Pipeline, plan: IngestPlan, identity: JobIdentity, sources: Sequence[Source], *, refetch: bool
) -> Any:
    return (
        pipeline
        | "UrlLists" >> beam.Create(reads(sources))
        | "IngestUrls" >> IngestUrls(plan, identity, refetch=refetch)
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Fetches every listed url and writes the images that pass into committed shards at --output.

    Args:
        argv: The ingest-urls flags and Beam's after them; None means the process's arguments.

    Returns:
        What the fetch and the write counted, one counter per outcome, or {} when the output was
        already committed and nothing is refetched.
    """
    args, options = common.start(parser(), argv)
    plan, identity, sources = plan_from(args)
    return common.run_committed(
        plan.images.output,
        identity,
        options,
        lambda p: build(p, plan, identity, sources, refetch=args.refetch_failed),
        overwrite=args.overwrite,
        rate=_rate,
        reopen=args.refetch_failed,
        phases=(Phase(name=WRITE, unit="urls"), Phase(name=COMMIT)),  # fetching is how its shards are written
    )


def _rate(found: Mapping[str, int], seconds: float) -> str:
    urls, written = found.get("urls_fetched", 0), found.get("images_encoded", 0)
    return (
        f"urls/s: {urls / seconds:,.1f} fetched, {written / seconds:,.1f} written; "
        f"success rate {written / max(urls, 1):.1%}; {found.get('bytes_fetched', 0) / seconds / 1e6:,.2f} MB/s "
        "(wall clock, startup included)"
    )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["ingest-urls", *sys.argv[1:]]))
