"""The tokenize job's throughput on DirectRunner (2 workers) against raw `tokenizers` encode_batch on 2 processes.

Both sides encode the same documents with the same BPE (trained here on pydoc text, 8k vocab, saved as
a local directory). The baseline is the Rust tokenizer alone, in 2 processes, with nothing written;
the job reads jsonl, tokenizes, lays out, shuffles, writes and commits .bin shards. Reported like
Megatron's preprocess_data: documents/s, MB/s of text and tokens/s.

Two ratios, job / baseline tokens/s:
- steady state (the goal, >= 0.7): the job's wall clock less its start-up, measured as the same job over
  one document, run first so that both job runs find the same warm file cache. The baseline's processes
  are started and have loaded the tokenizer before its clock starts.
- wall clock: all a user waits for on each side, start-up included (for the baseline: spawning its
  processes, importing tokenizers, loading the file). Beam's start-up is a fixed cost (worker processes
  importing Beam, slow where Python caches no bytecode), so this ratio rises with the input size.
Both sides run the tokenizer with the same threads: TOKENIZERS_PARALLELISM=false is set once here and every
process inherits it, baseline and Beam workers alike: one single-threaded process per core, which is what
the job's workers default to (with the library's own thread pool on, the baseline measured the same). The machine is
shared, so the baseline is timed before and after the job and their mean is used; both are printed.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

BASELINE = (
    "the same documents through the Rust tokenizers' encode_batch in 2 processes, started and loaded before the "
    "clock starts, writing nothing"
)
DOCUMENTS = 12000


def corpus() -> list[str]:
    from pydoc_data.topics import topics

    texts = [topics[name] for name in sorted(topics)]
    # Real text in document-sized pieces (about 2 KB, as web documents are), repeated to ~25 MB.
    pieces = [t[i : i + 2048] for t in texts for i in range(0, len(t), 2048)]
    return [pieces[i % len(pieces)] for i in range(DOCUMENTS)]


def train_tokenizer(directory: str, texts: list[str]) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=["<unk>", "<eos>"])
    tokenizer.train_from_iterator(texts[:2000], trainer=trainer)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>").save_pretrained(directory)


def _encode(args: tuple[str, list[str]]) -> int:
    from tokenizers import Tokenizer

    path, texts = args
    tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    return sum(len(e.ids) for b in range(0, len(texts), 512) for e in tokenizer.encode_batch(texts[b : b + 512]))


def baseline(directory: str, texts: list[str]) -> tuple[float, float, int]:
    """(seconds encoding, seconds from spawning the processes on, tokens)."""
    halves = [texts[: len(texts) // 2], texts[len(texts) // 2 :]]
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(_encode, [(directory, halves[0][:10])] * 2, chunksize=1)  # start both workers before timing
        ready = time.perf_counter()
        tokens = sum(pool.map(_encode, [(directory, h) for h in halves], chunksize=1))
        end = time.perf_counter()
    return end - ready, end - start, tokens


def run_job(directory: str, source: str, output: str) -> tuple[float, int]:
    """(wall seconds, tokens written less the eos ids)."""
    from dew.pipelines import tokenize_job

    runner = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    start = time.perf_counter()
    found = tokenize_job.main(["--input", source, "--output", output, "--tokenizer", directory, "--pack", *runner])
    return time.perf_counter() - start, found["tokens"] - found["documents_tokenized"]


def main() -> None:
    print(f"baseline: {BASELINE}")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    texts = corpus()
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir = os.path.join(work, "tokenizer")
        train_tokenizer(tokenizer_dir, texts)
        source, tiny = os.path.join(work, "docs.jsonl"), os.path.join(work, "tiny.jsonl")
        with open(source, "w") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
        with open(tiny, "w") as f:
            f.write(json.dumps({"text": texts[0]}) + "\n")
        before, before_wall, base_tokens = baseline(tokenizer_dir, texts)
        startup, _ = run_job(tokenizer_dir, tiny, os.path.join(work, "tiny"))
        wall, tokens = run_job(tokenizer_dir, source, os.path.join(work, "out"))
        after, after_wall, _ = baseline(tokenizer_dir, texts)
    if tokens != base_tokens:
        sys.exit(f"the job wrote {tokens} tokens, the baseline encoded {base_tokens}")
    base, base_wall = (before + after) / 2, (before_wall + after_wall) / 2
    steady = max(wall - startup, 1e-9)
    print(f"TOKENIZERS_PARALLELISM={os.environ['TOKENIZERS_PARALLELISM']} on both sides; {len(texts)} documents")
    for name, s in (("tokenizers encode_batch, 2 processes", base), ("tokenize job, DirectRunner x2", steady)):
        print(
            f"{name:<40} {len(texts) / s:>9,.0f} documents/s {megabytes / s:>7.2f} MB/s {tokens / s:>11,.0f} tokens/s"
        )
    print(f"baseline encode {before:.1f} s before the job, {after:.1f} s after; {base_wall:.1f} s with start-up")
    print(f"job wall clock {wall:.1f} s, of which Beam start-up {startup:.1f} s (the one-document job)")
    print(f"ratio job / baseline tokens/s, steady state: {base / steady:.2f} (goal >= 0.7)")
    print(f"ratio job / baseline tokens/s, wall clock with start-up: {base_wall / wall:.2f}")


if __name__ == "__main__":
    main()
