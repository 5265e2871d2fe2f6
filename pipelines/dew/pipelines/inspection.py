"""What a committed directory or a mixture plan holds, as numbers: the library side of `dew-preprocess inspect`.

`summarize(path)` reads meta.json (and stats.json, the document index, a few records, and for a documents
directory the document each duplicate example was removed for) and never the whole corpus when the
offline files are there; it imports neither Beam nor an image stack (Pillow, to
read image sizes, loads on use), so a notebook gets the same numbers the command prints.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from dew.data import formats, packing, remote
from dew.data.sections import DocumentsSection
from dew.data.tokens.mixture_plan import MIXTURE_FORMAT, is_plan
from dew.data.tokens.opening import open_tokens
from dew.pipelines.inspect_duplicates import explain
from dew.pipelines.inspect_removals import removal_examples
from dew.pipelines.inspect_sample import Sample, image_sides, read_sample, text_of

_TRAIN = "train"
# Counters named like books that are not: a job's shard tally.
_NOT_BOOKS = ("shards_written", "records_written")
# Records read for the sample statistics of a packed-dict directory (field sizes, caption lengths).
SAMPLE_RECORDS = 256
_FILL_BUCKETS = 20
# Ids of a document read for its sample: far more than the lines of text a sample shows.
_SHOWN_IDS = 1 << 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class Summary:
    """One directory or plan. `lengths` (token corpora) is a histogram of document lengths in tokens
    by power-of-two buckets: (low, high, documents) with low <= length < high, every bucket from the
    shortest document's to the longest's. `sample` (packed-dict directories) describes a bounded sample
    of records: which shard and records, each field's size and the captions' lengths in characters."""

    path: str
    format: str
    kind: str
    unit: str = ""
    splits: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    section: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    documents: dict[str, Any] = dataclasses.field(default_factory=dict)
    lengths: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    packing: dict[str, Any] = dataclasses.field(default_factory=dict)
    samples: list[Any] = dataclasses.field(default_factory=list)
    sample: dict[str, Any] = dataclasses.field(default_factory=dict)
    corpora: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def summarize(
    path: str,
    *,
    seq_len: int | None = None,
    packing_bins: int = 8,
    samples: int = 3,
    sample: int = SAMPLE_RECORDS,
    removals: int = 3,
) -> Summary:
    """The summary of a committed directory of any kind, or of a mixture plan (mixture.json).

    `samples` records are shown; `sample` records at most (and 64 MiB) are read for a packed-dict
    directory's field statistics. The packing fill is at `seq_len`, else at the train split's first
    plan written offline (a corpus tokenized with --pack). A documents directory's removals are
    explained, up to `removals` a reason (the removed text, and the kept document of a duplicate)."""
    if removals < 1:
        raise ValueError(f"removals must be at least 1, got {removals}: a reason's first example is always shown")
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
        "config": dict(meta.config),
        "stats": _stats(path),
    }
    # A directory without stats.json (another tool's) has no examples to explain, nor any drop reason.
    if meta.kind == DocumentsSection.KIND and "drop_examples" in found["stats"]:
        _explain_removals(path, meta, found["stats"], removals)
    found["stats"].pop("removal_tables", None)
    if meta.kind != "tokens":
        read = read_sample(path, meta, max(sample, samples))
        if read is None:
            return Summary(**found)
        shown = [{"fields": {k: len(v) for k, v in row.items()}, "caption": text_of(row)} for row in read.rows]
        return Summary(**found, samples=shown[:samples], sample=_sample_stats(read))
    if meta.tokens.eos_id is None:
        # No boundaries in the stream: no lengths to count nor a packing PackedTokens would read (it refuses
        # such a corpus), and its samples are the head of the stream, read no further than shown.
        head = np.array([found["splits"].get(_TRAIN, {}).get("units", 0)], dtype=np.int64)
        return Summary(**found, samples=_documents(path, meta, head[head > 0], min(samples, 1)))
    ends = _document_ends(path, meta)
    lengths = packing.lengths_of(ends)
    found["documents"] = _describe(lengths)
    found["lengths"] = _histogram(lengths)
    if lengths.size:
        found["packing"] = _packing(path, meta, lengths, seq_len, packing_bins, found["stats"])
    return Summary(**found, samples=_documents(path, meta, ends, samples))


def _explain_removals(path: str, meta: formats.Meta, stats: dict[str, Any], per_reason: int) -> None:
    """A documents directory's removals, `per_reason` a reason from its removal tables, each explained
    (the removed text and, for a duplicate, the kept document): stats["removal_examples"], the first of
    each also its drop example, and stats["removal_problems"] when a table was not read."""
    examples, problems = removal_examples(path, meta, stats, per_reason)
    listed = [(reason, example) for reason, found in examples.items() for example in found]
    explained = explain(path, meta, [example for _, example in listed])
    stats["removal_examples"] = {reason: [] for reason in examples}
    for (reason, _), example in zip(listed, explained, strict=True):
        stats["removal_examples"][reason].append(example)
    for reason, found in stats["removal_examples"].items():
        stats["drop_examples"][reason] = found[0]
    if problems:
        stats["removal_problems"] = problems


def _packing(
    path: str, meta: formats.Meta, lengths: np.ndarray, seq_len: int | None, bins: int, stats: dict[str, Any]
) -> dict[str, Any]:
    """Windows and fill of the train split's packing, with the windows counted by how full they are."""
    if seq_len is None:
        offline = [p for p in stats.get("packing", ()) if p["split"] == _TRAIN]
        if not offline:
            return {}
        seq_len, bins = offline[0]["seq_len"], offline[0]["bins"]
    name = formats.derived_path(path, _TRAIN, packing.packing_name(seq_len + 1, bins))
    plan = packing.PackingPlan.load(name, meta.fingerprint())
    source = "offline plan" if plan is not None else "planned here"
    if plan is None:
        plan = packing.plan_packing(lengths, seq_len + 1, bins)
    filled = np.add.reduceat(plan.lengths, plan.offsets[:-1]) / plan.window if len(plan) else np.zeros(0)
    counts, edges = np.histogram(filled, bins=_FILL_BUCKETS, range=(0.0, 1.0))
    return {
        "seq_len": seq_len,
        "bins": bins,
        "windows": len(plan),
        "fill": 1 - plan.padding,
        "source": source,
        "fill_histogram": [
            (float(lo), float(hi), int(n)) for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True)
        ],
        "full_windows": int(np.sum(filled >= 1.0)),
    }


def _sample_stats(read: Sample) -> dict[str, Any]:
    sizes = {name: np.array([len(row.get(name, b"")) for row in read.rows]) for name in read.rows[0]}
    out: dict[str, Any] = {
        "shard": read.shard,
        "records": len(read.rows),
        "of": read.of,
        "fields": {name: _describe(values) for name, values in sizes.items()},
    }
    captions = [text for row in read.rows if (text := text_of(row)) is not None]
    if captions:
        chars = np.array([len(text) for text in captions])
        out["caption_chars"] = {**_describe(chars), "histogram": _histogram(chars)}
    if "image" in read.rows[0]:
        sides = [s for row in read.rows if (s := image_sides(row["image"])) is not None]
        if sides:
            out["image_width"] = _describe(np.array([w for w, _ in sides]))
            out["image_height"] = _describe(np.array([h for _, h in sides]))
    return out


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
        corpora=[
            {**{key: corpus[key] for key in keep}, "state": _planned(corpus["path"], corpus["fingerprint"])}
            for corpus in data["corpora"]
        ],
    )


def _planned(path: str, fingerprint: str) -> str:
    """Whether a plan's corpus still holds what was planned: its numbers describe it only then, and a run
    over the plan refuses it otherwise."""
    try:
        meta = formats.read_meta(path, kind="tokens")
    except (OSError, ValueError) as error:
        return f"not read: {error}"
    if meta.fingerprint() != fingerprint:
        return "changed since the plan (its fingerprint differs): its numbers are stale, plan again"
    return "as planned"


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
    kept = ("files_unreadable", "packing", "removal_tables")
    out: dict[str, Any] = {key: data[key] for key in kept if key in data}
    out["dropped"] = {reason: n for reason, n in data.get("dropped", {}).items() if n}
    out.update(_books(data))
    examples = {reason: dict(example) for reason, example in data.get("drop_examples", {}).items()}
    # Any list of records naming a reason (decode-clips' dropped_inputs, every job's damaged_inputs)
    # gives the first example of a reason that has none yet, whichever job wrote it.
    for value in data.values():
        if isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict) and "reason" in entry and "path" in entry:
                    example = {key: entry[key] for key in ("path", "row", "error") if key in entry}
                    examples.setdefault(entry["reason"], example)
    if examples:
        out["drop_examples"] = dict(sorted(examples.items()))
    return out


def _books(data: dict[str, Any]) -> dict[str, Any]:
    """What the job read and wrote: the `<unit>_in` count and the `<unit>_written` one, of the same unit
    where the job counts it (else the first written count: ingest-urls reads urls and writes images)."""
    counts = {key: value for key, value in data.items() if isinstance(value, int) and not isinstance(value, bool)}
    read = next((key for key in counts if key.endswith("_in")), None)
    written = [key for key in counts if key.endswith("_written") and key not in _NOT_BOOKS]
    if read is None or not written:
        return {}
    unit = read.removesuffix("_in")
    chosen = f"{unit}_written" if f"{unit}_written" in written else written[0]
    return {
        "read": {"count": counts[read], "unit": unit},
        "written": {"count": counts[chosen], "unit": chosen.removesuffix("_written")},
    }


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
    used = np.flatnonzero(counts)
    first, last = int(used[0]), int(used[-1]) + 1
    return [
        (lo, hi, int(n))
        for lo, hi, n in zip(edges[first:last], edges[first + 1 : last + 1], counts[first:last].tolist(), strict=True)
    ]


def _documents(path: str, meta: formats.Meta, ends: np.ndarray, count: int) -> list[dict[str, Any]]:
    """The first documents of the train split, decoded when the corpus's tokenizer loads here."""
    tokens = open_tokens(path, split=_TRAIN)
    decode = _decoder(meta.tokens.tokenizer)
    out = []
    for start, end in zip([0, *ends[: count - 1].tolist()], ends[:count].tolist(), strict=False):
        # A sample shows a few lines of text: a long document (or a stream without an eos) is read only
        # as far as that, never whole into memory.
        ids = np.asarray(tokens[start : min(end, start + _SHOWN_IDS)])
        body = ids[ids != meta.tokens.eos_id] if meta.tokens.eos_id is not None else ids
        out.append({"tokens": end - start, "text": decode(body) if decode else None, "ids": body[:32].tolist()})
    return out


def _decoder(name: str) -> Any:
    from dew.data.text import tokenizer_for

    try:
        tokenizer = tokenizer_for(name, local_files_only=True)
        tokenizer.decode([])  # an HF tokenizer loads on first use: load it here, where failing is allowed
        return tokenizer.decode
    except Exception:  # a hub tokenizer not cached here, or no transformers: ids are shown instead
        return None
