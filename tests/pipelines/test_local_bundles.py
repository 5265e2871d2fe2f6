"""A local run sends a worker its share of a grouping in pieces: the same groups, cut into messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dew.pipelines import common, local_bundles, zygotes

pytestmark = pytest.mark.beam


def _groups(out: Path) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
    """Every group of a GroupByKey of ~16 MiB through dew's local runner (in this process), and the
    pieces of each partition it sent."""
    import apache_beam as beam
    from apache_beam.runners.portability.fn_api_runner import execution

    options = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    pipeline = common.make_pipeline(common.pipeline_options(options))
    pieces: list[list[int]] = []
    installed = execution.GroupingBuffer.partition

    def counted(self, n):
        parts = installed(self, n)
        pieces.append([len(part) for part in parts])
        return parts

    execution.GroupingBuffer.partition = counted
    try:
        rows = (
            pipeline
            | beam.Create(range(400))
            | beam.FlatMap(lambda i: [(i % 100, bytes([i % 251]) * 10_000 + b"%d" % j) for j in range(4)])
            | beam.GroupByKey()
            | beam.Map(lambda kv: (kv[0], len(kv[1]), sum(len(v) for v in kv[1])))
        )
        rows | beam.combiners.ToList() | beam.Map(lambda found: out.write_text(json.dumps(sorted(found))))
        pipeline.run().wait_until_finish()
    finally:
        execution.GroupingBuffer.partition = installed
    return [tuple(row) for row in json.loads(out.read_text())], pieces


def test_a_grouping_reaches_the_worker_whole_in_several_pieces(tmp_path: Path):
    found, pieces = _groups(tmp_path / "groups.json")
    assert local_bundles._installed
    # 100 keys, each of 16 values of 10,001-10,003 bytes: every value arrives, once, in its group.
    assert [(key, count) for key, count, _ in found] == [(key, 16) for key in range(100)]
    assert all(16 * 10_001 <= size <= 16 * 10_003 for *_, size in found)
    # ~16 MiB in 4 MiB pieces: the worker got it as several messages, not one.
    assert max(max(part) for part in pieces) >= 3


def test_pieces_keep_whole_elements_and_their_order():
    from apache_beam import coders
    from apache_beam.coders.coder_impl import create_InputStream
    from apache_beam.runners.portability.fn_api_runner import execution
    from apache_beam.transforms import core

    pre = coders.WindowedValueCoder(coders.TupleCoder([coders.VarIntCoder(), coders.BytesCoder()]))
    post = coders.WindowedValueCoder(
        coders.TupleCoder([coders.VarIntCoder(), coders.IterableCoder(coders.BytesCoder())])
    )
    windowing = core.Windowing(core.GlobalWindows())

    def filled() -> execution.GroupingBuffer:
        buffer = execution.GroupingBuffer(pre, post, windowing)
        from apache_beam.coders.coder_impl import create_OutputStream
        from apache_beam.transforms.window import GlobalWindows

        stream = create_OutputStream()
        for i in range(3000):
            pre.get_impl().encode_to_stream(GlobalWindows.windowed_value((i % 700, b"v" * 3000)), stream, True)
        buffer.append(stream.get())
        return buffer

    def decoded(parts: list[list[bytes]]) -> list[list[tuple[int, list[bytes]]]]:
        out = []
        for part in parts:
            elements = []
            for piece in part:
                stream = create_InputStream(piece)
                while stream.size() > 0:  # each piece holds whole elements
                    key, values = post.get_impl().decode_from_stream(stream, True).value
                    elements.append((key, list(values)))
            out.append(elements)
        return out

    local_bundles.install()
    ours = filled().partition(2)
    assert max(len(part) for part in ours) > 1
    beam_own = local_bundles._beam_partition(filled(), 2)
    assert [len(part) for part in beam_own] == [1, 1]
    assert decoded(ours) == decoded(beam_own)


def test_bound_malloc_leaves_a_threshold_the_user_set(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert zygotes.bound_malloc() is False
