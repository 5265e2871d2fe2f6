"""The packing plan: the rule piece by piece, coverage, CSR layout, derived files, document ends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import formats
from dew.data.packing import (
    PackingPlan,
    document_ends,
    lengths_of,
    load_document_ends,
    packing_name,
    plan_packing,
    save_document_ends,
)


def reference_plan(lengths: list[int], window: int, bins: int) -> list[list[tuple[int, int, int]]]:
    """The packing rule written out literally, one piece at a time, as the list of emitted windows."""
    emitted: list[list[tuple[int, int, int]]] = []
    open_windows: list[tuple[int, list[tuple[int, int, int]]]] = []  # (room, pieces)
    for doc, length in enumerate(lengths):
        for start in range(0, length, window):
            size = min(window, length - start)
            piece = (doc, start, size)
            if size == window:
                emitted.append([piece])
                continue
            # Fullest first, ties by opening order: the first window with room is the best fit.
            fullest_first = sorted(range(len(open_windows)), key=lambda j: (open_windows[j][0], j))
            fits = [j for j in fullest_first if open_windows[j][0] >= size]
            if fits:
                room, pieces = open_windows[fits[0]]
                pieces.append(piece)
                if room == size:
                    emitted.append(pieces)
                    del open_windows[fits[0]]
                else:
                    open_windows[fits[0]] = (room - size, pieces)
            else:
                if len(open_windows) == bins:
                    emitted.append(open_windows.pop(fullest_first[0])[1])
                open_windows.append((window - size, [piece]))
    emitted.extend(pieces for _, pieces in open_windows)
    return emitted


def as_windows(plan: PackingPlan) -> list[list[tuple[int, int, int]]]:
    return [
        [
            (int(plan.documents[p]), int(plan.starts[p]), int(plan.lengths[p]))
            for p in range(plan.offsets[w], plan.offsets[w + 1])
        ]
        for w in range(len(plan))
    ]


@given(
    lengths=st.lists(st.integers(0, 40), max_size=60),
    window=st.integers(1, 17),
    bins=st.integers(1, 5),
)
@settings(max_examples=200, deadline=None)
def test_the_plan_follows_the_rule_and_covers_every_item_once(lengths: list[int], window: int, bins: int) -> None:
    plan = plan_packing(np.array(lengths, dtype=np.int64), window, bins)
    assert as_windows(plan) == reference_plan(lengths, window, bins)
    covered = [np.zeros(n, dtype=np.int64) for n in lengths]
    for doc, start, size in zip(plan.documents, plan.starts, plan.lengths, strict=True):
        covered[doc][start : start + size] += 1
    assert all((c == 1).all() for c in covered)
    per_window = np.add.reduceat(plan.lengths, plan.offsets[:-1]) if len(plan) else np.zeros(0)
    assert (per_window <= window).all() and (per_window >= 1).all()
    assert plan.tokens == sum(lengths)


def test_more_bins_leave_less_padding() -> None:
    lengths = np.random.default_rng(0).integers(1, 300, size=3000)
    paddings = [plan_packing(lengths, 256, bins).padding for bins in (1, 4, 16)]
    assert paddings[0] > paddings[1] > paddings[2]


def test_plan_round_trips_through_its_derived_file(tmp_path) -> None:
    plan = plan_packing(np.array([5, 9, 1, 30, 2, 2]), 8, 2)
    path = formats.derived_path(str(tmp_path), "train", packing_name(8, 2))
    assert path.endswith("train.packing-bf1-8-2.npz")
    plan.save(path, "abc")
    assert PackingPlan.load(path, "abc") == plan
    assert PackingPlan.load(path, "other corpus") is None
    assert PackingPlan.load(str(tmp_path / "absent.npz"), "abc") is None


@pytest.mark.parametrize(("lengths", "window", "bins", "message"), [([3], 0, 1, "window"), ([3], 4, 0, "bins")])
def test_bad_shapes_are_refused(lengths, window, bins, message) -> None:
    with pytest.raises(ValueError, match=message):
        plan_packing(np.array(lengths), window, bins)
    with pytest.raises(ValueError, match="document 1 has negative length"):
        plan_packing(np.array([1, -1]), 4, 1)


@pytest.mark.parametrize(
    ("stream", "ends"),
    [
        ([1, 2, 0, 3, 0], [3, 5]),
        ([1, 2, 0, 3], [3, 4]),
        ([1, 2, 3], [3]),
        ([0, 0], [1, 2]),
        ([], []),
    ],
)
@pytest.mark.parametrize("chunk", [1, 2, 64])
def test_document_ends_cut_after_each_eos_and_keep_the_tail(stream, ends, chunk) -> None:
    array = np.array(stream, dtype=np.uint16)
    got = document_ends(len(array), lambda a, b: array[a:b], 0, chunk=chunk)
    assert got.tolist() == ends
    assert document_ends(len(array), lambda a, b: array[a:b], None).tolist() == ([len(array)] if stream else [])
    assert lengths_of(got).sum() == len(stream)


def test_document_index_round_trips(tmp_path) -> None:
    path = formats.derived_path(str(tmp_path), "train", "documents")
    save_document_ends(path, "fp", np.array([3, 5, 9]))
    assert load_document_ends(path, "fp").tolist() == [3, 5, 9]
    assert load_document_ends(path, "changed") is None
