"""Reading in process (workers=0) gives exactly the batches and positions of the Grain path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import Loading, PackedTokens, Ramp, Reader, TokenWindows, ramped, stream
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("paths")
    # Small, so that a dozen steps of 8 cross epoch boundaries, inside a step too.
    a = write_corpus(str(root / "a"), {"train": documents(30, longest=30)}, shards=2)
    b = write_corpus(str(root / "b"), {"train": documents(12, seed=3, longest=30)}, shards=1)
    return a, b


def _grain_steps(reads: Any, step: int, stop: int, *, ahead: int = 0) -> Any:
    """What a stream with workers read through before: Grain's threads running the same step function."""
    return iter(stream._through_grain(reads, step, stop, SERIAL))


def _read(reader: Reader, count: int, steps: int, state: Any = None, *, grain: bool) -> tuple[list[Any], Any]:
    if not grain:
        return read_global(reader, count, steps, state)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream, "InProcess", _grain_steps)
        return read_global(reader, count, steps, state)


@given(
    kind=st.sampled_from(["windows", "packed", "mixture"]),
    ramp=st.booleans(),
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 12),
    seed=st.integers(0, 100),
)
@settings(max_examples=15, deadline=None)
def test_in_process_reads_equal_grain_reads_and_resume_across_them(
    corpora, kind: str, ramp: bool, shares: int, new_shares: int, stop_at: int, seed: int
) -> None:
    a, b = corpora
    if kind == "windows":
        spec: Any = TokenWindows(path=a, seq_len=8, seed=seed, val_batches=0, loading=SERIAL)
    else:
        path = a if kind == "packed" else {a: 1.0, b: 2.0}
        spec = PackedTokens(path=path, seq_len=15, packing_bins=3, seed=seed, val_batches=0, loading=SERIAL)
    data = spec.load(batch=8)
    if ramp:
        data = ramped(data, Ramp(start=4, increment=4, samples=24))
    steps = 12
    full, full_state = _read(data.train, 1, steps, grain=True)
    ours, state = _read(data.train, shares, steps, grain=False)
    assert_batches_equal(full, ours)
    assert state == full_state
    # A position saved on one path resumes on the other, on another share count.
    head, state = _read(data.train, shares, stop_at, grain=False)
    tail, tail_state = _read(data.train, new_shares, steps - stop_at, state, grain=True)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state
