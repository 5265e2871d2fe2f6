"""A local run's bundle inputs sent to its workers in pieces of a few MiB, not as one message.

Beam's local runner (FnApiRunner, which DirectRunner runs Python pipelines on) processes a stage as one
bundle per worker. Its GroupingBuffer encodes a worker's whole share of a GroupByKey's output into one
byte string, and the bundle manager sends a bundle's input in one data message however many pieces it
holds. So a worker received its share of each grouped stage at once, and held it (the message, its
parsed copy, its bytes) while it worked through it: a worker's peak memory grew with the corpus, for any
job (bench_clean_memory.py measured it on a shuffle-only pipeline too), and a share over 2 GiB would fail
on gRPC's message limit.

`install()` changes both, for every local run in this process: a worker's share of a grouping is encoded
in pieces of about PIECE bytes (each holding whole elements, in the order Beam gives them), and a bundle's
input is sent a message every PIECE bytes. Elements, their order and their split between workers stay as
Beam makes them; only the cut of the byte stream into messages changes, so what a worker holds at once is
a few pieces, whatever the corpus. The launcher still holds each grouping whole: on this runner it is the
shuffle (Dataflow's runs in its own service).
"""

from __future__ import annotations

from typing import Any

PIECE = 4 << 20
_installed = False
_beam_partition: Any = None  # GroupingBuffer.partition as Beam has it, once install() replaced it


def install() -> None:
    """Makes this process's local runs send bundle inputs in pieces (idempotent)."""
    global _installed, _beam_partition
    if _installed:
        return
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

    _beam_partition = beam_partition = execution.GroupingBuffer.partition

    def partition(self: Any, n: int) -> list[list[bytes]]:
        if self._grouped_output or not self._windowing.is_default():
            return beam_partition(self, n)
        return _partition_in_pieces(self, n)

    execution.GroupingBuffer.partition = partition  # type: ignore[method-assign]
    fn_runner.BundleManager._send_input_to_worker = _send_in_pieces  # type: ignore[method-assign]
    _installed = True


def _partition_in_pieces(buffer: Any, n: int) -> list[list[bytes]]:
    """GroupingBuffer.partition for the global window, each part a list of pieces rather than one string."""
    from apache_beam.coders.coder_impl import create_OutputStream
    from apache_beam.transforms.window import GlobalWindow, GlobalWindows
    from apache_beam.utils import windowed_value

    pane = windowed_value.PaneInfo(
        is_first=True, is_last=True, timing=windowed_value.PaneInfoTiming.ON_TIME, index=0, nonspeculative_index=0
    )
    window = GlobalWindows.windowed_value(None, timestamp=GlobalWindow().max_timestamp(), pane_info=pane).with_value
    coder = buffer._post_grouped_coder.get_impl()
    key_coder = buffer._key_coder.get_impl()
    parts: list[list[bytes]] = [[] for _ in range(n)]
    streams = [create_OutputStream() for _ in range(n)]
    for index, (encoded_key, values) in enumerate(buffer._table.items()):
        stream = streams[index % n]
        coder.encode_to_stream(window((key_coder.decode(encoded_key), values)), stream, True)
        if stream.size() >= PIECE:
            parts[index % n].append(stream.get())
            streams[index % n] = create_OutputStream()
    for part, stream in zip(parts, streams, strict=True):
        if stream.size() or not part:
            part.append(stream.get())
    buffer._grouped_output = parts
    buffer._table.clear()
    return parts


def _send_in_pieces(self: Any, process_bundle_id: str, read_transform_id: str, byte_streams: Any) -> None:
    """BundleManager._send_input_to_worker, flushing a message whenever PIECE bytes are waiting."""
    data_out = self._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)
    for byte_stream in byte_streams or []:
        data_out.write(byte_stream)
        if data_out.size() >= PIECE:
            data_out.flush()
    data_out.close()
