"""A token corpus on gs:// read by range, through a proxy that adds latency and caps bandwidth.

The GCS emulator runs in a process of its own on 127.0.0.1, and in front of it, in another, the test
suite's FaultProxy adding LATENCY s to every request and sending every body at most BANDWIDTH bytes/s
together. A corpus of .bin shards with block checksums is read by TokenWindows (seq_len 2048, batch
32) three ways, each from an empty cache:
- first batch: the bytes fetched for it against the bytes of its windows, and what the whole-shard
  path (the same corpus with meta.json's block fields removed) fetched for the same batch;
- one epoch with DEW_CACHE_BYTES = corpus / 5: bytes fetched against the corpus, and the most disk the
  cache held (allocated blocks, sampled after every step) against the budget;
- steady state: tokens/s over the steps after the first few, as a ratio to the same corpus read from
  local disk in this run (the baseline), at 20 ms and at 100 ms a request.
An images corpus (ArrayRecord shards with record indexes, photographs padded to 8-24 kB a record) is
read the same ways at the record level (ImageRecords.read_batch, batch 32, no decoding): the first
batch's bytes against its records' chunk bytes and the whole-shard path's, an epoch in random order
with a cache of corpus / 5 (bytes fetched, most disk held), and that epoch's records/s against the
same epoch read from local disk.
Block sizes: the same token documents written with block checksums of 4096 bytes (the layout before
.bin shards took integrity.TOKEN_BLOCK_BYTES, and the baseline of these rows) and of 512, 256 and 128,
each read through the emulator directly: the epoch with a cache of corpus / 5 (bytes fetched against
the corpus, block files included and not, range requests a step, most disk held) and the first batch.
Checksum layouts: larger .bin shards (8 MiB, 256-byte blocks) written with the flat .blocks (version 1,
the baseline of these rows) and the two-level one (block_sums.BLOCKS_VERSION, at the default
$DEW_CHECKSUM_BYTES and at 256 KiB): checksum bytes and requests of a first batch and of the steps after
it, and the checksum memory the process holds then.
Run: .venv/bin/python benchmarks/bench_gcs_ranges.py   (about a minute and a half)
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_gcs_cache import _free_port, _serve
from checksum_layouts import SUMS_IDS, SUMS_SHARDS, checksum_layouts

from dew.data import (
    Loading,
    block_sums,
    blockcache,
    datasets,
    formats,
    integrity,
    ranges,
    record_shards,
    remote,
    shard_cache,
)
from dew.data.images import image_records
from dew.data.record_index import RecordIndex, index_name
from tests.runtime.token_support import write_corpus
from tests.support import gcs_filesystem

BASELINE = "TokenWindows over the same corpus on local disk, in the same run"
SHARDS, DOCS, SEQ_LEN, BATCH = 16, 4000, 2048, 32
BANDWIDTH = 200e6  # bytes/s, every request together
STEADY_STEPS = 40


def _image_records(directory: str) -> image_records.ImageRecords:
    """The train split's records of a committed images directory, local or gs://."""
    return image_records.committed(formats.read_meta(directory, kind="images"), directory, "train")


def _announce(server: Any, port_file: str, stop: Event) -> None:
    """Writes a started server's URL to `port_file`, then stops it when `stop` is set (10 minutes at most)."""
    with open(port_file, "w") as f:
        f.write(server.url)
    stop.wait(timeout=600)
    server.stop()


def _proxy(upstream: str, port_file: str, latency: float, stop: Event) -> None:
    from tests.gcs_faults import FaultProxy

    _announce(FaultProxy(upstream, latency=latency, bandwidth=BANDWIDTH).start(), port_file, stop)


def _read_when_written(path: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                if text := f.read():
                    return text
        time.sleep(0.05)
    raise RuntimeError(f"the proxy did not start within 30 s ({path})")


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered on 127.0.0.1:{port} within 30 s") from None
            time.sleep(0.1)


def _upload(local: str, uri: str, *, drop_blocks: bool = False) -> None:
    fs = gcs_filesystem()
    for name in sorted(os.listdir(local)):
        with open(os.path.join(local, name), "rb") as f:
            data = f.read()
        if name == formats.META and drop_blocks:  # the corpus as a writer before block checksums left it
            meta = formats.Meta.from_json(json.loads(data))
            for shards in meta.splits.values():
                for shard in shards:
                    for field, empty in (
                        ("block_bytes", 0),
                        ("blocks_crc32c", ""),
                        ("blocks_version", 0),
                        ("index_version", 0),
                    ):
                        object.__setattr__(shard, field, empty)
                    object.__setattr__(shard, "index_crc32c", "")
            data = json.dumps(meta.to_json()).encode()
        with fs.open(f"{uri}/{name}", "wb") as f:
            f.write(data)
    fs.invalidate_cache()


def _fresh_cache(scratch: str, budget: int) -> None:
    """An empty cache directory of its own (the ledger's connections stay with the old one)."""
    cache = tempfile.mkdtemp(prefix="cache-", dir=scratch)
    os.environ["DEW_CACHE_DIR"], os.environ["DEW_CACHE_BYTES"] = cache, str(budget)
    ranges._SUMS.clear()
    block_sums.forget()
    record_shards._INDEXES.clear()
    shard_cache._CHECKED.clear()


def _index_bytes(counters: ranges.Counters) -> int:
    """Index bytes fetched: block checksum files (their top levels, or whole) and their groups, record indexes."""
    return counters.index_bytes + counters.sums_bytes


def _stream(path: str, read_buffer: int = 128) -> Any:
    loading = Loading(workers=0, read_buffer=read_buffer)  # 128: 4 steps of 32 read ahead over gs://
    data = datasets.TokenWindows(path=path, seq_len=SEQ_LEN, val_batches=None, loading=loading)
    return data.load(batch=BATCH)


def _steady(path: str) -> tuple[float, float]:
    """(tokens/s, range requests/s) over STEADY_STEPS steps after three to start."""
    with _stream(path).train() as stream:
        for _ in range(3):
            next(stream)
        start, requests = time.perf_counter(), ranges.FETCHED.requests
        for _ in range(STEADY_STEPS):
            next(stream)
        seconds = time.perf_counter() - start
    return STEADY_STEPS * BATCH * (SEQ_LEN + 1) / seconds, (ranges.FETCHED.requests - requests) / seconds


def main() -> None:
    print(f"baseline: {BASELINE}")
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    port = _free_port()
    emulator = spawn.Process(target=_serve, args=(port, stop), daemon=True)
    emulator.start()
    _wait(port)
    upstream = f"http://127.0.0.1:{port}"
    os.environ["STORAGE_EMULATOR_HOST"] = upstream
    rows, children = [], [emulator]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            rng = np.random.default_rng(0)
            docs = [np.append(rng.integers(1, 60000, rng.integers(200, 1000)), 0) for _ in range(DOCS)]  # eos-closed
            block = integrity.TOKEN_BLOCK_BYTES
            local = write_corpus(os.path.join(scratch, "corpus"), {"train": docs}, shards=SHARDS, block_bytes=block)
            corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
            uri, whole = "gs://dew-bench/ranged", "gs://dew-bench/whole"
            _upload(local, uri)
            _upload(local, whole, drop_blocks=True)
            local_rate, _ = _steady(local)
            images = _image_corpus(scratch)
            images_uri, images_whole = "gs://dew-bench/images", "gs://dew-bench/images-whole"
            _upload(images, images_uri)
            _upload(images, images_whole, drop_blocks=True)
            local_records = _image_epoch(images)[0]
            layouts = _block_sizes(scratch, docs, corpus)
            sums = checksum_layouts(scratch, _upload, _fresh_cache, _stream, BATCH * (SEQ_LEN + 1) * 2)
            # The emulator without the proxy: the ceiling this machine's emulator sets, whatever the latency.
            rows.append(_measure(scratch, uri, whole, corpus, 0.0, local_rate))
            rows.append(_measure_images(scratch, images, images_uri, images_whole, 0.0, local_records))
            for latency in (0.02, 0.1):
                port_file = os.path.join(scratch, f"proxy-{latency}")
                proxy = spawn.Process(target=_proxy, args=(upstream, port_file, latency, stop), daemon=True)
                proxy.start()
                children.append(proxy)
                os.environ["STORAGE_EMULATOR_HOST"] = _read_when_written(port_file)
                rows.append(_measure(scratch, uri, whole, corpus, latency, local_rate))
                rows.append(_measure_images(scratch, images, images_uri, images_whole, latency, local_records))
    finally:
        stop.set()
        for child in children:
            child.join(timeout=30)
    print(f"corpus: {SHARDS} .bin shards, {corpus / 1e6:.1f} MB; windows of {SEQ_LEN + 1} ids, batch {BATCH}")
    print(f"images: {IMAGE_SHARDS} ArrayRecord shards of {IMAGE_RECORDS} records, batch {IMAGE_BATCH}")
    print(
        f"link: the proxy's latency a request, {BANDWIDTH / 1e6:.0f} MB/s cap; local: {local_rate / 1e6:.1f} M tokens/s"
    )
    for row in rows:
        print(row)
    print(f"block sizes (direct; the ratios against {BLOCK_SIZES[0]}-byte blocks, the baseline of these rows):")
    for row in layouts:
        print(row)
    print(
        f"checksum layouts (direct; {SUMS_SHARDS} .bin shards of {SUMS_IDS * 2 >> 20} MiB, 256-byte blocks; baseline:"
    )
    print("the flat layout, version 1, in the same run; first batch, then the next steps, one process):")
    for row in sums:
        print(row)


def _measure(scratch: str, uri: str, whole: str, corpus: int, latency: float, local_rate: float) -> str:
    batch_bytes = BATCH * (SEQ_LEN + 1) * 2
    _fresh_cache(scratch, 64 << 30)
    with _stream(whole, read_buffer=1).train() as stream:
        next(stream)
    whole_first = sum(
        os.path.getsize(os.path.join(d, n))
        for d, _, ns in os.walk(remote.cache_dir())
        for n in ns
        if n.endswith(".bin")
    )
    _fresh_cache(scratch, 64 << 30)
    before, index = ranges.FETCHED.bytes, _index_bytes(ranges.FETCHED)
    with _stream(uri, read_buffer=1).train() as stream:  # nothing read ahead: the first batch alone
        next(stream)
        first = ranges.FETCHED.bytes - before
        index = _index_bytes(ranges.FETCHED) - index
    budget = corpus // 5
    epoch, most = _epoch(scratch, uri, corpus)
    _fresh_cache(scratch, budget)
    rate, requests = _steady(uri)
    where = f"{latency * 1000:.0f} ms" if latency else "direct"
    return (
        f"{where:>6}: first batch {first / batch_bytes:.2f}x its bytes (+ {index / 1e3:.0f} kB of block "
        f"indexes; whole shards: {whole_first / batch_bytes:.0f}x) | epoch, cache corpus/5: "
        f"{epoch.bytes / epoch.asked:.2f}x the windows' bytes fetched "
        f"({(epoch.bytes + _index_bytes(epoch)) / epoch.asked:.2f}x with the indexes), disk held at most "
        f"{most / budget:.2f}x the budget | steady {rate / 1e6:.2f} M tokens/s = {rate / local_rate:.3f}x local "
        f"({requests:.0f} requests/s)"
    )


BLOCK_SIZES = (4096, 512, 256, 128)


def _epoch(scratch: str, uri: str, corpus: int) -> tuple[ranges.Counters, int]:
    """What one epoch, from an empty cache of corpus / 5, asked of gs:// (ranges.Counters: `asked` is
    the windows' bytes, the stream's read-ahead past the last step included), and the most disk held."""
    _fresh_cache(scratch, corpus // 5)
    before, most = dataclasses.replace(ranges.FETCHED), 0
    with _stream(uri).train() as stream:
        for _ in range(corpus // (BATCH * (SEQ_LEN + 1) * 2)):
            next(stream)
            most = max(most, blockcache.allocated())
    fields = dataclasses.fields(ranges.Counters)
    return ranges.Counters(**{f.name: getattr(ranges.FETCHED, f.name) - getattr(before, f.name) for f in fields}), most


def _block_sizes(scratch: str, docs: list[np.ndarray], corpus: int) -> list[str]:
    """One row a block size: the epoch and the first batch of the same documents written with it."""
    rows, base = [], 0.0
    steps, batch_bytes = corpus // (BATCH * (SEQ_LEN + 1) * 2), BATCH * (SEQ_LEN + 1) * 2
    for block in BLOCK_SIZES:
        local = write_corpus(
            os.path.join(scratch, f"blocks-{block}"), {"train": docs}, shards=SHARDS, block_bytes=block
        )
        uri = f"gs://dew-bench/blocks-{block}"
        _upload(local, uri)
        _fresh_cache(scratch, 64 << 30)
        before, index = ranges.FETCHED.bytes, _index_bytes(ranges.FETCHED)
        with _stream(uri, read_buffer=1).train() as stream:
            next(stream)
            first, first_index = ranges.FETCHED.bytes - before, _index_bytes(ranges.FETCHED) - index
        epoch, most = _epoch(scratch, uri, corpus)
        total = epoch.bytes / epoch.asked + _index_bytes(epoch) / corpus  # per epoch of the corpus
        base = base or total
        rows.append(
            f"{block:>5} B: epoch, cache corpus/5: {epoch.bytes / epoch.asked:.3f}x the windows' bytes fetched + "
            f"{_index_bytes(epoch) / corpus:.3f}x the corpus in block files = {total:.3f}x ({total / base:.3f}x the "
            f"{BLOCK_SIZES[0]}-byte layout's), {epoch.requests / steps:.0f} range requests a step, disk held at "
            f"most {most / (corpus // 5):.2f}x the budget | first batch {first / batch_bytes:.3f}x its bytes + "
            f"{first_index / 1e3:.1f} kB of block files"
        )
    return rows


IMAGE_SHARDS, IMAGE_RECORDS, IMAGE_BATCH = 12, 48, 32


def _image_corpus(scratch: str, shards: int = IMAGE_SHARDS, per_shard: int = IMAGE_RECORDS) -> str:
    """A committed images corpus of `shards` ArrayRecord shards of `per_shard` photographs padded to 8-24 kB."""
    from tests.runtime.image_support import records, write_committed

    rng = np.random.default_rng(1)
    pads = [rng.bytes(int(rng.integers(8000, 24000))) for _ in range(shards * per_shard)]
    rows = records(len(pads), pad=pads)
    local = os.path.join(scratch, "images")
    split = [rows[i * per_shard : (i + 1) * per_shard] for i in range(shards)]
    write_committed(local, {"train": split}, checksums=True)
    return local


def _chunk_bytes(local: str) -> np.ndarray:
    """Every record's chunk bytes, in corpus order, from the local copy's record indexes."""
    sizes = []
    for shard in formats.read_meta(local).shards("train"):
        with open(index_name(os.path.join(local, shard.name)), "rb") as f:
            index = RecordIndex.parse(f.read(), record_count=shard.records, size=shard.bytes, where=shard.name)
        sizes.append(np.diff(index.bounds))
    return np.concatenate(sizes)


def _image_epoch(path: str) -> tuple[float, int]:
    """(records/s, most disk the block cache held) over one epoch of batches in a fixed random order."""
    records = _image_records(path)
    order = np.random.default_rng(3).permutation(len(records))
    start, most = time.perf_counter(), 0
    for batch in np.array_split(order, len(order) // IMAGE_BATCH):
        records.read_batch(batch)
        most = max(most, blockcache.allocated()) if remote.is_remote(path) else 0
    return len(order) / (time.perf_counter() - start), most


def _measure_images(scratch: str, local: str, uri: str, whole: str, latency: float, local_records: float) -> str:
    chunks = _chunk_bytes(local)
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    batch = np.random.default_rng(4).choice(len(chunks), IMAGE_BATCH, replace=False)
    _fresh_cache(scratch, 64 << 30)
    _image_records(whole).read_batch(batch)
    cached = [os.path.join(d, n) for d, _, ns in os.walk(remote.cache_dir()) for n in ns]
    whole_first = sum(os.path.getsize(p) for p in cached if p.endswith(".array_record"))
    _fresh_cache(scratch, 64 << 30)
    before, index = ranges.FETCHED.bytes, _index_bytes(ranges.FETCHED)
    _image_records(uri).read_batch(batch)
    first, index = ranges.FETCHED.bytes - before, _index_bytes(ranges.FETCHED) - index
    budget = corpus // 5
    _fresh_cache(scratch, budget)
    before, indexes = ranges.FETCHED.bytes, _index_bytes(ranges.FETCHED)
    rate, most = _image_epoch(uri)
    epoch, indexes = ranges.FETCHED.bytes - before, _index_bytes(ranges.FETCHED) - indexes
    where = f"{latency * 1000:.0f} ms" if latency else "direct"
    record_bytes = int(chunks[batch].sum())
    return (
        f"{where:>6} images: first batch {first / record_bytes:.2f}x its records' bytes (+ {index / 1e3:.0f} kB of "
        f"indexes; whole shards: {whole_first / record_bytes:.0f}x) | epoch, cache corpus/5: {epoch / corpus:.2f}x "
        f"the corpus fetched ({(epoch + indexes) / corpus:.2f}x with the indexes), disk held"
        f" at most {most / budget:.2f}x the budget, {rate:.0f} records/s = "
        f"{rate / local_records:.3f}x local"
    )


if __name__ == "__main__":
    main()
