"""Data phases: what a run reads changing at step boundaries, every corpus continuing its own order.

A phase is a mixture of corpora read until a global record count. Each corpus's shuffled order runs
across the phases: a phase starts every corpus past the records earlier phases took from it, so no
record repeats before its corpus's epoch ends. Which record global record k is stays arithmetic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import validate
from dew.data.mixture import Corpus, MixtureOrder, match_corpora, mixture_changes
from dew.data.order import BaseOrder


@dataclasses.dataclass(frozen=True)
class DataPhase:
    """One phase of a run's data: a corpus path or {path: weight} mixture, and the step it ends before.

    until_step counts steps of the full batch from the run's start; the last phase has None and runs
    on to the end.

    Args:
        path: A committed corpus path, or a {path: weight} mixture of them.
        until_step: The step this phase ends before; None for the last phase.

    Examples:
        >>> from dew.data import DataPhase
        >>> DataPhase(path={"web": 0.7, "code": 0.3}, until_step=1000)
        DataPhase(path={'web': 0.7, 'code': 0.3}, until_step=1000)
    """

    path: str | Mapping[str, float]
    until_step: int | None = None

    def __post_init__(self) -> None:
        check_path("DataPhase.path", self.path)
        validate.positive_int("DataPhase.until_step", self.until_step, optional=True)

    @property
    def weights(self) -> dict[str, float]:
        return {self.path: 1.0} if isinstance(self.path, str) else dict(self.path)


def check_path(where: str, path: object) -> None:
    """Refuses what is neither a non-empty corpus path nor a good {path: weight} mixture, naming the
    field as its owner spells it (`where`)."""
    if isinstance(path, str):
        if not path:
            raise ValueError(f"{where} is empty")
    elif isinstance(path, Mapping):
        validate.mixture(where, path)
    else:
        raise TypeError(f"{where} is a path or a {{path: weight}} mapping, got {path!r}")


def check_phases(phases: Sequence[DataPhase]) -> None:
    """Steps rise strictly and only the last phase runs on."""
    for i, phase in enumerate(phases):
        last = i == len(phases) - 1
        if last and phase.until_step is not None:
            raise ValueError(f"phases[{i}] is the last phase, which runs to the end: its until_step must be None")
        if not last and phase.until_step is None:
            raise ValueError(f"phases[{i}] needs an until_step: only the last phase runs to the end")
        # Every phase but the last was checked above to have an until_step.
        previous = phases[i - 1].until_step if i else None
        if not last and previous is not None and phase.until_step is not None and phase.until_step <= previous:
            raise ValueError(
                f"phases[{i}].until_step {phase.until_step} does not come after phases[{i - 1}]'s "
                f"{phases[i - 1].until_step}"
            )


class PhasedOrder(BaseOrder):
    """Mixtures read one after another, each until a global record count, the last running on.

    Each corpus's shuffled order runs on across the phases: a phase starts every corpus past the
    records earlier phases took from it, matched by name, so no record repeats before its corpus's
    epoch ends. A resume accepts phases appended, or the current phase's end moved past the records
    already read; any other change to the list is refused, naming the phase.

    Args:
        phases: (until, corpora) per phase: the global record the phase ends before (None for the
            last), and its corpora, each at offset 0.
        seed: The seed of every corpus's shuffle.

    Examples:
        >>> import numpy as np
        >>> from dew.data import Corpus, PhasedStream
        >>> web, code = Corpus("web", list(range(10)), 1.0), Corpus("code", list(range(100, 110)), 1.0)
        >>> order = PhasedStream([(4, [web]), (None, [web, code])], seed=0)
        >>> [p["reads"]["corpora"][0]["offset"] for p in order.describe()["phases"]]  # web goes on past 4
        [0, 4]
        >>> int(order.read(np.arange(4)).max()) < 100  # the first phase reads web alone
        True
    """

    def __init__(self, phases: Sequence[tuple[int | None, Sequence[Corpus]]], seed: int) -> None:
        if not phases:
            raise ValueError("a phased order needs at least one phase")
        taken: dict[str, int] = {}
        self.orders: list[MixtureOrder] = []
        self.bounds: list[int] = []  # each phase's first global record
        start = 0
        for i, (until, corpora) in enumerate(phases):
            last = i == len(phases) - 1
            if (until is None) != last or (until is not None and until <= start):
                raise ValueError(f"phase {i} ends at record {until}, not after its start at {start}")
            order = MixtureOrder([dataclasses.replace(c, offset=taken.get(c.name, 0)) for c in corpora], seed)
            self.orders.append(order)
            self.bounds.append(start)
            if until is not None:
                for corpus, count in zip(order.corpora, order.counts(until - start).tolist(), strict=True):
                    taken[corpus.name] = taken.get(corpus.name, 0) + count
                start = until
        self.ends = [*self.bounds[1:], None]

    def read(self, ks: np.ndarray) -> Any:
        ks = np.asarray(ks, dtype=np.int64)
        phase = np.searchsorted(np.array(self.bounds), ks, side="right") - 1
        present = np.unique(phase).tolist()
        if len(present) == 1:
            p = present[0]
            return self.orders[p].read(ks - self.bounds[p])
        # A step across a phase boundary: read each side from its own mixture, rows back in place.
        from dew.data.mixture import _scatter

        parts = [(phase == p, self.orders[p].read(ks[phase == p] - self.bounds[p])) for p in present]
        return _scatter(parts, len(ks))

    def describe(self) -> dict[str, Any]:
        return {
            "order": "phased",
            "phases": [
                {"until": end, "reads": order.describe()} for end, order in zip(self.ends, self.orders, strict=True)
            ],
        }

    def record_tokens(self, ks: np.ndarray) -> dict[str, int]:
        ks = np.asarray(ks, dtype=np.int64)
        phase = np.searchsorted(np.array(self.bounds), ks, side="right") - 1
        out: dict[str, int] = {}
        for p in np.unique(phase).tolist():
            for name, count in self.orders[p].record_tokens(ks[phase == p] - self.bounds[p]).items():
                out[name] = out.get(name, 0) + count
        return out

    def renamed_corpora(self, saved: Mapping[str, Any]) -> dict[str, str]:
        before = saved_phases(saved)
        return {} if before is None else renamed_in_phases(before, self.describe()["phases"])

    def check_resume(self, saved: Mapping[str, Any], records: int) -> None:
        """Accepts phases appended, or the current phase's end moved past `records`; refuses the rest by name."""
        before = saved_phases(saved)
        if before is None:
            super().check_resume(saved, records)
            return
        check_phases_resume(before, self.describe()["phases"], records)


def saved_phases(saved: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The phases a saved description holds, each {"until", "reads"}: a phased order's own, a mixture's as
    its one phase running on; None for any other order."""
    if saved.get("order") == "mixture":
        return [{"until": None, "reads": saved}]
    if saved.get("order") == "phased":
        return list(saved.get("phases", []))
    return None


def renamed_in_phases(saved: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each saved corpus's name in our phases, phase by phase (match_corpora)."""
    out: dict[str, str] = {}
    for before, now in zip(saved, ours, strict=False):
        out.update(match_corpora(before["reads"], now["reads"]))
    return out


def check_phases_resume(saved: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]], records: int) -> None:
    """Refuses, by phase, a resume at `records` whose phases (each {"until", "reads"}) read other records
    than the saved ones did before it. Phases appended, or the current phase's end moved anywhere not
    before `records`, are accepted. A phase that ended exactly at `records` is the current one: the run
    read all of it and nothing after it, so its end may move on too."""
    start = 0
    for i, before in enumerate(saved):
        if start >= records:
            break
        if i >= len(ours):
            raise ValueError(f"the checkpoint has read phase {i}, which this run's phases no longer hold")
        changes = mixture_changes(before["reads"], ours[i]["reads"])
        if changes:
            raise ValueError(f"phase {i} of the checkpoint's data was changed: {'; '.join(changes)}")
        end, now = before["until"], ours[i]["until"]
        if end is not None and end < records:
            if now != end:
                raise ValueError(f"phase {i} ended at record {end} in the checkpoint, and now ends at {now}")
        elif now is not None and now < records:
            raise ValueError(f"phase {i} now ends at record {now}, before the checkpoint's record {records}")
        if end is None:
            break
        start = end


# The reference page's name for the phased order: its describe() is what a resume compares.
PhasedStream = PhasedOrder
