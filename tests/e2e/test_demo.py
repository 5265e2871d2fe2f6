"""`make demo` end to end: pydoc topics → Beam tokenize + pack → PackedTokens batches, decoded."""

from __future__ import annotations

from pathlib import Path

import pytest

from dew.data import formats
from dew.pipelines import demo

pytestmark = pytest.mark.beam


def test_demo_tokenizes_packs_and_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    in_memory = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    result = demo.main(["--workdir", str(tmp_path), "--seq_len", "128", "--batch", "4", "--steps", "5", *in_memory])
    out = capsys.readouterr().out
    meta = formats.read_meta(result["corpus"])
    assert meta.tokens.eos_id == 256 and set(meta.splits) == {"train", "val"}
    assert result["windows"] > 0 and 0.9 < result["fill"] <= 1.0 and result["rate"] > 0
    row = next(line for line in out.splitlines() if "row 0:" in line)
    assert len(row.split("row 0:")[1].strip()) > 50  # decoded pydoc text, not ids
    assert "(4, 129) int32" in out
