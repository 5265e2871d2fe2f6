"""Data phases: a run that switches corpora or mixtures at step boundaries (the reference page's
`dew.data.providers.phased_dataset`).

Each DataPhase names a corpus or {corpus: weight} mixture and the step it ends before; the last runs
on. Every phase's mixture continues each corpus's shuffled order where the earlier phases left it
(PhasedStream, dew.data.phases.PhasedOrder), so no window repeats before its corpus's epoch ends. A
resume checks the phases already read and accepts phases appended or moved past its step.
`phased_dataset` is the same Dataset as `PackedTokens(phases=...).load(batch=)`, spelled as a function.
"""

from __future__ import annotations

from collections.abc import Sequence

from dew.data.dataset import Dataset
from dew.data.loading import Loading
from dew.data.packed_batch import Positions
from dew.data.phases import DataPhase, PhasedOrder, PhasedStream, check_phases
from dew.data.spec import VAL_BATCHES

__all__ = ["DataPhase", "PhasedOrder", "PhasedStream", "check_phases", "phased_dataset"]


def phased_dataset(
    phases: Sequence[DataPhase],
    *,
    batch: int,
    seq_len: int = 256,
    packing_bins: int = 8,
    val_batches: int | None = VAL_BATCHES,
    positions: Positions = "document",
    seed: int = 0,
    loading: Loading = Loading(),
) -> Dataset:
    """Packed windows of `phases` in turn, `batch` windows a step; validation reads the first phase's."""
    from dew.data.tokens.packed import PackedTokens

    spec = PackedTokens(
        phases=tuple(phases),
        seq_len=seq_len,
        packing_bins=packing_bins,
        val_batches=val_batches,
        positions=positions,
        seed=seed,
        loading=loading,
    )
    return spec.load(batch=batch)
