"""WriteImages: Sources, in read units, → a committed `dew.images/1` directory, end to end, as one PTransform.

    read (undecoded) → decode, check, resize, encode, pack, park → (dedupe) → split → shard counts → route
    → write shards → stats.json → meta.json

A packed record is parked (dew.preprocess.parked) in one temporary file per bundle of the worker that
encoded it, and only its Parked reference travels on: on DirectRunner every stage boundary otherwise
sent each record's bytes through the runner process and back (to the routing stage, which waits on the
shard counts, and through the shuffle to its shard), which cost more than decoding and resizing it.
The shard writer reads each record from its parked file in key order, so the bytes written are the same.

Every image goes through dew.data.images.pixels, so it is dropped for the same reasons and resized the
same way as wherever else dew reads pixels.

A record's draw is a hash of where it came from (its Source's name and row); from there on the writer
skeleton (dew.preprocess.writing) splits, plans, routes, writes and commits it as it does every kind's,
so a record's split never depends on the other inputs (adding images never moves one from train to
val, which would leak it), shards fill evenly, and nothing is gathered to plan them but one byte total
per split. The val split holds val_fraction of the records in expectation, not exactly.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.formats import MAX_SHARDS, SHARD_EXTENSIONS, Meta
from dew.data.images import pixels
from dew.data.sections import RESIZE_POLICIES, ImagesSection
from dew.preprocess import commit, progress
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import DAMAGED, NAMESPACE, STATS_TAG
from dew.preprocess.drops import check_books, check_drops
from dew.preprocess.image_reading import FILE_REASONS, NEWER_REASONS, ROW_REASONS, ImageReadOptions, ReadImages
from dew.preprocess.parked import ParkingFile
from dew.preprocess.writing import Sharding, write_parked

DUPLICATE = "duplicate"
DROP_REASONS = (*pixels.REASONS, DUPLICATE, *ROW_REASONS, *FILE_REASONS)
DROPS_TAG = "drops"
# The progress phase images are decoded and encoded in (the skeleton's write and commit follow).
ENCODE = "encode"
# The flag to check first when every image is dropped for this reason.
_HINTS = {
    "too_small": "see --min_size",
    "bad_aspect": "see --max_aspect",
    "too_many_pixels": "see --max_pixels",
    "unencodable": "see --encoding, --resize and --size",
    "missing_field": "see --image_field, --caption_field, --extra_field and --caption_sidecar",
    "invalid_utf8": "is the caption UTF-8?",
    "malformed_json": "is the file jsonl, one JSON object a line?",
    "unsupported_format": "convert the images to JPEG, PNG or WebP",
    "remote_path": "urls are fetched by dew-preprocess ingest-urls, not read as paths",
    "not_a_file": "does --image_field name image files?",
    "non_utf8_name": "rename the files to UTF-8 names",
    "unreadable": "may the job read the files? (chmod a+r)",
}
Key = tuple[int, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImagesPlan:
    """Everything that decides the directory's bytes, plus where it goes.

    resize: keep the pixels, scale the shorter side to `size`, or scale and centre-crop to size × size.
    extras: the fields every record holds beyond image and caption, in order.
    shard_bytes / num_shards: each split gets ceil(its bytes / shard_bytes) shards, or train num_shards.
    dedupe: drop every image whose encoded bytes equal those of an image with a smaller key.
    """

    output: str
    read: ImageReadOptions = dataclasses.field(default_factory=ImageReadOptions)
    extras: tuple[str, ...] = ()
    rules: pixels.ImageRules = dataclasses.field(default_factory=pixels.ImageRules)
    resize: str = "center_crop"
    size: int | None = 256
    encoding: str = "jpeg"
    quality: int = 95
    ext: str = "array_record"
    val_fraction: float = 0.0
    shard_bytes: int = 256 << 20
    num_shards: int | None = None
    dedupe: bool = False

    def __post_init__(self) -> None:
        if self.resize not in RESIZE_POLICIES:
            raise ValueError(f"resize must be one of {RESIZE_POLICIES}, got {self.resize!r}")
        if self.resize != "keep" and not (isinstance(self.size, int) and self.size > 0):
            raise ValueError(f"--resize {self.resize} needs a positive --size, got {self.size!r}")
        if self.ext not in SHARD_EXTENSIONS or self.ext == "bin":
            raise ValueError(f"image shards are array_record or parquet, not {self.ext!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"--quality must be in 1..100, got {self.quality}")
        if self.shard_bytes < 1 or (self.num_shards is not None and not 1 <= self.num_shards <= MAX_SHARDS):
            raise ValueError(f"shard_bytes must be positive and num_shards in 1..{MAX_SHARDS}")
        self.section()  # an encoding or field list the contract refuses is a usage error, now

    def sharding(self) -> Sharding:
        return Sharding(val_fraction=self.val_fraction, per_shard=self.shard_bytes, num_shards=self.num_shards)

    def section(self) -> ImagesSection:
        return ImagesSection(
            encoding=self.encoding,
            resize=self.resize,
            size=None if self.resize == "keep" else self.size,
            fields=("image", "caption", *self.extras),
        )

    def config(self) -> dict[str, Any]:
        """The JSON config meta.json records: every field that changes a byte of output.

        Round-tripped through JSON here, so a rerun compares it equal to the one read back from meta.json.
        """
        config = {
            "job": "images",
            **self.section().to_json(),
            **dataclasses.asdict(self.read),
            **dataclasses.asdict(self.rules),
            "quality": self.quality,
            "format": self.ext,
            "val_fraction": self.val_fraction,
            "shard_bytes": self.shard_bytes,
            "num_shards": self.num_shards,
            "dedupe": self.dedupe,
        }
        return json.loads(json.dumps(config))

    def image_bytes(self, data: bytes) -> bytes:
        """The stored image for input bytes `data`, or pixels.ImageRejected naming why it is dropped."""
        size = None if self.resize == "keep" else self.size
        image = pixels.decode(data, rules=self.rules, size=size)
        # __post_init__ gives every policy but keep a size.
        if self.resize == "shorter_side" and size is not None:
            image = pixels.scale_shorter_side(image, size)
        elif self.resize == "center_crop" and size is not None:
            image = pixels.square(image, size)
        return pixels.encode(image, self.encoding, self.quality)


class _Encode(beam.DoFn):
    """((file, row), (image bytes, fields, draw)) → ((file, row), (Parked record, draw)), or with dedupe
    (image digest, that element); a dropped image is its reason on DROPS_TAG.

    The bundle's records are parked in one file, closed before any reference to it is handed on: the
    references leave in finish_bundle.
    """

    def __init__(self, plan: ImagesPlan) -> None:
        self.plan = plan

    def setup(self) -> None:
        self.encoded = beam.metrics.Metrics.counter(NAMESPACE, "images_encoded")
        self.drops = {r: beam.metrics.Metrics.counter(NAMESPACE, r) for r in pixels.REASONS}
        self.progress = progress.Tally(ENCODE)

    def start_bundle(self) -> None:
        self._discard()
        self.parking: ParkingFile | None = ParkingFile(self.plan.output, "images.records")
        self.parked: list[Any] = []

    def process(self, element: tuple[Key, tuple[bytes, dict[str, bytes], int]]) -> Iterator[Any]:
        key, (data, fields, place) = element
        self.progress.add()
        try:
            image = self.plan.image_bytes(data)
        except pixels.ImageRejected as rejected:
            self.drops[rejected.reason].inc()
            yield beam.pvalue.TaggedOutput(DROPS_TAG, rejected.reason)
            return
        self.encoded.inc()
        assert self.parking is not None
        record = (key, (self.parking.add(pack_dict_of_byte_arrays({"image": image, **fields})), place))
        self.parked.append((hashlib.sha256(image).hexdigest(), record) if self.plan.dedupe else record)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        assert self.parking is not None
        self.parking.close()
        self.parking = None  # handed on: from now on its references are what finds the records
        parked, self.parked = self.parked, []
        self.progress.publish()
        for element in parked:
            yield WindowedValue(element, MIN_TIMESTAMP, (GlobalWindow(),))

    def teardown(self) -> None:
        self._discard()

    def _discard(self) -> None:
        """Removes the file of a bundle that failed before finish_bundle: no reference to it left."""
        parking = getattr(self, "parking", None)
        if parking is not None:
            parking.discard()
            self.parking = None


def _first_of_each_image(element: tuple[str, Iterable[tuple[Key, Any]]]) -> Iterator[Any]:
    _, copies = element
    ordered = sorted(copies, key=lambda copy: copy[0])
    yield ordered[0]
    for _ in ordered[1:]:
        yield beam.pvalue.TaggedOutput(DROPS_TAG, DUPLICATE)


def images_stats(
    meta: Meta,
    tallies: Mapping[str, Any],
    drops: Iterable[tuple[str, int]],
    ignored: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """stats.json: images in, written, dropped by reason, and the non-image files of image folders left
    out by reason (never images, so outside the books); refuses a run whose books do not balance."""
    dropped = {reason: int(tallies.get(reason, 0)) for reason in DROP_REASONS}
    dropped.update({reason: int(tallies[reason]) for reason in NEWER_REASONS if tallies.get(reason)})
    for reason, count in drops:
        dropped[reason] += count
    written = meta.record_count
    check_books("image", tallies["images_in"], written, dropped)
    return {
        "images_in": tallies["images_in"],
        "images_written": written,
        "dropped": dropped,
        "damaged_inputs": tallies[DAMAGED],
        "ignored_files": dict(sorted((ignored or {}).items())),
        "splits": commit.split_stats(meta, "images"),
        "fingerprint": meta.fingerprint(),
    }


class WriteImages(beam.PTransform):
    """PCollection[tuple[Source, ...]] (read units: image_sources.reads) → a committed images directory in
    plan.output; yields its Meta once committed.

    spread: whether some Source holds many images (a row file, a saved dataset). Reading fuses with what
    follows it, so their images are then spread over workers before decoding, or one large file would be
    decoded by one worker alone; a Source of one image file needs no second shuffle of its bytes.
    ignored: how many files of image folders were left out as no image, by reason, for stats.json.
    """

    def __init__(
        self,
        plan: ImagesPlan,
        identity: JobIdentity,
        *,
        spread: bool,
        ignored: Mapping[str, int] | None = None,
        label: str | None = None,
    ) -> None:
        super().__init__(label)
        self.plan = plan
        self.identity = identity
        self.spread = spread
        self.ignored = dict(ignored or {})

    def expand(self, sources: beam.PCollection) -> beam.PCollection:
        plan = self.plan
        read = sources | "ReadImages" >> ReadImages(plan.read)
        images = read.images | "SpreadImages" >> beam.Reshuffle() if self.spread else read.images
        encoded = images | "Encode" >> beam.ParDo(_Encode(plan)).with_outputs(DROPS_TAG, main="records")
        records, drops = encoded.records, [encoded[DROPS_TAG]]
        if plan.dedupe:
            unique = (
                records  # keyed by the image's digest, which _Encode took before parking
                | "ByImage" >> beam.GroupByKey()
                | "FirstOfEach" >> beam.FlatMap(_first_of_each_image).with_outputs(DROPS_TAG, main="records")
            )
            records, drops = unique.records, [*drops, unique[DROPS_TAG]]
        dropped = beam.pvalue.AsList(
            drops | "AllDrops" >> beam.Flatten() | "DropsByReason" >> beam.combiners.Count.PerElement()
        )
        tallies = beam.pvalue.AsList(read[STATS_TAG])
        side = (self.ignored, tallies, dropped)
        return records | "Write" >> write_parked(plan, self.identity, finish=_finish, side=side)


def _finish(
    meta: Meta, ignored: Mapping[str, int], tallies: Iterable[Mapping[str, Any]], drops: Iterable[tuple[str, int]]
) -> dict[str, Any]:
    stats = images_stats(meta, _merge(tallies), drops, ignored)
    # A job that wrote no image is a mistake upstream (a flag, the wrong folder), never a corpus.
    check_drops(stats, 1.0, unit="images", hints=_HINTS)
    return stats


def _merge(tallies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    total: collections.Counter[str] = collections.Counter()
    damaged: list[dict[str, Any]] = []
    for tally in tallies:
        damaged.extend(tally.get(DAMAGED, ()))
        total.update({name: value for name, value in tally.items() if name != DAMAGED})
    return {**total, "images_in": total["images_in"], DAMAGED: sorted(damaged, key=lambda d: d["path"])}
