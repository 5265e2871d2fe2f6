"""PackedTokens: whole documents packed into seq_len + 1 windows, over one corpus, a mixture or phases."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from dew.data import formats, locations, validate
from dew.data.config import json_list_argument
from dew.data.dataset import Dataset
from dew.data.mixture import Corpus, MixtureOrder, mixed_records
from dew.data.order import Order
from dew.data.packed_batch import Positions
from dew.data.packing import (
    DOCUMENTS,
    PackingPlan,
    lengths_of,
    load_document_ends,
    packing_name,
    plan_packing,
)
from dew.data.phases import DataPhase, PhasedOrder, check_path, check_phases
from dew.data.position import describe
from dew.data.records import describe_source
from dew.data.registry import datasets
from dew.data.spec import VAL_BATCHES, IndexedSpec, Tokenize
from dew.data.tokens.documents import PackedWindowSource, TokenDocumentSource
from dew.data.tokens.mixture_plan import MixturePlan, is_plan
from dew.data.tokens.opening import check_one_tokenizer, corpus_meta, open_tokens

_log = logging.getLogger("dew.data")


def packed_split(
    path: str, split: str, *, window: int, bins: int, field: str | None, positions: Positions = "document"
) -> PackedWindowSource:
    """A split's packed windows, from the corpus's offline document index and plan when they match it.

    A derived file counts only when stamped with the committed corpus's fingerprint; otherwise the
    runtime computes the same index and plan itself (plan_packing is a pure function of the lengths).
    """
    tokens = open_tokens(path, split=split, field=field)
    # Refused whatever derived files lie beside it: `pack` indexes such a corpus as one document a split,
    # and a start must read the same windows with the offline files as without them.
    if tokens.eos_id is None:
        raise ValueError(
            f"{path}: the corpus records no eos_id, so it has no document boundaries to pack at; "
            "tokenize it with an eos between documents (--pack), or read it with TokenWindows"
        )
    meta = corpus_meta(path)
    fingerprint = meta.fingerprint() if meta is not None else None
    ends = plan = None
    if fingerprint is not None:
        ends = load_document_ends(formats.derived_path(path, split, DOCUMENTS), fingerprint)
        plan = PackingPlan.load(formats.derived_path(path, split, packing_name(window, bins)), fingerprint)
    if ends is None or plan is None:
        # Without the offline files a start reads the corpus (to find each eos) and plans it, which
        # takes minutes on a large one: say so, and how to avoid it.
        _log.warning(
            "%s (%s): no offline %s for this corpus; computing it here. `dew-preprocess pack` writes it once.",
            path,
            split,
            "document index and packing plan" if ends is None else f"packing plan for window {window}, bins {bins}",
        )
        started = time.monotonic()
    documents = TokenDocumentSource(tokens, ends=ends)
    if plan is None:
        plan = plan_packing(lengths_of(documents.ends), window, bins)
        _log.warning("%s (%s): %d windows planned in %.1f s", path, split, len(plan), time.monotonic() - started)
    if len(plan) == 0:
        raise ValueError(f"{path}: split {split!r} holds no tokens to pack")
    return PackedWindowSource(documents, plan, positions=positions)


@datasets("packed_tokens")
@dataclasses.dataclass(frozen=True)
class PackedTokens(IndexedSpec):
    """Whole documents packed into seq_len + 1 windows (best fit over packing_bins open windows), with
    segment ids and positions.

    A batch is {"text", "text_segment_ids", "text_positions"}, each int32 [batch, seq_len + 1]; segment
    0 is padding. The plan is made over the whole corpus in file order (dew.data.packing), so a window
    is a fact about the corpus and the seed only orders the windows.

    path is one committed corpus or {path: weight}, where each weight is that corpus's share of the
    windows of a step, or a mixture plan (a `.json` file `dew-preprocess plan-mixture` wrote): its
    corpora at its weights, refused if a corpus changed since or seq_len and packing_bins are not the
    plan's. phases instead switches mixtures at step boundaries, each corpus continuing its order
    (path is then unset). records is the exact windows of a pass: one corpus's, a mixture's pass until
    every corpus was read once, a plan's token budget, or the first phase's. Validation reads each corpus's val
    split, or val_batches whole batches of windows off the end of its plan, mixed at the same weights.

    positions says what text_positions counts: "document" (the default) is each token's position inside
    its document, continuing through the pieces of a document longer than a window, as ChatMessages
    counts; "piece" restarts at 0 in every piece, for a model whose position table stops at the window
    (docs/tokens.md).

    Args:
        path: One committed corpus, a {corpus: weight} mixture, or a mixture plan's `.json`.
        phases: Mixtures by step (DataPhase), instead of path.
        seq_len: Ids a window predicts; a window holds seq_len + 1.
        val_batches: Whole batches of windows held out per corpus without a val split.
        field: The ArrayRecord field or parquet column holding the ids.
        packing_bins: Open windows the best-fit plan chooses among.
        positions: "document" or "piece": what text_positions counts from.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.PackedTokens(path={"corpora/web": 0.75, "corpora/code": 0.25}, seq_len=512)
        >>> spec.corpora
        ['corpora/code', 'corpora/web']
    """

    reads_in_process: ClassVar[bool] = True

    path: str | Mapping[str, float] | None = None
    phases: Annotated[tuple[DataPhase, ...], json_list_argument(DataPhase)] = ()
    seq_len: int = 256
    val_batches: int | None = VAL_BATCHES
    field: str | None = None
    packing_bins: int = 8
    positions: Positions = "document"

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("seq_len", "packing_bins"))
        if self.positions not in ("document", "piece"):
            raise ValueError(f"PackedTokens.positions counts per 'document' or per 'piece', got {self.positions!r}")
        if (self.path is None) == (not self.phases):
            raise ValueError("PackedTokens reads either path or phases: set exactly one of them")
        if self.path is not None:
            check_path("PackedTokens.path", self.path)  # a phase's checks, named as the user wrote them
        check_phases(self.phases)

    @property
    def corpora(self) -> list[str]:
        """Every corpus directory the run reads, in name order."""
        names = {name for phase in self._phases() for name in phase.weights}
        return sorted(names)

    def _phases(self) -> tuple[DataPhase, ...]:
        if self.phases:
            return self.phases
        path = self.path
        assert path is not None, "__post_init__ lets no spec through without path or phases"
        return (DataPhase(dict(MixturePlan.read(path).weights) if is_plan(path) else path),)

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        plan = MixturePlan.read(self.path) if is_plan(self.path) else None
        if plan is not None:
            plan.check(seq_len=self.seq_len, packing_bins=self.packing_bins)
        for name in self.corpora:
            if not locations.exists(name):
                raise FileNotFoundError(f"PackedTokens: no corpus at {name}")
        check_one_tokenizer(self.corpora)
        read = functools.cache(self._windows)
        phases = self._phases()
        first = _distinct([Corpus(name, read(name, batch)[0], weight) for name, weight in phases[0].weights.items()])
        order: Order
        if len(phases) == 1:
            order = MixtureOrder(first, self.seed)
        else:
            order = PhasedOrder(
                [
                    (
                        None if p.until_step is None else p.until_step * batch,
                        _distinct([Corpus(name, read(name, batch)[0], weight) for name, weight in p.weights.items()]),
                    )
                    for p in phases
                ],
                self.seed,
            )
        if plan is not None:
            records = plan.windows
        else:
            records = len(first[0].source) if len(first) == 1 else mixed_records(first)
        val_sources = [(name, read(name, batch)[1], weight) for name, weight in phases[0].weights.items()]
        val: Any = None
        held = [(name, source, weight) for name, source, weight in val_sources if source is not None]
        if held and len(held) < len(val_sources) and self.val_batches != 0:
            # Validating on the corpora that have a val split alone would score another mixture than the
            # one trained; leaving Dataset.val None would drop theirs without a word.
            missing = ", ".join(name for name, source, _ in val_sources if source is None)
            raise ValueError(
                f"{missing}: no val split, and val_batches=None holds none out of its train split, while the "
                "mixture's other corpora have one; set val_batches to a number of batches to hold out, or 0 "
                "to train without validation"
            )
        if len(held) == len(val_sources):
            val = MixtureOrder([Corpus(n, s, w) for n, s, w in held], None)
            val = val.corpora[0].source if len(val_sources) == 1 else val
        return self.global_dataset(batch, train=None, val=val, order=order, records=records)

    def _windows(self, path: str, batch: int) -> tuple[PackedWindowSource, PackedWindowSource | None]:
        """(training windows, validation windows or None) of one corpus."""
        window = self.seq_len + 1
        shape: dict[str, Any] = {
            "window": window,
            "bins": self.packing_bins,
            "field": self.field,
            "positions": self.positions,
        }
        train = packed_split(path, "train", **shape)
        held = self.held_out_split(corpus_meta(path), path=path)
        if held is not None:
            return train, packed_split(path, held, **shape)
        cut = self.held_out_tail(len(train), batch, path=path, what="packed windows")
        if cut is None:
            return train, None
        return (
            PackedWindowSource(train.documents, train.plan, count=cut, positions=self.positions),
            PackedWindowSource(train.documents, train.plan, first=cut, positions=self.positions),
        )


def _distinct(corpora: list[Corpus]) -> list[Corpus]:
    """Refuses one corpus named twice (two spellings of a path, or a copy): a mixture shuffles a corpus by
    what it holds, so both names would read every window in step, twice in the same batches."""
    seen: dict[str, str] = {}
    for corpus in corpora:
        content = describe(describe_source(corpus.source))
        if content in seen:
            raise ValueError(
                f"PackedTokens: {seen[content]} and {corpus.name} are one corpus (they hold the same windows), "
                "which the mixture would read twice in step; name it once, with the sum of the two weights"
            )
        seen[content] = corpus.name
    return corpora
