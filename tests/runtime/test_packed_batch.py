"""The packed-window materializer: segment ids, positions per piece or per document, padding, fills."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data.packed_batch import packed_batch
from dew.data.packing import plan_packing


def ragged(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(values, document starts): document d holds 100 * (d + 1) + offset, so a token says where it came from."""
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.concatenate([100 * (d + 1) + np.arange(n) for d, n in enumerate(lengths)] or [np.zeros(0)])
    return values.astype(np.int64), starts


def reference(lengths: list[int], window: int, bins: int, windows: list[int], continue_positions: bool):
    """Each window written out piece by piece: (tokens, segment ids, positions), padding 0 / 0 / 0."""
    plan = plan_packing(np.array(lengths, dtype=np.int64), window, bins)
    values, starts = ragged(lengths)
    out = []
    for w in windows:
        text, segments, positions = [np.zeros(window, np.int64) for _ in range(3)]
        at = 0
        for rank, p in enumerate(range(plan.offsets[w], plan.offsets[w + 1])):
            doc, start, size = int(plan.documents[p]), int(plan.starts[p]), int(plan.lengths[p])
            text[at : at + size] = values[starts[doc] + start : starts[doc] + start + size]
            segments[at : at + size] = rank + 1
            positions[at : at + size] = np.arange(size) + (start if continue_positions else 0)
            at += size
        out.append((text, segments, positions))
    return plan, out


def test_a_long_document_restarts_per_piece_or_continues_per_document() -> None:
    # window 4: document 0 (6 ids) is a whole piece plus a 2-id remainder; document 1 (1 id) joins the remainder
    plan = plan_packing(np.array([6, 1]), 4, 2)
    piece = packed_batch(plan, np.arange(len(plan)), positions="piece")
    document = packed_batch(plan, np.arange(len(plan)), positions="document")
    assert piece.segment_ids.tolist() == [[1, 1, 1, 1], [1, 1, 2, 0]]
    assert piece.positions.tolist() == [[0, 1, 2, 3], [0, 1, 0, 0]]
    assert document.positions.tolist() == [[0, 1, 2, 3], [4, 5, 0, 0]]
    values, starts = ragged([6, 1])
    assert piece.gather(values, starts, fill=-1).tolist() == [[100, 101, 102, 103], [104, 105, 200, -1]]


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 13), min_size=1, max_size=12),
    window=st.integers(1, 6),
    bins=st.integers(1, 3),
    continue_positions=st.booleans(),
    data=st.data(),
)
def test_matches_windows_written_piece_by_piece(lengths, window, bins, continue_positions, data) -> None:
    plan = plan_packing(np.array(lengths, dtype=np.int64), window, bins)
    if len(plan) == 0:
        return
    windows = data.draw(st.lists(st.integers(0, len(plan) - 1), max_size=5))
    plan, expected = reference(lengths, window, bins, windows, continue_positions)
    rule = "document" if continue_positions else "piece"
    batch = packed_batch(plan, np.array(windows, dtype=np.int64), positions=rule)
    values, starts = ragged(lengths)
    gathered = batch.gather(values, starts)
    copied = batch.copy(lambda doc, start, size: values[starts[doc] + start : starts[doc] + start + size])
    assert batch.segment_ids.shape == batch.positions.shape == gathered.shape == (len(windows), window)
    for row, (text, segments, positions) in enumerate(expected):
        assert gathered[row].tolist() == text.tolist() == copied[row].tolist()
        assert batch.segment_ids[row].tolist() == segments.tolist()
        assert batch.positions[row].tolist() == positions.tolist()
    assert all(a.dtype == np.int32 for a in (batch.segment_ids, batch.positions, gathered, copied))


def test_refuses_an_unknown_position_rule() -> None:
    with pytest.raises(ValueError, match="per 'piece' or per 'document'"):
        packed_batch(plan_packing(np.array([3]), 4, 1), np.array([0]), positions="window")  # type: ignore[arg-type]
