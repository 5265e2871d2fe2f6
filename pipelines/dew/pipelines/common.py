"""What every job launcher shares: Beam options with local defaults, the runner, and the closing report.

Locally a job runs on Beam's in-process FnApiRunner across the machine's cores
(direct_running_mode=multi_processing), built here directly: Beam's DirectRunner would first try
PrismRunner, which downloads a binary from the internet. Any other --runner is Beam's own business,
except that a Dataflow launch missing what it needs is refused here, before anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, GoogleCloudOptions, PipelineOptions, StandardOptions

from dew.pipelines import flags, worker_logs
from dew.pipelines.flags import UsageError
from dew.pipelines.progress_line import ProgressLine, launcher_started, open_line
from dew.preprocess import commit
from dew.preprocess.commit import JobIdentity
from dew.preprocess.progress import Phase
from dew.preprocess.shards import TooManyShardsError

LOCAL_RUNNERS = (None, "DirectRunner", "direct", "FnApiRunner")
DATAFLOW_RUNNERS = ("DataflowRunner", "dataflow")
_FLAGS_HINT = "`terraform output -raw dataflow_flags` prints all of them (docs/infrastructure.md)"
_TOO_MANY_SHARDS = f"{TooManyShardsError.__module__}.{TooManyShardsError.__qualname__}"


def pipeline_options(rest: Sequence[str]) -> PipelineOptions:
    """PipelineOptions from the flags a job did not claim, defaulting a local run to every core."""
    options = PipelineOptions(list(rest))
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        given = " ".join(rest)
        direct = options.view_as(DirectOptions)
        if "direct_running_mode" not in given:
            direct.direct_running_mode = "multi_processing"
        if "direct_num_workers" not in given:
            direct.direct_num_workers = os.cpu_count() or 1
    _check_dataflow(options)
    # Workers and the launcher must resolve gs:// with the same options (project, credentials).
    FileSystems.set_options(options)
    return options


def on_dataflow(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in DATAFLOW_RUNNERS


def _check_dataflow(options: PipelineOptions) -> None:
    """Refuses a Dataflow launch that lacks what it needs, before the output is claimed.

    Beam checks these only once the pipeline runs, after the job has claimed its output and loaded its
    tokenizer; and without a gs:// temp or staging location it creates a bucket of its own in the
    project, outside Terraform and with no lifecycle, instead of failing.
    """
    if not on_dataflow(options):
        return
    cloud = options.view_as(GoogleCloudOptions)
    problems = [f"--{name} is missing" for name in ("project", "region") if not getattr(cloud, name)]
    locations = [cloud.temp_location, cloud.staging_location]
    if not any(str(where or "").startswith("gs://") for where in locations):
        problems.append("--temp_location (or --staging_location) must be a gs:// path")
    if problems:
        raise UsageError(f"DataflowRunner needs them: {'; '.join(problems)}. {_FLAGS_HINT}")


def start(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, *, check: Callable[[Any], None] | None = None
) -> tuple[Any, PipelineOptions]:
    """How every Beam job's main opens: (its flags, the PipelineOptions of the Beam flags left over).

    The flags are parsed (anything unknown is a UsageError), logging is set up as --verbose says, then
    `check`, when given, may refuse the flags before the Beam options are read and checked.
    """
    args, rest = flags.parse(parser, argv, beam=True)
    configure_logging(args.verbose)
    if check is not None:
        check(args)
    return args, pipeline_options(rest)


def require_remote(options: PipelineOptions, flag: str, *paths: str) -> None:
    """Refuses a local path that Dataflow's workers would have to read or write: they cannot see it."""
    for path in paths:
        if on_dataflow(options) and not path.startswith("gs://"):
            raise UsageError(f"{flag} {path} is a local path, which Dataflow workers cannot reach: give a gs:// path")


def local_runner(options: PipelineOptions) -> Any:
    """The FnApiRunner DirectRunner would fall back to, with the pipeline options handed to its workers,
    and its worker processes forked from this one where that is safe (dew.pipelines.forked_workers)."""
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    from dew.pipelines.forked_workers import ForkingRunner

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return ForkingRunner(provision_info=info)


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        return beam.Pipeline(runner=local_runner(options), options=options)
    return beam.Pipeline(options=options)


def counters(result: Any) -> dict[str, int]:
    """Every Beam counter of a finished run, summed over steps, by name."""
    from apache_beam.metrics.metric import MetricsFilter

    totals: dict[str, int] = {}
    for metric in result.metrics().query(MetricsFilter())["counters"]:
        value = metric.committed if metric.committed is not None else metric.attempted
        totals[metric.key.metric.name] = totals.get(metric.key.metric.name, 0) + int(value or 0)
    return dict(sorted(totals.items()))


def run(
    pipeline: beam.Pipeline,
    *,
    wait: bool = True,
    out: TextIO | None = None,
    job: str | None = None,
    phases: Sequence[Phase] = (),
) -> tuple[Any, dict[str, int], float]:
    """Runs the pipeline; when waiting, prints its counters and rates and returns (result, counters, seconds).

    With `phases`, a progress line (dew.pipelines.progress_line) shows the job's phases as it runs. The
    seconds are the wall clock since the dew-preprocess program's process started (start-up is part of what
    a user waits), or since the call for a job run as a function.
    """
    out = sys.stderr if out is None else out  # the stderr of the call, not of the import (a redirect, capsys)
    start = launcher_started()
    if not wait or not phases:
        result = pipeline.run()
        if not wait:
            return result, {}, 0.0
        result.wait_until_finish()
    else:
        opened = open_line()
        with contextlib.nullcontext(opened) if opened is not None else ProgressLine(job or "job", (), out=out) as line:
            line.follow(job or "job", phases)
            runner: Any = pipeline.runner
            if hasattr(runner, "when_started"):
                # Paused over the fork of its workers, which wants one thread, and started again after it.
                runner.before_fork, runner.when_started = line.pause, line.start
            else:
                line.start()
            result = pipeline.run()
            result.wait_until_finish()
    seconds = time.monotonic() - start
    found = counters(result)
    report(found, seconds, out)
    return result, found, seconds


def run_committed(
    output: str,
    identity: JobIdentity,
    options: PipelineOptions,
    build: Callable[[beam.Pipeline], object],
    *,
    overwrite: bool,
    rate: Callable[[Mapping[str, int], float], str] | None = None,
    reopen: bool = False,
    phases: Sequence[Phase] = (),
) -> dict[str, int]:
    """Every committing job's run: claim `output`, build the pipeline on it, run it, say what it committed.

    Returns the counters, or {} when this same job already committed the output; `reopen` claims a
    committed output again instead, for a rerun that rewrites part of it. `rate` words the job's own
    throughput line from its counters and the wall-clock seconds; `phases` are the job's, in order, for
    its progress line.
    """
    require_remote(options, "--output", output)
    if commit.prepare_output(output, identity, overwrite=overwrite):
        if not reopen:
            print(f"{output} is already committed by this same job and inputs; nothing to do", file=sys.stderr)
            return {}
        commit.reopen_output(output, identity)
    pipeline = make_pipeline(options)
    build(pipeline)
    try:
        _, found, seconds = run(pipeline, job=str(identity.config.get("job", "job")), phases=phases)
    except Exception as error:
        if not reopen and _planned_too_many_shards(error) and commit.holds_claim(output, identity):
            # Refused as the shards were planned, before any was written: the rerun with a larger size
            # is another config, and should not need --overwrite to replace a run that wrote nothing.
            commit.clear_output(output)
        raise
    if rate is not None and seconds:
        print(f"  {rate(found, seconds)}", file=sys.stderr)
    print(f"committed {output}", file=sys.stderr)
    return found


def _planned_too_many_shards(error: BaseException) -> bool:
    """Whether the run failed as its shard count was planned: raised here, or relayed by a worker as text."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TooManyShardsError):
            return True
        seen = seen.__cause__ or seen.__context__
    return _TOO_MANY_SHARDS in str(error)


def report(found: Mapping[str, int], seconds: float, out: TextIO) -> None:
    width = max((len(name) for name in found), default=0)
    # A job whose steps count nothing (plan-mixture) says it finished, not "counters:" over an empty list.
    # The seconds are the launcher's wall clock, start-up included (run).
    print(f"finished in {seconds:.1f} s" + ("; counters:" if found else ""), file=out)
    for name, value in found.items():
        print(f"  {name:<{width}}  {value:,}", file=out)
    if found.get("documents_tokenized"):
        print(
            f"  rate: {found['documents_tokenized'] / seconds:,.0f} documents/s, "
            f"{found.get('tokens', 0) / seconds:,.0f} tokens/s (wall clock, startup included)",
            file=out,
        )


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Beam logs start-up noise from its local workers on every run (semi_persistent_directory) and a
    # failed worker's whole traceback at ERROR, which buries the one line the failure is reported in.
    # A failure still raises with that traceback in it; --verbose shows Beam's logs as they come.
    logging.getLogger("apache_beam").setLevel(logging.INFO if verbose else logging.CRITICAL)
    # Silencing Beam also silenced the progress dew's workers log through it under multi_processing.
    worker_logs.route_worker_logs(verbose=verbose)
