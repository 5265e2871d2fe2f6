"""Fixtures of the preprocess tests: tiny real-text inputs, a locally trained HF tokenizer, a GCS emulator."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.preprocess.corpora import topics, write_jsonl

BUCKET = "dew-test"


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[str]:
    """A gcp-storage-emulator on 127.0.0.1 with bucket dew-test; STORAGE_EMULATOR_HOST points Beam and gcsfs at it."""
    from gcp_storage_emulator.server import create_server

    port = _free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    host = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError("the GCS emulator did not start within 10 s") from None
            time.sleep(0.05)
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = host
    try:
        yield host
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
