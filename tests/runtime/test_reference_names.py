"""The names the reference page's prose uses exist as the objects they describe: PackedWindows,
PhasedStream, dew.data.providers.phased_dataset and the `tokenized` wrapper."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dew.data
from dew.data import DataPartition, DataPhase, Loading, PackedTokens, tokenized
from dew.data.dataset import global_dataset
from dew.data.phases import PhasedOrder
from dew.data.providers import phased_dataset as phased_module
from dew.data.tokens.documents import PackedWindowSource
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, assert_resume_exact, read_global

SERIAL = Loading(workers=0)


def test_packed_windows_and_phased_stream_are_the_packer_and_the_phased_order() -> None:
    assert dew.data.PackedWindows is PackedWindowSource
    assert dew.data.PhasedStream is PhasedOrder
    assert phased_module.PhasedStream is PhasedOrder and phased_module.DataPhase is DataPhase


def test_phased_dataset_reads_what_packed_tokens_over_the_same_phases_reads(tmp_path) -> None:
    a = write_corpus(str(tmp_path / "a"), {"train": documents(40)})
    b = write_corpus(str(tmp_path / "b"), {"train": documents(25, seed=3)})
    phases = (DataPhase({a: 1.0, b: 1.0}, until_step=3), DataPhase({a: 1.0, b: 3.0}))
    made = phased_module.phased_dataset(phases, batch=4, seq_len=15, val_batches=0, seed=5, loading=SERIAL)
    spec = PackedTokens(phases=phases, seq_len=15, val_batches=0, seed=5, loading=SERIAL).load(batch=4)
    assert made.records == spec.records and made.val is None
    got, got_state = read_global(made.train, 1, 6)
    want, want_state = read_global(spec.train, 1, 6)
    assert_batches_equal(got, want)
    assert got_state == want_state
    # The windows really are packed documents of the two corpora: every non-padding id is a document id.
    ids = {int(i) for doc in documents(40) + documents(25, seed=3) for i in doc}
    for batch in got:
        real = batch["text"][batch["text_segment_ids"] > 0]
        assert set(real.tolist()) <= ids


def captions_to_lengths(captions: list[str]) -> dict[str, np.ndarray]:
    return {"input_ids": np.array([[len(c), len(c.split())] for c in captions], dtype=np.int32)}


def test_tokenized_adds_the_ids_and_forwards_the_position_of_a_global_stream() -> None:
    captions = np.array([f"caption number {i}" for i in range(24)], dtype=object)
    data = global_dataset(train=captions, val=None, batch=4, seed=1, loading=SERIAL, val_batches=None)
    with data.train(DataPartition()) as plain:
        expected = [list(next(plain)) for _ in range(5)]
    with data.train(DataPartition()) as inner:
        wrapped = tokenized(CaptionBatches(inner), captions_to_lengths)
        first = [next(wrapped) for _ in range(3)]
        state = wrapped.get_state()
    assert [list(b["caption"]) for b in first] == expected[:3]
    for batch in first:
        assert batch["text"]["input_ids"].tolist() == [[len(c), 3] for c in batch["caption"]]
    with data.train(DataPartition()) as inner:
        resumed = tokenized(CaptionBatches(inner), captions_to_lengths)
        resumed.set_state(state)
        assert list(next(resumed)["caption"]) == expected[3]


@given(stop_at=st.integers(0, 6), counts=st.sampled_from([(1, 2), (2, 4), (4, 1), (2, 2)]), seed=st.integers(0, 9))
@settings(max_examples=6, deadline=None)
def test_a_tokenized_global_stream_resumes_exactly_on_another_share_count(stop_at, counts, seed) -> None:
    captions = np.array([f"caption {'number ' * (i % 3)}{i}" for i in range(22)], dtype=object)
    data = global_dataset(train=captions, val=None, batch=4, seed=seed, loading=SERIAL, val_batches=None)

    def reader(partition: DataPartition) -> Any:
        return tokenized(CaptionBatches(data.train(partition)), captions_to_lengths)

    assert_resume_exact(reader, steps=6, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


class CaptionBatches:
    """{"caption": batch} for each batch of a stream, with the stream's position."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream

    def __iter__(self):  # type: ignore[no-untyped-def]
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return {"caption": next(self.stream)}

    def get_state(self):  # type: ignore[no-untyped-def]
        return self.stream.get_state()

    def set_state(self, state) -> None:  # type: ignore[no-untyped-def]
        self.stream.set_state(state)

    def close(self) -> None:
        self.stream.close()


def test_a_stream_without_a_position_gives_a_wrapper_without_one_and_refusals_name_the_field() -> None:
    batches = iter([{"caption": [b"a cat", "a dog"]}, {"image": [1]}])
    stream = tokenized(batches, captions_to_lengths)
    assert not hasattr(stream, "get_state") and not hasattr(stream, "set_state")
    assert next(stream)["text"]["input_ids"].tolist() == [[5, 2], [5, 2]]  # bytes captions decode as text
    with pytest.raises(KeyError, match="no 'caption' to tokenize; its keys are \\['image'\\]"):
        next(stream)
    with pytest.raises(KeyError, match="holds 'text' already"):
        next(tokenized(iter([{"caption": ["x"], "text": 1}]), captions_to_lengths))
    with pytest.raises(TypeError, match="must be a function"):
        tokenized(iter([]), "not a tokenizer")  # type: ignore[arg-type]
