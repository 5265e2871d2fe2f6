"""WriteClips: video Sources → a committed `dew.clips/1` directory, end to end, as one PTransform.

    spread videos → decode each video's clips (one open file, one pass per run of nearby clips) and park
    them in a file of the video's → the writer skeleton (dew.preprocess.writing): shard counts → route
    → write shards → stats.json → meta.json

Every clip is cut by dew.data.video.decode, the path VideoDataset reads through at training time, so a
clip decoded offline is the clip that would have been decoded online, and a file is refused for the
same reasons. A video is the unit of the books: videos in = videos written + videos dropped by reason.

A clip's key is (the video's file index, the clip's index on the video's frame-rate grid), and its
shard comes from a hash of the video's name and that index, as the images job places images: shards
fill evenly and their bytes never depend on which worker decoded what, or when.

The clips' bytes never cross Beam's shuffle. The worker that decodes a video writes its clips, as they
are packed, to one temporary file under the output (dew.preprocess.parked) and hands on only where each
clip is; the shard writer reads them from there in key order. Moving the raw clips between processes
through the runner instead cost as much as decoding them (docs/decode-clips.md has the numbers). A
video's references are handed on only once every clip of it decoded, so a video that fails part-way
loses the clips already decoded from it too (its file is deleted) and none reaches a shard.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam

from dew.data.formats import MAX_SHARDS, SHARD_EXTENSIONS, Meta
from dew.data.sections import ClipsSection
from dew.data.video import decode
from dew.data.video.clip_records import pack_clip, section_fields
from dew.data.video.decode import ClipShape, Video, VideoError
from dew.preprocess import progress
from dew.preprocess.clip_sources import LIST_REASONS, MISSING_FILE, SOURCE_REASONS, Source, SourceOptions
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import NAMESPACE, TRAIN
from dew.preprocess.job_errors import BadInputError, TooManyDropsError
from dew.preprocess.parked import Parked, ParkingFile
from dew.preprocess.quiet import user_error
from dew.preprocess.writing import Sharding, write_parked

NO_AUDIO = "no_audio"
# Every reason stats.json names, counted or not; those of LIST_REASONS it names only once counted.
DROP_REASONS = (*decode.REASONS, NO_AUDIO, *SOURCE_REASONS)
NO_AUDIO_POLICIES = ("silence", "drop")
TALLY_TAG = "tally"
# The progress phase videos are decoded in (the skeleton's write and commit follow).
DECODE = "decode"
# What to check for a reason whose usual cause is a flag rather than the videos.
_HINTS = {
    "too_short": "a clip is --frames / --frame_rate seconds long",
    NO_AUDIO: "--no_audio silence keeps them, with silent audio",
}
Key = tuple[int, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipsPlan:
    """Everything that decides the directory's bytes, plus where it goes.

    every: seconds from one clip's start to the next (default: the clip's length, clips back to back);
    per_video: instead, this many clips a video, evenly spaced from its first instant to its last.
    no_audio: a video without an audio stream gets silent audio, or is dropped as no_audio.
    strict: the first bad video fails the job, naming it, instead of being counted and skipped.
    """

    output: str
    shape: ClipShape
    sources: SourceOptions = dataclasses.field(default_factory=SourceOptions)
    every: float | None = None
    per_video: int | None = None
    frame_encoding: str = "raw"
    quality: int = 95
    audio_dtype: str = "float32"
    no_audio: str = "silence"
    strict: bool = False
    ext: str = "array_record"
    shard_bytes: int = 256 << 20
    num_shards: int | None = None

    def __post_init__(self) -> None:
        if self.shape.audio_padding:
            raise ValueError("stored clips hold the audio of their own frames: audio_padding must be 0")
        if self.every is not None and self.per_video is not None:
            raise ValueError("clips are cut --every k seconds or --per_video N, not both")
        if self.every is not None and not self.every > 0:
            raise ValueError(f"--every must be a positive number of seconds, got {self.every}")
        if self.per_video is not None and self.per_video < 1:
            raise ValueError(f"--per_video must be a positive count, got {self.per_video}")
        if self.no_audio not in NO_AUDIO_POLICIES:
            raise ValueError(f"no_audio must be one of {NO_AUDIO_POLICIES}, got {self.no_audio!r}")
        if self.ext not in SHARD_EXTENSIONS or self.ext == "bin":
            raise ValueError(f"clip shards are array_record or parquet, not {self.ext!r}")
        if self.shard_bytes < 1 or (self.num_shards is not None and not 1 <= self.num_shards <= MAX_SHARDS):
            raise ValueError(f"shard_bytes must be positive and num_shards in 1..{MAX_SHARDS}")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"JPEG quality must be in 1..100, got {self.quality}")
        self.section()  # an encoding or dtype the contract refuses is a usage error, now

    def sharding(self) -> Sharding:
        """One split, train: a clip's draw places it in a shard, never in val."""
        return Sharding(per_shard=self.shard_bytes, num_shards=self.num_shards)

    def section(self) -> ClipsSection:
        shape = self.shape
        return ClipsSection(
            frames=shape.frames,
            frame_size=shape.frame_size,
            frame_rate=shape.frame_rate,
            frame_encoding=self.frame_encoding,
            audio_rate=shape.audio_rate,
            audio_dtype=self.audio_dtype,
            fields=section_fields(shape.audio_rate is not None),
        )

    def config(self) -> dict[str, Any]:
        """The JSON config meta.json records: every field that changes a byte of output (not strict).

        The section's `fields` are among them, so a crashed run of a dew whose records lacked has_audio
        is refused by name rather than finished into shards of two layouts."""
        config = {
            "job": "decode-clips",
            **self.section().to_json(),
            **dataclasses.asdict(self.sources),
            **{k: getattr(self, k) for k in ("every", "per_video", "quality", "no_audio", "shard_bytes", "num_shards")},
            "format": self.ext,
            "decoder": decode.DECODER_VERSION,
        }
        return json.loads(json.dumps(config))

    def clip_indices(self, starts: int) -> list[int]:
        """Which of a video's `starts` grid positions (1 / frame_rate apart) begin a clip."""
        if self.per_video is not None:
            if self.per_video == 1:
                return [(starts - 1) // 2]
            return sorted({round(i * (starts - 1) / (self.per_video - 1)) for i in range(self.per_video)})
        step = (self.every if self.every is not None else self.shape.seconds) * self.shape.frame_rate
        # A hair of slack so that a step of 0.4 s at 25 fps (9.999999999 grid positions) lands on the grid.
        picked = (math.floor(m * step + 1e-6) for m in range(starts))
        return sorted({j for j in picked if j < starts})


class _DecodeVideo(beam.DoFn):
    """Source → ((file, clip), (parked record, draw)) for each clip of a video that decoded whole, and one
    tally per video (TALLY_TAG)."""

    def __init__(self, plan: ClipsPlan) -> None:
        self.plan = plan

    def setup(self) -> None:
        names = ("videos_in", "clips_decoded", "frames_decoded", *DROP_REASONS, *LIST_REASONS)
        self.counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name) for name in names}
        self.progress = progress.Tally(DECODE)
        self.section = self.plan.section()

    def process(self, source: Source) -> Iterator[Any]:
        self.counters["videos_in"].inc()
        clips: list[tuple[Key, tuple[Parked, int]]] = []
        reason, error = source.problem, ""
        if reason is None:
            parking = ParkingFile(self.plan.output, f"video-{source.index:08d}.clips")
            try:
                clips = list(self._clips(source, parking))
            except VideoError as failed:
                reason, error = failed.reason, str(failed)
            except FileNotFoundError as failed:
                reason, error = MISSING_FILE, str(failed)
            except BaseException:
                parking.discard()
                raise
            if reason is None:
                parking.close()
                yield from clips
            else:
                parking.discard()
                clips = []
        else:
            error = f"{source.path}: {source.detail or reason}"
        if reason is not None:
            self.counters[reason].inc()
            if self.plan.strict:
                raise user_error(
                    BadInputError(f"{error} (--strict stops at the first bad video; drop it to count them instead)")
                )
        tally = {"index": source.index, "path": source.path, "clips": len(clips), "reason": reason, "error": error}
        self.progress.add()
        yield beam.pvalue.TaggedOutput(TALLY_TAG, tally)

    def finish_bundle(self) -> None:
        self.progress.publish()

    def _clips(self, source: Source, parking: ParkingFile) -> Iterator[tuple[Key, tuple[Parked, int]]]:
        plan, shape = self.plan, self.plan.shape
        with Video(source.path) as video:
            if shape.audio_rate is not None and not video.has_audio and plan.no_audio == "drop":
                raise VideoError(source.path, NO_AUDIO, "the file has no audio stream (--no_audio drop)")
            indices = plan.clip_indices(video.starts(shape))
            # clips() gives them in ascending order, as clip_indices lists them.
            for index, clip in zip(indices, video.clips(shape, indices), strict=True):
                span = (clip.start, clip.start + shape.seconds)
                record = pack_clip(
                    self.section, clip.frames, clip.audio, caption=source.caption, source=source.path, span=span,
                    has_audio=clip.has_audio, quality=plan.quality,
                )  # fmt: skip
                self.counters["clips_decoded"].inc()
                self.counters["frames_decoded"].inc(shape.frames)
                yield (source.index, index), (parking.add(record), source.draw(index))


def clips_stats(meta: Meta, tallies: Iterable[Mapping[str, Any]], videos: int) -> dict[str, Any]:
    """stats.json: videos in, written and dropped by reason with their paths; refuses unbalanced books."""
    tallies = sorted(tallies, key=lambda t: t["index"])
    dropped = dict.fromkeys(DROP_REASONS, 0)
    dropped.update(collections.Counter(t["reason"] for t in tallies if t["reason"] is not None))
    kept = [t for t in tallies if t["reason"] is None]
    clips = sum(shard.records for shard in meta.shards(TRAIN))
    decoded = sum(t["clips"] for t in kept)
    if not len(tallies) == videos == len(kept) + sum(dropped.values()) or clips != decoded:
        raise RuntimeError(
            f"clip accounting is off: {videos} videos planned, {len(tallies)} read, {len(kept)} written, "
            f"{sum(dropped.values())} dropped; {clips} clips in the shards of the {decoded} decoded"
        )
    if not clips:
        raise user_error(TooManyDropsError(_nothing_written(tallies, dropped, videos)))
    return {
        "videos_in": videos,
        "videos_written": len(kept),
        "clips_written": clips,
        "frames_written": clips * meta.section_as(ClipsSection).frames,
        "dropped": dropped,
        "dropped_inputs": [{k: t[k] for k in ("path", "reason", "error")} for t in tallies if t["reason"] is not None],
        "shards": len(meta.shards(TRAIN)),
        "bytes": sum(s.bytes for s in meta.shards(TRAIN)),
        "fingerprint": meta.fingerprint(),
    }


def _nothing_written(tallies: list[Mapping[str, Any]], dropped: Mapping[str, int], videos: int) -> str:
    """The refusal of a job that wrote no clip: each reason's count, with one of its videos and its error."""
    lines = [f"the job wrote no clip of {videos} videos, so nothing was committed. Drops by reason:"]
    for reason, count in sorted(dropped.items(), key=lambda rn: -rn[1]):
        if count:
            example = next(t["error"] for t in tallies if t["reason"] == reason)
            lines.append(f"  {reason}: {count}, e.g. {example}" + (f" — {_HINTS[reason]}" if reason in _HINTS else ""))
    return "\n".join(lines)


class WriteClips(beam.PTransform):
    """PCollection[Source] → a committed clips directory in plan.output; yields its Meta once committed.

    `videos` is how many Sources the launcher numbered: the books must account for every one.
    """

    def __init__(self, plan: ClipsPlan, identity: JobIdentity, videos: int, label: str | None = None) -> None:
        super().__init__(label)
        self.plan, self.identity, self.videos = plan, identity, videos

    def expand(self, sources: beam.PCollection) -> beam.PCollection:
        plan = self.plan
        decoded = (
            sources
            | "SpreadVideos" >> beam.Reshuffle()
            | "DecodeVideos" >> beam.ParDo(_DecodeVideo(plan)).with_outputs(TALLY_TAG, main="records")
        )
        tallies, records = decoded[TALLY_TAG], decoded.records
        side = (beam.pvalue.AsList(tallies), self.videos)
        return records | "Write" >> write_parked(plan, self.identity, finish=clips_stats, side=side)
