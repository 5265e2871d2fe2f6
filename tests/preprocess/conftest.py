"""Fixtures of the preprocess tests: tiny real-text inputs and a locally trained HF tokenizer.

The GCS emulator fixture (gcs_emulator) is shared by every suite and lives in tests/conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.preprocess.corpora import topics, write_jsonl


@pytest.fixture
def text_inputs(tmp_path: Path) -> Path:
    """Three jsonl files of pydoc topics (one of them gzipped), 40 documents in all."""
    import gzip

    texts = topics(40)
    directory = tmp_path / "in"
    directory.mkdir()
    write_jsonl(directory / "a.jsonl", texts[:15])
    write_jsonl(directory / "b.jsonl", texts[15:25])
    with gzip.open(directory / "c.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts[25:])
    return directory


@pytest.fixture(scope="session")
def hf_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 300-token BPE trained here on pydoc text and saved as a local HF tokenizer directory (no hub)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(topics(80), trainer=trainer)
    directory = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>").save_pretrained(directory)
    return str(directory)
