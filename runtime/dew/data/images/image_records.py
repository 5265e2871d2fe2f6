"""Image records in ArrayRecord shards, read a batch at a time: a committed directory or raw shard sets.

Two layouts hold the same packed dicts (dew.data.codec):
- a committed `dew.images/1` directory: meta.json names every shard, its record count and checksum,
  and the fields (`image`, `caption`, the offline token ids and any extras);
- a raw shard set, `<set>/*.array_record` with no meta.json, as img2dataset and FlaxDiff's converters
  write them (`jpg` and `txt` fields beside `key` and `meta`). Record counts come from each file's
  footer, and the fields from the first record.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats, locations, record_footer, remote, shard_cache
from dew.data.captions import TEXT_FIELDS
from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.committed import refuse_dew_directory
from dew.data.committed_records import VERIFIED, WHERE, CommittedRecords, committed_split
from dew.data.formats import Shard
from dew.data.record_shards import ShardReaders
from dew.data.sections import ImagesSection

# The names an image and a caption go by in raw shards, in the order they are looked for.
IMAGE_NAMES = ("image", "jpg", "jpeg", "png", "webp")
CAPTION_NAMES = ("caption", "txt", "text")


@dataclasses.dataclass(frozen=True)
class Fields:
    """Which stored field is the image, which the caption (None: uncaptioned), what else passes through,
    and whether token ids written offline sit beside them."""

    image: str
    caption: str | None
    extras: tuple[str, ...] = ()
    token_ids: bool = False

    @classmethod
    def of(cls, names: Sequence[str], where: str, *, token_ids: bool = False) -> Fields:
        image = next((n for n in IMAGE_NAMES if n in names), None)
        if image is None:
            known = ", ".join(IMAGE_NAMES)
            raise ValueError(f"{where}: the records hold no image field ({known}); they hold {list(names)}")
        caption = next((n for n in CAPTION_NAMES if n in names), None)
        taken = {image, caption, *(TEXT_FIELDS if token_ids else ())}
        return cls(image, caption, tuple(n for n in names if n not in taken), token_ids)


class ImageRecords(CommittedRecords):
    """Every record of some ArrayRecord files in order, read by index a batch at a time.

    A batch holds `image` (the stored bytes), `caption` (str) when captioned, the offline `input_ids`
    and `attention_mask` (int32) when present, and every extra field as bytes. A file is opened on its
    first read, in the process that reads it (dew.data.record_shards): a gs:// shard of a committed
    directory with a record index is read by range, a batch fetching its records' chunks only; one
    without is fetched into the local cache and checked against meta.json then.
    """

    WHAT = "image records"

    def __init__(
        self,
        files: Sequence[str],
        counts: Sequence[int],
        fields: Fields,
        description: dict[str, Any],
        *,
        directory: str | None = None,
        shards: Sequence[Shard] | None = None,
    ) -> None:
        super().__init__(files, counts, description, directory=directory, shards=shards)
        self.fields = fields

    @property
    def captioned(self) -> bool:
        return self.fields.caption is not None

    def decode(self, raw: list[bytes], where: list[str], verified: list[bool]) -> dict[str, Any]:
        batch = self._fields([unpack_dict_of_byte_arrays(r, w) for r, w in zip(raw, where, strict=True)], where)
        batch[VERIFIED] = verified
        return batch

    def _fields(self, records: list[dict[str, bytes]], where: list[str]) -> dict[str, Any]:
        fields = self.fields
        names = [fields.image, *([fields.caption] if fields.caption else []), *fields.extras]
        names += list(TEXT_FIELDS) if fields.token_ids else []
        for record, at in zip(records, where, strict=True):
            missing = [n for n in names if n not in record]
            if missing:
                raise ValueError(f"{at}: the packed record has no field {missing[0]!r}; its fields are {list(record)}")
        batch: dict[str, Any] = {"image": [r[fields.image] for r in records], WHERE: where}
        if fields.caption:
            batch["caption"] = [_text(r[fields.caption], at) for r, at in zip(records, where, strict=True)]
        for name in fields.extras:
            batch[name] = [r[name] for r in records]
        if fields.token_ids:
            for name in TEXT_FIELDS:
                batch[name] = np.stack([_ids(r[name], name, at) for r, at in zip(records, where, strict=True)])
        return batch


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{where}: the caption is not UTF-8 ({error})") from None


def _ids(data: bytes, name: str, where: str) -> np.ndarray:
    if len(data) % 4:
        raise ValueError(f"{where}: field {name!r} holds {len(data)} bytes, not whole int32 values")
    return np.frombuffer(data, dtype="<i4").astype(np.int32)


def committed(meta: formats.Meta, directory: str, split: str) -> ImageRecords:
    """The records of one split of a committed images directory whose meta.json is `meta`."""
    section = meta.section
    assert isinstance(section, ImagesSection)
    shards, files = committed_split(meta, directory, split, reader="the image readers", writer="the images job")
    fields = Fields.of(section.fields, directory, token_ids=section.caption_length is not None)
    description = {"images": "committed", "corpus": meta.fingerprint(), "split": split}
    return ImageRecords(files, [s.records for s in shards], fields, description, directory=directory, shards=shards)


def raw_files(directory: str, *, asked: bool) -> list[str]:
    """The `*.array_record` files of a raw shard set, in name order.

    A committed directory is refused: read as a raw set, its val shards would join its training
    records, unchecked against meta.json. So is a directory a dew job wrote but never committed,
    unless the caller `asked` for raw sets by name (ArrayRecordImages' shards=, a named corpus): a raw
    layout is never guessed from a directory dew writes (dew.data.committed).
    """
    if remote.is_remote(directory):
        names = remote.list_names(directory)
    elif os.path.isdir(remote.resolve(directory)):
        names = os.listdir(remote.resolve(directory))
    else:
        raise FileNotFoundError(f"no shard directory at {directory}")
    if formats.META in names:
        raise ValueError(
            f"{directory} is a committed images directory (it holds {formats.META}), not a raw shard set; "
            f"read it as ArrayRecordImages({directory!r}), which keeps its val split apart and checks its shards"
        )
    if not asked:
        refuse_dew_directory(directory, names, writer=ImagesSection.WRITER)
    return [os.path.join(directory, n) for n in sorted(names) if n.endswith(".array_record")]


def raw(directory: str, files: Sequence[str]) -> ImageRecords:
    """The records of raw shard files with no meta.json: counts from each footer, fields from record 0.

    A gs:// file is read by range (dew.data.record_footer): its footer, read once, gives its count and
    where each record lies, and record 0 costs its own chunk; one whose footer cannot be parsed here
    is fetched whole into the local cache.
    """
    from array_record.python.array_record_module import ArrayRecordReader

    if not files:
        raise FileNotFoundError(f"{directory} holds no .array_record files")
    counts, fields = [], None
    given, files = files, [remote.resolve(f) for f in files]  # a local path's `~` expanded, as it is opened
    readers = ShardReaders(files)
    for at, file in enumerate(files):
        ranged = record_footer.ranged(file) if record_footer.wanted(file) else None
        try:
            if ranged is not None:
                counts.append(record_footer.index(ranged).records)
                first = readers.read(np.array([at]), np.array([0])) if counts[-1] and fields is None else None
            else:
                reader = ArrayRecordReader(
                    locations.local_file(file, hold := shard_cache.Hold()), "readahead_buffer_size:0"
                )
                counts.append(reader.num_records())
                first = reader.read([0]) if counts[-1] and fields is None else None
                reader.close()
                del hold
        except formats.DamagedError:
            raise
        except Exception as error:
            raise ValueError(f"{file} is not a readable ArrayRecord file: {error}") from None
        if first is not None:
            fields = Fields.of(list(unpack_dict_of_byte_arrays(first[0], f"{file} record 0")), file)
    if fields is None:
        raise ValueError(f"{directory}: its .array_record files hold no records")
    relative = [os.path.relpath(f, os.path.dirname(directory.rstrip("/"))) for f in given]
    description = {"images": "array_record", "files": relative, "counts": counts}
    return ImageRecords(files, counts, fields, description)
