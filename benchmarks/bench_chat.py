"""Supervised/RL text: how fast batches are cut and conversations rendered, against same-run baselines.

1. ChatMessages windows: read_batch against plain numpy packing of the same windows from the same plan
   and rendered arrays (benchmarks/plain.py: one slice copy per piece and column).
2. PreferencePairs: read_batch against a padding collator's loop (one slice per row and side) over the
   same rows.
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

from benchmarks import plain
from benchmarks.timing import rate
from dew.data.chat import ChatWindows
from dew.data.preference import COLUMNS, MASK_KEY, PairSource
from dew.data.templates import ChatTemplate, messages_of
from tests.runtime.chat_support import corpus, save_chat_tokenizer

BASELINE = (
    "windows: plain numpy packing of the same plan and rendered ids (one slice copy per piece and column); "
    "pairs: a padding collator's per-row slice loop; rendering: transformers' apply_chat_template, no marks"
)
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


def same(ours: dict[str, np.ndarray], baseline: dict[str, np.ndarray]) -> None:
    if ours.keys() != baseline.keys() or any(not np.array_equal(ours[k], baseline[k]) for k in ours):
        raise SystemExit("the baseline builds another batch than dew")


def main() -> None:
    print(f"baseline: {BASELINE}")
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
        template_rate = len(convs) / (time.perf_counter() - start)
        print(
            f"render+marks   {ours:9.0f} conversations/s   plain apply_chat_template {template_rate:9.0f}/s   "
            f"ratio {ours / template_rate:.2f}x"
        )

        rng = np.random.default_rng(0)
        picks = [rng.integers(0, len(source), BATCH) for _ in range(64)]
        it = iter(range(1 << 30))
        columns = {
            "text": (source.ids.values, source.pad_id),
            MASK_KEY: (source.completion.values, 0),
            "roles": (source.roles.values, 0),
        }

        def packed(rows: np.ndarray) -> dict[str, np.ndarray]:
            return plain.pack(source.plan, source.ids.offsets, columns, rows, positions="document")

        same(source.read_batch(picks[0]), packed(picks[0]))
        batched = rate(lambda: source.read_batch(picks[next(it) % 64]), BATCH)
        base = rate(lambda: packed(picks[next(it) % 64]), BATCH)
        print(
            f"chat windows   {batched:9.0f} windows/s read_batch    {base:9.0f}/s plain numpy     "
            f"ratio {batched / base:.2f}x  ({len(source)} windows, padding {source.plan.padding:.1%})"
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
        prompts, chosen, rejected = ([np.asarray(r[key], dtype=np.int32) for r in rows] for key in COLUMNS)

        def padded(picked: np.ndarray) -> dict[str, np.ndarray]:
            return plain.pad_pairs(prompts, chosen, rejected, picked, 512, 0)

        same(pairs.read_batch(picks[0]), padded(picks[0]))
        batched = rate(lambda: pairs.read_batch(picks[next(it) % 64]), BATCH)
        base = rate(lambda: padded(picks[next(it) % 64]), BATCH)
        print(
            f"pref. pairs    {batched:9.0f} pairs/s read_batch      {base:9.0f}/s collator loop   "
            f"ratio {batched / base:.2f}x"
        )


if __name__ == "__main__":
    main()
