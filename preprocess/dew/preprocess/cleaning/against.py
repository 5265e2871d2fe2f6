"""Committed documents corpora: found on the launcher, read back on the workers.

`documents_corpus(path)` is what both `clean --against DIR` and `tokenize --input DIR` ask: the
committed meta.json of a documents directory (an uncommitted one is refused by dew.data.formats, naming
what commits it), its shards checked by size, and their paths in order. Sizes are all the launcher checks;
the worker that reads a shard first checks its content against meta.json's sha256 (files.verified, once per
host and file state), so a shard rewritten after the commit, even to its own size, is refused by name
rather than read as the corpus.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Mapping

import apache_beam as beam

from dew.data import committed, formats, locations
from dew.data.extras import require
from dew.data.formats import Shard
from dew.data.sections import DocumentsSection
from dew.preprocess import files
from dew.preprocess.cleaning.plan import Against
from dew.preprocess.cleaning.removals import removals_name
from dew.preprocess.constants import REMOVALS_SUFFIX

_BATCH = 1024


def is_documents_directory(path: str) -> bool:
    """Whether an --input names a folder a dew job wrote (committed or not), to be read as a documents
    corpus; any other folder is left to the file listing, which says how to name its files."""
    if any(c in path for c in "*?[") or not locations.is_directory(path):
        return False
    names = committed.listing(path)
    return committed.META in names or bool(committed.dew_signs(names))


def documents_corpus(path: str) -> Against:
    """A committed documents directory: its fingerprint and every shard of every split, in order."""
    path = path.rstrip("/")
    if files.is_local(path) and os.path.isfile(path):
        raise ValueError(f"{path} is a file: --against takes a documents directory that clean committed")
    meta = formats.read_meta(path, kind=DocumentsSection.KIND)
    formats.check_local_sizes(path, meta)
    shards = tuple(shard for split in sorted(meta.splits) for shard in meta.splits[split])
    return Against(path=path, fingerprint=meta.fingerprint(), shards=shards)


def read_columns(path: str, columns: list[str]) -> Iterator[list[bytes]]:
    """The given binary columns of a documents shard, row by row, a row group at a time."""
    pq = require("pyarrow.parquet", for_what="reading documents shards")
    with files.open_read(path) as raw:
        table = pq.ParquetFile(raw)
        for batch in table.iter_batches(columns=columns, batch_size=_BATCH):
            yield from zip(*(batch.column(i).to_pylist() for i in range(len(columns))), strict=True)


class ReadAgainst(beam.DoFn):
    """(corpus rank, shard path, Shard) → (rank, document id, text) for every document of the shard, once
    its bytes are checked against meta.json."""

    def process(self, element: tuple[int, str, Shard]) -> Iterator[tuple[int, str, str]]:
        rank, path, shard = element
        for doc_id, text in read_columns(files.verified(path, shard), ["id", "text"]):
            yield rank, doc_id.decode(), text.decode("utf-8")


def text_inputs(patterns: list[str], text_field: str) -> tuple[files.InputFile, ...]:
    """The input files of a job reading text (tokenize, clean): each pattern's files, where a pattern
    naming a folder must be a committed documents directory and stands for its shards.

    A documents shard keeps its text in the column `text`, which must then be the --text_field. Each of a
    directory's shards comes back with its meta.json entry (InputFile.shard), which the read step checks
    it against (`committed_shards`). A file the patterns name twice, under any spelling (`in/*` and
    `./in/a.jsonl`, a symlink), is read once, as its first path in sorted order: documents are named by
    their file's path, so a second spelling would read every one of them again as a new document.
    """
    expanded: list[str] = []
    entries: dict[object, Shard] = {}
    for pattern in patterns:
        if is_documents_directory(pattern):
            if text_field != "text":
                raise ValueError(
                    f"--input {pattern} is a documents directory, whose text is the field 'text', but "
                    f"--text_field is {text_field!r}: read it in a job of its own"
                )
            corpus = documents_corpus(pattern)
            for path, shard in zip(corpus.paths(), corpus.shards, strict=True):
                expanded.append(path)
                entries[files.same_file_key(path)] = shard
        else:
            expanded.append(pattern)
    kept: dict[object, files.InputFile] = {}
    found = files.expand_inputs(expanded)
    listed: set[str] = set()  # the directories found committed: their shards are the ones meta.json lists
    for parent in sorted({_parent(i.path) for i in found}):
        named = _named_shards(parent)
        entries.update(named)
        if named:
            listed.add(parent)
    for item in found:  # sorted by path: the first spelling of a file is the one read
        key = files.same_file_key(item.path)
        if _parent(item.path) in listed and key not in entries and formats.parse_shard_name(item.path):
            raise ValueError(
                f"--input {item.path} is named as a shard, but {files.join(_parent(item.path), committed.META)} "
                "lists no such shard: a commit leaves none it does not list, so the file is no part of that "
                "documents directory; pass the directory itself as --input"
            )
        if item.path.endswith(REMOVALS_SUFFIX) and files.same_file_key(item.path) in entries:
            raise ValueError(
                f"--input {item.path} is a removal table of a documents directory, not documents: "
                f"pass the directory itself as --input"
            )
        if key in kept:
            logging.warning("--input names %s twice (also as %s): it is read once", kept[key].path, item.path)
            continue
        kept[key] = dataclasses.replace(item, shard=entries.get(key))
    return tuple(kept.values())


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."


def _named_shards(directory: str) -> dict[object, Shard]:
    """The shards and removal tables of `directory` when it is a committed documents directory (so that
    its files named one by one are checked too, and a removal table is not read as documents), else none.
    A directory a dew job left uncommitted is refused: its files are no corpus, named one by one or not."""
    if not files.exists(files.join(directory, committed.META)):
        committed.refuse_uncommitted(directory, writer=DocumentsSection.WRITER)
        return {}
    meta = formats.read_meta(directory)
    if meta.kind != DocumentsSection.KIND:
        return {}
    shards = [shard for split in meta.splits.values() for shard in split]
    out: dict[object, Shard] = {files.same_file_key(files.join(directory, s.name)): s for s in shards}
    for shard in shards:  # a removal table is no shard: it only marks the file as one to refuse
        out[files.same_file_key(files.join(directory, removals_name(shard.name)))] = shard
    return out


def committed_shards(inputs: Iterable[files.InputFile]) -> Mapping[str, Shard]:
    """Input path → meta.json's entry, for the inputs that are shards of a committed documents directory."""
    return {i.path: i.shard for i in inputs if i.shard is not None}
