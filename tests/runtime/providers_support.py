"""Tiny provider datasets built in the test: HF json/parquet/save_to_disk splits and a prepared TFDS builder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dew.data import DataPartition, Loading

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


def rows(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"text": f"doc {i}", "n": i, "vec": [i, i + 1, i + 2]} for i in range(start, start + count)]


def write_jsonl(directory: Path, name: str, records: list[dict[str, Any]], files: int = 1) -> list[str]:
    """`records` spread over `files` jsonl files in order; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = directory / f"{name}-{f}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records[f::files]))
        paths.append(str(path))
    return paths


def write_parquet(directory: Path, name: str, records: list[dict[str, Any]]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(records), path)
    return str(path)


# Preprocess hooks, importable by name as a spec's config needs.
def shout(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": record["text"].upper(), "n": record["n"]}


def needs_title(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"title": record["title"]}


def decode_text(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": record["text"].decode(), "n": record["n"]}


def ns(batch: Mapping[str, Any]) -> list[int]:
    return np.asarray(batch["n"]).tolist()


def share_batches(reader: Any, partition: DataPartition, steps: int, state: Any = None) -> tuple[list[Any], Any]:
    """`steps` batches of one share (from `state` when given) and its position after them, as JSON."""
    stream = reader(partition)
    try:
        if state is not None:
            stream.set_state(state)
        batches = [next(stream) for _ in range(steps)]
        return batches, json.loads(json.dumps(stream.get_state()))
    finally:
        stream.close()


def prepare_tfds(data_dir: Path, *, size: int = 24, version: str = "1.0.0", config: str = "small") -> str:
    """Prepares the builder "dew_tiny" (configs small/big) as array_record; its version directory."""
    import tensorflow_datasets as tfds

    class DewTiny(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        name = "dew_tiny"
        VERSION = tfds.core.Version(version)
        BUILDER_CONFIGS = [  # noqa: RUF012  (tfds reads this class attribute as a list)
            tfds.core.BuilderConfig(name="small"),
            tfds.core.BuilderConfig(name="big"),
        ]

        def _info(self) -> Any:
            features = tfds.features.FeaturesDict(
                {
                    "text": tfds.features.Text(),
                    "n": np.int64,
                    "vec": tfds.features.Tensor(shape=(3,), dtype=np.int32),
                    # Stored zlib-compressed, so SkipDecoding has bytes on disk to hand back.
                    "packed": tfds.features.Tensor(shape=(2,), dtype=np.int64, encoding=tfds.features.Encoding.ZLIB),
                }
            )
            return tfds.core.DatasetInfo(builder=self, features=features)

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples(0, size), "test": self._generate_examples(1000, size // 2)}

        def _generate_examples(self, start: int, count: int) -> Any:
            for i in range(start, start + count):
                vec, packed = np.array([i, i + 1, i + 2], np.int32), np.array([i, -i], np.int64)
                yield i, {"text": f"doc {i}", "n": i, "vec": vec, "packed": packed}

    builder = DewTiny(data_dir=str(data_dir), config=config, file_format="array_record")
    builder.download_and_prepare()
    return str(builder.data_dir)
