"""Supervised/RL text: how fast batches are cut and conversations rendered, against same-run baselines.

1. ChatMessages windows: one vectorised read_batch per batch against reading the same windows one
   record at a time (what a per-record Grain map would do).
2. PreferencePairs: the same comparison for [B, 2, seq_len] pairs.
3. Rendering with derived assistant marks against transformers' plain apply_chat_template, which
   gives no marks: the ratio is the price of finding spans by rendering prefixes.
Run: .venv/bin/python benchmarks/bench_chat.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.timing import rate
from dew.data.chat import ChatWindows
from dew.data.preference import PairSource
from dew.data.templates import ChatTemplate, messages_of
from tests.runtime.chat_support import corpus, save_chat_tokenizer

BATCH = 64


def conversations(n: int) -> list[list[dict[str, str]]]:
    texts = [t for text in corpus() for t in text.split("\n\n") if t.strip()]
    out = []
    for i in range(n):
        turns = [{"role": "system", "content": "Answer from the Python docs."}] if i % 2 else []
        for j in range(1 + i % 3):
            turns.append({"role": "user", "content": texts[(i * 7 + j) % len(texts)][:300]})
            turns.append({"role": "assistant", "content": texts[(i * 11 + j + 1) % len(texts)][:600]})
        out.append(turns)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        tokenizer = save_chat_tokenizer(directory, vocab_size=2000)
        template = ChatTemplate(tokenizer)
        convs = conversations(400)
        records = tuple(json.dumps({"messages": c}) for c in convs)

        start = time.perf_counter()
        source = ChatWindows.read(template, None, records, window=1025, bins=8, pad_id=0)
        ours = len(convs) / (time.perf_counter() - start)
        hf = template.tokenizer.tokenizer
        start = time.perf_counter()
        for c in convs:
            hf.apply_chat_template(messages_of(c, "bench"), tokenize=True)
        plain = len(convs) / (time.perf_counter() - start)
        print(
            f"render+marks   {ours:9.0f} conversations/s   plain apply_chat_template {plain:9.0f}/s   "
            f"ratio {ours / plain:.2f}x"
        )

        rng = np.random.default_rng(0)
        picks = [rng.integers(0, len(source), BATCH) for _ in range(64)]
        it = iter(range(1 << 30))
        batched = rate(lambda: source.read_batch(picks[next(it) % 64]), BATCH)
        one = rate(lambda: [source[int(i)] for i in picks[next(it) % 64]], BATCH)
        print(
            f"chat windows   {batched:9.0f} windows/s batched       {one:9.0f}/s one at a time   "
            f"ratio {batched / one:.1f}x  ({len(source)} windows, padding {source.plan.padding:.1%})"
        )

        rows = [
            {
                "prompt": rng.integers(1, 2000, rng.integers(16, 200)).tolist(),
                "chosen": rng.integers(1, 2000, rng.integers(1, 300)).tolist(),
                "rejected": rng.integers(1, 2000, rng.integers(1, 300)).tolist(),
            }
            for _ in range(5000)
        ]
        pairs = PairSource.read(None, tuple(json.dumps(r) for r in rows), seq_len=512, pad_id=0)
        picks = [rng.integers(0, len(pairs), BATCH) for _ in range(64)]
        batched = rate(lambda: pairs.read_batch(picks[next(it) % 64]), BATCH)
        one = rate(lambda: [pairs[int(i)] for i in picks[next(it) % 64]], BATCH)
        print(
            f"pref. pairs    {batched:9.0f} pairs/s batched         {one:9.0f}/s one at a time   "
            f"ratio {batched / one:.1f}x"
        )


if __name__ == "__main__":
    main()
