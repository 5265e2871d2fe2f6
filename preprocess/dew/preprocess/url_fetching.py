"""FetchShard: one shard's rows → fetched, checked, resized, encoded → the committed shard and its status table.

The shard, not the record, is the unit of work, as in img2dataset: a committed shard whose status
table matches it is skipped before a single url is fetched, so a rerun after a crash costs only the
shards that were missing. Within a shard a pool of threads fetches through one shared Fetcher (per-host
limits, Retry-After backoff, per-fetch deadline), and each thread also decodes and resizes what it
fetched, since Pillow and OpenCV release the GIL while they work. Results are spilled as they complete
and written in key order, so timing decides nothing but speed; a hung server holds a shard no longer
than the fetch deadline times the attempts.
"""

from __future__ import annotations

import concurrent.futures
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.extras import require
from dew.data.formats import shard_name
from dew.data.images import fetch, pixels
from dew.preprocess import commit, files, progress, url_status
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import NAMESPACE
from dew.preprocess.ingest_plan import IngestPlan
from dew.preprocess.piece_lengths import park_lengths
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import WRITE_PHASE, commit_shard, stage_shard
from dew.preprocess.url_status import Status

Key = tuple[int, int]
Row = tuple[Key, bytes, dict[str, bytes]]
# What one fetch gives: the stored image and the original's (width, height), or the drop reason; bytes fetched.
Outcome = tuple[bytes | None, tuple[int, int], str, int]


def completed(
    pool: concurrent.futures.Executor, work: Callable[[Any], Any], items: Iterable[Any], window: int
) -> Iterator[tuple[Any, Any]]:
    """(item, work(item)) as each finishes, with at most `window` items submitted at once."""
    pending: dict[concurrent.futures.Future[Any], Any] = {}
    queue = iter(items)
    for item in queue:
        pending[pool.submit(work, item)] = item
        if len(pending) >= window:
            break
    while pending:
        done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            item = pending.pop(future)
            following = next(queue, None)
            if following is not None:
                pending[pool.submit(work, following)] = following
            yield item, future.result()


class FetchShard(beam.DoFn):
    """((split, j), [(key, url, fields) | None]) → (split, Shard).

    refetch: a committed shard whose table lists rows worth asking again is rewritten with them fetched anew.
    """

    def __init__(self, plan: IngestPlan, claim: JobIdentity, *, refetch: bool) -> None:
        self.plan = plan
        self.claim = claim  # the run's identity: a table or shard is committed only while it holds the output
        self.refetch = refetch
        self.fmt = ShardFormat(ext=plan.images.ext, section=plan.images.section())

    def setup(self) -> None:
        plan = self.plan
        self.fetcher = fetch.Fetcher(timeout=plan.timeout, retries=plan.retries, policy=plan.policy)
        self.pool = concurrent.futures.ThreadPoolExecutor(plan.threads, thread_name_prefix="dew-fetch")
        self.progress = progress.Tally(WRITE_PHASE)  # fetching is how ingest-urls writes its shards
        names: tuple[str, ...] = (
            "urls_fetched",
            "urls_refetched",
            "bytes_fetched",
            "images_encoded",
            *fetch.DROP_REASONS,
        )
        names += ("shards_written", "shards_skipped", "shards_refetched")
        self.counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name) for name in names}

    def teardown(self) -> None:
        self.fetcher.close()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def process(self, element: tuple[tuple[str, int], Iterable[Any]], counts: Mapping[str, int]) -> Iterator[Any]:
        (split, index), values = element
        output = self.plan.images.output
        name = shard_name(split, index, counts[split], self.fmt.ext)
        rows: list[Row] = sorted(value for value in values if value is not None)
        counted = self.progress.done
        final = files.join(output, name)
        committed: Status | None = None
        if files.exists(final):
            checksums = files.checksums_of(final)
            committed = url_status.current(output, name, checksums.sha256)
            if committed is not None and committed.keys != tuple(key for key, _, _ in rows):
                raise RuntimeError(f"{url_status.status_name(name)} lists other rows than this run routes to {name}")
            if committed is not None and not (self.refetch and committed.to_refetch()):
                lengths = [n for n, reason in zip(committed.lengths, committed.reasons, strict=True) if not reason]
                park_lengths(output, name, self.fmt, np.array(lengths, dtype=np.int64))
                self.counters["shards_skipped"].inc()
                checksums.write_blocks(final, output)
                self.progress.add(len(rows))
                yield split, checksums.shard(name, record_count=len(lengths), units=sum(lengths))
                return
        outcomes: dict[Key, tuple[str, str, int]] = {}  # key → (url, reason, record length)
        kept = _kept(final, self.fmt) if committed is not None else iter(())
        staged = stage_shard(output, name, self.fmt, self._records(rows, committed, kept, outcomes))
        keys = sorted(outcomes)
        status = Status(
            keys=tuple(keys),
            urls=tuple(outcomes[key][0] for key in keys),
            reasons=tuple(outcomes[key][1] for key in keys),
            lengths=tuple(outcomes[key][2] for key in keys),
            shard_sha256=staged.checksums.sha256,
        )
        commit.check_claim(output, self.claim)
        url_status.write_status(output, name, status, keep_previous=committed is not None)
        shard = commit_shard(staged, output, name, self.fmt, claim=self.claim, replace=files.exists(final))
        self.counters["shards_refetched" if committed is not None else "shards_written"].inc()
        self.progress.add(len(rows) - (self.progress.done - counted))  # the rows kept as they were, if any
        self.progress.publish()
        yield split, shard

    def _records(
        self, rows: list[Row], committed: Status | None, kept: Iterator[bytes], outcomes: dict[Key, Any]
    ) -> Iterator[tuple[Key, bytes]]:
        """The shard's records in any order; fills `outcomes` with every row's as a side effect."""
        to_fetch = rows
        if committed is not None:
            retry = committed.to_refetch()
            before = dict(zip(committed.keys, committed.reasons, strict=True))
            to_fetch = [row for row in rows if row[0] in retry]
            for key, url, _ in rows:
                if key in retry:
                    continue
                record = next(kept) if not before[key] else b""
                outcomes[key] = (url.decode(), before[key], len(record))
                if record:
                    yield key, record
            self.counters["urls_refetched"].inc(len(to_fetch))
        window = 2 * self.plan.threads
        for (key, url, fields), outcome in completed(self.pool, self._fetch, to_fetch, window):
            image, (width, height), reason, size = outcome
            # Counted here, in the bundle's thread: Beam records no metric updated from the pool's threads.
            self.counters["urls_fetched"].inc()
            self.counters["bytes_fetched"].inc(size)
            self.progress.add()
            record = b""
            if image is not None:
                record = pack_dict_of_byte_arrays(
                    {
                        "image": image,
                        "caption": fields["caption"],
                        "url": url,
                        "width": str(width).encode(),
                        "height": str(height).encode(),
                        **{name: value for name, value in fields.items() if name != "caption"},
                    }
                )
                self.counters["images_encoded"].inc()
                yield key, record
            else:
                self.counters[reason].inc()
            outcomes[key] = (url.decode(), reason, len(record))

    def _fetch(self, row: Row) -> Outcome:
        url = row[1].decode()
        try:
            data = self.fetcher.get(url)
        except fetch.Dropped as dropped:
            return None, (0, 0), dropped.reason, 0
        try:
            image = self.plan.images.image_bytes(data)
            sides = pixels.image_size(data)
        except pixels.ImageRejected as rejected:
            return None, (0, 0), rejected.reason, len(data)
        return image, sides, "", len(data)


def _kept(final: str, fmt: ShardFormat) -> Iterator[bytes]:
    """The records of a committed shard in order, read a few at a time (they are its written rows, in key order)."""
    with tempfile.TemporaryDirectory(prefix="dew-refetch-") as work:
        local = files.download(final, work)
        if fmt.ext == "parquet":
            pq = require("pyarrow.parquet", for_what="parquet shards")
            for batch in pq.ParquetFile(local).iter_batches(batch_size=64, columns=list(fmt.fields)):
                for row in batch.to_pylist():
                    yield pack_dict_of_byte_arrays({field: row[field] for field in fmt.fields})
            return
        from array_record.python.array_record_module import ArrayRecordReader

        reader = ArrayRecordReader(local)
        try:
            total = reader.num_records()
            for start in range(0, total, 64):
                yield from reader.read(start, min(total, start + 64))
        finally:
            reader.close()
