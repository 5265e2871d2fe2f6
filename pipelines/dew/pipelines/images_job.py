"""dew-preprocess images: image folders, image rows or a saved HF dataset → a committed images directory.

    dew-preprocess images --input photos/ --output images/ --caption_template 'a photo of a {label}' \\
        --resize center_crop --size 256 --encoding jpeg --val_fraction 0.01

Unclaimed flags go to Beam, so the same command runs on Dataflow with
`--runner DataflowRunner --project P --region R --temp_location gs://B/tmp` and gs:// paths.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import apache_beam as beam

from dew.pipelines import common, flags, image_flags
from dew.pipelines.jobs import Job
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import manifest_fingerprint
from dew.preprocess.image_reading import ImageReadOptions
from dew.preprocess.image_sources import FILE_KINDS, Found, Source, find_sources, reads
from dew.preprocess.progress import Phase
from dew.preprocess.write_images import ENCODE, ImagesPlan, WriteImages
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="images",
    place=5,
    summary="image folders, image rows or a saved HF dataset → committed captioned-image shards",
    extras=("images", "parquet"),
)


def parser() -> argparse.ArgumentParser:
    """The images job's flags: where the images and captions come from, how they are resized and stored.

    Returns:
        What `dew-preprocess images --help` shows; unclaimed flags go on to Beam.
    """
    p = flags.parser("dew-preprocess images", __doc__.split("\n\n")[0])
    flags.committed_io(
        p,
        inputs="an ImageFolder directory, a save_to_disk directory, or image/.parquet/.jsonl files or globs; "
        "repeatable",
        output="images directory (local or gs://)",
    )
    p.add_argument("--image_field", default="image", help="row column of the image: bytes, a path or an HF Image")
    p.add_argument("--caption_field", default="caption", help="row column of the caption")
    p.add_argument("--extra_field", action="append", default=[], help="row column passed through; repeatable")
    p.add_argument(
        "--caption_template", default="{label}", help="an image file's caption; {label} is its class, {stem} its name"
    )
    flags.switch(p, "--caption_sidecar", "an image file's caption is the text of <stem>.txt beside it")
    image_flags.add(p)
    p.add_argument("--val_fraction", type=float, default=0.0, help="share of records, drawn by a hash, held out")
    flags.shard_sizing(p, size="target shard size", count="train shard count, instead of by size")
    flags.switch(p, "--dedupe", "drop images whose stored bytes repeat an earlier image's, as duplicate")
    flags.overwrite(p)
    return p


def plan_from(args: argparse.Namespace) -> tuple[ImagesPlan, JobIdentity, Found]:
    """The plan, its identity and the numbered sources, all decided on the launcher; a plan that cannot
    run is a usage error, before any worker starts."""
    try:
        return _plan(args)
    except ValueError as error:
        raise flags.UsageError(str(error)) from None


def _plan(args: argparse.Namespace) -> tuple[ImagesPlan, JobIdentity, Found]:
    found = find_sources(args.input)
    sources = found.sources
    unlabelled = any(source.kind == "image" and source.label is None for source in sources)
    if unlabelled and not args.caption_sidecar and "{label}" in args.caption_template:
        raise ValueError(
            "images outside an ImageFolder tree have no {label} for --caption_template; "
            "give another template or --caption_sidecar"
        )
    extras = (*sources[0].extras, *args.extra_field)
    plan = ImagesPlan(
        output=args.output.rstrip("/"),
        read=ImageReadOptions(
            image_field=args.image_field,
            caption_field=args.caption_field,
            extra_fields=tuple(args.extra_field),
            caption_template=args.caption_template,
            sidecar=args.caption_sidecar,
        ),
        extras=extras,
        **image_flags.plan_fields(args),
        val_fraction=args.val_fraction,
        shard_bytes=flags.shard_bytes(args),
        num_shards=args.num_shards,
        dedupe=args.dedupe,
    )
    return plan, JobIdentity(config=plan.config(), inputs=manifest_fingerprint(found.manifest)), found


def build(
    pipeline: beam.Pipeline,
    plan: ImagesPlan,
    identity: JobIdentity,
    sources: Sequence[Source],
    ignored: dict[str, int] | None = None,
) -> Any:
    spread = any(source.kind not in FILE_KINDS for source in sources)
    write = WriteImages(plan, identity, spread=spread, ignored=ignored)
    return pipeline | "Sources" >> beam.Create(reads(sources)) | "WriteImages" >> write


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Reads, resizes and encodes the input images with their captions into committed shards at --output.

    Args:
        argv: Flags of this job and then Beam's; None for the command line it was started with.

    Returns:
        Counters of the pipeline (images_encoded, records_written, each drop reason, ...), empty
        when the output is already this same job's commit.
    """
    args, options = common.start(parser(), argv)
    plan, identity, found = plan_from(args)
    for line in found.left_out():
        print(line, file=sys.stderr)
    ignored = {reason: len(paths) for reason, paths in found.ignored.items()}
    return common.run_committed(
        plan.output,
        identity,
        options,
        lambda p: build(p, plan, identity, found.sources, ignored),
        overwrite=args.overwrite,
        rate=lambda found, seconds: f"images/s: {found.get('images_in', 0) / seconds:,.1f} read, wall clock",
        phases=phases(found.sources),
    )


def phases(sources: Sequence[Source]) -> tuple[Phase, ...]:
    """Encode (of as many images as sources, when each is one image file), write, commit."""
    singles = all(source.kind in FILE_KINDS for source in sources)
    return (
        Phase(name=ENCODE, unit="images", total=len(sources) if singles else None),
        Phase(name=WRITE, unit="records"),
        Phase(name=COMMIT),
    )


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["images", *sys.argv[1:]]))
