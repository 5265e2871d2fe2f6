"""The clean job's peak memory per process at two corpus sizes: does a worker's grow with the corpus?

Issue 27's goal: memory per worker bounded by a batch, not the corpus, so peak RSS flat from 10^5 to 10^6
documents. The documents are short (1 to 3 real sentences from CPython's pydoc topics and stdlib
docstrings), with 5% exact copies and 5% near copies planted, so the larger corpus is feasible on 2 cores.
`dew-preprocess clean` runs as its own launcher process on DirectRunner with 2 workers (multi_processing,
the workers forked from the launcher), --no-quality by default: the filters look at one document at a
time, and the dedup shuffles are what could hold the corpus.

Peak memory is each process's VmHWM from /proc/<pid>/status, sampled every 0.1 s for the launcher and
every process under it (the last sample before a process exits is its peak, but for what it touched in
that last 0.1 s). Not ru_maxrss: RUSAGE_CHILDREN is the largest of all children ever waited for, and a
forked worker's high-water mark starts at the launcher's size at the fork; VmHWM of each process apart
still counts the pages a fork shares with the launcher, which is the same at both sizes.

The launcher on DirectRunner also holds the runner's shuffle: every GroupByKey's data passes through it
(Dataflow's Shuffle service on Dataflow), so the launcher's peak grows with the corpus by design; the
workers' must not. Reported per size: each process's peak VmHWM, and the ratio largest / smallest size
of the largest worker's (goal about 1.0x) and of the launcher's.
"""

from __future__ import annotations

import argparse
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
    """`count` short documents of 1-3 real sentences; 5% are exact and 5% near copies of an earlier one."""
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
            texts.append(" ".join(rng.sample(pool, rng.randint(1, 3))))
    return texts


def write(texts: list[str], directory: Path, files: int = 4) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-len(texts) // files)
    for i in range(files):
        with open(directory / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in texts[i * step : (i + 1) * step])


def vm_hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


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
    """Peak VmHWM of a launcher and every process under it, by pid, until stopped."""

    def __init__(self, root: int, every: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root, self.every = root, every
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for pid in [self.root, *descendants(self.root)]:
                kb = vm_hwm_kb(pid)
                if kb is not None:
                    self.peaks[pid] = max(kb, self.peaks.get(pid, 0))
            self.done.wait(self.every)


def run_clean(inputs: Path, output: Path, extra: list[str]) -> tuple[float, int, dict[int, int]]:
    """(seconds, the launcher's peak VmHWM in KiB, each process under it: its peak)."""
    command = [sys.executable, "-m", "dew.pipelines.cli", "clean", "--input", str(inputs / "*.jsonl")]
    command += ["--output", str(output), "--overwrite", *extra, *TWO]
    start = time.perf_counter()
    with open(output.parent / f"{output.name}.log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        sampler = Sampler(process.pid)
        sampler.start()
        code = process.wait()
    sampler.done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    if code:
        raise RuntimeError(f"clean failed ({code}): see {output.parent / f'{output.name}.log'}")
    peaks = dict(sampler.peaks)
    launcher = peaks.pop(process.pid, 0)
    return seconds, launcher, peaks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated, smallest first")
    p.add_argument("--quality", action="store_true", help="run the quality filters too")
    p.add_argument("--workdir", default=None, help="where corpora and outputs go (a temporary folder if unset)")
    p.add_argument("--shard_size_mb", default="4", help="the job's shard size: a worker writing a shard holds its keys")
    p.add_argument("--beam", action="append", default=[], help="a Beam flag for the job (--beam=--flag=value)")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="dew-bench-clean-memory-"))
    from benchmarks.bench_clean import sentences

    pool = sentences()
    extra = ([] if args.quality else ["--no-quality"]) + ["--shard_size_mb", args.shard_size_mb, *args.beam]
    print(f"corpus: 1-3 of {len(pool):,} real sentences a document, 5% exact and 5% near copies; {' '.join(extra)}")
    rows = []
    for count in sizes:
        inputs = work / f"in-{count}"
        write(corpus(count, pool), inputs)
        mib = sum(f.stat().st_size for f in inputs.iterdir()) / (1 << 20)
        seconds, launcher, workers = run_clean(inputs, work / f"out-{count}", extra)
        stats = json.loads((work / f"out-{count}" / "stats.json").read_text())
        top = max(workers.values(), default=0)
        rows.append((count, launcher, top))
        print(f"\n{count:,} documents ({mib:,.1f} MiB of jsonl): {seconds:,.1f} s, {count / seconds:,.0f} documents/s")
        print(f"  written {stats['documents_written']:,}, removed {sum(stats['dropped'].values()):,}")
        print(f"  peak VmHWM: launcher {launcher / 1024:,.0f} MiB")
        for pid, kb in sorted(workers.items()):
            print(f"  peak VmHWM: process {pid} under it {kb / 1024:,.0f} MiB")
    (small, s_launcher, s_worker), (large, l_launcher, l_worker) = rows[0], rows[-1]
    if sizes[-1] < 1_000_000:
        print(f"\nthe top size is {large:,}, not 10^6 (--sizes)")
    print(
        f"\nlargest worker's peak VmHWM, {small:,} → {large:,} documents: {s_worker / 1024:,.0f} → "
        f"{l_worker / 1024:,.0f} MiB, ratio {l_worker / s_worker:.2f}x for {large / small:.0f}x the documents "
        "(goal about 1.0x)"
    )
    print(
        f"launcher's (DirectRunner's shuffle lives there): {s_launcher / 1024:,.0f} → {l_launcher / 1024:,.0f} MiB, "
        f"ratio {l_launcher / s_launcher:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
