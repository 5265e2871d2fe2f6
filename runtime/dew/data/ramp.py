"""Batch ramps: the global batch growing over a run's first records, derived from the record count."""

from __future__ import annotations

import bisect
import dataclasses
import itertools

from dew.data import validate


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a ramp: every step in it reads `batch` records; it begins at global record `records`.

    Args:
        batch: The global batch of every step in the stage.
        records: The global record count at which the stage begins.

    Examples:
        >>> from dew.data import Stage
        >>> Stage(batch=8, records=0)
        Stage(batch=8, records=0)
    """

    batch: int
    records: int


@dataclasses.dataclass(frozen=True)
class Ramp:
    """Grows the global batch from `start` by `increment` until the dataset's own batch.

    Each increment comes once the records read since the previous one reach samples / increments.
    `start` and `increment` are global records a step (MaxText counts them per device: multiply its
    per_device values by the device count). The stage a run is in depends only on how many records it
    has read, which its saved data position already holds, so a resume continues the ramp exactly.

    Args:
        start: The global batch of the first stage, in records a step.
        increment: Records a step added at each later stage.
        samples: Records read over the whole ramp, spread evenly over its increments.

    Examples:
        >>> from dew.data import Ramp
        >>> Ramp(start=64, increment=64, samples=10_000)
        Ramp(start=64, increment=64, samples=10000)
    """

    start: int
    increment: int
    samples: int

    def __post_init__(self) -> None:
        validate.fields(self, positive=("start", "increment", "samples"))

    def stages(self, final: int) -> tuple[Stage, ...]:
        """Every stage up to `final`, the run's own global batch; the last stage runs on for ever."""
        if final < self.start:
            raise ValueError(f"ramp start {self.start} is above the final batch {final}")
        if (final - self.start) % self.increment:
            raise ValueError(
                f"the ramp from {self.start} to {final} is not a whole number of {self.increment}-record increments"
            )
        increments = (final - self.start) // self.increment
        stages, records = [], 0
        for i in range(increments):
            batch = self.start + i * self.increment
            stages.append(Stage(batch, records))
            # One integer ceiling, so stage boundaries are exact (no float rounding).
            records += batch * (-(-self.samples // (increments * batch)))
        stages.append(Stage(final, records))
        return tuple(stages)

    def steps_for(self, records: int, final: int) -> int:
        """The steps in which a run under this ramp reads `records` records."""
        return Schedule(self.stages(final)).steps_for(records)


class Schedule:
    """Step ↔ record arithmetic over a run's stages; a flat batch is one stage."""

    def __init__(self, stages: tuple[Stage, ...]) -> None:
        if not stages or stages[0].records != 0:
            raise ValueError("a batch schedule starts with a stage at record 0")
        self.stages = stages
        self._first_steps = [0]
        for prev, nxt in itertools.pairwise(stages):
            span = nxt.records - prev.records
            if span % prev.batch:
                raise ValueError(f"stage at record {prev.records} does not hold whole batches of {prev.batch}")
            self._first_steps.append(self._first_steps[-1] + span // prev.batch)

    @classmethod
    def flat(cls, batch: int) -> Schedule:
        return cls((Stage(batch, 0),))

    @property
    def final(self) -> int:
        return self.stages[-1].batch

    def step(self, step: int) -> tuple[int, int]:
        """(first global record, batch) of `step`."""
        i = bisect.bisect_right(self._first_steps, step) - 1
        stage = self.stages[i]
        return stage.records + (step - self._first_steps[i]) * stage.batch, stage.batch

    def step_at(self, records: int) -> int:
        """The step that begins at global record `records`, refusing a count inside a step."""
        i = bisect.bisect_right([s.records for s in self.stages], records) - 1
        stage = self.stages[i]
        offset, remainder = divmod(records - stage.records, stage.batch)
        if remainder:
            raise ValueError(
                f"record {records} falls inside a step of {stage.batch} records (stage from record "
                f"{stage.records}); a saved position always ends on a step, so this run's batch or ramp is not "
                "the checkpoint's: resume with the batch and ramp it was saved under"
            )
        return self._first_steps[i] + offset

    def stages_from(self, step: int) -> tuple[Stage, ...]:
        """The stages a run that is about to read `step` has still to read: the one holding it and those after."""
        return self.stages[bisect.bisect_right(self._first_steps, step) - 1 :]

    def steps_for(self, records: int) -> int:
        if records < 0:
            raise ValueError(f"records must be non-negative, got {records}")
        i = bisect.bisect_right([s.records for s in self.stages], records) - 1
        stage = self.stages[i]
        return self._first_steps[i] + -(-(records - stage.records) // stage.batch)

    def describe(self) -> list[list[int]]:
        return [[s.batch, s.records] for s in self.stages]
