"""PlanMixture: corpora, weights and a token budget → how many windows each corpus gives and how many epochs that is.

A window is one packed seq_len + 1 record, the unit PackedTokens and mixture interleave, so the
plan speaks in windows: the budget buys ceil(tokens / seq_len) of them (each window trains seq_len
next-token predictions), split between corpora as the run's mixture order splits them (run_shares),
and a corpus's epochs are its share over the windows its train split packs into. Corpora from
different tokenizers are refused: their ids mean different tokens.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data import formats, packing
from dew.data.formats import Meta
from dew.data.mixture import Corpus, MixtureOrder
from dew.data.tokens.mixture_plan import MIXTURE_FORMAT
from dew.data.tokens.opening import check_same_tokenizer
from dew.preprocess import files
from dew.preprocess.pack import committed_document_ends
from dew.preprocess.quiet import user_error


def read_corpus_meta(directory: str) -> Meta:
    """A committed token corpus's meta.json, local or gs://, refusing an uncommitted directory by path
    and a directory of another kind by what it holds."""
    path = files.join(directory, formats.META)
    if not files.exists(path):
        raise FileNotFoundError(f"{directory} has no {formats.META}: it is not a committed corpus; run tokenize first")
    meta = Meta.from_json(json.loads(files.read_bytes(path)), where=path)
    meta.expect("tokens", directory)
    return meta


@dataclasses.dataclass(frozen=True, kw_only=True)
class MixtureRequest:
    corpora: Mapping[str, float]
    tokens: int
    seq_len: int
    packing_bins: int = 8
    split: str = "train"

    def __post_init__(self) -> None:
        if not self.corpora:
            raise ValueError("a mixture needs at least one corpus")
        for path, weight in self.corpora.items():
            if not weight > 0 or not math.isfinite(weight):
                raise ValueError(f"corpus {path} has weight {weight}; weights must be positive")
        if self.tokens < 1 or self.seq_len < 1 or self.packing_bins < 1:
            raise ValueError("tokens, seq_len and packing_bins must be positive")
        run_shares(0, list(self.corpora.values()))  # refuses here weights the run could not mix


def corpus_windows(directory: str, meta: Meta, split: str, seq_len: int, bins: int) -> int:
    """Windows `split` packs into: the offline plan when it matches the corpus, else planned here."""
    fingerprint = meta.fingerprint()
    work = tempfile.mkdtemp(prefix="dew-mixture-")
    try:
        name = formats.derived_path(directory, split, packing.packing_name(seq_len + 1, bins))
        if files.exists(name):
            offline = packing.PackingPlan.load(files.download(name, work), fingerprint)
            if offline is not None:
                return len(offline)
        index = formats.derived_path(directory, split, packing.DOCUMENTS)
        ends = packing.load_document_ends(files.download(index, work), fingerprint) if files.exists(index) else None
        if ends is None:
            ends = _scan_ends(directory, meta, split, work)
        return len(packing.plan_packing(packing.lengths_of(ends), seq_len + 1, bins))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _scan_ends(directory: str, meta: Meta, split: str, work: str) -> np.ndarray:
    found, seen = [], 0
    for shard in meta.shards(split):
        tokens, local = committed_document_ends(directory, split, shard, meta.tokens, work)
        found.append(local + seen)
        seen += tokens
    ends = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    if seen and (ends.size == 0 or ends[-1] != seen):
        ends = np.append(ends, np.int64(seen))
    return ends


def run_shares(total: int, weights: Sequence[float]) -> list[int]:
    """The windows each corpus gives the first `total` records of the run over these weights (in the
    plan's corpus order), from the run's own mixture order: its weights are exact to a hundredth of the
    smallest and its layout is the quota method (dew.data.mixture), so an exact split of `total` by
    weight differs from what the run reads (0.7/0.3 over 12,345 windows: 8,642 planned, 8,638 read)."""
    order = MixtureOrder([Corpus(str(i), [0], weight) for i, weight in enumerate(weights)], seed=0)
    return [int(n) for n in order.counts(total)]


# Repeating data beyond ~4 epochs buys less and less, and past ~16 next to nothing (Muennighoff et al.,
# "Scaling Data-Constrained Language Models", 2023): a plan that repeats a corpus more is almost surely
# a budget or a weight typed wrong, so the launcher says so.
MANY_EPOCHS = 16


def epoch_warnings(plan: dict[str, Any]) -> list[str]:
    """One line for each corpus the plan repeats more than MANY_EPOCHS times."""
    out = []
    for corpus in plan["corpora"]:
        if corpus["epochs"] > MANY_EPOCHS:
            out.append(
                f"warning: {corpus['path']}: the plan reads it {corpus['epochs']:,.0f} times over "
                f"({corpus['windows']:,} windows from the {corpus['windows_available']:,} its split packs into); "
                f"past ~{MANY_EPOCHS} epochs repeated data teaches next to nothing: check --tokens and the weight, "
                "or add data"
            )
    return out


def mixture_plan(request: MixtureRequest, found: Sequence[tuple[str, Meta, int]]) -> dict[str, Any]:
    """The plan JSON from each corpus's (path, meta, windows available)."""
    by_path = {path: (meta, windows) for path, meta, windows in found}
    check_same_tokenizer({path: meta for path, (meta, _) in by_path.items()})
    paths = sorted(request.corpora)
    total = math.ceil(request.tokens / request.seq_len)
    weight_sum = sum(request.corpora.values())
    # The weights as the plan records them and the run reads them back, so the shares are the run's.
    shares = run_shares(total, [request.corpora[p] / weight_sum for p in paths])
    corpora = []
    for path, share in zip(paths, shares, strict=True):
        meta, available = by_path[path]
        if available == 0 and share:
            raise ValueError(f"{path}: split {request.split!r} packs into no windows, yet the mixture draws {share}")
        corpora.append(
            {
                "path": path,
                "weight": request.corpora[path] / weight_sum,
                "windows": share,
                "windows_available": available,
                "epochs": share / available if available else 0.0,
                "tokens_available": sum(s.units for s in meta.shards(request.split)),
                "fingerprint": meta.fingerprint(),
            }
        )
    first = by_path[paths[0]][0]
    return {
        "format": MIXTURE_FORMAT,
        "tokens": request.tokens,
        "seq_len": request.seq_len,
        "packing_bins": request.packing_bins,
        "split": request.split,
        "windows": total,
        "tokenizer": first.tokens.tokenizer,
        "tokenizer_hash": first.tokens.tokenizer_hash,
        "corpora": corpora,
    }


class _Measure(beam.DoFn):
    def __init__(self, request: MixtureRequest) -> None:
        self.request = request

    def process(self, path: str) -> Iterator[tuple[str, Meta, int]]:
        r = self.request
        try:
            meta = read_corpus_meta(path)
            windows = corpus_windows(path, meta, r.split, r.seq_len, r.packing_bins)
        except (formats.DamagedError, formats.WrongKindError) as error:  # a damaged plan or index file
            raise user_error(error) from None
        yield path, meta, windows


class PlanMixture(beam.PTransform):
    """A pipeline root → one mixture plan dict, each corpus measured on its own worker."""

    def __init__(self, request: MixtureRequest, label: str | None = None) -> None:
        super().__init__(label)
        self.request = request

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            root
            | "Corpora" >> beam.Create(sorted(self.request.corpora))
            | "Measure" >> beam.ParDo(_Measure(self.request))
            | "All" >> beam.combiners.ToList()
            | "Plan" >> beam.Map(lambda found: mixture_plan(self.request, found))
        )


def write_plan(path: str, plan: Mapping[str, Any]) -> None:
    """Writes the plan JSON atomically, local or gs://."""
    data = json.dumps(plan, indent=1, sort_keys=True).encode()
    if files.is_local(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        temporary = f"{path}.tmp-{os.getpid()}"
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    else:
        files.write_atomic(path, data, path.rsplit("/", 1)[0])
