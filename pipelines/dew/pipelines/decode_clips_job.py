"""dew-preprocess decode-clips: video files → committed shards of decoded clips with their audio.

    dew-preprocess decode-clips --input videos/ --output clips/ --frames 16 --frame_size 256 \\
        --frame_rate 25 --audio_rate 16000 --every 2 --frame_encoding jpeg

Unclaimed flags go to Beam, so the same command runs on Dataflow with
`--runner DataflowRunner --project P --region R --temp_location gs://B/tmp` and gs:// paths.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam

from dew.data.sections import AUDIO_DTYPES, FRAME_ENCODINGS
from dew.data.video.decode import ClipShape
from dew.pipelines import common, flags
from dew.pipelines.jobs import Job
from dew.preprocess.clip_sources import LAYOUTS, Source, SourceOptions, find_sources
from dew.preprocess.commit import JobIdentity
from dew.preprocess.files import manifest_fingerprint
from dew.preprocess.progress import Phase
from dew.preprocess.write_clips import DECODE, NO_AUDIO_POLICIES, ClipsPlan, WriteClips
from dew.preprocess.writing import COMMIT, WRITE

JOB = Job(
    name="decode-clips",
    place=8,
    summary="video files, folders or lists → committed shards of decoded clips with their audio",
    extras=("video", "parquet"),
)


def parser() -> argparse.ArgumentParser:
    """The decode-clips job's flags: the videos, how clips are cut and sampled, and their audio.

    Returns:
        The parser `dew-preprocess decode-clips --help` comes from; flags it lacks reach Beam.
    """
    p = flags.parser("dew-preprocess decode-clips", __doc__.split("\n\n")[0])
    flags.committed_io(
        p,
        inputs="a folder of videos, video files or globs, or a .jsonl/.csv/.parquet list of path and caption "
        "(jsonl, csv also .gz/.zst); repeatable",
        output="clips directory (local or gs://)",
    )
    p.add_argument(
        "--layout", default="auto", choices=LAYOUTS, help="voxceleb2: <root>/<split>/<identity>/<clip>/<utterance>.mp4"
    )
    p.add_argument(
        "--caption_template",
        default="{stem}",
        help="a video's caption: {stem}, {folder}; with --layout voxceleb2 {split} {identity} {clip} {utterance} too",
    )
    p.add_argument("--path_field", default="path", help="a list's column of video paths")
    p.add_argument("--caption_field", default="caption", help="a list's column of captions")
    p.add_argument("--frames", type=int, default=16, help="frames a clip")
    p.add_argument("--frame_size", type=int, default=256, help="side of the square frames, in pixels")
    p.add_argument("--frame_rate", type=float, default=25.0, help="frames a second of the clips, whatever the file's")
    p.add_argument("--audio_rate", type=int, default=16000, help="the model's audio sample rate; 0 stores no audio")
    cut = p.add_mutually_exclusive_group()
    cut.add_argument(
        "--every", type=float, default=None, help="seconds between clip starts (default: the clip's length)"
    )
    cut.add_argument("--per_video", type=int, default=None, help="this many clips a video, evenly spaced")
    p.add_argument(
        "--frame_encoding", default="raw", choices=FRAME_ENCODINGS, help="raw uint8 frames, or a JPEG a frame"
    )
    p.add_argument("--quality", type=int, default=95, help="JPEG quality of the frames, 1..100")
    p.add_argument("--audio_dtype", default="float32", choices=AUDIO_DTYPES, help="how the audio samples are stored")
    p.add_argument(
        "--no_audio", default="silence", choices=NO_AUDIO_POLICIES, help="a video without audio: silence or drop"
    )
    p.add_argument("--format", default="array_record", choices=("array_record", "parquet"), help="shard file kind")
    flags.shard_sizing(p, size="target shard size", count="shard count, instead of by size")
    flags.switch(p, "--strict", "fail on the first bad video, naming it, instead of counting it by reason")
    flags.overwrite(p)
    return p


def plan_from(args: argparse.Namespace) -> tuple[ClipsPlan, JobIdentity, tuple[Source, ...]]:
    """The plan, its identity and the numbered videos, decided on the launcher; a plan that cannot run
    is a usage error, before any worker starts."""
    try:
        options = SourceOptions(
            layout=args.layout,
            caption_template=args.caption_template,
            path_field=args.path_field,
            caption_field=args.caption_field,
        )
        sources, manifest = find_sources(args.input, options)
        shape = ClipShape(
            frames=args.frames,
            frame_size=args.frame_size,
            frame_rate=args.frame_rate,
            audio_rate=args.audio_rate or None,
        )
        plan = ClipsPlan(
            output=args.output.rstrip("/"),
            shape=shape,
            sources=options,
            every=args.every,
            per_video=args.per_video,
            frame_encoding=args.frame_encoding,
            quality=args.quality,
            audio_dtype=args.audio_dtype,
            no_audio=args.no_audio,
            strict=args.strict,
            ext=args.format,
            shard_bytes=flags.shard_bytes(args),
            num_shards=args.num_shards,
        )
    except ValueError as error:
        raise flags.UsageError(str(error)) from None
    return plan, JobIdentity(config=plan.config(), inputs=manifest_fingerprint(manifest)), sources


def build(pipeline: beam.Pipeline, plan: ClipsPlan, identity: JobIdentity, sources: Sequence[Source]) -> Any:
    return (
        pipeline
        | "Videos" >> beam.Create(list(sources))
        | "WriteClips" >> WriteClips(plan, identity, videos=len(sources))
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Decodes the input videos into committed shards of clips, with their audio, at --output.

    Args:
        argv: Decode-clips flags first, Beam options after; None reads them from sys.argv.

    Returns:
        The job's counters by name, one per clip written and per reason a video was dropped; {}
        when the same job committed that output before.
    """
    args, options = common.start(parser(), argv)
    plan, identity, sources = plan_from(args)
    return common.run_committed(
        plan.output,
        identity,
        options,
        lambda p: build(p, plan, identity, sources),
        overwrite=args.overwrite,
        rate=_rate,
        phases=(
            Phase(name=DECODE, unit="videos", total=len(sources)),
            Phase(name=WRITE, unit="clips"),
            Phase(name=COMMIT),
        ),
    )


def _rate(found: Mapping[str, int], seconds: float) -> str:
    clips, frames = found.get("clips_decoded", 0) / seconds, found.get("frames_decoded", 0) / seconds
    return f"rate: {clips:,.1f} clips/s, {frames:,.0f} frames/s (wall clock)"


if __name__ == "__main__":
    from dew.pipelines.cli import main as cli

    sys.exit(cli(["decode-clips", *sys.argv[1:]]))
