"""PackedTokens: documents at runtime, every token once per epoch, segments, offline plans, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, Loading, PackedTokens, TokenDocumentSource, datasets, formats
from dew.data.packing import (
    DOCUMENTS,
    PackingPlan,
    lengths_of,
    packing_name,
    plan_packing,
    save_document_ends,
)
from dew.data.phases import DataPhase
from dew.data.tokens.opening import corpus_meta, open_tokens
from dew.data.tokens.packed import packed_split
from tests.runtime.token_support import EOS, documents, stream_of, write_corpus
from tests.support import assert_batches_equal, assert_resume_exact, read_global

SERIAL = Loading(workers=0, threads=2, read_buffer=8)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("packed")
    return write_corpus(str(root / "c"), {"train": documents(70, longest=50), "val": documents(20, seed=2)}, shards=3)


def test_documents_end_at_eos_and_keep_the_tail() -> None:
    ids = np.array([5, 6, EOS, 7, EOS, 8, 9], dtype=np.uint16)

    class Stream:
        eos_id = EOS

        def __len__(self):
            return len(ids)

        def __getitem__(self, span):
            return ids[span]

    docs = TokenDocumentSource(Stream())
    assert [d.tolist() for d in (docs[i] for i in range(len(docs)))] == [[5, 6, 0], [7, 0], [8, 9]]
    assert len(TokenDocumentSource(Stream(), eos_id=99)) == 1  # no eos: one document


@given(seq_len=st.integers(3, 40), bins=st.integers(1, 6))
@settings(max_examples=15, deadline=None)
def test_every_token_of_every_document_appears_once_per_epoch(corpus, seq_len: int, bins: int) -> None:
    source = packed_split(corpus, "train", window=seq_len + 1, bins=bins, field=None)
    batch = source.read_batch(np.arange(len(source)))
    text, segments, positions = batch["text"], batch["text_segment_ids"], batch["text_positions"]
    by_piece = packed_split(corpus, "train", window=seq_len + 1, bins=bins, field=None, positions="piece")
    piece_positions = by_piece.read_batch(np.arange(len(source)))["text_positions"]
    stream = stream_of(documents(70, longest=50))
    ends = source.documents.ends
    seen = np.zeros(len(stream), dtype=np.int64)
    for row in range(len(text)):
        for segment in range(1, int(segments[row].max()) + 1):
            cells = np.flatnonzero(segments[row] == segment)
            piece = source.plan.offsets[row] + segment - 1
            document = int(source.plan.documents[piece])
            start = (int(ends[document - 1]) if document else 0) + int(source.plan.starts[piece])
            # segment ids and positions agree: one contiguous run counting up from the piece's place in its
            # document, or from 0 when positions restart in each piece
            offset = int(source.plan.starts[piece])
            assert (np.diff(cells) == 1).all()
            assert positions[row, cells].tolist() == list(range(offset, offset + len(cells)))
            assert piece_positions[row, cells].tolist() == list(range(len(cells)))
            np.testing.assert_array_equal(text[row, cells], stream[start : start + len(cells)])
            seen[start : start + len(cells)] += 1
        padding = segments[row] == 0
        assert (text[row, padding] == 0).all() and (positions[row, padding] == 0).all()
        assert not padding.any() or padding[np.argmax(padding) :].all()  # padding only at the end
    assert (seen == 1).all()
    assert len(ends) == 70


def test_the_offline_plan_equals_the_runtime_plan_and_is_used(corpus, tmp_path) -> None:
    runtime = packed_split(corpus, "train", window=17, bins=4, field=None)
    meta = corpus_meta(corpus)
    tokens = open_tokens(corpus)
    stream = tokens[:]
    offline_ends = np.flatnonzero(stream == EOS) + 1
    plan = plan_packing(lengths_of(offline_ends), 17, 4)
    assert plan == runtime.plan
    np.testing.assert_array_equal(offline_ends, runtime.documents.ends)

    # An offline plan stamped with this corpus is read instead of planning: prove it by a marker plan.
    from dew.data import formats

    marker = plan_packing(lengths_of(offline_ends), 17, 1)
    marker = PackingPlan(17, 4, marker.offsets, marker.documents, marker.starts, marker.lengths)
    marker.save(formats.derived_path(corpus, "train", packing_name(17, 4)), meta.fingerprint())
    save_document_ends(formats.derived_path(corpus, "train", DOCUMENTS), meta.fingerprint(), offline_ends)
    try:
        assert packed_split(corpus, "train", window=17, bins=4, field=None).plan == marker
        marker.save(formats.derived_path(corpus, "train", packing_name(17, 4)), "another corpus")
        assert packed_split(corpus, "train", window=17, bins=4, field=None).plan == plan
    finally:
        import os

        os.remove(formats.derived_path(corpus, "train", packing_name(17, 4)))
        os.remove(formats.derived_path(corpus, "train", DOCUMENTS))


@given(
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 4]),
    stop_at=st.integers(0, 6),
    seed=st.integers(0, 50),
    bins=st.integers(1, 8),
)
@settings(max_examples=10, deadline=None)
def test_packed_tokens_resume_exactly(corpus, shares, new_shares, stop_at, seed, bins) -> None:
    data = PackedTokens(path=corpus, seq_len=15, packing_bins=bins, seed=seed, loading=SERIAL).load(batch=4)
    assert_resume_exact(data.train, steps=6, stop_at=stop_at, count_before=shares, count_after=new_shares)


def test_records_is_the_exact_window_count_and_validation_reads_val(corpus) -> None:
    data = PackedTokens(path=corpus, seq_len=15, packing_bins=3, loading=SERIAL, val_batches=None).load(batch=4)
    assert data.records == len(packed_split(corpus, "train", window=16, bins=3, field=None))
    val_windows = len(packed_split(corpus, "val", window=16, bins=3, field=None))
    assert len(list(data.val(DataPartition()))) == val_windows // 4
    # one epoch of the shuffled stream holds every window once, and the batches are those windows
    _, windows = data.train.order.locate(np.arange(data.records))
    assert sorted(windows.tolist()) == list(range(data.records))
    batches, state = read_global(data.train, 1, 3)
    source = data.train.order.corpora[0].source
    np.testing.assert_array_equal(batches[2]["text"], source.read_batch(windows[8:12])["text"])
    # the saved token counter is the real tokens read, padding excluded, whatever the share count
    assert state["tokens"] == {corpus: sum(int((b["text_segment_ids"] > 0).sum()) for b in batches)}
    assert read_global(data.train, 4, 3)[1] == state


def test_spec_round_trips_with_a_mixture_and_phases(corpus) -> None:
    spec = PackedTokens(
        phases=(DataPhase({corpus: 0.7, "/other": 0.3}, until_step=10), DataPhase(corpus)),
        seq_len=63,
        packing_bins=4,
    )
    assert datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec
    assert spec.corpora == sorted([corpus, "/other"])
    assert datasets.PackedTokens is PackedTokens and datasets["packed_tokens"] is PackedTokens
    mixed = PackedTokens(path={corpus: 2.0, "/b": 1.0})
    assert datasets.from_config(json.loads(json.dumps(mixed.to_config()))) == mixed


def test_bad_specs_are_refused(corpus, tmp_path) -> None:
    with pytest.raises(ValueError, match="exactly one of them"):
        PackedTokens()
    # Named as the user wrote it: PackedTokens.path, not the DataPhase it is checked through.
    with pytest.raises(ValueError, match=r"^PackedTokens\.path\['x'\]: weight must be a positive number"):
        PackedTokens(path={"x": 0.0})
    with pytest.raises(ValueError, match=r"^PackedTokens\.path is empty"):
        PackedTokens(path="")
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        PackedTokens(path=corpus, seq_len=0)
    with pytest.raises(ValueError, match="last phase"):
        PackedTokens(phases=(DataPhase(corpus, until_step=3),))
    flat = write_corpus(str(tmp_path / "flat"), {"train": documents(5)}, eos_id=None)
    with pytest.raises(ValueError, match=r"flat: the corpus records no eos_id"):
        PackedTokens(path=flat, loading=SERIAL).load(batch=2)
    other = write_corpus(str(tmp_path / "other"), {"train": documents(5)}, tokenizer="another")
    with pytest.raises(ValueError, match="different tokenizers"):
        PackedTokens(path={corpus: 1.0, other: 1.0}, loading=SERIAL).load(batch=2)


def test_token_counters_do_not_depend_on_when_the_state_is_taken(corpus) -> None:
    data = PackedTokens(path=corpus, seq_len=15, packing_bins=3, loading=SERIAL).load(batch=4)
    with data.train(DataPartition()) as often, data.train(DataPartition()) as once:
        for _ in range(5):
            next(often)
            often.get_state()
            next(once)
        assert often.get_state() == often.get_state() == once.get_state()


@pytest.mark.slow
def test_worker_processes_give_the_same_batches_and_positions(corpus) -> None:
    # Sources travel to Grain's worker processes by pickle and reopen their files there; a position
    # saved under worker processes resumes in-process on another share count, and vice versa.
    parallel = Loading(workers=2, threads=2, read_buffer=8, worker_buffer=1)
    spec = PackedTokens(path=corpus, seq_len=15, packing_bins=3, seed=4, loading=SERIAL)
    serial_run = spec.load(batch=4).train
    worker_run = PackedTokens(path=corpus, seq_len=15, packing_bins=3, seed=4, loading=parallel).load(batch=4).train
    full, full_state = read_global(serial_run, 1, 6)
    head, state = read_global(worker_run, 2, 3)
    tail, tail_state = read_global(serial_run, 4, 3, state)
    assert_batches_equal(full, head + tail)
    assert tail_state == full_state


def test_a_corpus_without_an_eos_is_refused_with_its_offline_index_as_without(tmp_path) -> None:
    """PackedTokens refused a corpus written without an eos, but once `dew-preprocess pack` had written its
    document index (one document a split) it packed the whole corpus as that one document: every window
    one segment, positions running on across what were separate texts. With the derived files or without,
    the runtime must do the same thing."""
    flat = write_corpus(str(tmp_path / "flat"), {"train": documents(20)}, eos_id=None)
    meta = corpus_meta(flat)
    assert meta is not None
    tokens = open_tokens(flat)
    save_document_ends(formats.derived_path(flat, "train", DOCUMENTS), meta.fingerprint(), np.array([len(tokens)]))
    with pytest.raises(ValueError, match=r"flat: the corpus records no eos_id"):
        PackedTokens(path=flat, seq_len=15, val_batches=0, loading=SERIAL).load(batch=2)


def test_shard_files_of_corpora_from_different_tokenizers_are_not_mixed(tmp_path) -> None:
    """A corpus named by one of its shard files was left out of the one-tokenizer check, though the meta.json
    beside it names its tokenizer: two such files of different tokenizers mixed silently, ids meaning
    different tokens."""
    files = [
        f"{write_corpus(str(tmp_path / name), {'train': documents(20)}, shards=1, tokenizer=name)}/"
        "train-00000-of-00001.bin"
        for name in ("one", "another")
    ]
    with pytest.raises(ValueError, match="different tokenizers"):
        PackedTokens(path=dict.fromkeys(files, 1.0), seq_len=15, val_batches=0, loading=SERIAL).load(batch=2)


def test_one_corpus_named_twice_in_a_mixture_is_refused(corpus) -> None:
    """Each corpus is shuffled by what it holds, so one corpus under two spellings ("c" and "c/") read
    every window twice in step, both copies in the same batch."""
    spec = PackedTokens(path={corpus: 1.0, f"{corpus}/": 2.0}, seq_len=15, val_batches=0, loading=SERIAL)
    with pytest.raises(ValueError, match="are one corpus"):
        spec.load(batch=4)


def test_a_mixture_whose_corpora_part_have_a_val_split_is_refused_without_a_hold_out(tmp_path) -> None:
    """With val_batches=None a corpus without a val split gives no validation windows. Dataset.val was then
    silently None, dropping the other corpus's val split too; validating on that one alone would score
    another mixture than the one trained. It is refused naming the corpus; a number of batches, or 0, reads."""
    with_val = write_corpus(str(tmp_path / "a"), {"train": documents(40, seed=1), "val": documents(8, seed=2)})
    without = write_corpus(str(tmp_path / "b"), {"train": documents(40, seed=3)})
    mixture = {with_val: 1.0, without: 1.0}
    with pytest.raises(ValueError, match=rf"{without}: no val split, and val_batches=None"):
        PackedTokens(path=mixture, seq_len=8, val_batches=None, loading=SERIAL).load(batch=4)
    assert PackedTokens(path=mixture, seq_len=8, val_batches=0, loading=SERIAL).load(batch=4).val is None
    held = PackedTokens(path=mixture, seq_len=8, val_batches=1, loading=SERIAL).load(batch=4).val
    assert held is not None and held.steps == 1
    alone = PackedTokens(path=with_val, seq_len=8, val_batches=None, loading=SERIAL).load(batch=4).val
    assert alone is not None  # one corpus with a val split scores all of it
