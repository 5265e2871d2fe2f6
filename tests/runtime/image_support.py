"""Image records for the image tests: real photographs encoded here, written committed or raw."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from dew.data import formats
from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.formats import Meta, Shard
from dew.data.sections import ImagesSection

Image = pytest.importorskip("PIL.Image")
skdata = pytest.importorskip("skimage.data")
pytest.importorskip("cv2")
pytest.importorskip("array_record")


def photographs() -> list[bytes]:
    """Eight files of real photographs: JPEG, PNG and WebP, several sizes, greyscale and RGBA among them."""
    astronaut, coffee, chelsea = skdata.astronaut(), skdata.coffee(), skdata.chelsea()
    camera, logo, rocket = skdata.camera(), skdata.logo(), skdata.rocket()

    def encode(array: np.ndarray, fmt: str, size: tuple[int, int], **options) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(array).resize(size).save(buffer, format=fmt, **options)
        return buffer.getvalue()

    return [
        encode(astronaut, "JPEG", (96, 96), quality=90),
        encode(coffee, "JPEG", (120, 80), quality=90),
        encode(chelsea, "PNG", (75, 50)),
        encode(camera, "JPEG", (64, 64), quality=90),  # greyscale
        encode(logo, "PNG", (70, 70)),  # RGBA
        encode(rocket, "WEBP", (80, 107), quality=90),
        encode(astronaut, "WEBP", (48, 48), lossless=True),
        encode(coffee, "PNG", (90, 60)),
    ]


def records(
    count: int, *, image: str = "image", caption: str | None = "caption", **extra: Sequence[bytes]
) -> list[dict]:
    """`count` records cycling through the photographs, captioned "photo <i> — é", with `extra` fields."""
    photos = photographs()
    out = []
    for i in range(count):
        record = {image: photos[i % len(photos)]}
        if caption is not None:
            record[caption] = f"photo {i} — é".encode()
        for name, values in extra.items():
            record[name] = values[i]
        out.append(record)
    return out


def write_array_record(path: str, entries: Sequence[Mapping[str, bytes] | bytes]) -> None:
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(path, "group_size:1")
    for entry in entries:
        writer.write(entry if isinstance(entry, bytes) else pack_dict_of_byte_arrays(entry))
    writer.close()


def write_committed(
    directory: str,
    splits: Mapping[str, Sequence[Sequence[Mapping[str, bytes]]]],
    *,
    checksums: bool = False,
    **section: object,
) -> Meta:
    """A committed dew.images/1 directory: each split a list of shards, each shard a list of records.

    With checksums, each shard's entry and sidecars (block checksums, record index) come from the jobs'
    own files.checksums_of, as every dew job writes them; without, meta.json is the older format."""
    os.makedirs(directory, exist_ok=True)
    listing = {}
    for split, shards in splits.items():
        listing[split] = []
        for index, shard in enumerate(shards):
            name = formats.shard_name(split, index, len(shards), "array_record")
            path = os.path.join(directory, name)
            write_array_record(path, shard)
            units = sum(len(pack_dict_of_byte_arrays(r)) for r in shard)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            if checksums:
                from dew.preprocess import files

                summed = files.checksums_of(path)
                summed.write_blocks(path, directory)
                listing[split].append(summed.shard(name, record_count=len(shard), units=units))
            else:
                listing[split].append(Shard(name, len(shard), units, os.path.getsize(path), digest))
    fields = tuple(next(iter(next(iter(splits.values()))[0])))
    meta = Meta(
        section=ImagesSection(encoding="jpeg", fields=fields, **section),
        splits={s: tuple(x) for s, x in listing.items()},
        config={"job": "test"},
    )
    formats.write_meta(directory, meta)
    if checksums:
        from dew.data.committed import TEMP_DIR

        os.rmdir(os.path.join(directory, TEMP_DIR))  # the jobs' scratch for their atomic writes, empty
    return meta


def write_raw_set(directory: str, shards: Sequence[Sequence[Mapping[str, bytes]]], names: Sequence[str] = ()) -> None:
    """A raw shard set, directory/NNNNN.array_record, as img2dataset writes it."""
    os.makedirs(directory, exist_ok=True)
    for index, shard in enumerate(shards):
        name = names[index] if names else f"{index:05d}.array_record"
        write_array_record(os.path.join(directory, name), shard)
