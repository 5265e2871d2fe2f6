"""Where the decode-clips job's videos are, decided on the launcher: each video is one numbered Source.

What an `--input` names decides how it is read:
- a directory: every video file under it, at any depth, captioned from --caption_template with {stem}
  (the file name without its suffix) and {folder} (its directory, relative to the input);
- a directory with layout voxceleb2: `<root>/<split>/<identity>/<clip>/<utterance>.mp4`, the template
  filled with {split}, {identity}, {clip} and {utterance} besides {stem} and {folder};
- a `.jsonl`, `.csv` or `.parquet` list: one video a row, its path (relative to the list's directory,
  absolute, or gs://) under --path_field and its caption under --caption_field;
- any other file or glob: the videos it matches, captioned from the template.

Sources are sorted by path and numbered: the number is the file index of every clip's (file, clip) key.
Each Source carries its `name` (its path relative to the input, or as its list gives it), which decides
the shard its clips go to, so a video's clips land where they land whatever else is added beside it. A
list row that names no video, or none that exists, is still a Source, carrying its `problem`, so the
job counts it under that reason like any other bad input rather than losing it on the launcher.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import posixpath
from collections.abc import Iterator, Sequence

from dew.data.extras import require
from dew.preprocess import files
from dew.preprocess.document_rows import without_bom
from dew.preprocess.files import InputFile

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".3gp")
LIST_SUFFIXES = (".jsonl", ".csv", ".parquet")
LAYOUTS = ("auto", "voxceleb2")
MISSING_FIELD = "missing_field"
MISSING_FILE = "missing_file"
SOURCE_REASONS = (MISSING_FIELD, MISSING_FILE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One video: where it is, the name that places its clips, its caption, or why it cannot be read."""

    index: int
    path: str
    name: str
    caption: str
    problem: str | None = None

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


def _tree(root: str, listed: Sequence[InputFile], options: SourceOptions) -> Iterator[tuple[str, str, str, str | None]]:
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
        yield item.path, name, _caption(options.caption_template, f"{root} ({options.layout} layout)", **names), None


def _rows(path: str) -> Iterator[dict[str, object]]:
    data = files.read_bytes(path)
    if not path.endswith(".parquet"):
        data = without_bom(data)  # a list saved by a Windows tool
    if path.endswith(".parquet"):
        pq = require("pyarrow.parquet", for_what="reading a parquet list of videos")
        yield from pq.read_table(io.BytesIO(data)).to_pylist()
    elif path.endswith(".csv"):
        yield from csv.DictReader(io.StringIO(data.decode("utf-8")))
    else:
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as error:
                    raise ValueError(f"{path} line {number} is not JSON ({error})") from None


def _listed(path: str, options: SourceOptions) -> Iterator[tuple[str, str, str, str | None]]:
    base = posixpath.dirname(path)
    for row, values in enumerate(_rows(path)):
        video, caption = values.get(options.path_field), values.get(options.caption_field)
        where = f"{path} row {row}"
        if not isinstance(video, str) or not video or caption is None:
            yield where, where, "", MISSING_FIELD
            continue
        full = video if "://" in video or posixpath.isabs(video) else posixpath.join(base, video)
        yield full, video, str(caption), None if files.exists(full) else MISSING_FILE


def find_sources(patterns: Sequence[str], options: SourceOptions) -> tuple[tuple[Source, ...], tuple[InputFile, ...]]:
    """Every video the --input patterns name, numbered in path order, and the files to fingerprint."""
    if not patterns:
        raise ValueError("no input given: pass --input with a video folder, a list of videos, or video files")
    found: dict[str, tuple[str, str, str, str | None]] = {}
    manifest: dict[str, InputFile] = {}
    for pattern in patterns:
        # An object store has no directories: a trailing slash names one.
        directory = os.path.isdir(pattern) if files.is_local(pattern) else pattern.endswith("/")
        if options.layout == "voxceleb2" and not directory:
            raise ValueError(f"--layout voxceleb2 reads a directory <root>/<split>/<identity>/<clip>/, not {pattern}")
        listed = files.expand_inputs([files.join(pattern, "**") if directory else pattern])
        if directory:
            sources = list(_tree(pattern, listed, options))
        else:
            sources = []
            for item in listed:
                if item.path.lower().endswith(LIST_SUFFIXES):
                    sources += _listed(item.path, options)
                elif _is_video(item.path):
                    stem = posixpath.splitext(posixpath.basename(item.path))[0]
                    caption = _caption(options.caption_template, item.path, stem=stem, folder="")
                    sources.append((item.path, posixpath.basename(item.path), caption, None))
                else:
                    raise ValueError(f"{item.path}: not a video ({', '.join(VIDEO_SUFFIXES)}) nor a list of them")
        if not sources:
            raise FileNotFoundError(f"--input {pattern} holds no video")
        found.update((source[0], source) for source in sources)
        manifest.update((item.path, item) for item in listed)
    numbered = tuple(
        Source(index=i, path=path, name=name, caption=caption, problem=problem)
        for i, (path, name, caption, problem) in enumerate(found[key] for key in sorted(found))
    )
    return numbered, tuple(manifest[path] for path in sorted(manifest))
