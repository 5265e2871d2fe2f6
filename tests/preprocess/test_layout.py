"""The layout alone (no Beam): any file and document sizes route to shards that concatenate to the corpus."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.preprocess.layout import TRAIN, VAL, FileLengths, Layout, ShardMap, locate

files_of_documents = st.lists(st.lists(st.integers(0, 40), max_size=12), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(files=files_of_documents, val=st.sampled_from([0.0, 0.1, 0.37, 0.5]), shards=st.integers(1, 7))
def test_shards_concatenate_to_the_corpus_cut_at_the_exact_token(files, val, shards) -> None:
    # Document (f, r) holds tokens f * 1000 + r repeated, so a misplaced or reordered piece shows.
    docs = {
        (f, r): np.full(n, f * 1000 + r, dtype=np.int64) for f, lens in enumerate(files) for r, n in enumerate(lens)
    }
    lengths = [FileLengths.of(f, [(r, n) for r, n in enumerate(lens)]) for f, lens in enumerate(files)]
    layout = Layout.plan([x.summary() for x in lengths], val_fraction=val, itemsize=2, shard_bytes=1, num_shards=shards)
    located = [item for x in lengths for item in locate(x, layout)]
    routes = ShardMap.of(layout, located)
    found: dict = {}
    for key in sorted(docs, key=lambda k: hash(k)):  # arrival order must not matter
        for shard, (k, piece) in routes.assign(key, docs[key]):
            found.setdefault(shard, []).append((k, piece))
    stream = np.concatenate([docs[k] for k in sorted(docs)]) if docs else np.zeros(0, np.int64)
    cut = len(stream) - int(len(stream) * val)
    for split, want in ((TRAIN, stream[:cut]), (VAL, stream[cut:])):
        count = layout.shards.get(split, 0)
        assert set(s for s in found if s[0] == split) <= {(split, j) for j in range(count)}
        pieces = [p for j in range(count) for _, p in sorted(found.get((split, j), []), key=lambda x: x[0])]
        got = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        np.testing.assert_array_equal(got, want)
        # Shard j holds no document that starts before j / count of the split (shards break between documents).
        start, stop = layout.split_range(split)
        offset = start
        for j in range(count):
            for key, piece in sorted(found.get((split, j), []), key=lambda x: x[0]):
                whole = len(piece) == len(docs[key])
                if whole and j:
                    assert offset >= start + (stop - start) * j // count
                offset += len(piece)
    assert layout.documents == sum(1 for d in docs.values() if len(d))
    assert layout.empty_documents == sum(1 for d in docs.values() if not len(d))
    assert layout.first_empty == min((k for k, d in docs.items() if not len(d)), default=None)


def test_shard_count_follows_the_bytes_unless_fixed() -> None:
    summaries = [(0, 1000, 10, 0, -1), (1, 3000, 5, 1, 4)]
    layout = Layout.plan(summaries, val_fraction=0.25, itemsize=2, shard_bytes=1024)
    assert layout.shards == {TRAIN: 6, VAL: 2} and layout.cut == 3000 and layout.file_starts == {0: 0, 1: 1000}
    assert Layout.plan(summaries, val_fraction=0.0, itemsize=2, shard_bytes=1024, num_shards=5).shards == {TRAIN: 5}
