"""Every dew-preprocess job, declared once.

The console script's usage, the flex template's `--job` parameter and metadata (dew.pipelines.metadata
writes pipelines/dataflow/metadata.json from this list and each job's parser), the Dataflow launcher's
choices and the job table in docs/preprocess.md all read `JOBS`. A new job is a module with `parser()`
and `main(argv)` plus one entry here.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """One job: the name users type (`dew-preprocess NAME`, `--job NAME`), the module that runs it, and
    what it turns into what, in one line. `pipeline`: whether it runs a Beam pipeline, which the
    dew-preprocess program shows a progress line for from its start (inspect reads and prints)."""

    name: str
    module: str
    summary: str
    # Whether the job runs on Beam and passes Beam's pipeline options through (inspect does neither).
    beam: bool = True

    def load(self) -> ModuleType:
        """The job's module, with `parser()` and `main(argv)`; importing it imports apache_beam, except inspect's."""
        return importlib.import_module(self.module)


# The first job is what the flex template runs when --job is not given.
JOBS: tuple[Job, ...] = (
    Job(
        name="tokenize",
        module="dew.pipelines.tokenize_job",
        summary="raw text files → a committed token corpus (shards, meta.json, packing plans)",
    ),
    Job(
        name="clean",
        module="dew.pipelines.clean_job",
        summary="raw text files → a committed documents directory without duplicates or low-quality text",
    ),
    Job(
        name="pack",
        module="dew.pipelines.pack",
        summary="a committed corpus → its document index and packing plans, ahead of training",
    ),
    Job(
        name="plan-mixture",
        module="dew.pipelines.plan_mixture",
        summary="corpora, weights and a token budget → windows and epochs per corpus",
    ),
    Job(
        name="images",
        module="dew.pipelines.images_job",
        summary="image folders, image rows or a saved HF dataset → committed captioned-image shards",
    ),
    Job(
        name="ingest-urls",
        module="dew.pipelines.ingest_urls_job",
        summary="url lists with captions → fetched, filtered, resized images in committed shards with status tables",
    ),
    Job(
        name="caption-tokenize",
        module="dew.pipelines.caption_tokenize_job",
        summary="committed image shards + an HF tokenizer → a new directory with caption token ids",
    ),
    Job(
        name="decode-clips",
        module="dew.pipelines.decode_clips_job",
        summary="video files, folders or lists → committed shards of decoded clips with their audio",
    ),
    Job(
        name="inspect",
        module="dew.pipelines.inspect_job",
        summary="a committed directory or mixture.json → its splits, drops, lengths, fill and samples (no Beam)",
        beam=False,
    ),
)


def find(name: str) -> Job | None:
    return next((job for job in JOBS if job.name == name), None)
