"""A pod's 4096 shares over one epoch of a real corpus, by the index arithmetic every share's stream runs
(stream.share_records, then the order): no Grain stream is opened per share, so the test costs what the
arithmetic does, and it checks exactly what each of 4096 streams would read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dew.data import DataPartition, Loading, PackedTokens, formats
from dew.data.mixture import MixtureOrder
from dew.data.packing import DOCUMENTS, lengths_of, packing_name, plan_packing, save_document_ends
from dew.data.stream import GlobalReader, GlobalStream, share_records
from dew.data.tokens.documents import TokenDocumentSource
from dew.data.tokens.token_bytes import TokenBytes
from tests.runtime.token_support import documents, write_corpus

SHARES = 4096
BATCH = SHARES
SEQ_LEN, BINS = 15, 4
SERIAL = Loading(workers=0, threads=2, read_buffer=8)


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> GlobalReader:
    """The training reader of PackedTokens over a corpus with its offline (mapped) document index and plan."""
    directory = write_corpus(str(tmp_path_factory.mktemp("pod") / "c"), {"train": documents(20000, longest=30)})
    meta = formats.read_meta(directory)
    ends = TokenDocumentSource(TokenBytes(directory)).ends
    save_document_ends(formats.derived_path(directory, "train", DOCUMENTS), meta.fingerprint(), ends)
    plan = plan_packing(lengths_of(ends), SEQ_LEN + 1, BINS)
    plan.save(formats.derived_path(directory, "train", packing_name(SEQ_LEN + 1, BINS)), meta.fingerprint())
    spec = PackedTokens(path=directory, seq_len=SEQ_LEN, packing_bins=BINS, val_batches=0, loading=SERIAL)
    data = spec.load(batch=BATCH)
    assert isinstance(data.train, GlobalReader) and data.records is not None and data.records > 2 * BATCH
    return data.train


def records(reader: GlobalReader) -> int:
    order = reader.order
    assert isinstance(order, MixtureOrder)
    return len(order.corpora[0].source)


def windows(reader: GlobalReader, ks: np.ndarray) -> np.ndarray:
    """The corpus windows global records `ks` are: what a share reading them gets."""
    order = reader.order
    assert isinstance(order, MixtureOrder)
    return order.locate(ks)[1]


def global_records(reader: GlobalReader, step: int, shares: int, readers: int = 1) -> list[list[np.ndarray]]:
    """[share][reader] → the global records that reader of that share reads at `step`."""
    return [
        [share_records(reader.schedule, DataPartition(i, shares, readers, r), step) for r in range(readers)]
        for i in range(shares)
    ]


@pytest.mark.parametrize(("shares", "readers"), [(SHARES, 1), (SHARES // 4, 4), (SHARES, 2)])
def test_every_window_is_read_once_an_epoch_by_disjoint_shares(reader, shares: int, readers: int) -> None:
    n = records(reader)
    steps = -(-n // BATCH)
    seen = []
    for step in range(steps):
        per_share = global_records(reader, step, shares, readers)
        for share in per_share:  # every reader of a share reads the same records
            assert all(np.array_equal(share[0], other) for other in share[1:])
        ks = np.concatenate([share[0] for share in per_share])
        assert len(ks) == BATCH and len(np.unique(ks)) == BATCH  # disjoint shares, a whole batch
        seen.append(ks)
    ks = np.sort(np.concatenate(seen))
    np.testing.assert_array_equal(ks, np.arange(steps * BATCH))
    epoch = windows(reader, ks[ks < n])
    np.testing.assert_array_equal(np.sort(epoch), np.arange(n))  # each window once in the epoch


def test_a_position_saved_on_one_share_resumes_exactly_on_4096(reader) -> None:
    with GlobalStream(reader.order, reader.schedule, DataPartition(), reader.loading) as single:
        for _ in range(3):
            next(single)
        state = json.loads(json.dumps(single.get_state()))
        expected = [next(single) for _ in range(2)]
    pod = GlobalStream(reader.order, reader.schedule, DataPartition(SHARES - 1, SHARES), reader.loading)
    pod.set_state(state)  # accepted on a share of 4096, at the same global record count
    assert pod.records == 3 * BATCH
    pod.close()
    step = reader.schedule.step_at(state["records"])
    for offset, batch in enumerate(expected):
        per_share = [rows[0] for rows in global_records(reader, step + offset, SHARES)]
        interleaved = np.empty(BATCH, dtype=np.int64)
        for i, ks in enumerate(per_share):
            interleaved[i::SHARES] = ks  # row j of share i is row i + j * SHARES of the global batch
        single_ks = share_records(reader.schedule, DataPartition(), step + offset)
        np.testing.assert_array_equal(interleaved, single_ks)
        got = reader.order.read(interleaved)
        for key, value in batch.items():
            np.testing.assert_array_equal(got[key], value)
