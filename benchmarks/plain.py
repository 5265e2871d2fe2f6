"""Plain numpy implementations that benchmarks use as baselines (not a benchmark itself).

Each is what a competent user would write with numpy alone, given the same inputs dew has (a packing
plan, flat arrays of ids): no dew reader, no per-record Python beyond one slice per piece or row.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np


def pack(
    plan: Any,
    document_starts: np.ndarray,
    columns: dict[str, tuple[np.ndarray, int]],
    windows: np.ndarray,
    *,
    positions: Literal["piece", "document"],
) -> dict[str, np.ndarray]:
    """Plan windows `windows` as int32 [windows, plan.window] arrays: each of `columns` (name: (flat
    values, fill)) copied piece by piece, plus text_segment_ids and text_positions.

    The layout is computed for the whole batch at once, then each piece is one slice copy per column:
    pieces are long (hundreds of ids), so this beats per-token index arithmetic (np.repeat of every id's
    source and destination), which measured slower.
    """
    first, counts = plan.offsets[windows], plan.offsets[windows + 1] - plan.offsets[windows]
    window_first = np.cumsum(counts) - counts
    rank = np.arange(int(counts.sum())) - np.repeat(window_first, counts)
    pieces = np.repeat(first, counts) + rank
    lengths = plan.lengths[pieces]
    before = np.cumsum(lengths) - lengths
    columns_at = before - np.repeat(before[window_first], counts)
    sources = document_starts[plan.documents[pieces]] + plan.starts[pieces]
    origins = plan.starts[pieces] if positions == "document" else np.zeros_like(lengths)
    shape = (len(windows), plan.window)
    out = {name: np.full(shape, fill, dtype=np.int32) for name, (_, fill) in columns.items()}
    segments, places = np.zeros(shape, dtype=np.int32), np.zeros(shape, dtype=np.int32)
    count_up = np.arange(plan.window, dtype=np.int32)
    rows = np.repeat(np.arange(len(windows)), counts)
    for row, column, length, source, segment, origin in zip(
        rows.tolist(),
        columns_at.tolist(),
        lengths.tolist(),
        sources.tolist(),
        (rank + 1).tolist(),
        origins.tolist(),
        strict=True,
    ):
        cells = slice(column, column + length)
        for name, (values, _) in columns.items():
            out[name][row, cells] = values[source : source + length]
        segments[row, cells] = segment
        places[row, cells] = count_up[:length] + origin
    return {**out, "text_segment_ids": segments, "text_positions": places}


def pad_pairs(
    prompts: list[np.ndarray],
    chosen: list[np.ndarray],
    rejected: list[np.ndarray],
    rows: np.ndarray,
    seq_len: int,
    pad_id: int,
) -> dict[str, np.ndarray]:
    """[rows, 2, seq_len] prompt + chosen and prompt + rejected, right-padded, with a completion mask:
    one slice per row and side, as a padding collator writes it."""
    ids = np.full((len(rows), 2, seq_len), pad_id, dtype=np.int32)
    mask = np.zeros((len(rows), 2, seq_len), dtype=np.int32)
    for b, row in enumerate(rows.tolist()):
        prompt = prompts[row]
        ids[b, :, : len(prompt)] = prompt
        for side, completion in enumerate((chosen[row], rejected[row])):
            end = len(prompt) + len(completion)
            ids[b, side, len(prompt) : end] = completion
            mask[b, side, len(prompt) : end] = 1
    return {"input_ids": ids, "completion_mask": mask}
