"""CleanCorpus: input files → a committed `dew.documents/1` directory, end to end, as one PTransform.

    read documents → describe (id, quality verdict and the text it leaves, record, exact key, band keys)
    → exact groups (keep the smallest node of equal normalized texts) → LSH buckets (edges from each
    bucket's smallest node) → connected components → removals (quality, exact, near)
    → join with each document's size by node (kept: its size; removed: a removal row)
    → shard counts → the records and removal rows grouped by shard: removal table, then the shard
    → stats.json → meta.json

The text leaves describe once, to the shard writer (dew.preprocess.cleaning.write); every other step
moves ids, hashes and sizes, so no dedup grouping holds a document's text.

The quality filters run first and decide the text a kept document is written with: C4 drops lines, and
the record, the exact key and the MinHash signature are all of the text it leaves, so a duplicate is
decided on the text that would be written. Documents of --against corpora enter at "describe" as nodes
of a smaller rank: they take part in the exact groups and clusters, so they are kept over any document
of the inputs, and are never written.
Every grouping holds one key's values, and groups that may be large (one text copied a million times,
one crowded bucket) are read twice rather than held; nothing gathers all documents or all pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from dew.data.formats import Meta, Shard
from dew.preprocess import commit, progress, read_documents
from dew.preprocess.cleaning import minhash
from dew.preprocess.cleaning.against import ReadAgainst
from dew.preprocess.cleaning.components import ConnectedComponents
from dew.preprocess.cleaning.plan import (
    DUPLICATE_REASONS,
    EXACT_DUPLICATE,
    NEAR_DUPLICATE,
    CleanPlan,
    document_id,
    node,
    record,
    split_node,
)
from dew.preprocess.cleaning.removals import Removal
from dew.preprocess.cleaning.write import TABLES, TRAIN, WriteCleanShard, record_entry, route_record, route_removal
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import NAMESPACE, STATS_TAG
from dew.preprocess.drops import check_books, check_drops
from dew.preprocess.read_documents import ReadDocuments
from dew.preprocess.shards import GroupByShard, sized_count
from dew.preprocess.writing import build_meta, commit_checked

REMOVED, DEDUP, BANDS, EXACT, EDITED, RECORDS = "removed", "dedup", "bands", "exact", "edited", "records"
_HINTS = {"missing_field": "is the text under --text_field?", "too_long": "see --max_document_bytes"}
_AGAINST_HINT = "--against counts here: are the inputs already in it (an earlier clean of them)?"


def quality_reasons(plan: CleanPlan) -> tuple[str, ...]:
    """The quality reason codes stats.json counts: every one the filters module knows, when they run."""
    if plan.quality is None:
        return ()
    from dew.preprocess.cleaning.quality import QUALITY_REASONS

    return tuple(QUALITY_REASONS)


# The phase that reads each document's quality verdict and MinHash signature, as the progress line names it.
DESCRIBE = "describe"


class _Describe(beam.DoFn):
    """((file, row), text) → (node, (key, record bytes, edited)), plus on REMOVED a quality removal
    (node, (reason, None)), or else on RECORDS its record entry (id, file, row and text, one bytes value:
    dew.preprocess.cleaning.write.record_entry) and on DEDUP its (exact key, (node, band keys)).

    The record is of the text the quality filters leave (C4's kept lines), `edited` says it differs from
    the text read, and dedup hashes that same text. Only RECORDS holds the text: it goes to the shard
    writer (dew.preprocess.cleaning.write), which packs the record there, and everything else is ids,
    hashes and sizes."""

    def __init__(self, plan: CleanPlan) -> None:
        self.plan = plan

    def setup(self) -> None:
        self.signer = minhash.Signer(self.plan.minhash)
        self.filter_text = None
        if self.plan.quality is not None:
            from dew.preprocess.cleaning.quality import filter_text

            self.filter_text = filter_text
            if self.plan.quality.language_model:
                from dew.preprocess.cleaning import langid

                langid.load(self.plan.quality.language_model, self.plan.language_model_sha256)
        self.progress = progress.Tally(DESCRIBE)
        self.described = beam.metrics.Metrics.counter(NAMESPACE, "documents_described")

    def process(self, element: tuple[tuple[int, int], str], paths: Mapping[int, str]) -> Iterator[Any]:
        key, text = element
        source = paths[key[0]]
        doc_id = document_id(source, key[1])
        name = node(self.plan.rank, doc_id)
        self.described.inc()
        self.progress.add()
        kept, reason = (text, None) if self.filter_text is None else self.filter_text(text, self.plan.quality)
        yield name, (key, len(record(doc_id, kept, source, key[1])), kept != text)
        if reason is not None:
            yield beam.pvalue.TaggedOutput(REMOVED, (name, (reason, None)))
            return
        yield beam.pvalue.TaggedOutput(RECORDS, record_entry(doc_id, key[0], key[1], kept))
        if self.plan.exact or self.plan.near:
            yield beam.pvalue.TaggedOutput(DEDUP, dedup_entry(self.plan, self.signer, name, kept))


def dedup_entry(plan: CleanPlan, signer: minhash.Signer, name: bytes, text: str) -> tuple[bytes, tuple[bytes, bytes]]:
    """(exact key, (node, band keys one after another)); without exact dedup the key is the node, a group of
    one. The band keys travel as one bytes value: 14 of them as a list would be 14 values to encode."""
    normalized = minhash.normalize(text)
    key = minhash.exact_key(normalized, text) if plan.exact else name
    signature = signer.signature(normalized) if plan.near else None
    return key, (name, b"" if signature is None else b"".join(signer.band_keys(signature)))


class _DescribeAgainst(beam.DoFn):
    def __init__(self, plan: CleanPlan) -> None:
        self.plan = plan

    def setup(self) -> None:
        self.signer = minhash.Signer(self.plan.minhash)

    def process(self, element: tuple[int, str, str]) -> Iterator[tuple[bytes, tuple[bytes, bytes]]]:
        rank, doc_id, text = element
        yield dedup_entry(self.plan, self.signer, node(rank, doc_id), text)


# The most band groupings: band b of a signature is grouped in grouping b % BAND_GROUPINGS.
BAND_GROUPINGS = 16


def band_groupings(plan: CleanPlan) -> list[str]:
    """The tag of each band grouping: one a band, up to BAND_GROUPINGS.

    A runner whose shuffle is its own process (DirectRunner's) hands a worker its whole share of a
    grouping at once, so one grouping of every band key would be 14 keys a document in one message;
    a grouping a band is one key a document, as small as the exact grouping's."""
    return [f"{BANDS}{g}" for g in range(min(plan.minhash.bands if plan.near else 1, BAND_GROUPINGS))]


def exact_groups(element: tuple[bytes, Iterable[tuple[bytes, bytes]]], groupings: int) -> Iterator[Any]:
    """One normalized text's documents → the keeper's band keys, each on its band grouping's tag, and
    (keeper, other) on EXACT."""
    _, copies = element
    keeper = min(name for name, _ in copies)
    width = minhash.BAND_KEY_BYTES
    for name, bands in copies:  # a second pass: the group is never held
        if name == keeper:
            for start in range(0, len(bands), width):
                band = bands[start : start + width]  # a band key's first byte is its band's number
                yield beam.pvalue.TaggedOutput(f"{BANDS}{band[0] % groupings}", (band, name))
        else:
            yield beam.pvalue.TaggedOutput(EXACT, (keeper, name))


def bucket_edges(element: tuple[bytes, Iterable[bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """A band bucket's documents → an edge from its smallest document to each other one (a star)."""
    _, names = element
    smallest = min(names)
    for name in names:
        if name != smallest:
            yield smallest, name


def _exact_removals(element: tuple[bytes, Mapping[str, Iterable[Any]]], rank: int) -> Iterator[Any]:
    """An exact keeper's copies are removed as duplicates of the keeper's cluster's kept document."""
    keeper, joined = element
    roots = list(joined["root"])
    kept = roots[0] if roots else keeper
    for name in joined["copies"]:
        if split_node(name)[0] == rank:
            yield name, (EXACT_DUPLICATE, kept)


def _near_removals(element: tuple[bytes, bytes], rank: int) -> Iterator[Any]:
    name, root = element
    if name != root and split_node(name)[0] == rank:
        yield name, (NEAR_DUPLICATE, root)


class _Decide(beam.DoFn):
    """(node, {record: (key, record size, edited), removal}) → a kept record's size, plus 1 on EDITED when
    its text is not the text read; or a Removal on REMOVED."""

    def __init__(self, against: Sequence[str]) -> None:
        self.against = list(against)

    def setup(self) -> None:
        self.kept = beam.metrics.Metrics.counter(NAMESPACE, "documents_kept")
        self.removed = beam.metrics.Metrics.counter(NAMESPACE, "documents_removed")

    def process(self, element: tuple[bytes, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        name, joined = element
        records = list(joined["record"])
        removals = list(joined["removal"])
        if not records:
            return  # a document of an --against corpus
        doc_id = split_node(name)[1]
        if len(records) != 1 or len(removals) > 1:
            raise RuntimeError(f"document {doc_id} was read {len(records)} times and removed {len(removals)} times")
        key, size, edited = records[0]
        if not removals:
            self.kept.inc()
            yield size
            if edited:
                yield beam.pvalue.TaggedOutput(EDITED, 1)
            return
        self.removed.inc()
        reason, of = removals[0]
        of_id = of_in = None
        if of is not None:
            of_rank, of_id = split_node(of)
            of_in = self.against[of_rank] if of_rank < len(self.against) else ""
        # The file index, named by its path once the removal is off the join (NameSources).
        yield beam.pvalue.TaggedOutput(REMOVED, (doc_id, reason, of_id, of_in, key[0], key[1]))


class CleanCorpus(beam.PTransform):
    """PCollection[(file index, path)] → a committed documents directory in plan.output; yields its Meta."""

    def __init__(
        self,
        plan: CleanPlan,
        identity: JobIdentity,
        paths: Sequence[str],
        committed: Mapping[str, Shard] | None = None,
        label: str | None = None,
    ) -> None:
        """`committed`: the inputs that are shards of a committed documents directory, with their meta.json
        entries (dew.preprocess.cleaning.against.committed_shards), checked before they are read."""
        super().__init__(label)
        self.plan = plan
        self.identity = identity
        self.paths = list(paths)
        self.committed = dict(committed or {})

    def expand(self, inputs: beam.PCollection) -> beam.PCollection:
        plan, rank = self.plan, self.plan.rank
        pipeline = inputs.pipeline
        read = inputs | "ReadDocuments" >> ReadDocuments(plan.read, self.committed)
        names = beam.pvalue.AsDict(inputs)
        described = read.documents | "Describe" >> beam.ParDo(_Describe(plan), names).with_outputs(
            REMOVED, DEDUP, RECORDS, main="sizes"
        )
        removals = [described[REMOVED]]
        if plan.exact or plan.near:
            against = [
                (r, path, shard)
                for r, corpus in enumerate(plan.against)
                for path, shard in zip(corpus.paths(), corpus.shards, strict=True)
            ]
            others = (
                pipeline
                | "AgainstShards" >> beam.Create(against)
                | "SpreadAgainst" >> beam.Reshuffle()
                | "ReadAgainst" >> beam.ParDo(ReadAgainst())
                | "DescribeAgainst" >> beam.ParDo(_DescribeAgainst(plan))
            )
            tags = band_groupings(plan)
            groups = (
                (described[DEDUP], others)
                | "AllDedup" >> beam.Flatten()
                | "ByText" >> beam.GroupByKey()
                | "ExactGroups" >> beam.FlatMap(exact_groups, len(tags)).with_outputs(*tags, EXACT)
            )
            edges = [
                groups[tag] | f"ByBand{g}" >> beam.GroupByKey() | f"BucketEdges{g}" >> beam.FlatMap(bucket_edges)
                for g, tag in enumerate(tags)
            ] | "AllEdges" >> beam.Flatten()
            roots = edges | "Clusters" >> ConnectedComponents(plan.cc_rounds)
            exact = (
                {"copies": groups[EXACT], "root": roots}
                | "KeeperRoots" >> beam.CoGroupByKey()
                | "ExactRemovals" >> beam.FlatMap(_exact_removals, rank)
            )
            near = roots | "NearRemovals" >> beam.FlatMap(_near_removals, rank)
            removals += [exact, near]
        removal = removals | "AllRemovals" >> beam.Flatten()
        decided = (
            {"record": described.sizes, "removal": removal}
            | "JoinRemovals" >> beam.CoGroupByKey()
            | "Decide" >> beam.ParDo(_Decide([a.path for a in plan.against])).with_outputs(REMOVED, EDITED, main="kept")
        )
        edited = beam.pvalue.AsSingleton(decided[EDITED] | "EditedTexts" >> beam.CombineGlobally(sum))
        kept, removed = decided.kept, decided[REMOVED] | "NameSources" >> beam.Map(_with_source, names)
        counts = beam.pvalue.AsSingleton(
            kept | "TotalBytes" >> beam.CombineGlobally(sum) | "ShardCounts" >> beam.Map(self._counts)
        )
        writer = WriteCleanShard(plan.output, plan.shard_format(), self.identity, self.paths)
        written = (
            (
                described[RECORDS] | "Route" >> beam.Map(route_record, counts),
                removed | "RouteRemovals" >> beam.Map(route_removal, counts),
            )
            | "RecordsAndRemovals" >> beam.Flatten()
            | "ByShard" >> GroupByShard(counts)
            | "WriteShards" >> beam.ParDo(writer, counts).with_outputs(TABLES, main="shards")
        )
        shards, tables = written.shards, beam.pvalue.AsList(written[TABLES])
        reasons = beam.pvalue.AsList(
            removed | "Reasons" >> beam.Map(lambda r: r[1]) | "ByReason" >> beam.combiners.Count.PerElement()
        )
        examples = beam.pvalue.AsList(
            removed
            | "ExampleKeys" >> beam.Map(lambda r: (r[1], (r[4], r[5], r[0], r[2], r[3])))
            | "FirstExamples" >> beam.CombinePerKey(min)
        )
        tallies = beam.pvalue.AsSingleton(
            read[STATS_TAG]
            | "AllTallies" >> beam.combiners.ToList()
            | "Tally" >> beam.Map(read_documents.merge_tallies)
        )
        return (
            shards
            | "AllShards" >> beam.combiners.ToList()
            | "Commit" >> beam.Map(_commit, plan, self.identity, counts, tallies, reasons, examples, tables, edited)
        )

    def _counts(self, total: int) -> dict[str, int]:
        plan = self.plan
        return {TRAIN: plan.num_shards if plan.num_shards is not None else sized_count(TRAIN, total, plan.shard_bytes)}


def _with_source(removal: tuple[Any, ...], paths: Mapping[int, str]) -> Removal:
    doc_id, reason, of_id, of_in, file, row = removal
    return doc_id, reason, of_id, of_in, paths[file], row


def clean_stats(
    meta: Meta,
    plan: CleanPlan,
    tallies: Mapping[str, Any],
    reasons: Iterable[tuple[str, int]],
    examples: Iterable[tuple[str, tuple[str, int, str, str | None, str | None]]],
    tables: Iterable[tuple[str, int]],
    edited: int,
) -> dict[str, Any]:
    """stats.json: documents in, written (and of those, `documents_edited`: written with the text C4's line
    removal left, not the text read), and removed by reason, with the first removal of each (in source
    order) as an example; refuses a run whose books do not balance."""
    dropped = {reason: tallies[reason] for reason in read_documents.DROP_REASONS}
    dropped.update({reason: 0 for reason in (*quality_reasons(plan), *DUPLICATE_REASONS)})
    for reason, count in reasons:
        dropped[reason] = dropped.get(reason, 0) + count
    found = dict(tallies[read_documents.EXAMPLES])
    for reason, (source, row, doc_id, of_id, of_in) in examples:
        found[reason] = {"path": source, "row": row, "id": doc_id}
        if of_id is not None:
            found[reason].update(duplicate_of=of_id, duplicate_in=of_in)
    written = meta.record_count
    check_books("document", tallies["documents_in"], written, dropped)
    return {
        "documents_in": tallies["documents_in"],
        "documents_written": written,
        "documents_edited": edited,
        "dropped": dict(sorted(dropped.items())),
        "drop_examples": dict(sorted(found.items())),
        "files_unreadable": tallies["files_unreadable"],
        "damaged_inputs": tallies[read_documents.DAMAGED],
        "removal_tables": dict(sorted(tables)),
        "splits": commit.split_stats(meta, "documents"),
        "fingerprint": meta.fingerprint(),
    }


def _commit(
    shards: list[tuple[str, Shard]],
    plan: CleanPlan,
    identity: JobIdentity,
    counts: Mapping[str, int],
    *side: Any,
) -> Meta:
    meta = build_meta(shards, plan.section(), counts, identity)
    return commit_checked(plan.output, meta, _finish, plan, *side, claim=identity)


def _finish(
    meta: Meta,
    plan: CleanPlan,
    tallies: Mapping[str, Any],
    reasons: Iterable[tuple[str, int]],
    examples: Iterable[Any],
    tables: Iterable[tuple[str, int]],
    edited: int,
) -> dict[str, Any]:
    stats = clean_stats(meta, plan, tallies, reasons, examples, tables, edited)
    against = dict.fromkeys(DUPLICATE_REASONS, _AGAINST_HINT) if plan.against else {}
    check_drops(stats, plan.max_drop_fraction, hints={**_HINTS, **against})
    return stats
