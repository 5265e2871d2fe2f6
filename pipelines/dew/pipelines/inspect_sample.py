"""A bounded sample of a packed-dict directory's records, and the small pictures the report shows of it.

The sample comes from the first shard of the train split (the one shard whose checksum inspect reads),
spread evenly over it rather than its first records, and is bounded twice: by a record count and by
the bytes read, so a corpus of 3 MB clips reads a few dozen records, not a few hundred.
"""

from __future__ import annotations

import base64
import dataclasses
import io
from typing import Any

import numpy as np

from dew.data import formats
from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.extras import require

TRAIN = "train"
SAMPLE_BYTES = 64 << 20
_THUMB_SIDE = 128
_THUMB_QUALITY = 75


@dataclasses.dataclass(frozen=True)
class Sample:
    """Records `indices` of `shard` (holding `of` records), each a dict of field name to bytes."""

    shard: str
    of: int
    indices: list[int]
    rows: list[dict[str, bytes]]


def read_sample(path: str, meta: formats.Meta, count: int, budget: int = SAMPLE_BYTES) -> Sample | None:
    """Up to `count` records spread over the first train shard, fewer where they would pass `budget` bytes."""
    shards = meta.shards(TRAIN) or next(iter(meta.splits.values()), ())
    if not shards or count < 1 or not shards[0].records:
        return None
    shard = shards[0]
    per_record = max(1, shard.units // shard.records) if type(meta.section).UNIT == "bytes" else 1
    wanted = max(1, min(count, shard.records, budget // per_record))
    indices = sorted({round(i) for i in np.linspace(0, shard.records - 1, wanted)})
    # The sample is spread over meta.json's count, which must be the shard's own (its footer's).
    local = formats.verify_shard(path, shard, checksum=True, own_records=True)
    if formats.shard_extension(shard.name) == "parquet":
        rows = _parquet_rows(local, indices)
    else:
        from array_record.python.array_record_module import ArrayRecordReader

        reader = ArrayRecordReader(local, "readahead_buffer_size:0")
        try:
            rows = [
                unpack_dict_of_byte_arrays(r, f"{local} record {i}")
                for r, i in zip(reader.read(indices), indices, strict=True)
            ]
        finally:
            reader.close()
    return Sample(shard=shard.name, of=shard.records, indices=indices, rows=rows)


def _parquet_rows(local: str, indices: list[int]) -> list[dict[str, bytes]]:
    pq = require("pyarrow.parquet", for_what="inspecting parquet shards")
    file = pq.ParquetFile(local)
    rows: list[dict[str, bytes]] = []
    start = 0
    for group in range(file.num_row_groups):
        size = file.metadata.row_group(group).num_rows
        inside = [i - start for i in indices if start <= i < start + size]
        if inside:  # only the row groups holding a sampled row are read
            rows.extend(file.read_row_group(group).take(inside).to_pylist())
        start += size
    return [{name: _as_bytes(value) for name, value in row.items()} for row in rows]


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def text_of(row: dict[str, bytes], field: str = "caption") -> str | None:
    """A text field of a record, or None where it has none; bytes that are no UTF-8 are shown replaced."""
    value = row.get(field)
    return None if value is None else value.decode("utf-8", errors="replace")


def image_sides(data: bytes) -> tuple[int, int] | None:
    """(width, height) from an encoded image's header, None where it cannot be read (or no Pillow)."""
    try:
        pil = require("PIL.Image", for_what="reading image sizes")
        with pil.open(io.BytesIO(data)) as image:
            return image.size
    except Exception:  # a record the report describes but cannot picture: its bytes are shown instead
        return None


def thumbnail(data: bytes | np.ndarray) -> str | None:
    """A JPEG data: URI at most 128 px a side of an encoded image or a uint8 RGB array; None if unreadable."""
    pil = require("PIL.Image", for_what="dew-preprocess inspect --html thumbnails")
    try:
        image = pil.fromarray(data) if isinstance(data, np.ndarray) else pil.open(io.BytesIO(data))
        image.draft("RGB", (_THUMB_SIDE, _THUMB_SIDE))  # a JPEG decodes at a fraction of its size
        image = image.convert("RGB")
        image.thumbnail((_THUMB_SIDE, _THUMB_SIDE))
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=_THUMB_QUALITY)
    except Exception:  # hostile or damaged bytes: the grid shows the record without a picture
        return None
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()


def clip_frames(row: dict[str, bytes], section: dict[str, Any], keep: int) -> list[np.ndarray | bytes]:
    """`keep` frames spread over a clip record: raw uint8 arrays, or each frame's JPEG bytes."""
    count, size = section["frames"], section["frame_size"]
    chosen = sorted({round(i) for i in np.linspace(0, count - 1, min(keep, count))})
    if section.get("frame_encoding") == "jpeg":
        jpegs = unpack_dict_of_byte_arrays(row["frames"], "a clip's frames")
        return [jpegs[str(i)] for i in chosen]
    frames = np.frombuffer(row["frames"], dtype=np.uint8)
    if frames.size != count * size * size * 3:
        return []
    frames = frames.reshape(count, size, size, 3)
    return [frames[i] for i in chosen]
