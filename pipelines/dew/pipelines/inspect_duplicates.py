"""Where the document a duplicate was removed for came from: looked up by id when inspect shows it.

A removal row names the kept document by id, and by the --against corpus that holds it when that is
not the directory itself. Its source file, row and text are in the corpus holding it, so inspect finds
them there rather than the clean job writing them a second time: the writer puts every document in
the shard its id draws (dew.data.sections.document_shard), so one lookup reads that one shard's id
column, once the shard has passed its meta.json check as for any reader, and then the one row group
holding the id. An --against corpus is read only while it is the corpus the clean ran against (the
fingerprint the clean's meta.json recorded for it); one moved, deleted or rewritten since is reported
by path, not read.

The removed document's own text is read back from its source, up to its row, through the clean job's
own reader (dew.preprocess.document_rows, with the read options its meta.json records): a local jsonl,
txt or parquet file (gzip or zstd compressed), or a shard of a committed documents directory, checked
first.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dew.data import committed, formats, remote
from dew.data.extras import require
from dew.data.sections import DocumentsSection, document_shard
from dew.preprocess.document_rows import DamagedInput, DocumentRows, ReadOptions

EXCERPT_CHARS = 160
_TRAIN = "train"


def explain(path: str, meta: formats.Meta, examples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`examples` (removals: {"path", "row", "id"}, and "duplicate_of", "duplicate_in" for a duplicate),
    each with `removed` added, and `kept` for a duplicate; any other example (a row dropped on reading)
    is returned as it is.

    `removed` is {"excerpt"} of the removed document's text as its source holds it; `kept` is {"id",
    "corpus", "source", "row", "excerpt"} of the document it duplicates, corpus being the directory
    that holds it (`path`, or an --against corpus). Either is {"missing": why} instead where it could
    not be read, naming the path. Each source file is read once, up to the last row wanted of it."""
    against = {a["path"]: a["fingerprint"] for a in meta.config.get("against") or ()}
    wanted: dict[str, set[int]] = {}
    for example in examples:
        if "id" in example:
            wanted.setdefault(example["path"], set()).add(example["row"])
    texts = {source: _removed_rows(source, rows, meta.config) for source, rows in wanted.items()}
    out = []
    for example in examples:
        if "id" not in example:
            out.append(dict(example))
            continue
        found = {**example, "removed": texts[example["path"]][example["row"]]}
        if example.get("duplicate_of"):
            corpus = example.get("duplicate_in") or path
            recorded = None if corpus == path else against.get(corpus)
            kept = _kept(corpus, example["duplicate_of"], recorded)
            found["kept"] = {"id": example["duplicate_of"], "corpus": corpus, **kept}
        out.append(found)
    return out


def excerpt(text: str) -> str:
    """The first EXCERPT_CHARS characters of `text` with every run of whitespace one space, "…" if cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"


def _kept(corpus: str, doc_id: str, fingerprint: str | None) -> dict[str, Any]:
    if not remote.is_remote(corpus) and not os.path.isdir(corpus):
        return {"missing": f"{corpus} is not there: the corpus was moved or deleted after the clean"}
    try:
        meta = formats.read_meta(corpus, kind=DocumentsSection.KIND)
        if fingerprint is not None and meta.fingerprint() != fingerprint:
            return {"missing": f"{corpus} was rewritten after the clean: it is no longer the corpus cleaned against"}
        shards = meta.shards(_TRAIN)
        if not shards:
            return {"missing": f"{corpus} holds no {_TRAIN} shard"}
        shard = shards[document_shard(doc_id, len(shards))]
        found = _find(formats.verify_shard(corpus, shard, checksum=True, own_records=True), doc_id)
    except (OSError, ValueError) as error:  # uncommitted, damaged or unreadable: said, never raised
        return {"missing": str(error)}
    if found is None:
        return {"missing": f"{doc_id} is not in {corpus}/{shard.name}, the shard its id draws"}
    return {"source": found["source"], "row": int(found["row"]), "excerpt": excerpt(found["text"])}


def _find(local: str, doc_id: str) -> dict[str, str] | None:
    """The text, source and row of document `doc_id` in a documents shard: its id column row group by
    row group, then the other columns of the one group holding it."""
    pq = require("pyarrow.parquet", for_what="dew-preprocess inspect of a documents directory")
    key = doc_id.encode()
    file = pq.ParquetFile(local)
    for group in range(file.num_row_groups):
        ids = file.read_row_group(group, columns=["id"]).column(0).to_pylist()
        if key in ids:
            row = file.read_row_group(group, columns=["text", "source", "row"]).slice(ids.index(key), 1)
            return {name: value.decode("utf-8", errors="replace") for name, value in row.to_pylist()[0].items()}
    return None


def _removed(source: str, row: int, config: Mapping[str, Any]) -> dict[str, Any]:
    """An excerpt of the text at `row` of `source` (see _removed_rows)."""
    return _removed_rows(source, {row}, config)[row]


def _removed_rows(source: str, rows: Collection[int], config: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """{row: excerpt of its text} for `rows` of `source`, read through DocumentRows with the options the
    clean job recorded, so each row is the very document the job read there; {row: {"missing": why}} for
    a row that could not be read."""
    found: dict[int, dict[str, Any]] = {}
    why: tuple[str, str | None]  # what is said before a missing row's number and after it (None: no number)
    if remote.is_remote(source):
        return {row: {"missing": f"{source} is not read by inspect (a gs:// source)"} for row in rows}
    if not os.path.isabs(source) and not os.path.lexists(source):
        # Sources are recorded as clean was given them, so a relative one is relative to where clean ran.
        where = (
            f"{source} is not there from {os.getcwd()}: clean recorded it as given, relative to where it ran; "
            "run inspect from there"
        )
        return {row: {"missing": where} for row in rows}
    last = max(rows)
    try:
        reader = DocumentRows(source, ReadOptions.recorded(config))
        with open(_checked(source), "rb") as raw:
            for row, text, reason in reader.read(raw):
                if row in rows:
                    found[row] = {"excerpt": excerpt(text)} if text is not None else _no_text(source, row, reason)
                if row >= last:
                    break
    except DamagedInput as damage:
        why = (f"{source}: {damage.reason.replace('_', ' ')} before row ", f" ({damage})")
    except (OSError, ValueError) as error:
        why = (f"{source}: {error}", None)
    else:
        why = (f"{source} ends before row ", "")
    head, tail = why
    return {row: found.get(row) or {"missing": head if tail is None else f"{head}{row}{tail}"} for row in rows}


def _no_text(source: str, row: int, reason: str | None) -> dict[str, Any]:
    return {"missing": f"{source} holds no text at row {row} ({str(reason).replace('_', ' ')})"}


def _checked(source: str) -> str:
    """`source`, after its meta.json check when it is a shard of a committed directory (clean read it so);
    refused (UncommittedError, shown as the reason the text is not read) when its directory is one a dew job
    wrote and never committed, or whose meta.json is gone."""
    directory, name = os.path.split(source)
    if not os.path.exists(os.path.join(directory or ".", formats.META)):
        committed.refuse_uncommitted(directory or ".")  # a dew directory killed or stripped since: not data
        return source
    meta = formats.read_meta(directory or ".")
    for shard in (s for shards in meta.splits.values() for s in shards):
        if shard.name == name:
            return formats.verify_shard(directory or ".", shard, checksum=True, own_records=True)
    return source
