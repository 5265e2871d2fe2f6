"""TokenizeCorpus: input files → a committed token corpus directory, end to end, as one PTransform.

    read documents → tokenize (in batches) → lengths per file → layout (cut, shards) → route → write shards
    → (pack: document index + plans) → stats.json → meta.json

Shards are planned by the layout, cut at exact token counts, rather than by a record's draw; the meta,
stats and commit are the writer skeleton's (dew.preprocess.writing.build_meta, commit_checked).

Each arrow is a labelled step; the pieces are reusable on their own (dew.preprocess.read_documents,
.tokenize, .layout, .shards, .pack, .commit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.formats import MAX_SHARDS, SHARD_EXTENSIONS, Meta, Shard
from dew.data.sections import TokensSection
from dew.preprocess import commit, layout, pack, progress, read_documents
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import STATS_TAG
from dew.preprocess.drops import check_books, check_drops
from dew.preprocess.layout import FileLengths, Layout, ShardMap
from dew.preprocess.pack import PackCorpus
from dew.preprocess.read_documents import DROP_REASONS, ReadDocuments, ReadOptions
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import WriteShards
from dew.preprocess.tokenizing import TokenBatch, TokenizeBatches, TokenizerInfo
from dew.preprocess.writing import WRITE, build_meta, commit_checked


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusPlan:
    """Everything that decides a corpus's bytes, plus where it goes.

    val_fraction: the share of tokens, from the end of the corpus, that becomes the `val` split.
    shard_bytes: the target shard size; each split gets ceil(its bytes / shard_bytes) shards.
    num_shards: forces the train split's shard count instead.
    windows: (seq_len, packing_bins) pairs to write packing plans for; empty writes none.
    max_drop_fraction: the most of the documents read that may be dropped before the job fails
        uncommitted; a job that writes no document fails whatever it is. It decides whether the corpus
        commits, never a byte of it, so it is no part of config().
    """

    output: str
    tokenizer: TokenizerInfo
    read: ReadOptions = dataclasses.field(default_factory=ReadOptions)
    ext: str = "bin"
    val_fraction: float = 0.0
    shard_bytes: int = 256 << 20
    num_shards: int | None = None
    windows: tuple[tuple[int, int], ...] = ()
    batch_size: int = 512
    max_drop_fraction: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drop_fraction <= 1.0:
            raise ValueError(f"max_drop_fraction must be in [0, 1], got {self.max_drop_fraction}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.shard_bytes < 1:
            raise ValueError(f"shard_bytes must be positive, got {self.shard_bytes}")
        if self.num_shards is not None and not 1 <= self.num_shards <= MAX_SHARDS:
            raise ValueError(f"num_shards must be in 1..{MAX_SHARDS}, got {self.num_shards}")
        if self.windows and self.tokenizer.eos_id is None:
            raise ValueError("packing plans need document boundaries: tokenize with --pack to write eos ids")
        if self.ext not in SHARD_EXTENSIONS:
            raise ValueError(f"shard format {self.ext!r} is not one of {', '.join(SHARD_EXTENSIONS)}")

    def section(self) -> TokensSection:
        """The tokens section of the corpus's meta.json."""
        info = self.tokenizer
        return TokensSection(
            tokenizer=info.name,
            tokenizer_hash=info.fingerprint,
            vocab_size=info.vocab_size,
            dtype=info.dtype.name,
            eos_id=info.eos_id,
            bos_id=info.bos_id,
        )

    def shard_format(self) -> ShardFormat:
        return ShardFormat(ext=self.ext, section=self.section())

    def config(self) -> dict[str, Any]:
        """The JSON config meta.json records: every field that changes a byte of output, nothing else."""
        info = self.tokenizer
        return {
            "job": "tokenize",
            "tokenizer": info.name,
            "tokenizer_hash": info.fingerprint,
            "eos_id": info.eos_id,
            "format": self.ext,
            "val_fraction": self.val_fraction,
            "shard_bytes": self.shard_bytes,
            "num_shards": self.num_shards,
            "text_field": self.read.text_field,
            "txt_documents": self.read.txt_documents,
            "max_document_bytes": self.read.max_document_bytes,
            "windows": [list(w) for w in self.windows],
        }


def corpus_stats(
    meta: Meta,
    corpus: Layout,
    tallies: Mapping[str, Any],
    packed: Sequence[Mapping[str, Any]],
    paths: Mapping[int, str],
) -> dict[str, Any]:
    """stats.json: what came in, what was dropped and why (with the first row of each reason), what was
    written; the document books must balance. `paths` names each file index."""
    dropped = {reason: tallies[reason] for reason in DROP_REASONS}
    dropped["no_tokens"] = corpus.empty_documents
    examples = dict(tallies[read_documents.EXAMPLES])
    if corpus.first_empty is not None:
        file, row = corpus.first_empty
        examples["no_tokens"] = {"path": paths[file], "row": row}
    check_books("document", tallies["documents_in"], corpus.documents, dropped)
    return {
        "documents_in": tallies["documents_in"],
        "documents_written": corpus.documents,
        "dropped": dropped,
        "drop_examples": dict(sorted(examples.items())),
        "files_unreadable": tallies["files_unreadable"],
        "damaged_inputs": tallies["damaged_inputs"],
        "tokens": corpus.tokens,
        "splits": commit.split_stats(meta, "pieces", "tokens"),
        "packing": sorted(packed, key=lambda p: (p["split"], p["seq_len"], p["bins"])),
        "fingerprint": meta.fingerprint(),
    }


class TokenizeCorpus(beam.PTransform):
    """PCollection[(file index, path)] → a committed corpus in plan.output; yields its Meta once committed."""

    def __init__(
        self,
        plan: CorpusPlan,
        identity: JobIdentity,
        committed: Mapping[str, Shard] | None = None,
        label: str | None = None,
    ) -> None:
        """`committed`: the inputs that are shards of a committed documents directory, with their meta.json
        entries, checked before they are read (dew.preprocess.cleaning.against.committed_shards)."""
        super().__init__(label)
        self.plan = plan
        self.identity = identity
        self.committed = dict(committed or {})

    def expand(self, paths: beam.PCollection) -> beam.PCollection:
        plan = self.plan
        read = paths | "ReadDocuments" >> ReadDocuments(plan.read, self.committed)
        batches = read.documents | "Tokenize" >> TokenizeBatches(plan.tokenizer, batch_size=plan.batch_size)
        lengths = (
            batches
            | "DocumentLengths" >> beam.FlatMap(TokenBatch.lengths_by_file)
            | "ByFile" >> beam.GroupByKey()
            | "FileLengths" >> beam.MapTuple(FileLengths.of_parts)
        )
        planned = (
            lengths
            | "FileTotals" >> beam.Map(FileLengths.summary)
            | "AllFiles" >> beam.combiners.ToList()
            | "Layout" >> beam.Map(_layout, plan)
        )
        corpus = beam.pvalue.AsSingleton(planned)
        counts = beam.pvalue.AsSingleton(planned | "ShardCounts" >> beam.Map(lambda c: dict(c.shards)))
        routes = beam.pvalue.AsSingleton(
            lengths
            | "LocateCuts" >> beam.FlatMap(layout.locate, corpus)
            | "AllCuts" >> beam.combiners.ToList()
            | "ShardMap" >> beam.Map(lambda located, c: ShardMap.of(c, located), corpus)
        )
        fmt = plan.shard_format()
        shards = (
            batches
            | "Route" >> beam.FlatMap(_route, routes, fmt.dtype)
            | "WriteShards" >> WriteShards(plan.output, fmt, counts, self.identity)
        )
        tallies = beam.pvalue.AsSingleton(
            read[STATS_TAG]
            | "AllTallies" >> beam.combiners.ToList()
            | "Tally" >> beam.Map(read_documents.merge_tallies)
        )
        meta = (
            shards
            | "AllShards" >> beam.combiners.ToList()
            | "BuildMeta" >> beam.Map(_meta, plan, self.identity, corpus)
        )
        if plan.tokenizer.eos_id is None:
            # Without eos every split is one document: there is no index worth writing ahead.
            packed = beam.pvalue.AsList(meta.pipeline | "NoPacking" >> beam.Create([]))
        else:
            packed = beam.pvalue.AsList(meta | "Pack" >> PackCorpus(plan.output, plan.windows))
        names = beam.pvalue.AsDict(paths)
        return meta | "Commit" >> beam.Map(_commit, plan, self.identity, corpus, tallies, packed, names)


def _route(
    batch: TokenBatch, shards: ShardMap, dtype: np.dtype
) -> Iterator[tuple[tuple[str, int], tuple[tuple[int, int], bytes]]]:
    # Shard writers take one record an element: the batch is split up only here, on its last move.
    for key, ids in batch.documents():
        for shard, (piece_key, piece) in shards.assign(key, ids):
            yield shard, (piece_key, np.ascontiguousarray(piece, dtype=dtype).tobytes())


def _layout(totals: list[Any], plan: CorpusPlan) -> Layout:
    itemsize = plan.tokenizer.dtype.itemsize
    corpus = Layout.plan(
        totals,
        val_fraction=plan.val_fraction,
        itemsize=itemsize,
        shard_bytes=plan.shard_bytes,
        num_shards=plan.num_shards,
    )
    progress.announce_total(WRITE, corpus.tokens * itemsize)  # the bytes of ids the shards will hold
    progress.announce_total(pack.INDEX, sum(corpus.shards.values()))  # PackCorpus reads every shard
    progress.announce_total(pack.PLAN, len(corpus.shards))  # and plans every split
    return corpus


def _meta(shards: Iterable[tuple[str, Shard]], plan: CorpusPlan, identity: JobIdentity, corpus: Layout) -> Meta:
    return build_meta(shards, plan.section(), corpus.shards, identity)


def _finish(
    meta: Meta,
    plan: CorpusPlan,
    corpus: Layout,
    tallies: Mapping[str, Any],
    packed: Sequence[Mapping[str, Any]],
    paths: Mapping[int, str],
) -> dict[str, Any]:
    stats = corpus_stats(meta, corpus, tallies, packed, paths)
    check_drops(stats, plan.max_drop_fraction)
    return stats


def _commit(meta: Meta, plan: CorpusPlan, identity: JobIdentity, *side: Any) -> Meta:
    return commit_checked(plan.output, meta, _finish, plan, *side, claim=identity)
