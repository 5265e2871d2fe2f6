"""Exact resume for the cells of the resume inventory (docs/runtime.md#resume-inventory) that no
spec's own test file covers: a stream stopped at a random step, its position written to JSON and
read back, and resumed on another share count, yields the global batches of the uninterrupted run,
pixels and augmentation included; on a count the spec does not allow, the resume is refused by name."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import (
    CC3M,
    ArrayRecordImages,
    DataPartition,
    DataPhase,
    Loading,
    OxfordFlowers,
    PackedTokens,
    Ramp,
    ramped,
)
from dew.data.images import corpora
from tests.runtime import image_support as images
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, assert_resume_exact, read_global

pytest.importorskip("array_record")

FAST = Loading(workers=0, threads=2, read_buffer=8)
# Pairs of share counts, before and after the stop, that a batch of 4 splits into.
COUNTS = st.sampled_from([(1, 2), (2, 1), (2, 4), (4, 1), (1, 1)])


def lengths(captions: list[str]) -> dict[str, np.ndarray]:
    """A tokenize= hook: each caption's utf-8 bytes, cut and padded to 12."""
    ids = np.zeros((len(captions), 12), np.int32)
    for row, caption in enumerate(captions):
        raw = np.frombuffer(caption.encode()[:12], np.uint8)
        ids[row, : len(raw)] = raw
    return {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int32)}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("resume")
    committed = str(base / "images")
    rows = images.records(14, key=[f"key-{i}".encode() for i in range(14)])
    images.write_committed(committed, {"train": [rows[:8], rows[8:]]})
    flowers = str(base / "flowers")
    labelled = images.records(13, label=[str(1 + 8 * i).encode() for i in range(13)])
    images.write_committed(flowers, {"train": [labelled[:6], labelled[6:9]], "val": [labelled[9:]]})
    cc3m = str(base / "cc3m")
    shard_set = corpora.CC3M_SET
    present = [i for i in range(shard_set.shards) if i not in shard_set.missing]
    photos = images.records(len(present), image="jpg", caption="txt")
    images.write_raw_set(
        os.path.join(cc3m, shard_set.directory), [[p] for p in photos], [f"{i:05d}.array_record" for i in present]
    )
    a = write_corpus(str(base / "a"), {"train": documents(40), "val": documents(12, seed=7)})
    b = write_corpus(str(base / "b"), {"train": documents(25, seed=3, base=500), "val": documents(9, seed=8)})
    return {"images": committed, "flowers": flowers, "cc3m": cc3m, "a": a, "b": b}


AUGMENT = {"flip": True, "random_crop": True, "crop_scale": 1.5}


@given(stop_at=st.integers(0, 6), counts=COUNTS, seed=st.integers(0, 9))
@settings(max_examples=5, deadline=None)
def test_oxford_flowers_resume_exactly_with_captions_tokenized_and_augmented(root, stop_at, counts, seed) -> None:
    spec = OxfordFlowers(path=root["flowers"], image_size=16, val_batches=None, seed=seed, loading=FAST, **AUGMENT)
    data = spec.load(batch=4, tokenize=lengths)
    assert_resume_exact(data.train, steps=6, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(stop_at=st.integers(0, 5), counts=COUNTS)
@settings(max_examples=4, deadline=None)
def test_a_named_corpus_resumes_exactly_augmented(root, stop_at, counts) -> None:
    data = CC3M(root=root["cc3m"], image_size=16, val_batches=1, seed=2, loading=FAST, **AUGMENT).load(batch=4)
    assert_resume_exact(data.train, steps=5, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(stop_at=st.integers(0, 9), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]), samples=st.integers(1, 20))
@settings(max_examples=6, deadline=None)
def test_a_ramped_augmented_image_stream_resumes_across_its_stages(root, stop_at, counts, samples) -> None:
    spec = ArrayRecordImages(root["images"], image_size=16, val_batches=0, seed=3, loading=FAST, **AUGMENT)
    run = ramped(spec.load(batch=6), Ramp(start=2, increment=2, samples=samples))
    assert_resume_exact(run.train, steps=9, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(
    weights=st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=2, max_size=2),
    stop_at=st.integers(0, 8),
    counts=COUNTS,
    seed=st.integers(0, 50),
)
@settings(max_examples=8, deadline=None)
def test_a_packed_mixture_resumes_exactly_on_another_share_count(root, weights, stop_at, counts, seed) -> None:
    spec = PackedTokens(
        path=dict(zip((root["a"], root["b"]), weights, strict=True)), seq_len=15, seed=seed, loading=FAST
    )
    data = spec.load(batch=4)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(stop_at=st.integers(0, 10), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]), samples=st.integers(1, 30))
@settings(max_examples=6, deadline=None)
def test_a_ramped_packed_mixture_resumes_across_its_stages(root, stop_at, counts, samples) -> None:
    spec = PackedTokens(path={root["a"]: 1.0, root["b"]: 2.0}, seq_len=15, seed=1, loading=FAST)
    run = ramped(spec.load(batch=6), Ramp(start=2, increment=2, samples=samples))
    assert_resume_exact(run.train, steps=10, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


def validation_of(root: dict[str, str], kind: str):
    if kind == "packed_mixture":
        return PackedTokens(path={root["a"]: 1.0, root["b"]: 2.0}, seq_len=15, val_batches=None, loading=FAST)
    if kind == "packed":
        return PackedTokens(path=root["b"], seq_len=15, val_batches=None, loading=FAST)
    if kind == "images":
        return ArrayRecordImages(root["images"], image_size=16, val_batches=2, seed=4, loading=FAST, **AUGMENT)
    return OxfordFlowers(path=root["flowers"], image_size=16, val_batches=None, loading=FAST, **AUGMENT)


@pytest.mark.parametrize("kind", ["packed", "packed_mixture", "images", "flowers"])
@given(stop_at=st.integers(0, 2), counts=st.sampled_from([(1, 2), (2, 1)]))
@settings(max_examples=3, deadline=None)
def test_a_validation_pass_resumes_exactly_on_another_share_count(root, kind, stop_at, counts) -> None:
    data = validation_of(root, kind).load(batch=2)
    with data.val(DataPartition()) as one_pass:
        steps = sum(1 for _ in one_pass)
    stop_at = min(stop_at, steps)
    assert_resume_exact(data.val, steps=steps, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(stop_at=st.integers(0, 6), counts=COUNTS)
@settings(max_examples=4, deadline=None)
def test_a_resume_under_other_loading_knobs_reads_the_same_pixels(root, stop_at, counts) -> None:
    """Loading changes how fast records are read, never which: a host may resume another host's run
    with its own threads and read-ahead."""

    def reader(loading: Loading):
        spec = ArrayRecordImages(root["images"], image_size=16, val_batches=0, seed=6, loading=loading, **AUGMENT)
        return spec.load(batch=4).train

    full, full_state = read_global(reader(FAST), 1, 6)
    _, state = read_global(reader(FAST), counts[0], stop_at)
    tail, tail_state = read_global(reader(Loading(workers=0, threads=1, read_buffer=1)), counts[1], 6 - stop_at, state)
    assert_batches_equal(full[stop_at:], tail)
    assert tail_state == full_state


def test_a_run_read_in_process_resumes_exactly_in_a_worker_process(root) -> None:
    def reader(loading: Loading):
        spec = ArrayRecordImages(root["images"], image_size=16, val_batches=0, seed=7, loading=loading, **AUGMENT)
        return spec.load(batch=4).train

    full, full_state = read_global(reader(FAST), 1, 5)
    _, state = read_global(reader(FAST), 2, 2)
    tail, tail_state = read_global(reader(Loading(workers=1, threads=2, read_buffer=4)), 1, 3, state)
    assert_batches_equal(full[2:], tail)
    assert tail_state == full_state


def test_a_resume_past_the_ramp_stages_a_share_count_does_not_split_reads_exactly(root) -> None:
    """Shares that split the final batch but not the ramp's first stages are refused from the start, and
    read exactly what one share reads once the run resumes past those stages."""
    spec = PackedTokens(path={root["a"]: 1.0, root["b"]: 2.0}, seq_len=15, seed=1, loading=FAST)
    run = ramped(spec.load(batch=8), Ramp(start=2, increment=2, samples=4))
    full, _ = read_global(run.train, 1, 8)
    with pytest.raises(ValueError, match=r"smaller than the 4 shares reading it \(the ramp stage from global record 0"):
        next(run.train(DataPartition(index=0, count=4)))
    head, state = read_global(run.train, 2, 5)
    assert state["records"] >= run.ramp.stages(8)[-1].records  # past the ramp: every later step holds 8
    _, early = read_global(run.train, 2, 1)  # a stage of 6 records is still ahead
    with pytest.raises(ValueError, match=r"does not split into 4 equal shares.*\(the ramp stage from global record"):
        run.train(DataPartition(index=0, count=4)).set_state(early)  # refused where the position is given
    tail, _ = read_global(run.train, 4, 3, state)
    assert_batches_equal(full, head + tail)


@pytest.mark.parametrize("first", ["mixture", "corpus"])
@given(until=st.integers(1, 5), stop_at=st.integers(0, 8), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]))
@settings(max_examples=5, deadline=None)
def test_a_run_of_one_order_continues_exactly_into_phases_that_begin_with_it(
    root, first, until, stop_at, counts
) -> None:
    """A run started on `path` and resumed onto a phase list whose first phase is that path reads what a
    run on the phase list from the start reads, as long as it stopped before the first phase ended."""
    head_path = {root["a"]: 1.0, root["b"]: 2.0} if first == "mixture" else root["a"]
    plain = PackedTokens(path=head_path, seq_len=15, seed=2, loading=FAST, val_batches=0)
    phases = (DataPhase(head_path, until_step=until), DataPhase({root["a"]: 1.0, root["b"]: 1.0}))
    phased = PackedTokens(phases=phases, seq_len=15, seed=2, loading=FAST, val_batches=0)
    stop_at = min(stop_at, until)
    full, full_state = read_global(phased.load(batch=4).train, 1, 8)
    head, state = read_global(plain.load(batch=4).train, counts[0], stop_at)
    tail, tail_state = read_global(phased.load(batch=4).train, counts[1], 8 - stop_at, state)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state


@given(stop_at=st.integers(0, 8), extra=st.integers(1, 4), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]))
@settings(max_examples=5, deadline=None)
def test_a_phase_appended_after_the_stop_is_read_exactly_as_if_it_had_been_there(root, stop_at, extra, counts) -> None:
    a, b = root["a"], root["b"]
    before = (DataPhase({a: 1.0, b: 1.0}, until_step=2), DataPhase({a: 1.0, b: 3.0}))
    after = (
        DataPhase({a: 1.0, b: 1.0}, until_step=2),
        DataPhase({a: 1.0, b: 3.0}, until_step=max(stop_at, 2) + extra),
        DataPhase(b),
    )

    def reader(phases):
        return PackedTokens(phases=phases, seq_len=15, seed=3, loading=FAST, val_batches=0).load(batch=4).train

    full, full_state = read_global(reader(after), 1, 10)
    head, state = read_global(reader(before), counts[0], stop_at)
    tail, tail_state = read_global(reader(after), counts[1], 10 - stop_at, state)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state


@pytest.mark.parametrize("until", [2, 3])
def test_a_checkpoint_at_the_end_of_a_phase_resumes_onto_that_phase_extended(root, until) -> None:
    """Checkpointed at the step a phase ends before, a run has read that phase whole and nothing after
    it, so extending the phase is moving its end past the stop: accepted, and read as if it had been there."""
    a, b = root["a"], root["b"]

    def reader(first_until: int):
        phases = (DataPhase({a: 1.0, b: 1.0}, until_step=first_until), DataPhase(b))
        return PackedTokens(phases=phases, seq_len=15, seed=5, loading=FAST, val_batches=0).load(batch=4).train

    full, full_state = read_global(reader(until + 3), 1, 8)
    head, state = read_global(reader(until), 2, until)
    tail, tail_state = read_global(reader(until + 3), 4, 8 - until, state)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state


@pytest.mark.parametrize("stop_at", [1, 3])
def test_a_phased_run_resumes_onto_its_current_phase_alone(root, stop_at) -> None:
    """Dropping the phases a run has not reached leaves its current phase running on: a run of that mixture
    alone (path=, or one DataPhase) continues it exactly, and one on another mixture is refused by name."""
    a, b = root["a"], root["b"]
    head_path = {a: 1.0, b: 2.0}
    phases = (DataPhase(head_path, until_step=3), DataPhase(b))

    def reader(**where):
        return PackedTokens(**where, seq_len=15, seed=5, loading=FAST, val_batches=0).load(batch=4).train

    head, state = read_global(reader(phases=phases), 2, stop_at)
    for alone in ({"path": head_path}, {"phases": (DataPhase(head_path),)}):
        full, full_state = read_global(reader(**alone), 1, 6)
        tail, tail_state = read_global(reader(**alone), 4, 6 - stop_at, state)
        assert_batches_equal(full, head + tail)
        assert tail_state == full_state
    stream = reader(path={a: 1.0, b: 1.0})(DataPartition())
    with pytest.raises(ValueError, match=f"phase 0 of the checkpoint's data was changed: corpus '{b}' weight 2 -> 1"):
        stream.set_state(state)
    stream.close()
