"""The clean job's MinHash dedup against datatrove's on the same documents: agreement, documents/s, memory.

The corpus: documents of 6 to 14 real sentences (CPython's pydoc topics and stdlib docstrings, cut into
sentences) drawn at random, so two documents rarely share a 5-gram, plus planted copies: 5% exact
copies (case and spacing changed) and 10% near copies (words replaced, shingle Jaccard 0.85-0.97, where
LSH finds a pair with probability >= 0.995). Pairs nearer the threshold are found by chance, by each
side's own random hash functions, so there two correct implementations disagree by design (a run with
copies at 0.75-0.97 agreed on 93% of removed ids). It is written as two jsonl files, one per
datatrove task.

The baseline is datatrove 0.10.1's four MinHash stages (signature, buckets, cluster, filter writing jsonl)
on LocalPipelineExecutor with 2 workers, the same 5-grams and 14 bands x 8 rows, installed with uv in a
venv of its own under --workdir (kept there for reruns; the benchmark says so and stops when it cannot be
installed). dew runs `dew-preprocess clean --no-quality` on DirectRunner with 2 workers. Both decide
with the same rule which document of a cluster stays (datatrove's own keeps the root of its union-find,
an arbitrary member), so the clusters datatrove found are given dew's rule (the smallest stable id) and
the removed ids are compared. Reported:
- agreement on removed ids: 1 - |dew △ datatrove| / |dew ∪ datatrove| (goal >= 99%), and per document;
- documents/s, steady state: the documents the larger corpus adds over the seconds it adds, so each
  side's start-up (Beam's fixed cost; datatrove's imports, process pools and spaCy loads) cancels out,
  ratio dew / datatrove (goal >= 1.0x); start-up reported apart;
- peak RSS at two corpus sizes: dew's workers (where documents are processed, bounded by a bundle) and
  its launcher (which on DirectRunner also holds the runner's shuffle buffers, Dataflow's Shuffle
  service on Dataflow), and datatrove's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATATROVE = ["datatrove==0.10.1", "spacy>=3.8,<3.9", "regex", "tokenizers", "orjson"]
TWO = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
# Small shards, so that the corpus sizes compared differ in how many shards they fill, not how large one is.
SHARD_MB = 0.25

BASELINE_SCRIPT = r"""
import glob, json, os, resource, struct, sys, time
t0 = time.perf_counter()
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig
startup = time.perf_counter() - t0
inputs, work = sys.argv[1], sys.argv[2]
hashing = HashConfig(precision=64, hash_fc="sha1")  # its xxhash default fails on str with xxhash 3.6
config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, hash_config=hashing)
start = time.perf_counter()
def run(steps, tasks, name):
    LocalPipelineExecutor(pipeline=steps, tasks=tasks, workers=min(tasks, 2), logging_dir=f"{work}/logs-{name}").run()
run([JsonlReader(inputs), MinhashDedupSignature(output_folder=f"{work}/sigs", config=config)], 2, "sigs")
run([MinhashDedupBuckets(input_folder=f"{work}/sigs", output_folder=f"{work}/buckets", config=config)], 14, "buckets")
run([MinhashDedupCluster(input_folder=f"{work}/buckets", output_folder=f"{work}/remove", config=config,
                         save_cluster_id=True)], 1, "cluster")
run([JsonlReader(inputs), MinhashDedupFilter(input_folder=f"{work}/remove"), JsonlWriter(f"{work}/out")], 2, "filter")
seconds = time.perf_counter() - start
clusters = {}
for path in sorted(glob.glob(f"{work}/remove/*.clusters")):
    data = open(path, "rb").read()
    rank = int(os.path.basename(path).split(".")[0])
    for doc, cluster in struct.iter_unpack("<II", data):
        clusters.setdefault(cluster, []).append([rank, doc])
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
json.dump({"startup": startup, "seconds": seconds, "clusters": list(clusters.values()), "rss_kb": rss}, sys.stdout)
"""

DEW_SCRIPT = r"""
import json, resource, sys, time
from dew.pipelines.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - start
json.dump({"code": code, "seconds": seconds, "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
           "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, sys.stderr)
"""


def sentences() -> list[str]:
    from tests.preprocess.planted import candidate_texts

    found = set()
    for text in candidate_texts():
        for part in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
            if 8 <= len(part.split()) <= 60:
                found.add(part)
    return sorted(found)


def corpus(count: int, pool: list[str], seed: int = 0) -> list[str]:
    from tests.preprocess.planted import exact_copy, near_copy

    rng = random.Random(seed)
    texts: list[str] = []
    while len(texts) < count:
        base = " ".join(rng.sample(pool, rng.randint(6, 14)))
        texts.append(base)
        draw = rng.random()
        if draw < 0.05:
            texts.append(exact_copy(base))
        elif draw < 0.15:
            copy, similarity = near_copy(base, rng.uniform(0.85, 0.97), rng)
            while similarity < 0.85:  # a short document's one-word steps can land below the target
                copy, similarity = near_copy(base, rng.uniform(similarity + 0.02, 0.97), rng)
            texts.append(copy)
    texts = texts[:count]
    rng.shuffle(texts)
    return texts


def write(texts: list[str], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    half = len(texts) // 2
    paths = []
    for i, chunk in enumerate((texts[:half], texts[half:])):
        path = directory / f"part-{i}.jsonl"
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in chunk))
        paths.append(path)
    return paths


def datatrove_python(folder: Path) -> Path | None:
    python = folder / "bin" / "python"
    if python.exists():
        return python
    uv = [sys.executable, "-m", "uv"]
    try:
        subprocess.run([*uv, "venv", "-q", "--python", sys.executable, str(folder)], check=True, timeout=120)
        subprocess.run([*uv, "pip", "install", "-q", "--python", str(python), *DATATROVE], check=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as error:
        print(f"SKIPPED: datatrove could not be installed in its own venv under {folder} ({error})")
        return None
    return python


def run_dew(inputs: Path, output: Path) -> dict:
    argv = ["clean", "--input", str(inputs / "*.jsonl"), "--output", str(output), "--no-quality", "--overwrite"]
    command = [sys.executable, "-c", DEW_SCRIPT, *argv, "--shard_size_mb", str(SHARD_MB), *TWO]
    done = subprocess.run(command, capture_output=True, text=True)
    report = json.loads(done.stderr[done.stderr.rindex("{") :])
    if report["code"] != 0:
        raise RuntimeError(done.stderr[-3000:])
    return report


def run_datatrove(python: Path, inputs: Path, work: Path) -> dict:
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    done = subprocess.run(
        [str(python), "-c", BASELINE_SCRIPT, str(inputs), str(work)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout)


def removed_by_dew(output: Path) -> set[tuple[str, int]]:
    from dew.preprocess.cleaning.removals import read_table

    rows = [row for table in sorted(output.glob("*.removals.parquet")) for row in read_table(str(table))]
    return {(Path(r["source"]).name, r["row"]) for r in rows}


def removed_by_datatrove(clusters: list[list[list[int]]], inputs: Path) -> set[tuple[str, int]]:
    """datatrove's clusters with dew's keep rule: all but the member with the smallest stable id."""
    from dew.preprocess.cleaning.plan import document_id

    removed = set()
    for members in clusters:
        names = [(f"part-{rank}.jsonl", doc) for rank, doc in members]
        keep = min(names, key=lambda n: document_id(str(inputs / n[0]), n[1]))
        removed.update(n for n in names if n != keep)
    return removed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--documents", type=int, default=1500, help="the smaller corpus; the larger is 4 times as many")
    p.add_argument("--repeat", type=int, default=1, help="runs of each side at each size; the fastest counts")
    p.add_argument("--workdir", default="/tmp/dew-bench-clean", help="corpora, outputs and datatrove's venv")
    args = p.parse_args()
    work = Path(args.workdir)
    python = datatrove_python(work / "datatrove-venv")
    if python is None:
        return 0
    pool = sentences()
    print(f"corpus: random runs of 6-14 of {len(pool):,} real sentences, 5% exact and 10% near copies planted")
    rows = []
    for count in (args.documents, 4 * args.documents):
        inputs = work / f"in-{count}"
        write(corpus(count, pool), inputs)
        runs = []
        for _ in range(args.repeat):  # alternating, each side's fastest run: a shared machine's load comes and goes
            runs.append((run_dew(inputs, work / f"dew-{count}"), run_datatrove(python, inputs, work / f"dt-{count}")))
            runs[-1][1]["wall"] = runs[-1][1]["startup"] + runs[-1][1]["seconds"]
        ours = min((r[0] for r in runs), key=lambda r: r["seconds"])
        theirs = min((r[1] for r in runs), key=lambda r: r["wall"])
        a, b = removed_by_dew(work / f"dew-{count}"), removed_by_datatrove(theirs["clusters"], inputs)  # same each run
        rows.append((count, ours, theirs, a, b))
    for count, ours, theirs, a, b in rows:
        union = a | b
        agreement = 1 - len(a ^ b) / len(union) if union else 1.0
        print(f"\n{count:,} documents")
        print(f"  removed: dew {len(a):,}, datatrove {len(b):,}, both {len(a & b):,}")
        print(f"  agreement on removed ids: {agreement:.2%} (goal >= 99%); per document {1 - len(a ^ b) / count:.2%}")
        print(f"  wall clock: dew {ours['seconds']:.1f} s, datatrove {theirs['wall']:.1f} s")
        print(
            f"  peak RSS: dew workers {ours['children_kb'] / 1024:,.0f} MiB, dew launcher+runner "
            f"{ours['self_kb'] / 1024:,.0f} MiB; datatrove {theirs['rss_kb'] / 1024:,.0f} MiB"
        )
    (small, s_ours, s_theirs, *_), (large, l_ours, l_theirs, *_) = rows
    extra = large - small
    added_ours, added_theirs = l_ours["seconds"] - s_ours["seconds"], l_theirs["wall"] - s_theirs["wall"]
    if added_ours > 0 and added_theirs > 0:
        dew_rate, their_rate = extra / added_ours, extra / added_theirs
        print(
            f"\ndocuments/s steady state (the {extra:,} documents the larger run adds, over the seconds it adds): "
            f"dew {dew_rate:,.0f}, datatrove {their_rate:,.0f}: ratio {dew_rate / their_rate:.2f}x (goal >= 1.0x)"
        )
        print(
            f"start-up (wall clock at {small:,} less those documents at that rate): "
            f"dew {s_ours['seconds'] - small / dew_rate:.1f} s, datatrove {s_theirs['wall'] - small / their_rate:.1f} s"
        )
    else:
        print("\nthe wall clock did not grow with the corpus (a busy machine): no steady-state rate this run")
    print(f"wall clock at {large:,}: ratio dew / datatrove {l_theirs['wall'] / l_ours['seconds']:.2f}x faster")
    print(
        f"dew worker peak RSS from {small:,} to {large:,} documents: {s_ours['children_kb'] / 1024:,.0f} → "
        f"{l_ours['children_kb'] / 1024:,.0f} MiB ({l_ours['children_kb'] / s_ours['children_kb']:.2f}x for "
        f"{large / small:.0f}x the documents)"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
