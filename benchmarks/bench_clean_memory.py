"""The clean job's peak memory per process at two corpus sizes: does a worker's grow with the corpus?

Issue 27's goal: memory per worker bounded by a batch, not the corpus, so peak RSS flat from 10^5 to 10^6
documents. The documents are short (2 to 4 real sentences from CPython's pydoc topics and stdlib
docstrings), with 5% exact copies and 5% near copies planted, so the larger corpus is feasible on 2 cores.
`dew-preprocess clean` runs as its own launcher process on DirectRunner with 2 workers (multi_processing,
the workers forked from the launcher), --no-quality by default: the filters look at one document at a
time, and the dedup shuffles are what could hold the corpus.

Peak memory is sampled every 0.1 s for the launcher and every process under it: VmHWM from
/proc/<pid>/status, and the private resident memory (Private_Clean + Private_Dirty of smaps_rollup), whose
peak is what a worker holds of its own; VmHWM also counts the pages a forked worker still shares with
the launcher. Not ru_maxrss: RUSAGE_CHILDREN is the largest of all children ever waited for.

The baseline (benchmarks/shuffle_baseline.py) is the runner's own share: the same files through the same
runner and forked workers, read → GroupByKey by text → GroupByKey by shard → write, nothing of dew's. On
DirectRunner the launcher holds every grouping whole (it is the shuffle; Dataflow's is a service), so its
peak grows with the corpus by design. Reported per size: each process's peaks; then, between the smallest
and largest size, each peak's ratio and its growth in MiB a 10^5 documents, for the clean job and the
baseline, and clean's growth over the baseline's: about 1x means the clean job's workers grow only as
the runner makes any job's grow.

--trace runs the workers under tracemalloc (benchmarks/traced_job.py) and leaves their top allocation
sites in the workdir: what found that the Python heap of a clean worker is tens of MiB, and what grew was
the runner's (FnApiRunner sends a worker its whole share of a grouping as one message) and glibc's heap
left fragmented by those buffers (dew.pipelines.zygotes.bound_malloc). Cutting that message into pieces
by patching Beam's runner halved the traced Python peak but left resident memory where it was, so dew
does not patch Beam's internals.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TWO = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def corpus(count: int, pool: list[str], seed: int = 0) -> list[str]:
    """`count` short documents of 2-4 real sentences; 5% are exact and 5% near copies of an earlier one."""
    from tests.preprocess.planted import exact_copy, near_copy

    rng = random.Random(seed)
    texts: list[str] = []
    for i in range(count):
        draw = rng.random()
        if i and draw < 0.05:
            texts.append(exact_copy(texts[rng.randrange(i)]))
        elif i and draw < 0.10:
            texts.append(near_copy(texts[rng.randrange(i)], rng.uniform(0.85, 0.97), rng)[0])
        else:
            texts.append(" ".join(rng.sample(pool, rng.randint(2, 4))))
    return texts


def write(texts: list[str], directory: Path, files: int = 4) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-len(texts) // files)
    for i in range(files):
        with open(directory / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in texts[i * step : (i + 1) * step])


def memory_kb(pid: int) -> tuple[int, int] | None:
    """(VmHWM, private resident KiB now: Private_Clean + Private_Dirty of smaps_rollup), or None once gone."""
    found: dict[str, int] = {}
    try:
        for name, keys in (("status", ("VmHWM:",)), ("smaps_rollup", ("Private_Clean:", "Private_Dirty:"))):
            with open(f"/proc/{pid}/{name}", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith(keys):
                        found[line.split(":")[0]] = int(line.split()[1])
    except (OSError, ValueError):
        return None
    if len(found) != 3:
        return None
    return found["VmHWM"], found["Private_Clean"] + found["Private_Dirty"]


def descendants(root: int) -> list[int]:
    """Every process under `root` now, found by the parent pid in /proc/<pid>/stat."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            parent[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, ppid in parent.items() if ppid == pid]
        found += children
        frontier += children
    return found


class Sampler(threading.Thread):
    """Peak VmHWM and peak private resident memory of a launcher and every process under it, by pid."""

    def __init__(self, root: int, every: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root, self.every = root, every
        self.peaks: dict[int, int] = {}
        self.private: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for pid in [self.root, *descendants(self.root)]:
                found = memory_kb(pid)
                if found is not None:
                    self.peaks[pid] = max(found[0], self.peaks.get(pid, 0))
                    self.private[pid] = max(found[1], self.private.get(pid, 0))
            self.done.wait(self.every)


@dataclasses.dataclass
class Run:
    """One job's run: seconds, and per process (KiB) its peak VmHWM and its peak private resident memory."""

    seconds: float
    launcher: tuple[int, int]
    workers: dict[int, tuple[int, int]]

    def worker(self, which: int) -> int:
        """The largest worker's peak: 0 VmHWM, 1 private."""
        return max((peak[which] for peak in self.workers.values()), default=0)


def measure(command: list[str], log_path: Path) -> Run:
    """Runs `command` as its own process, sampling it and every process under it until it exits."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        sampler = Sampler(process.pid)
        sampler.start()
        code = process.wait()
    sampler.done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    if code:
        raise RuntimeError(f"{command[1:4]} failed ({code}): see {log_path}")
    peaks = {pid: (kb, sampler.private.get(pid, 0)) for pid, kb in sampler.peaks.items()}
    launcher = peaks.pop(process.pid, (0, 0))
    return Run(seconds, launcher, peaks)


def run_clean(inputs: Path, output: Path, extra: list[str], trace: Path | None = None) -> Run:
    """The clean job as the dew-preprocess program runs it; with `trace`, its workers run under tracemalloc
    and leave their top allocation sites there (benchmarks/traced_job.py)."""
    job = ["-m", "dew.pipelines.cli"] if trace is None else [str(ROOT / "benchmarks" / "traced_job.py"), str(trace)]
    command = [sys.executable, *job, "clean", "--input", str(inputs / "*.jsonl")]
    command += ["--output", str(output), "--overwrite", *extra, *TWO]
    return measure(command, output.parent / f"{output.name}.log")


def run_baseline(inputs: Path, output: Path, shard_mb: float, beam_flags: list[str]) -> Run:
    """benchmarks/shuffle_baseline.py on the same files, runner and workers: Beam's own cost of the shuffles."""
    command = [sys.executable, str(ROOT / "benchmarks" / "shuffle_baseline.py"), str(inputs / "*.jsonl")]
    command += [str(output), str(shard_mb), *TWO, *beam_flags]
    return measure(command, output.parent / f"{output.name}.log")


def _mib(kb: int) -> str:
    return f"{kb / 1024:,.0f}"


def report(name: str, count: int, run: Run) -> None:
    print(f"  {name}: {run.seconds:,.1f} s, {count / run.seconds:,.0f} documents/s")
    print(f"    launcher: peak VmHWM {_mib(run.launcher[0])} MiB, peak private {_mib(run.launcher[1])} MiB")
    for pid, (hwm, private) in sorted(run.workers.items()):
        print(f"    worker {pid}: peak VmHWM {_mib(hwm)} MiB, peak private {_mib(private)} MiB")


def growth(name: str, small: tuple[int, Run], large: tuple[int, Run]) -> list[float]:
    """Prints the largest / smallest size ratio of each peak, and its growth in MiB a 10^5 documents more;
    returns the growths (largest worker's private, its VmHWM, the launcher's VmHWM)."""
    (n, a), (m, b) = small, large
    found = []
    print(f"{name}, {n:,} → {m:,} documents ({m / n:.0f}x):")
    for label, (x, y) in (
        ("largest worker, peak private", (a.worker(1), b.worker(1))),
        ("largest worker, peak VmHWM  ", (a.worker(0), b.worker(0))),
        ("launcher,       peak VmHWM  ", (a.launcher[0], b.launcher[0])),
    ):
        slope = (y - x) / 1024 / ((m - n) / 1e5)
        found.append(slope)
        print(f"  {label} {_mib(x)} → {_mib(y)} MiB: {y / x:.2f}x, {slope:+,.0f} MiB a 10^5 documents")
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated, smallest first")
    p.add_argument("--quality", action="store_true", help="run the quality filters too")
    p.add_argument("--workdir", default=None, help="where corpora and outputs go (a temporary folder if unset)")
    p.add_argument("--shard_size_mb", default="4", help="the job's shard size: a worker writing a shard holds its keys")
    p.add_argument("--trace", action="store_true", help="tracemalloc in the workers: top sites in the workdir")
    p.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the shuffle baseline")
    p.add_argument("--beam", action="append", default=[], help="a Beam flag for both jobs (--beam=--flag=value)")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="dew-bench-clean-memory-"))
    from benchmarks.bench_clean import sentences

    pool = sentences()
    extra = ([] if args.quality else ["--no-quality"]) + ["--shard_size_mb", args.shard_size_mb, *args.beam]
    print(f"corpus: 2-4 of {len(pool):,} real sentences a document, 5% exact and 5% near copies")
    print(f"clean: {' '.join(extra)} {' '.join(TWO)}; baseline: read → GroupByKey(text) → GroupByKey(shard) → write")
    clean, baseline = [], []
    for count in sizes:
        inputs = work / f"in-{count}"
        write(corpus(count, pool), inputs)
        mib = sum(f.stat().st_size for f in inputs.iterdir()) / (1 << 20)
        print(f"\n{count:,} documents ({mib:,.1f} MiB of jsonl)")
        run = run_clean(inputs, work / f"out-{count}", extra, work / f"trace-{count}" if args.trace else None)
        stats = json.loads((work / f"out-{count}" / "stats.json").read_text())
        report("clean", count, run)
        print(f"    written {stats['documents_written']:,}, removed {sum(stats['dropped'].values()):,}")
        clean.append((count, run))
        if args.baseline:
            base = run_baseline(inputs, work / f"base-{count}", float(args.shard_size_mb), args.beam)
            report("baseline", count, base)
            baseline.append((count, base))
    if sizes[-1] < 1_000_000:
        print(f"\nthe top size is {sizes[-1]:,}, not 10^6 (--sizes)")
    if len(clean) < 2:
        return 0  # one size: its peaks only (a --trace run), no growth to show
    print()
    ours = growth("clean", clean[0], clean[-1])
    if baseline:
        theirs = growth("baseline (the runner's own)", baseline[0], baseline[-1])
        print(
            "clean's growth a 10^5 documents over the baseline's: largest worker's private "
            f"{ours[0] / theirs[0]:.2f}x, its VmHWM {ours[1] / theirs[1]:.2f}x; launcher's {ours[2] / theirs[2]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
