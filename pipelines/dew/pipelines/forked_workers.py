"""Local Beam workers forked from the launcher, which has imported Beam already, instead of started afresh.

Under `direct_running_mode=multi_processing` Beam starts each worker as a new Python process running
`apache_beam.runners.worker.sdk_worker_main`, and every one imports all of apache_beam again (its IO
connectors, pandas, the Google clients: ~4 s of CPU here) before it does any work. On a 2-core machine
that was most of a small job's wall clock. Here the runner forks one waiting child per worker just
before the run, and a child becomes the worker Beam asked for once it is told where to connect: the same
harness (`sdk_worker_main.main`), the same pipeline options and log relay, in a separate process.

A fork is taken only where it is safe (dew.pipelines.zygotes says when): in a launcher that owns a fresh
process and said so, for its first local run. Any other local run (a job called as a library, in tests
or a notebook; a second job in the same process) gets Beam's own worker processes, as before.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.transforms import environments

from dew.pipelines import zygotes
from dew.pipelines.zygotes import Zygote

URN = "dew:env:forked_python:v1"
# The subprocess environment's parameter does not read the pipeline context it is typed to take.
_SUBPROCESS = environments.SubprocessSDKEnvironment(command_string="").to_runner_api_parameter(
    None  # type: ignore[arg-type]
)[0]
# Zygotes of the runs now in progress, by run; each handler takes one of its run.
_pools: dict[str, list[Zygote]] = {}
_pools_lock = threading.Lock()


class ForkingRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner whose multi_processing workers are forked from this process when that is safe.

    when_started: called once the workers are forked (or it is clear they will not be), before the run:
    what would start a thread (the launcher's progress line) waits for it, since a fork wants one thread.
    """

    when_started: Callable[[], None] | None = None
    before_fork: Callable[[], None] | None = None  # stops what holds a thread (that progress line), first

    def run_via_runner_api(self, pipeline_proto: Any, options: Any) -> Any:
        if self.before_fork is not None:
            self.before_fork()
        try:
            return self._run_forked(pipeline_proto, options)
        finally:
            self.when_started = self.before_fork = None

    def _started(self) -> None:
        if self.when_started is not None:
            self.when_started()

    def _run_forked(self, pipeline_proto: Any, options: Any) -> Any:
        safe = zygotes.take_allowance()
        subprocess = [
            env
            for env in pipeline_proto.components.environments.values()
            if env.urn == _SUBPROCESS and b"apache_beam.runners.worker.sdk_worker_main" in env.payload
        ]
        if not subprocess or not safe:
            self._started()
            return super().run_via_runner_api(pipeline_proto, options)
        run = f"{os.getpid()}-{id(pipeline_proto)}"
        for env in subprocess:
            env.urn = URN
            env.payload = json.dumps({"run": run, "command": env.payload.decode()}).encode()
        waiting = zygotes.fork(self._num_workers * len(subprocess))
        self._started()
        with _pools_lock:
            _pools[run] = waiting
        try:
            return super().run_via_runner_api(pipeline_proto, options)
        finally:
            with _pools_lock:
                unused = _pools.pop(run)
            for zygote in unused:
                zygote.dismiss()


def _take(run: str) -> Zygote | None:
    with _pools_lock:
        pool = _pools.get(run)
        return pool.pop() if pool else None


@worker_handlers.WorkerHandler.register_environment(URN, bytes)
class ForkedWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """Starts its worker in a zygote of its run, or as Beam would (a new process) when none is left."""

    def __init__(self, payload: bytes, state: Any, provision_info: Any, grpc_server: Any) -> None:
        super().__init__(state, provision_info, grpc_server)
        self.payload = json.loads(payload)

    def start_worker(self) -> None:
        zygote = _take(self.payload["run"])
        if zygote is None:
            from apache_beam.runners.portability import local_job_service

            worker = local_job_service.SubprocessSdkWorker(
                self.payload["command"].encode(), self.control_address, self.provision_info, self.worker_id
            )
            target = worker.run
        else:
            target = functools.partial(self._run, zygote)
        self.worker_thread = threading.Thread(name="run_worker", target=target)
        self.worker_thread.start()

    def stop_worker(self) -> None:
        self.worker_thread.join()

    def _run(self, zygote: Zygote) -> None:
        """What Beam's SubprocessSdkWorker.run does for a new process: a log relay, the environment, a wait."""
        import grpc
        from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
        from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
        from apache_beam.utils import thread_pool_executor
        from google.protobuf import json_format, text_format

        options = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]
        logging_server = grpc.server(thread_pool_executor.shared_unbounded_instance(), options=options)
        logging_port = logging_server.add_insecure_port("[::]:0")
        logging_server.start()
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(), logging_server)
        environment = {
            "CONTROL_API_SERVICE_DESCRIPTOR": text_format.MessageToString(
                endpoints_pb2.ApiServiceDescriptor(url=self.control_address)
            ),
            "LOGGING_API_SERVICE_DESCRIPTOR": text_format.MessageToString(
                endpoints_pb2.ApiServiceDescriptor(url=f"localhost:{logging_port}")
            ),
            "PIPELINE_OPTIONS": json_format.MessageToJson(self.provision_info.provision_info.pipeline_options),
        }
        if self.worker_id:
            environment["WORKER_ID"] = self.worker_id
        finished = False
        try:
            zygote.start(environment)
            _, status = os.waitpid(zygote.pid, 0)
            finished = True
            if os.waitstatus_to_exitcode(status):
                raise RuntimeError(f"Worker process exited with code {os.waitstatus_to_exitcode(status)}")
        finally:
            if not finished:
                with contextlib.suppress(ProcessLookupError, ChildProcessError):
                    os.kill(zygote.pid, signal.SIGKILL)
                    os.waitpid(zygote.pid, 0)
            logging_server.stop(0)
