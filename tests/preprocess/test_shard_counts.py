"""Shard counts planned from a size (no Beam run): every planner refuses more than a shard name can count.

A count planned from --shard_size_mb (or --rows_per_shard) is known only after the job has counted its
input, so the launcher cannot refuse it; each planner does, naming the flag and the fix, before a shard
is written. A count given with --num_shards is refused by the launcher's flags instead.
"""

from __future__ import annotations

import pytest

from dew.data.formats import MAX_SHARDS
from dew.data.video.decode import ClipShape
from dew.preprocess import write_clips
from dew.preprocess.ingest_plan import URL_FIELDS, IngestPlan
from dew.preprocess.layout import TRAIN, VAL, Layout
from dew.preprocess.shards import TooManyShardsError
from dew.preprocess.write_images import ImagesPlan

TOO_MANY = MAX_SHARDS + 1
SHAPE = ClipShape(frames=2, frame_size=8, frame_rate=25.0)


def tokens(*, num_shards: int | None = None) -> dict[str, int]:
    summary = [(0, TOO_MANY, 1, 0, -1)]  # (file, tokens, documents, empty documents, first empty row)
    return dict(Layout.plan(summary, val_fraction=0.0, itemsize=2, shard_bytes=2, num_shards=num_shards).shards)


def image_counts(*, num_shards: int | None = None, val: int = 0) -> dict[str, int]:
    plan = ImagesPlan(output="o", shard_bytes=1, num_shards=num_shards, val_fraction=0.5 if val else 0.0)
    return plan.sharding().counts([(TRAIN, TOO_MANY), *([(VAL, val)] if val else [])])


def ingest_counts(*, num_shards: int | None = None) -> dict[str, int]:
    plan = IngestPlan(images=ImagesPlan(output="o", extras=URL_FIELDS, num_shards=num_shards), rows_per_shard=1)
    return plan.sharding().counts([(TRAIN, TOO_MANY)])


def clip_counts(*, num_shards: int | None = None) -> dict[str, int]:
    plan = write_clips.ClipsPlan(output="o", shape=SHAPE, shard_bytes=1, num_shards=num_shards)
    return plan.sharding().counts([(TRAIN, TOO_MANY)])


@pytest.mark.parametrize(
    ("plan", "flag"),
    [
        (tokens, "--shard_size_mb"),
        (image_counts, "--shard_size_mb"),
        (clip_counts, "--shard_size_mb"),
        (ingest_counts, "--rows_per_shard"),
    ],
    ids=["tokenize", "images", "decode-clips", "ingest-urls"],
)
def test_a_size_that_plans_too_many_shards_is_refused_naming_its_flag(plan, flag: str) -> None:
    with pytest.raises(TooManyShardsError) as refused:
        plan()
    message = str(refused.value)
    assert message.startswith(f"{flag} plans {TOO_MANY} train shards") and f"more than the {MAX_SHARDS}" in message
    assert message.endswith(f"Use a larger {flag}, or set the count with --num_shards")
    # --num_shards fixes the train split's count, whatever the size would plan.
    assert plan(num_shards=MAX_SHARDS)[TRAIN] == MAX_SHARDS


def test_a_val_split_planned_past_the_limit_names_only_the_size_as_the_fix() -> None:
    """--num_shards sets only the train split's count, so it is no fix for val."""
    with pytest.raises(TooManyShardsError, match=f"plans {TOO_MANY} val shards") as refused:
        image_counts(num_shards=4, val=TOO_MANY)
    assert str(refused.value).endswith("Use a larger --shard_size_mb")
    with pytest.raises(TooManyShardsError, match="val shards"):
        Layout.plan([(0, 4 * TOO_MANY, 1, 0, -1)], val_fraction=0.5, itemsize=1, shard_bytes=2, num_shards=4)


def test_the_largest_count_a_name_can_spell_is_planned() -> None:
    summary = [(0, MAX_SHARDS, 1, 0, -1)]
    assert Layout.plan(summary, val_fraction=0.0, itemsize=2, shard_bytes=2).shards == {TRAIN: MAX_SHARDS}


@pytest.mark.parametrize("given", [0, TOO_MANY])
def test_plans_given_a_count_out_of_range_refuse_it(given: int) -> None:
    with pytest.raises(ValueError, match="num_shards"):
        ImagesPlan(output="o", num_shards=given)
    with pytest.raises(ValueError, match="num_shards"):
        write_clips.ClipsPlan(output="o", shape=SHAPE, num_shards=given)
