"""The one writer path with a kind other than tokens: packed-dict image records → committed shards.

Records are real photographs (skimage.data) encoded as PNG, with captions, packed with the runtime's
codec and written by WriteShards through each record-shaped file format, then committed with meta.json
last and a piece index. What comes back is what went in, in key order, whatever order it arrived in.
"""

from __future__ import annotations

import io
import os
import random

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from dew.data import formats
from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays
from dew.data.pieces import PIECES, offline_pieces
from dew.data.sections import ImagesSection
from dew.data.tokens.opening import open_tokens
from dew.preprocess.commit import JobIdentity, commit_corpus, ordered_shards, prepare_output
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import WriteShards

SECTION = ImagesSection(encoding="png", fields=("image", "caption"))
COUNTS = {"train": 2, "val": 1}
# The run that claims each output these tests write.
CLAIM = JobIdentity(config={"job": "write-records"}, inputs="")


def photographs() -> list[bytes]:
    from PIL import Image
    from skimage import data

    out = []
    for name in ("astronaut", "camera", "coffee", "chelsea", "rocket", "coins"):
        pixels = getattr(data, name)()[::8, ::8]
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


def keyed_records() -> list[tuple[tuple[str, int], tuple[tuple[int, int], bytes]]]:
    out = []
    for i, image in enumerate(photographs() * 2):
        split, shard = ("val", 0) if i >= 10 else ("train", i % 2)
        record = pack_dict_of_byte_arrays({"image": image, "caption": f"photograph {i}".encode()})
        out.append(((split, shard), ((0, i), record)))
    return out


def commit(shards: list, output: str) -> None:
    commit_corpus(output, formats.Meta(section=SECTION, splits=ordered_shards(shards, COUNTS)), {}, CLAIM)


def write(output: str, ext: str, elements: list) -> formats.Meta:
    fmt = ShardFormat(ext=ext, section=SECTION)
    prepare_output(output, CLAIM, overwrite=False)
    with TestPipeline(runner="BundleBasedDirectRunner") as p:
        counts = beam.pvalue.AsSingleton(p | "Counts" >> beam.Create([COUNTS]))
        shards = p | beam.Create(elements, reshuffle=False) | WriteShards(output, fmt, counts, CLAIM)
        _ = shards | beam.combiners.ToList() | beam.Map(commit, output)
    return formats.read_meta(output, kind="images")


@pytest.mark.beam
@pytest.mark.parametrize("ext", ["array_record", "parquet"])
def test_packed_records_commit_and_read_back_in_key_order(ext, tmp_path) -> None:
    elements = keyed_records()
    shuffled = elements[:]
    random.Random(7).shuffle(shuffled)
    meta = write(str(tmp_path / "a"), ext, elements)
    again = write(str(tmp_path / "b"), ext, shuffled)
    assert meta == again, "arrival order changed the bytes written"

    want: dict[str, list[dict[str, bytes]]] = {"train": [], "val": []}
    for (split, shard), (_, record) in elements:
        want[split].append((shard, unpack_dict_of_byte_arrays(record)))
    for split in want:
        got = []
        for shard in meta.shards(split):
            got.extend(read_back(str(tmp_path / "a" / shard.name), ext))
        assert got == [entries for _, entries in sorted(want[split], key=lambda x: x[0])]
        index = offline_pieces(str(tmp_path / "a"), meta, split, None)
        sizes = [len(pack_dict_of_byte_arrays(r)) for r in got]
        assert index is not None and np.diff(index.ends, prepend=0).tolist() == sizes
        assert [s.records for s in meta.shards(split)] == index.counts.tolist()
    assert os.path.exists(formats.derived_path(str(tmp_path / "a"), "train", PIECES))
    with pytest.raises(formats.WrongKindError, match="holds images"):
        open_tokens(str(tmp_path / "a"))


def read_back(path: str, ext: str) -> list[dict[str, bytes]]:
    if ext == "array_record":
        from array_record.python.array_record_module import ArrayRecordReader

        reader = ArrayRecordReader(path)
        try:
            return [unpack_dict_of_byte_arrays(r) for r in reader.read_all()]
        finally:
            reader.close()
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_packed_records_cannot_go_into_bin_shards() -> None:
    with pytest.raises(ValueError, match="keep no record boundaries"):
        ShardFormat(ext="bin", section=SECTION)


@pytest.mark.beam
def test_a_record_whose_fields_disagree_with_meta_is_refused(tmp_path) -> None:
    bad = [(("train", 0), ((0, 0), pack_dict_of_byte_arrays({"caption": b"x", "image": b"y"})))]
    with pytest.raises(Exception, match=r"holds fields \['caption', 'image'\], meta.json declares"):
        write(str(tmp_path / "c"), "parquet", bad)
