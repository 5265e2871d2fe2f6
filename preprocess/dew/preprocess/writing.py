"""The writer skeleton every kind's job runs: plan → split → shard counts → route → write shards → stats → commit.

A kind brings what is its own: the records, each keyed by where it came from and carrying its draw
(an integer in [0, DRAW) hashed from that place), the shard format, and the stats.json its books make.
WriteDrawn does the rest, the same way for every kind:

- split: a record is `val` when its draw is under val_fraction, else `train` (split_of), so adding inputs
  never moves one from train to val;
- shard counts: each split's amount (bytes, or rows) over the amount a shard holds, or `num_shards`
  for train (Sharding; sized_count refuses a count a shard name cannot hold);
- route: within its split, a record goes to the shard its draw falls in, so shards fill evenly and
  their bytes never depend on which worker made what, or when;
- write: WriteShards (every shard of the planned -of-N, empty ones too) or the kind's own writer;
- stats and commit: meta.json's envelope from the shards in order, the kind's stats (which refuse
  unbalanced books, or raise TooManyDropsError to commit nothing, clearing the output), then
  stats.json and meta.json last (dew.preprocess.commit).

A kind whose shards are planned another way (token corpora cut at exact token counts) uses the second
half alone: build_meta and commit_checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import apache_beam as beam

from dew.data.formats import Meta, Shard
from dew.data.sections import Section
from dew.preprocess import commit, progress
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import DRAW, TRAIN, VAL
from dew.preprocess.job_errors import TooManyDropsError
from dew.preprocess.parked import Parked
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import WRITE_PHASE, WriteShards, sized_count

ShardId = tuple[str, int]
# The kind's stats.json from the meta about to commit and its side inputs, in the order given.
Finish = Callable[..., dict[str, Any]]
WRITE, COMMIT = WRITE_PHASE, "commit"


def split_of(draw: int, val_fraction: float) -> tuple[str, float]:
    """(split, where in the split in [0, 1)) of a record's draw."""
    at = draw / DRAW
    if at < val_fraction:
        return VAL, at / val_fraction
    return TRAIN, (at - val_fraction) / (1.0 - val_fraction)


def shard_of(draw: int, val_fraction: float, counts: Mapping[str, int]) -> ShardId:
    """The (split, shard index) a record of this draw goes to."""
    split, at = split_of(draw, val_fraction)
    return split, min(counts[split] - 1, int(at * counts[split]))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sharding:
    """How a kind's splits become shard counts: each split's amount (bytes, or rows) over `per_shard`, or
    `num_shards` for train; `flag` and `unit` name what set per_shard, for the refusal of too many."""

    val_fraction: float = 0.0
    per_shard: int
    num_shards: int | None = None
    flag: str = "--shard_size_mb"
    unit: str = "bytes"

    def counts(self, amounts: Iterable[tuple[str, int]]) -> dict[str, int]:
        """Each split's shard count; train and (with a val_fraction) val always get one."""
        total = {TRAIN: 0, **({VAL: 0} if self.val_fraction else {})}
        total.update(amounts)
        return {
            split: self.num_shards
            if split == TRAIN and self.num_shards is not None
            else sized_count(split, amount, self.per_shard, flag=self.flag, unit=self.unit)
            for split, amount in total.items()
        }


def build_meta(
    shards: Iterable[tuple[str, Shard]], section: Section, counts: Mapping[str, int], identity: JobIdentity
) -> Meta:
    """meta.json's envelope: the section, every split's shards in index order (each -of-N there once),
    the job's config and the fingerprint of its inputs."""
    return Meta(
        section=section,
        splits=commit.ordered_shards(shards, counts),
        config=dict(identity.config),
        inputs=identity.inputs,
    )


def commit_checked(output: str, meta: Meta, finish: Finish, *side: Any, claim: JobIdentity) -> Meta:
    """Commits `meta` with the stats `finish(meta, *side)` makes, while `claim` (this run) holds the output;
    a TooManyDropsError from it clears the output instead, since the same inputs and config would fail
    the same way: nothing is worth resuming, and the rerun with corrected flags needs no --overwrite."""
    progress.announce_total(COMMIT, 1)
    try:
        stats = finish(meta, *side)
    except TooManyDropsError:
        if commit.holds_claim(output, claim):  # another run's output is not this one's to clear
            commit.clear_output(output)
        raise
    commit.commit_corpus(output, meta, stats, claim)
    progress.Tally(COMMIT).add()
    return meta


class WriteDrawn(beam.PTransform):
    """PCollection[(key, (record, draw))] → the committed directory `output`; yields its Meta.

    amount: how much of a shard a record fills, in sharding's unit (its bytes, or 1 for rows);
    write: the kind's own shard writer, routed ((split, j), (key, record)) and the counts side input →
    (split, Shard), instead of WriteShards;
    finish, side: the kind's stats.json (Finish) and the side inputs it takes after the meta.
    """

    def __init__(
        self,
        output: str,
        fmt: ShardFormat,
        identity: JobIdentity,
        *,
        sharding: Sharding,
        amount: Callable[[Any], int],
        finish: Finish,
        side: Sequence[Any] = (),
        write: Callable[[beam.PCollection, Any], beam.PCollection] | None = None,
        label: str | None = None,
    ) -> None:
        super().__init__(label)
        self.output, self.fmt, self.identity = output, fmt, identity
        self.sharding, self.amount, self.write = sharding, amount, write
        self.finish, self.side = finish, tuple(side)

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        val_fraction, amount = self.sharding.val_fraction, self.amount
        counts = beam.pvalue.AsSingleton(
            records
            | "SplitAmounts" >> beam.Map(lambda kv: (split_of(kv[1][1], val_fraction)[0], (amount(kv[1][0]), 1)))
            | "PerSplit" >> beam.CombinePerKey(_sum_pairs)
            | "AllSplits" >> beam.combiners.ToList()
            | "ShardCounts" >> beam.Map(_planned, self.sharding)
        )
        routed = records | "Route" >> beam.Map(_route, val_fraction, counts)
        if self.write is None:
            shards = routed | "WriteShards" >> WriteShards(self.output, self.fmt, counts, self.identity)
        else:
            shards = self.write(routed, counts)
        return (
            shards
            | "AllShards" >> beam.combiners.ToList()
            | "Commit"
            >> beam.Map(commit_shards, self.output, self.fmt.section, counts, self.identity, self.finish, *self.side)
        )


def _sum_pairs(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    amount = records = 0
    for a, r in pairs:
        amount, records = amount + a, records + r
    return amount, records


def _planned(per_split: list[tuple[str, tuple[int, int]]], sharding: Sharding) -> dict[str, int]:
    progress.announce_total(WRITE, sum(records for _, (_, records) in per_split))
    return sharding.counts((split, amount) for split, (amount, _) in per_split)


def _route(element: tuple[Any, tuple[Any, int]], val_fraction: float, counts: Mapping[str, int]) -> Any:
    key, (record, draw) = element
    return shard_of(draw, val_fraction, counts), (key, record)


def commit_shards(
    shards: list[tuple[str, Shard]],
    output: str,
    section: Section,
    counts: Mapping[str, int],
    identity: JobIdentity,
    finish: Finish,
    *side: Any,
) -> Meta:
    """The Commit step: every written (split, Shard) of the planned counts → the committed Meta."""
    return commit_checked(output, build_meta(shards, section, counts, identity), finish, *side, claim=identity)


class ParkedPlan(Protocol):
    """A kind's plan whose records are parked (dew.preprocess.parked) and whose shards are sized by bytes."""

    @property
    def output(self) -> str: ...

    @property
    def ext(self) -> str: ...

    def section(self) -> Section: ...

    def sharding(self) -> Sharding: ...


def write_parked(plan: ParkedPlan, identity: JobIdentity, *, finish: Finish, side: Sequence[Any] = ()) -> WriteDrawn:
    """WriteDrawn for records that are Parked references, each filling a shard by its bytes."""
    fmt = ShardFormat(ext=plan.ext, section=plan.section())
    return WriteDrawn(
        plan.output, fmt, identity, sharding=plan.sharding(), amount=_parked_size, finish=finish, side=side
    )


def _parked_size(record: Parked) -> int:
    return record.size
