"""What a committed directory or a mixture plan holds, as numbers: the library side of `dew-preprocess inspect`.

`summarize(path)` reads meta.json (and stats.json, the document index, a few records) and never the
whole corpus when the offline files are there; it imports neither Beam nor matplotlib, so a notebook
gets the same numbers the command prints.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from dew.data import formats, packing, remote
from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.extras import require
from dew.data.tokens.corpus import open_tokens
from dew.data.tokens.plan import MIXTURE_FORMAT, is_plan

_TRAIN = "train"
# What each job's stats.json counts in and out (tokenize, ingest-urls, images and caption-tokenize, decode-clips).
_BOOKS = (
    ("documents_in", "documents_written"),
    ("urls_in", "images_written"),
    ("images_in", "images_written"),
    ("videos_in", "videos_written"),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Summary:
    """One directory or plan. `lengths` (token corpora) is a histogram of document lengths in tokens
    by power-of-two buckets: (low, high, documents) with low <= length < high."""

    path: str
    format: str
    kind: str
    unit: str = ""
    splits: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    section: dict[str, Any] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    documents: dict[str, Any] = dataclasses.field(default_factory=dict)
    lengths: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    packing: dict[str, Any] = dataclasses.field(default_factory=dict)
    samples: list[Any] = dataclasses.field(default_factory=list)
    corpora: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summarize(path: str, *, seq_len: int | None = None, packing_bins: int = 8, samples: int = 3) -> Summary:
    """The summary of a committed directory of any kind, or of a mixture plan (mixture.json)."""
    path = path.rstrip("/")
    if is_plan(path):
        return _plan(path)
    meta = formats.read_meta(path)
    # A missing or truncated shard anywhere is what someone running inspect needs to hear about, and a
    # stat a shard finds it; checksums are read only for the shards that samples come from.
    formats.check_local_sizes(path, meta)
    splits = {
        split: {
            "shards": len(shards),
            "records": sum(s.records for s in shards),
            "units": sum(s.units for s in shards),
            "bytes": sum(s.bytes for s in shards),
        }
        for split, shards in meta.splits.items()
    }
    found: dict[str, Any] = {
        "path": path,
        "format": meta.format,
        "kind": meta.kind,
        "unit": type(meta.section).UNIT,
        "splits": splits,
        "section": meta.section.to_json(),
        "stats": _stats(path),
    }
    if meta.kind != "tokens":
        return Summary(**found, samples=_records(path, meta, samples))
    ends = _document_ends(path, meta)
    lengths = packing.lengths_of(ends)
    found["documents"] = _describe(lengths)
    found["lengths"] = _histogram(lengths)
    if seq_len is not None and lengths.size:
        plan = packing.plan_packing(lengths, seq_len + 1, packing_bins)
        found["packing"] = {"seq_len": seq_len, "bins": packing_bins, "windows": len(plan), "fill": 1 - plan.padding}
    return Summary(**found, samples=_documents(path, meta, ends, samples))


def _plan(path: str) -> Summary:
    data = json.loads(_read(path))
    if data.get("format") != MIXTURE_FORMAT:
        raise ValueError(f"{path} is not a {MIXTURE_FORMAT} plan")
    keep = ("path", "weight", "windows", "windows_available", "epochs", "tokens_available")
    budget = {key: data[key] for key in ("tokens", "seq_len", "packing_bins", "split", "windows", "tokenizer")}
    return Summary(
        path=path,
        format=MIXTURE_FORMAT,
        kind="mixture",
        section=budget,
        corpora=[{key: corpus[key] for key in keep} for corpus in data["corpora"]],
    )


def _read(path: str) -> bytes:
    if remote.is_remote(path):
        return remote.read_bytes(path)
    with open(path, "rb") as f:
        return f.read()


def _stats(path: str) -> dict[str, Any]:
    name = os.path.join(path, "stats.json")
    try:
        data = json.loads(_read(name))
    except FileNotFoundError:
        return {}  # a directory another tool wrote: the contract makes stats.json optional
    wanted = ("drop_examples", "files_unreadable")
    out = {key: data[key] for key in wanted if key in data}
    out["dropped"] = {reason: n for reason, n in data.get("dropped", {}).items() if n}
    for read, written in _BOOKS:
        if read in data and written in data:
            out["read"] = {"count": data[read], "unit": read.removesuffix("_in")}
            out["written"] = {"count": data[written], "unit": written.removesuffix("_written")}
            break
    for dropped in data.get("dropped_inputs", ()):  # decode-clips names each dropped video and its error
        example = {"path": dropped["path"], "error": dropped["error"]}
        out.setdefault("drop_examples", {}).setdefault(dropped["reason"], example)
    return out


def _document_ends(path: str, meta: formats.Meta) -> np.ndarray:
    """The train split's document ends: the offline index when it matches, else found by scanning for eos."""
    ends = packing.load_document_ends(formats.derived_path(path, _TRAIN, packing.DOCUMENTS), meta.fingerprint())
    if ends is not None:
        return ends
    tokens = open_tokens(path, split=_TRAIN)
    return packing.document_ends(len(tokens), lambda a, b: tokens[a:b], meta.tokens.eos_id)


def _describe(lengths: np.ndarray) -> dict[str, Any]:
    if not lengths.size:
        return {"count": 0}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99]).tolist()
    return {
        "count": int(lengths.size),
        "mean": float(lengths.mean()),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": int(lengths.max()),
    }


def _histogram(lengths: np.ndarray) -> list[tuple[int, int, int]]:
    if not lengths.size:
        return []
    top = int(np.ceil(np.log2(int(lengths.max()) + 1)))
    edges = [0, *(1 << k for k in range(top + 1))]
    counts, _ = np.histogram(lengths, bins=edges)
    return [(lo, hi, int(n)) for lo, hi, n in zip(edges[:-1], edges[1:], counts.tolist(), strict=True) if n]


def _documents(path: str, meta: formats.Meta, ends: np.ndarray, count: int) -> list[dict[str, Any]]:
    """The first documents of the train split, decoded when the corpus's tokenizer loads here."""
    tokens = open_tokens(path, split=_TRAIN)
    decode = _decoder(meta.tokens.tokenizer)
    out = []
    for start, end in zip([0, *ends[: count - 1].tolist()], ends[:count].tolist(), strict=False):
        ids = np.asarray(tokens[start:end])
        body = ids[ids != meta.tokens.eos_id] if meta.tokens.eos_id is not None else ids
        out.append({"tokens": int(ids.size), "text": decode(body) if decode else None, "ids": body[:32].tolist()})
    return out


def _decoder(name: str) -> Any:
    from dew.data.text import tokenizer_for

    try:
        tokenizer = tokenizer_for(name, local_files_only=True)
        tokenizer.decode([])  # an HF tokenizer loads on first use: load it here, where failing is allowed
        return tokenizer.decode
    except Exception:  # a hub tokenizer not cached here, or no transformers: ids are shown instead
        return None


def _records(path: str, meta: formats.Meta, count: int) -> list[dict[str, Any]]:
    """Field names and sizes of the first records of the first train shard (packed dicts of byte arrays)."""
    shards = meta.shards(_TRAIN) or next(iter(meta.splits.values()), ())
    if not shards or count < 1:
        return []
    local = formats.verify_shard(path, shards[0], checksum=True)
    ext = formats.parse_shard_name(shards[0].name)[3]
    if ext == "parquet":
        pq = require("pyarrow.parquet", for_what="inspecting parquet shards")
        rows = pq.ParquetFile(local).read_row_group(0).slice(0, count).to_pylist()
    else:
        from array_record.python.array_record_module import ArrayRecordReader

        reader = ArrayRecordReader(local, "readahead_buffer_size:0")
        try:
            wanted = min(count, reader.num_records())
            rows = [unpack_dict_of_byte_arrays(r, local) for r in reader.read(list(range(wanted)))]
        finally:
            reader.close()
    return [{"fields": {name: len(value) for name, value in row.items()}} for row in rows]
