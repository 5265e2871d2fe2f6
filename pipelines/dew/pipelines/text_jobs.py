"""What the jobs that read raw text share (tokenize, clean): the read flags, the input files, and the run.

Both read documents with ReadDocuments, which keys each by its file's index in the sorted input list
and orders by that key; `run_text_job` is where that list is made and indexed, for either job.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from dew.pipelines import common, flags
from dew.preprocess import read_documents
from dew.preprocess.cleaning.against import text_inputs as documents_inputs
from dew.preprocess.commit import JobIdentity
from dew.preprocess.document_rows import ReadOptions, kind_of
from dew.preprocess.files import InputFile
from dew.preprocess.progress import Phase


def add_read_flags(p: argparse.ArgumentParser) -> None:
    """How text inputs become documents, shared by every job that reads them (tokenize, clean)."""
    p.add_argument("--text_field", default="text", help="JSON key or parquet column of the text")
    p.add_argument(
        "--txt_documents", default="file", choices=("file", "line"), help="a .txt file is one document, or one per line"
    )
    p.add_argument(
        "--max_document_bytes",
        type=flags.positive_int,
        default=64 << 20,
        help="bytes; longer documents are dropped as too_long",
    )
    flags.switch(p, "--strict", "fail on the first bad document instead of counting it")


def read_options(args: argparse.Namespace) -> ReadOptions:
    return ReadOptions(
        text_field=args.text_field,
        txt_documents=args.txt_documents,
        max_document_bytes=args.max_document_bytes,
        strict=args.strict,
    )


def text_inputs(args: argparse.Namespace) -> tuple[InputFile, ...]:
    """The --input files, a committed documents directory standing for its shards; checked on the launcher."""
    try:
        inputs = documents_inputs(args.input, args.text_field)
        for item in inputs:
            kind_of(item.path)  # an unknown file kind is a usage error, before any worker starts
    except ValueError as error:
        raise flags.UsageError(str(error)) from None
    return inputs


def run_text_job(
    corpus: Callable[[Sequence[str]], beam.PTransform],
    *,
    output: str,
    identity: JobIdentity,
    inputs: Sequence[InputFile],
    options: PipelineOptions,
    overwrite: bool,
    phases: Sequence[Phase],
    remote: Sequence[str] = (),
    rate: Callable[[Mapping[str, int], float], str] | None = None,
) -> dict[str, int]:
    """Runs `corpus(paths)` over the (file index, path) of each input into a committed `output`.

    Args:
        corpus: The job's transform, given the input paths in their sorted order.
        output: The directory committed, with `identity`, by common.run_committed.
        identity: The job's config and the fingerprint of its inputs.
        inputs: The input files, sorted by path (text_inputs).
        options: Beam's options.
        overwrite: Replace an output another job committed.
        phases: The job's phases after reading, which comes first, measured in input bytes (a file's
            document count is unknown ahead).
        remote: Paths besides the inputs that a remote runner must reach (gs://).
        rate: Words the job's throughput line from its counters and the wall-clock seconds.

    Returns:
        The counters, or {} when this same job already committed the output.
    """
    paths = [i.path for i in inputs]
    common.require_remote(options, "--input", *paths, *remote)
    total = sum(i.size for i in inputs)
    read = Phase(name=read_documents.READ, unit="documents", total=total, measured_in="bytes")

    def build(pipeline: beam.Pipeline) -> object:
        return pipeline | "Inputs" >> beam.Create(list(enumerate(paths))) | corpus(paths)  # under its own label

    return common.run_committed(
        output, identity, options, build, overwrite=overwrite, rate=rate, phases=(read, *phases)
    )
