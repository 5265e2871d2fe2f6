"""Quickstart: train a tiny JAX language model on your own jsonl, kill it, resume it, lose nothing.

    jsonl → dew-preprocess tokenize --pack → PackedTokens(...).load(batch=) → a two-layer transformer
    (jax + optax) → Orbax checkpoints holding the model state and the data position → the run is
    SIGKILLed at step --kill_at and resumed from its last checkpoint → its loss curve is checked to
    equal, bit for bit, that of a run that was never stopped.

    python examples/quickstart.py [--input docs.jsonl --text_field text] [--steps 300] [--kill_at 170]
                                  [Beam flags, e.g. --direct_running_mode=in_memory]

Without --input it writes CPython's own reference documentation (pydoc_data's topics) as jsonl.
Needs the `beam` and `jax` extras (`pip install 'dew[beam,jax]'`). The killed run is a child process
that sends itself SIGKILL, so nothing of it gets to clean up: what survives is only what Orbax had
committed to disk.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run:
    """Everything that decides the losses of a training run; a resumed run must be given the same."""

    corpus: str
    seq_len: int
    batch: int
    steps: int
    checkpoint_every: int
    width: int
    layers: int
    heads: int
    learning_rate: float
    seed: int
    workers: int


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python examples/quickstart.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", default=None, help="a jsonl file of documents (default: CPython's pydoc topics)")
    p.add_argument("--text_field", default="text", help="the JSON key holding each document's text")
    p.add_argument("--workdir", default=None, help="where the corpus and checkpoints go (default: a temporary one)")
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--checkpoint_every", type=int, default=50)
    p.add_argument("--kill_at", type=int, default=170, help="the step at which the second run is killed")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--learning_rate", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=0, help="Grain worker processes (0 reads in the trainer)")
    # The killed run is this script again, told where the corpus is and when to die.
    p.add_argument("--corpus", default=None, help=argparse.SUPPRESS)
    p.add_argument("--checkpoints", default=None, help=argparse.SUPPRESS)
    p.add_argument("--die_at", type=int, default=None, help=argparse.SUPPRESS)
    return p


def write_topics(path: Path) -> None:
    from pydoc_data.topics import topics

    with path.open("w") as f:
        for name in sorted(topics):
            f.write(json.dumps({"text": topics[name]}) + "\n")


def tokenize(source: str, corpus: Path, args: argparse.Namespace, beam_flags: Sequence[str]) -> None:
    """`dew-preprocess tokenize --pack`, as a separate process so the trainer never imports Beam."""
    command = [sys.executable, "-m", "dew.pipelines.cli", "tokenize", "--input", source, "--output", str(corpus)]
    command += ["--text_field", args.text_field, "--pack", "--seq_len", str(args.seq_len), "--overwrite"]
    subprocess.run([*command, *beam_flags], check=True)


# --- the model: a pre-norm causal transformer that attends within its own packed document only ---


def init_params(key: Any, vocab: int, run: Run) -> dict[str, Any]:
    import jax

    keys = iter(jax.random.split(key, 2 + 4 * run.layers))

    def dense(shape: tuple[int, ...]) -> Any:
        return jax.random.normal(next(keys), shape) * shape[0] ** -0.5

    layers = [
        {
            "attention_norm": jax.numpy.ones(run.width),
            "qkv": dense((run.width, 3 * run.width)),
            "out": dense((run.width, run.width)),
            "mlp_norm": jax.numpy.ones(run.width),
            "up": dense((run.width, 4 * run.width)),
            "down": dense((4 * run.width, run.width)),
        }
        for _ in range(run.layers)
    ]
    return {
        "embed": dense((vocab, run.width)),
        "position": dense((run.seq_len, run.width)) * 0.1,
        "layers": layers,
        "final_norm": jax.numpy.ones(run.width),
    }


def rms_norm(x: Any, scale: Any) -> Any:
    import jax.numpy as jnp

    return x * scale / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def logits_of(params: dict[str, Any], tokens: Any, positions: Any, segments: Any, heads: int) -> Any:
    import jax
    import jax.numpy as jnp

    x = params["embed"][tokens] + params["position"][positions]
    length = tokens.shape[1]
    causal = jnp.tril(jnp.ones((length, length), bool))
    # Packed windows hold several documents: a token may look back only inside its own one.
    same_document = segments[:, :, None] == segments[:, None, :]
    mask = (causal & same_document)[:, None]
    for layer in params["layers"]:
        q, k, v = jnp.split(rms_norm(x, layer["attention_norm"]) @ layer["qkv"], 3, axis=-1)
        q, k, v = (t.reshape(*t.shape[:2], heads, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
        scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(q.shape[-1]), -1e9)
        attended = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + attended @ layer["out"]
        x = x + jax.nn.gelu(rms_norm(x, layer["mlp_norm"]) @ layer["up"]) @ layer["down"]
    return rms_norm(x, params["final_norm"]) @ params["embed"].T


def loss_of(params: dict[str, Any], batch: dict[str, Any], heads: int) -> Any:
    import jax.numpy as jnp
    import optax

    text, segments = batch["text"], batch["text_segment_ids"]
    logits = logits_of(params, text[:, :-1], batch["text_positions"][:, :-1], segments[:, :-1], heads)
    # A target counts only when it continues the same document; padding (segment 0) never does.
    counted = (segments[:, 1:] == segments[:, :-1]) & (segments[:, 1:] > 0)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, text[:, 1:])
    return jnp.sum(losses * counted) / jnp.maximum(jnp.sum(counted), 1)


# --- training with checkpoints ---


def train(run: Run, checkpoints: Path, *, die_at: int | None = None) -> tuple[int, list[float]]:
    """Trains to run.steps, continuing from the latest checkpoint under `checkpoints` if there is one.

    Returns the step it started from and the loss of every step it took. Each loss is also appended to
    `checkpoints/losses.jsonl` as it is computed, so a killed run's losses outlive it.
    """
    import jax
    import optax
    import orbax.checkpoint as ocp

    from dew.data import DataPartition, Loading, datasets, formats
    from dew.data.checkpoints import DataPositionRestore, DataPositionSave

    vocab = formats.read_meta(run.corpus).tokens.vocab_size
    spec = datasets.PackedTokens(
        path=run.corpus,
        seq_len=run.seq_len,
        val_batches=0,
        seed=run.seed,
        loading=Loading(workers=run.workers, threads=2, read_buffer=2 * run.batch),
    )
    data = spec.load(batch=run.batch)
    optimizer = optax.adamw(run.learning_rate)
    params = init_params(jax.random.key(run.seed), vocab, run)
    state = {"params": params, "optimizer": optimizer.init(params)}

    @jax.jit
    def step_fn(state: dict[str, Any], batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        loss, grads = jax.value_and_grad(loss_of)(state["params"], batch, run.heads)
        updates, optimizer_state = optimizer.update(grads, state["optimizer"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "optimizer": optimizer_state}, loss

    checkpoints.mkdir(parents=True, exist_ok=True)
    options = ocp.CheckpointManagerOptions(save_interval_steps=run.checkpoint_every)
    losses: list[float] = []
    with (
        data.train(DataPartition()) as stream,
        ocp.CheckpointManager(checkpoints.resolve() / "orbax", options=options) as manager,
        (checkpoints / "losses.jsonl").open("a") as log,
    ):
        start = manager.latest_step() or 0
        if start:
            # The data position goes back into the stream itself: its next batch is step start + 1's.
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
            restored = manager.restore(
                start,
                args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), data=DataPositionRestore(stream)),
            )
            state = restored["state"]
            print(f"resumed at step {start}: the stream continues at record {restored['data']['records']:,}")
        for step in range(start + 1, run.steps + 1):
            state, loss = step_fn(state, next(stream))
            losses.append(float(loss))
            log.write(json.dumps({"step": step, "loss": losses[-1]}) + "\n")
            log.flush()
            if step == die_at:
                os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no final save: a preemption
            manager.save(
                step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), data=DataPositionSave(stream))
            )
            if step % run.checkpoint_every == 0 or step == run.steps:
                print(f"step {step:4d}  loss {losses[-1]:.4f}")
        manager.wait_until_finished()
    return start, losses


def run_of(args: argparse.Namespace, corpus: str) -> Run:
    fields = {f.name for f in dataclasses.fields(Run)} - {"corpus"}
    return Run(corpus=corpus, **{name: getattr(args, name) for name in fields})


def flags_of(run: Run) -> list[str]:
    return [f"--{f.name}={getattr(run, f.name)}" for f in dataclasses.fields(run)]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args, beam_flags = parser().parse_known_args(argv)
    if args.die_at is not None:
        train(run_of(args, args.corpus), Path(args.checkpoints), die_at=args.die_at)
        raise SystemExit(f"step {args.die_at} was never reached")
    if not 0 < args.kill_at < args.steps:
        raise SystemExit(f"--kill_at must fall inside the run: 0 < {args.kill_at} < --steps {args.steps}")

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="dew-quickstart-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = args.input
    if source is None:
        source = str(workdir / "pydoc_topics.jsonl")
        write_topics(Path(source))
    corpus = workdir / "corpus"
    print(f"[1/4] dew-preprocess tokenize --pack: {source} → {corpus}")
    tokenize(source, corpus, args, beam_flags)
    run = run_of(args, str(corpus))

    print(f"[2/4] train {run.steps} steps without a stop")
    _, whole = train(run, workdir / "uninterrupted")

    print(f"[3/4] train again, killed at step {args.kill_at}")
    stopped = workdir / "stopped"
    child = subprocess.run(
        [sys.executable, __file__, *flags_of(run), f"--checkpoints={stopped}", f"--die_at={args.kill_at}"]
    )
    if child.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run to kill ended with code {child.returncode}, not by SIGKILL")
    with (stopped / "losses.jsonl").open() as f:
        before = [json.loads(line)["loss"] for line in f]

    print("[4/4] resume from its last checkpoint")
    start, after = train(run, stopped)
    # Steps between the checkpoint and the kill are taken twice; the second time must match the first.
    replayed = before[start : args.kill_at]
    if after[: len(replayed)] != replayed:
        raise SystemExit(f"the steps replayed after step {start} differ from the killed run's")
    if before[:start] + after != whole:
        raise SystemExit("the resumed loss curve differs from the uninterrupted one")
    print(f"resumed at step {start} after a kill at step {args.kill_at}: all {len(whole)} losses equal bit for bit")
    return {"losses": whole, "resumed_at": start, "killed_at": args.kill_at}


if __name__ == "__main__":
    main()
