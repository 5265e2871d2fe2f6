"""A new kind added the way docs/contributing.md says, and nothing more, in a copy of dew's sources.

tests/toy_kind/ holds "pairs" as the files the guide names, each at its place in the repository. The test
copies runtime/, preprocess/, pipelines/, docs/ and pyproject.toml to a temporary folder, puts the
kind's files there, and then takes only the guide's steps, each as a user would, in a process of its own
that imports the copy: regenerate the derived files, run the job through `dew-preprocess`, read the
committed directory back through `dew.data`. It checks the kind touched exactly the files the guide
lists, that every derived list picked the kind up, and that every line of the input is accounted for.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dew.pipelines import generated

pytestmark = [pytest.mark.beam, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "toy_kind"
ROOTS = ("runtime", "preprocess", "pipelines", "docs")
MARKER = "# --- appended to runtime/dew/data/sections.py ---\n"
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
# The guide's table: the files a kind touches, all of them (docs/contributing.md).
KIND_FILES = {
    "runtime/dew/data/sections.py",
    "runtime/dew/data/pairs/__init__.py",
    "runtime/dew/data/pairs/records.py",
    "runtime/dew/data/pairs/pairs.py",
    "preprocess/dew/preprocess/write_pairs.py",
    "pipelines/dew/pipelines/pairs_job.py",
}


def copy_with_the_kind(repo: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for root in ROOTS:
        shutil.copytree(REPO / root, repo / root, ignore=skip)
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    for source in sorted(TOY.rglob("*.py")):
        place = repo / source.relative_to(TOY)
        if source.name == "sections_addition.py":
            addition = source.read_text().split(MARKER, 1)[1]
            with open(place.with_name("sections.py"), "a", encoding="utf-8") as sections:
                sections.write("\n" + addition)
        else:
            place.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, place)


def changed_files(repo: Path) -> set[str]:
    """Every file of the copy that is new or differs from dew's own."""
    changed = set()
    for path in repo.rglob("*"):
        if path.is_dir() or "__pycache__" in path.parts or path.name == "pyproject.toml":
            continue
        relative = path.relative_to(repo)
        original = REPO / relative
        if not original.exists() or not filecmp.cmp(path, original, shallow=False):
            changed.add(relative.as_posix())
    return changed


def run(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A process that imports dew from the copy alone (its roots come before the installed checkout's)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(repo / root) for root in ROOTS[:3]))
    done = subprocess.run(
        [sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if check and done.returncode:
        raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def write_inputs(directory: Path) -> dict[tuple[str, str], str]:
    """Two files of pairs, with a line in each that has no tab; returns every good pair and its file."""
    directory.mkdir()
    pairs: dict[tuple[str, str], str] = {}
    for name in ["a.txt", "b.txt"]:
        lines = []
        for row in range(40):
            left, right = f"{name} left {row}", f"right {row * row}"
            lines.append(f"{left}\t{right}")
            pairs[(left, right)] = name
        lines.insert(7, f"{name} has no tab here")
        (directory / name).write_text("\n".join(lines) + "\n")
    return pairs


READ_BACK = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import dew.data
    from dew.data import DataPartition, Loading, datasets, formats
    from dew.data.pairs.pairs import pair_records

    path = sys.argv[1]
    meta = formats.read_meta(path, kind="pairs")
    splits = {}
    for split in sorted(meta.splits):
        records = pair_records(meta, path, split)
        batch = records.read_batch(np.arange(len(records)))
        splits[split] = [list(pair) for pair in zip(batch["left"], batch["right"])]
    spec = dew.data.ToyPairs(path=path, loading=Loading(workers=0), val_batches=None)
    assert datasets["toy_pairs"] is type(spec) is datasets.ToyPairs
    data = spec.load(batch=4)
    stream = data.train(DataPartition())
    try:
        streamed = [[l, r] for _ in range(len(splits["train"]) // 4) for b in [next(stream)]
                    for l, r in zip(b["left"], b["right"])]
    finally:
        stream.close()
    scored = [[l, r] for b in data.val(DataPartition()) for l, r in zip(b["left"], b["right"])]
    print(json.dumps({"splits": splits, "streamed": streamed, "scored": scored, "config": spec.to_config(),
                      "kinds": sorted(datasets.names())}))
    """
)


def test_a_kind_added_by_the_guide_alone_is_written_listed_and_read_back(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    copy_with_the_kind(repo)
    assert changed_files(repo) == KIND_FILES  # the guide's files, and no other

    stale = run(repo, "-m", "dew.pipelines.generated", "--check", check=False)
    assert stale.returncode == 1 and "kinds.py" in stale.stdout + stale.stderr
    run(repo, "-m", "dew.pipelines.generated", "--write")
    run(repo, "-m", "dew.pipelines.generated", "--check")
    derived = changed_files(repo) - KIND_FILES
    assert {"runtime/dew/data/kinds.py", "docs/preprocess.md", "pipelines/dew/pipelines/help.json"} <= derived
    generated_files = {os.path.relpath(path, REPO) for path in generated.generated()}
    assert derived <= generated_files, derived - generated_files  # only files `generated` declares it writes
    assert "ToyPairs" in (repo / "runtime/dew/data/kinds.py").read_text()
    assert "toy-pairs" in (repo / "docs/preprocess.md").read_text()
    usage = run(repo, "-m", "dew.pipelines.cli", check=False)
    assert usage.returncode == 2 and "toy-pairs" in usage.stdout + usage.stderr
    assert "--val_fraction" in run(repo, "-m", "dew.pipelines.cli", "toy-pairs", "--help").stdout

    pairs = write_inputs(tmp_path / "in")
    output = tmp_path / "pairs"
    job = ["-m", "dew.pipelines.cli", "toy-pairs", "--input", str(tmp_path / "in" / "*.txt"), "--output", str(output)]
    run(repo, *job, "--val_fraction", "0.25", "--shard_size_mb", "0.001", *IN_MEMORY)
    stats = json.loads((output / "stats.json").read_text())
    assert stats["lines_in"] == 82 and stats["lines_written"] == 80 and stats["dropped"] == {"no_tab": 2}

    read = json.loads(run(repo, "-c", READ_BACK, str(output)).stdout)
    train = [tuple(p) for p in read["splits"]["train"]]
    val = [tuple(p) for p in read["splits"]["val"]]
    assert sorted(train + val) == sorted(pairs)  # every pair once, none invented, none lost
    assert val and len(val) < len(train) and set(read["splits"]) == {"train", "val"}
    streamed = [tuple(p) for p in read["streamed"]]
    assert len(set(streamed)) == len(streamed) == len(train) // 4 * 4 and set(streamed) <= set(train)
    scored = [tuple(p) for p in read["scored"]]
    assert scored and len(set(scored)) == len(scored) and set(scored) <= set(val)
    assert read["config"]["kind"] == "toy_pairs" and "toy_pairs" in read["kinds"]

    inspected = run(repo, "-m", "dew.pipelines.cli", "inspect", str(output)).stdout
    assert "pairs" in inspected and "no_tab" in inspected

    before = {p.name: p.read_bytes() for p in output.iterdir()}
    run(repo, *job, "--val_fraction", "0.25", "--shard_size_mb", "0.001", *IN_MEMORY)  # committed: a no-op
    assert {p.name: p.read_bytes() for p in output.iterdir()} == before
