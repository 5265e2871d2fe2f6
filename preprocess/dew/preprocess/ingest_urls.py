"""IngestUrls: url lists → fetched, checked, resized, encoded → a committed `dew.images/1` directory.

    read rows (no fetch) → route each row to its shard by its draw → group by shard
    → fetch, encode and write each shard with its status table → stats.json → meta.json

Rows go through the writer skeleton (dew.preprocess.writing) as the images job's records do: a hash
of (file name, row) picks the split and the shard, and shard counts come from the number of input rows,
so which row goes where never depends on what a fetch gave or when; the skeleton's shard writer is
replaced by fetching. Within a shard records are in key order. The commit protocol holds: shards
committed one by one, meta.json last, a crashed run resumed shard by shard, another config refused.
stats.json balances the books (rows in = written + dropped by reason) against the status tables, and
the commit fails when a table does not describe the shard beside it.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterable, Mapping
from typing import Any

import apache_beam as beam

from dew.data.formats import Meta, Shard
from dew.data.images import fetch
from dew.preprocess import commit, files, url_status
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import DAMAGED, STATS_TAG
from dew.preprocess.drops import check_books, check_drops
from dew.preprocess.image_reading import FILE_REASONS, NEWER_REASONS, ROW_REASONS
from dew.preprocess.ingest_plan import IngestPlan
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import GroupByShard
from dew.preprocess.url_fetching import FetchShard
from dew.preprocess.url_reading import ReadUrls
from dew.preprocess.writing import WriteDrawn

DROP_REASONS = (*fetch.DROP_REASONS, *ROW_REASONS, *FILE_REASONS)


class IngestUrls(beam.PTransform):
    """PCollection[tuple[Source, ...]] of url lists (image_sources.reads) → a committed images directory in
    plan.images.output; yields its Meta.

    refetch: committed shards whose status table lists rows dropped for a reason worth asking again
    (url_status.REFETCHED) are rewritten with those rows fetched anew and every other record copied as is.
    """

    def __init__(self, plan: IngestPlan, identity: JobIdentity, *, refetch: bool, label: str | None = None) -> None:
        super().__init__(label)
        self.plan = plan
        self.identity = identity
        self.refetch = refetch

    def expand(self, sources: beam.PCollection) -> beam.PCollection:
        plan = self.plan
        read = sources | "ReadUrls" >> ReadUrls(plan.images.read)
        fetch_shards = FetchShard(plan, self.identity, refetch=self.refetch)

        def write(routed: beam.PCollection, counts: Any) -> beam.PCollection:
            return (
                routed
                | "AsRows" >> beam.MapTuple(lambda shard, kv: (shard, (tuple(kv[0]), *kv[1])))
                | "GroupByShard" >> GroupByShard(counts)
                | "FetchShards" >> beam.ParDo(fetch_shards, counts)
            )

        images = plan.images
        return (
            read.urls
            | "Drawn" >> beam.MapTuple(lambda key, row: (key, ((row[0], row[1]), row[2])))
            | "Write"
            >> WriteDrawn(
                images.output,
                ShardFormat(ext=images.ext, section=images.section()),
                self.identity,
                sharding=plan.sharding(),
                amount=_one_row,
                finish=functools.partial(_finish, images.output),
                side=(beam.pvalue.AsList(read[STATS_TAG]),),
                write=write,
            )
        )


def _one_row(_: object) -> int:
    return 1


def ingest_stats(output: str, meta: Meta, tallies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """stats.json: rows in, written, dropped by reason, and the status tables; refuses books that do not balance."""
    rows_in = 0
    dropped: collections.Counter[str] = collections.Counter({reason: 0 for reason in DROP_REASONS})
    damaged: list[dict[str, Any]] = []
    for tally in tallies:
        rows_in += tally.get("images_in", 0)
        dropped.update({name: n for name, n in tally.items() if name in DROP_REASONS})
        # Named only once counted, so the stats of a run without such rows stay what they were.
        dropped.update({name: n for name, n in tally.items() if name in NEWER_REASONS and n})
        damaged.extend(tally.get(DAMAGED, ()))
    status: dict[str, list[str]] = {}
    to_refetch = 0
    for split, shards in meta.splits.items():
        for shard in shards:
            table = _status_of(output, shard)
            dropped.update(table.drops())
            to_refetch += len(table.to_refetch())
            status.setdefault(split, []).append(url_status.status_name(shard.name))
    written = meta.record_count
    check_books("url", rows_in, written, dropped, read="rows read")
    return {
        "urls_in": rows_in,
        "images_written": written,
        "dropped": dict(dropped),
        "refetchable": to_refetch,
        "status_tables": status,
        "damaged_inputs": sorted(damaged, key=lambda d: d["path"]),
        "splits": commit.split_stats(meta, "images"),
        "fingerprint": meta.fingerprint(),
    }


def _status_of(output: str, shard: Shard) -> url_status.Status:
    table = url_status.read_status(files.join(output, url_status.status_name(shard.name)))
    written = len(table.written())
    if table.shard_sha256 != shard.sha256 or written != shard.records:
        raise RuntimeError(
            f"{url_status.status_name(shard.name)} describes another shard than the committed {shard.name} "
            f"({written} written rows, shard sha256 {table.shard_sha256[:12]}…, the shard holds {shard.records} "
            f"records, sha256 {shard.sha256[:12]}…); rerun the job to rewrite it"
        )
    return table


# The flag to check first when every row is dropped for this reason.
_HINTS = {
    "missing_field": "see --url_field and --caption_field",
    "bad_url": "are these http(s) urls?",
    "no_image": "do these urls name images rather than pages?",
    "too_small": "see --min_size",
    "unencodable": "see --encoding, --resize and --size",
}


def _finish(output: str, meta: Meta, tallies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    stats = ingest_stats(output, meta, tallies)
    if not stats["refetchable"]:
        # Nothing written and nothing a --refetch_failed run could still fetch: a wrong --url_field or
        # wrong files, never a corpus. (Rows that timed out are kept committed for that later run.)
        check_drops({**stats, "urls_written": stats["images_written"]}, 1.0, unit="urls", hints=_HINTS)
    return stats
