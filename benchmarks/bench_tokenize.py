"""The tokenize job's throughput on DirectRunner (2 workers) against raw `tokenizers` encode_batch on 2 processes.

Both sides encode the same documents with the same BPE (trained here on pydoc text, 8k vocab, saved as
a local directory). The baseline is the Rust tokenizer alone, in 2 processes, with nothing written;
the job reads jsonl, tokenizes, lays out, shuffles, writes and commits .bin shards. Reported like
Megatron's preprocess_data: documents/s, MB/s of text and tokens/s; the ratio is job / baseline tokens/s
(goal >= 0.7). Beam's start-up (worker processes importing Beam) is timed separately and left out.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

DOCUMENTS = 6000


def corpus() -> list[str]:
    from pydoc_data.topics import topics

    texts = [topics[name] for name in sorted(topics)]
    # Real text in document-sized pieces (about 2 KB, as web documents are), repeated to a few MB.
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


def baseline(directory: str, texts: list[str]) -> tuple[float, int]:
    halves = [texts[: len(texts) // 2], texts[len(texts) // 2 :]]
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(_encode, [(directory, halves[0][:10])] * 2)  # start both workers before timing
        start = time.perf_counter()
        tokens = sum(pool.map(_encode, [(directory, h) for h in halves]))
        return time.perf_counter() - start, tokens


def job(directory: str, source: str, output: str) -> tuple[float, float, int]:
    from dew.pipelines import tokenize

    runner = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    start = time.perf_counter()
    found = tokenize.main(["--input", source, "--output", output, "--tokenizer", directory, "--pack", *runner])
    wall = time.perf_counter() - start
    # Start-up: the same job over one document, so worker processes importing Beam are not counted.
    tiny = source + ".tiny.jsonl"
    with open(source) as f, open(tiny, "w") as g:
        g.write(f.readline())
    start = time.perf_counter()
    tokenize.main(["--input", tiny, "--output", output + "-tiny", "--tokenizer", directory, "--pack", *runner])
    startup = time.perf_counter() - start
    return wall, startup, found["tokens"] - found["documents_tokenized"]  # less the eos ids


def main() -> None:
    texts = corpus()
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as work:
        tokenizer_dir = os.path.join(work, "tokenizer")
        train_tokenizer(tokenizer_dir, texts)
        source = os.path.join(work, "docs.jsonl")
        with open(source, "w") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
        base_seconds, base_tokens = baseline(tokenizer_dir, texts)
        wall, startup, tokens = job(tokenizer_dir, source, os.path.join(work, "out"))
    if tokens != base_tokens:
        sys.exit(f"the job wrote {tokens} tokens, the baseline encoded {base_tokens}")
    seconds = max(wall - startup, 1e-9)
    for name, s in (("tokenizers encode_batch, 2 processes", base_seconds), ("tokenize job, DirectRunner x2", seconds)):
        print(
            f"{name:<40} {len(texts) / s:>9,.0f} documents/s {megabytes / s:>7.2f} MB/s {tokens / s:>11,.0f} tokens/s"
        )
    print(f"job wall clock {wall:.1f} s, of which Beam start-up {startup:.1f} s (excluded above)")
    print(f"ratio job / baseline tokens/s: {base_seconds / seconds:.2f} (goal >= 0.7)")


if __name__ == "__main__":
    main()
