"""Where the decode-clips job's videos are, decided on the launcher: each video is one numbered Source.

What an `--input` names decides how it is read:
- a directory: every video file under it, at any depth, captioned from --caption_template with {stem}
  (the file name without its suffix) and {folder} (its directory, relative to the input);
- a directory with layout voxceleb2: `<root>/<split>/<identity>/<clip>/<utterance>.mp4`, the template
  filled with {split}, {identity}, {clip} and {utterance} besides {stem} and {folder};
- a `.jsonl`, `.csv` or `.parquet` list: one video a row, its path (relative to the list's directory,
  absolute, or gs://) under --path_field and its caption under --caption_field; a jsonl or csv list may
  be compressed (`.jsonl.gz`, `.csv.zst`, `.zstd`: LAION and DataComp ship their metadata so), opened
  by document_rows.decompressed as every job opens its compressed rows;
- any other file or glob: the videos it matches, captioned from the template.

Sources are sorted by path and numbered: the number is the file index of every clip's (file, clip) key.
Each Source carries its `name` (its path relative to the input, or as its list gives it), which decides
the shard its clips go to, so a video's clips land where they land whatever else is added beside it. A
list row that names no video, or none that exists, is still a Source, carrying its `problem`, so the
job counts it under that reason like any other bad input rather than losing it on the launcher; so is
a jsonl line that is not a JSON object (`malformed_json`), a csv row with more fields than its header
(`malformed_csv`) and a row that is not UTF-8 (`invalid_utf8`), while the rows around it are read. A
list naming one video in several rows (a caption a row) gives a Source a row. A list that breaks off (a
compressed stream cut short or corrupted, a parquet file without its footer or with a damaged row
group) keeps the rows read before the damage, and its lost rest is a Source too, under
`truncated_input` or `corrupt_input` as in the images job: one for a compressed list, whose lost rows
are unknown, one a row for parquet, which knows them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dew.data.extras import require
from dew.preprocess import files
from dew.preprocess.csv_rows import MALFORMED_CSV, csv_records
from dew.preprocess.document_rows import (
    CORRUPT_INPUT,
    INVALID_UTF8,
    MALFORMED_JSON,
    MAX_ROW_BYTES,
    MISSING_FIELD,
    TOO_LONG,
    TRUNCATED_INPUT,
    DamagedInput,
    bounded_lines,
    compression_of,
    decompressed,
    without_bom,
)
from dew.preprocess.files import InputFile
from dew.preprocess.image_sources import row_kind, row_suffixes

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".3gp")
# A list's suffix → its kind; jsonl and csv lists may be compressed besides (image_sources.row_kind).
LIST_SUFFIXES = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
LAYOUTS = ("auto", "voxceleb2")
MISSING_FILE = "missing_file"
SOURCE_REASONS = (MISSING_FIELD, MISSING_FILE)
# Reasons counted since stats.json listed the ones above: stats.json names them only once one is counted,
# so the stats of a run without such input stay what they were, byte for byte.
LIST_REASONS = (MALFORMED_JSON, MALFORMED_CSV, INVALID_UTF8, TOO_LONG, TRUNCATED_INPUT, CORRUPT_INPUT)
# A row of a list: its values, or none with why it cannot be read and how ("" when the reason says it all).
_Row = tuple[Mapping[str, Any], str | None, str]
# A video found: (path, name, caption, problem, detail), as Source holds them.
_Found = tuple[str, str, str, str | None, str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One video: where it is, the name that places its clips, its caption, or why it cannot be read
    (`problem`, a reason, and `detail`, the error in words when the launcher knows more than the reason)."""

    index: int
    path: str
    name: str
    caption: str
    problem: str | None = None
    detail: str = ""

    def draw(self, clip: int) -> int:
        """A clip's place in [0, 2^64) from where it came from alone; it picks the clip's shard."""
        return int.from_bytes(hashlib.sha256(f"{self.name}\0{clip}".encode()).digest()[:8], "little")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """How inputs are read: the directory layout, the caption template, a list's columns."""

    layout: str = "auto"
    caption_template: str = "{stem}"
    path_field: str = "path"
    caption_field: str = "caption"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")


def _is_video(path: str) -> bool:
    return path.lower().endswith(VIDEO_SUFFIXES)


def _caption(template: str, where: str, **names: str) -> str:
    try:
        return template.format(**names)
    except (KeyError, IndexError) as error:
        raise ValueError(
            f"--caption_template {template!r} names {error} which {where} does not give; it gives {sorted(names)}"
        ) from None


def _tree(root: str, listed: Sequence[InputFile], options: SourceOptions) -> Iterator[_Found]:
    prefix = root.rstrip("/") + "/"
    depth = 4 if options.layout == "voxceleb2" else None
    for item in listed:
        name = item.path[len(prefix) :] if item.path.startswith(prefix) else item.path
        if not _is_video(name) or (depth is not None and name.count("/") + 1 != depth):
            continue
        folder, base = posixpath.split(name)
        names = {"stem": posixpath.splitext(base)[0], "folder": folder}
        if options.layout == "voxceleb2":
            names.update(zip(("split", "identity", "clip"), folder.split("/"), strict=True), utterance=names["stem"])
        caption = _caption(options.caption_template, f"{root} ({options.layout} layout)", **names)
        yield item.path, name, caption, None, ""


def _rows(path: str, fields: Sequence[str]) -> Iterator[_Row]:
    """Every row of the list at `path` (of a parquet list, its `fields` alone), raising DamagedInput where
    it breaks off, once the rows before were given."""
    if row_kind(path, LIST_SUFFIXES) == "parquet":
        yield from _parquet_rows(path, fields)
        return
    with files.open_read(path) as raw, decompressed(raw, compression_of(path)) as stream:
        if row_kind(path, LIST_SUFFIXES) == "csv":
            # A bad cell's lone surrogates are refused by _listed: it drops its row only.
            for values, reason in csv_records(stream):
                yield values, reason, "more fields than the header names (an unquoted comma?)" if reason else ""
            return
        for number, line in enumerate(bounded_lines(stream, MAX_ROW_BYTES), 1):
            if line is None:
                yield {}, TOO_LONG, f"line {number} is longer than {MAX_ROW_BYTES:,} bytes"
                continue
            line = without_bom(line) if number == 1 else line  # a list saved by a Windows tool
            if not line.strip():
                continue
            try:
                values = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                yield {}, INVALID_UTF8, f"line {number} is not UTF-8"
            except ValueError as error:
                yield {}, MALFORMED_JSON, f"line {number} is not JSON ({error})"
            else:
                if isinstance(values, dict):
                    yield values, None, ""
                else:
                    yield {}, MALFORMED_JSON, f"line {number} is no JSON object"


def _parquet_rows(path: str, fields: Sequence[str]) -> Iterator[_Row]:
    pa = require("pyarrow", for_what="reading a parquet list of videos")
    pq = require("pyarrow.parquet", for_what="reading a parquet list of videos")
    with files.open_read(path) as raw:
        try:
            table = pq.ParquetFile(raw)
        except (pa.ArrowException, OSError) as error:
            # The footer is written last: a file that starts as parquet but lacks it was cut short.
            raw.seek(0)
            reason = TRUNCATED_INPUT if raw.read(4) == b"PAR1" else CORRUPT_INPUT
            raise DamagedInput(reason, f"parquet: {error}") from error
        row, rows = 0, table.metadata.num_rows
        columns = [name for name in fields if name in table.schema_arrow.names]
        try:
            # One row group at a time, so the groups before a damaged one are read in full.
            for group in range(table.num_row_groups):
                for values in table.read_row_group(group, columns=columns).to_pylist():
                    yield values, None, ""
                    row += 1
        except (pa.ArrowException, OSError) as error:
            raise DamagedInput(CORRUPT_INPUT, f"parquet: {error}", lost=max(1, rows - row)) from error


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: a csv cell's undecodable bytes, a JSON "\ud800" escape
        return False
    return True


def _video(values: Mapping[str, Any], options: SourceOptions) -> tuple[str, str, str | None, str]:
    """A row's video path and caption, (path, caption, None, ""), or why it names none, ("", "", reason, detail)."""
    video, caption = values.get(options.path_field), values.get(options.caption_field)
    if not isinstance(video, str) or not video or caption is None:
        return "", "", MISSING_FIELD, ""
    if not (_utf8(video) and _utf8(str(caption))):
        return "", "", INVALID_UTF8, "its path or caption is not UTF-8"
    return video, str(caption), None, ""


def _listed(path: str, options: SourceOptions) -> Iterator[_Found]:
    base = posixpath.dirname(path)
    row = 0
    try:
        for values, unread, why in _rows(path, (options.path_field, options.caption_field)):
            where = f"{path} row {row}"
            row += 1
            video, caption, problem, detail = _video(values, options) if unread is None else ("", "", unread, why)
            if problem is not None:
                yield where, where, "", problem, detail
                continue
            full = video if "://" in video or posixpath.isabs(video) else posixpath.join(base, video)
            yield full, video, caption, None if files.exists(full) else MISSING_FILE, ""
    except DamagedInput as damage:
        for lost in range(row, row + damage.lost):
            where = f"{path} row {lost}"
            yield where, where, "", damage.reason, f"{damage} (the list breaks off at row {row})"


def find_sources(patterns: Sequence[str], options: SourceOptions) -> tuple[tuple[Source, ...], tuple[InputFile, ...]]:
    """Every video the --input patterns name, numbered in path order, and the files to fingerprint."""
    if not patterns:
        raise ValueError("no input given: pass --input with a video folder, a list of videos, or video files")
    found: dict[str, _Found] = {}
    manifest: dict[str, InputFile] = {}
    for pattern in patterns:
        # An object store has no directories: a trailing slash names one.
        directory = os.path.isdir(pattern) if files.is_local(pattern) else pattern.endswith("/")
        if options.layout == "voxceleb2" and not directory:
            raise ValueError(f"--layout voxceleb2 reads a directory <root>/<split>/<identity>/<clip>/, not {pattern}")
        listed = files.expand_inputs([files.join(pattern, "**") if directory else pattern])
        # A video reached directly is keyed by its path, so one that two patterns reach is read once, as a
        # file two patterns name is; a list's row by its video, its list and its place there, so every row
        # is a source of its own (one caption a row, as MSR-VTT's lists give a video 20), in every list
        # that names the video (two lists as two patterns: the later one's rows replaced the earlier's,
        # uncounted), and a list two patterns reach is read once.
        sources: dict[str, _Found] = {}
        if directory:
            sources.update((source[0], source) for source in _tree(pattern, listed, options))
        else:
            for item in listed:
                if row_kind(item.path, LIST_SUFFIXES) is not None:
                    for row, source in enumerate(_listed(item.path, options)):
                        sources[f"{source[0]}\0{item.path}\0{row:012d}"] = source  # after the video's own path
                elif _is_video(item.path):
                    stem = posixpath.splitext(posixpath.basename(item.path))[0]
                    caption = _caption(options.caption_template, item.path, stem=stem, folder="")
                    sources[item.path] = (item.path, posixpath.basename(item.path), caption, None, "")
                else:
                    lists = row_suffixes(LIST_SUFFIXES)
                    raise ValueError(
                        f"{item.path}: not a video ({', '.join(VIDEO_SUFFIXES)}) nor a list of them ({lists})"
                    )
        if not sources:
            raise FileNotFoundError(f"--input {pattern} holds no video")
        found.update(sources)
        manifest.update((item.path, item) for item in listed)
    # A video a list names is its rows' sources, whichever pattern (a folder) also reached it and in
    # whatever order the patterns came: no source of its own beside them, with a caption of the folder's.
    in_lists = {source[0] for key, source in found.items() if "\0" in key}
    found = {key: source for key, source in found.items() if "\0" in key or key not in in_lists}
    numbered = tuple(
        Source(index=i, path=path, name=name, caption=caption, problem=problem, detail=detail)
        for i, (path, name, caption, problem, detail) in enumerate(found[key] for key in sorted(found))
    )
    return numbered, tuple(manifest[path] for path in sorted(manifest))
