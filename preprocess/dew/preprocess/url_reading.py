"""ReadUrls: url lists → ((file, row), (url, {field: bytes}, draw)), nothing fetched yet.

A url list is rows naming an image by url, with its caption and any extra fields: `.parquet`,
`.jsonl` (`.ndjson`), `.csv` files or globs, or a dataset written by `save_to_disk`. A jsonl or csv list
may be compressed (`.jsonl.gz`, `.csv.zst`, `.zstd`), decompressed as the text jobs' inputs are
(document_rows.decompressed), so a cut or corrupted stream is a damaged input there as here.
Rows are read by the images job's own reader (dew.preprocess.image_reading), so a row without a url or
caption, a caption that is not UTF-8, a jsonl line that is not JSON and a damaged file are counted
under the same reasons; only the image column differs: it holds a url to fetch, not bytes or a path.

Sources are numbered in path order, so the (file, row) key and the draw that routes a row to its shard
depend on the input alone, as in the images job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dew.preprocess import files
from dew.preprocess.csv_rows import csv_records
from dew.preprocess.document_rows import MISSING_FIELD, compression_of, decompressed
from dew.preprocess.files import InputFile
from dew.preprocess.image_reading import ReadImages, ReadSource, utf8_field
from dew.preprocess.image_sources import HF_DICT, HF_STATE, ROW_SUFFIXES, Source, row_kind, row_suffixes

URL_SUFFIXES = {**ROW_SUFFIXES, ".csv": "csv"}
_Row = tuple[int, bytes | None, dict[str, bytes], str | None]


def find_url_sources(patterns: Sequence[str]) -> tuple[tuple[Source, ...], tuple[InputFile, ...]]:
    """Every url list the --input patterns name, numbered in path order, and the files to fingerprint."""
    if not patterns:
        raise ValueError("no input given: pass --input with url lists (.parquet, .jsonl, .csv) or a saved HF dataset")
    found: dict[str, tuple[str, str]] = {}
    manifest: dict[str, InputFile] = {}
    for pattern in patterns:
        if files.exists(files.join(pattern, HF_DICT)):
            splits = sorted(json.loads(files.read_bytes(files.join(pattern, HF_DICT))).get("splits", []))
            raise ValueError(f"--input {pattern} is a saved DatasetDict; name one split's directory: {splits}")
        if files.exists(files.join(pattern, HF_STATE)):
            root = pattern.rstrip("/")
            listed = list(files.expand_inputs([files.join(root, "*")]))
            found[root] = ("hf", os.path.basename(root))
        else:
            listed = list(files.expand_inputs([pattern]))
            for item in listed:
                kind = row_kind(item.path, URL_SUFFIXES)
                if kind is None:
                    allowed = row_suffixes(URL_SUFFIXES)
                    raise ValueError(f"{item.path}: not a url list ({allowed}) nor a saved HF dataset")
                found[item.path] = (kind, os.path.basename(item.path))
        manifest.update((item.path, item) for item in listed)
    sources = tuple(
        Source(index=i, kind=found[path][0], path=path, name=found[path][1]) for i, path in enumerate(sorted(found))
    )
    return sources, tuple(manifest[path] for path in sorted(manifest))


class _ReadUrlSource(ReadSource):
    """The images job's row reader with a url where it expects an image, and csv files besides."""

    def _rows(self, source: Source) -> Iterator[_Row]:
        if source.kind != "csv":
            yield from super()._rows(source)
            return
        for row, values, reason in self._csv_rows(source):
            yield (row, *self._row(values, "")) if reason is None else (row, None, {}, reason)

    def _row(self, values: Mapping[str, Any], base: str) -> tuple[bytes | None, dict[str, bytes], str | None]:
        url = values.get(self.options.image_field)
        if not isinstance(url, str) or not url.strip():
            return None, {}, MISSING_FIELD
        fields: dict[str, bytes] = {}
        for name, column in (("caption", self.options.caption_field), *((f, f) for f in self.options.extra_fields)):
            value, reason = utf8_field(values.get(column), text_only=name == "caption")
            if value is None:  # utf8_field gives no bytes exactly when it gives a reason
                return None, {}, reason
            fields[name] = value
        url_bytes, reason = utf8_field(url.strip())
        return (None, {}, reason) if reason else (url_bytes, fields, None)

    def _csv_rows(self, source: Source) -> Iterator[tuple[int, Mapping[str, Any], str | None]]:
        with (
            files.open_read(source.path) as raw,
            decompressed(raw, compression_of(source.path), label="csv") as stream,
        ):
            for row, (values, reason) in enumerate(csv_records(stream)):
                yield row, values, reason


class ReadUrls(ReadImages):
    """PCollection[tuple[Source, ...]] (image_sources.reads: a url list is a unit alone) → ((file, row), (url
    bytes, {field: bytes}, draw)) and a tally per unit (`stats`)."""

    reader = _ReadUrlSource
    main = "urls"
