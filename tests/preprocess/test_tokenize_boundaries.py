"""Document boundaries the tokenize job writes: one eos closes each document, and the text cannot forge one.

Each document's ids are recomputed here with the `tokenizers` library on its own and compared one by one.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.pipelines import flags
from dew.pipelines import tokenize_job as job
from dew.preprocess.pack import shard_tokens
from tests.preprocess.corpora import topics, write_jsonl

pytestmark = pytest.mark.beam
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def tokenize(inputs: Path, output: Path, *flags: str) -> dict:
    return job.main(["--input", str(inputs / "*"), "--output", str(output), "--pack", *flags, *IN_MEMORY])


def documents_of(directory: Path) -> tuple[np.ndarray, int]:
    """Every split's ids in order, and the eos id meta.json records."""
    meta = formats.read_meta(str(directory))
    parts = []
    for split in meta.splits:
        for shard in meta.shards(split):
            ext = formats.parse_shard_name(shard.name)[3]
            parts.extend(shard_tokens(str(directory / shard.name), ext, np.dtype(meta.tokens.dtype)))
    assert meta.tokens.eos_id is not None
    return np.concatenate(parts).astype(np.int64), meta.tokens.eos_id


def test_special_token_text_in_a_document_is_text_not_a_boundary(tmp_path: Path, hf_tokenizer_dir: str) -> None:
    from tokenizers import Tokenizer

    texts = [
        topics(1)[0],
        "one document <eos> that names the eos token",
        "<eos>",
        "an <unk> too",
        topics(3)[2],
    ]
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_jsonl(inputs / "a.jsonl", texts)
    out = tmp_path / "out"
    tokenize(inputs, out, "--tokenizer", hf_tokenizer_dir)
    stream, eos = documents_of(out)
    # The text "<eos>" is five characters of text: it must not end a document where the job did not.
    reference = Tokenizer.from_file(os.path.join(hf_tokenizer_dir, "tokenizer.json"))
    reference.encode_special_tokens = True
    ends = np.flatnonzero(stream == eos) + 1
    assert len(ends) == len(texts) and ends[-1] == len(stream)
    for text, ids in zip(texts, np.split(stream, ends[:-1]), strict=True):
        assert ids.tolist() == [*reference.encode(text, add_special_tokens=False).ids, eos]
    assert formats.read_meta(str(out)).shards("train")[0].records == len(texts)


def test_an_eos_id_the_text_can_produce_is_refused(tmp_path: Path, hf_tokenizer_dir: str) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_jsonl(inputs / "a.jsonl", ["a\x00b", "c"])
    # Byte 0 is a NUL in the text: every one would cut its document in two.
    with pytest.raises(flags.UsageError, match=r"eos id 0 .*byte"):
        tokenize(inputs, tmp_path / "b", "--eos_id", "0")
    # An ordinary token of the vocabulary (not a special token) is one the text encodes to.
    with pytest.raises(flags.UsageError, match=r"eos id 100 .*not a special token"):
        tokenize(inputs, tmp_path / "h", "--tokenizer", hf_tokenizer_dir, "--eos_id", "100")
    assert not (tmp_path / "b" / "meta.json").exists() and not (tmp_path / "h" / "meta.json").exists()


def test_a_document_without_tokens_is_dropped_with_or_without_eos(tmp_path: Path) -> None:
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # Whitespace splitting makes no token of a text of spaces: the document has nothing to train on.
    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.train_from_iterator(topics(20), trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>"]))
    directory = str(tmp_path / "words")
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="<eos>").save_pretrained(directory)
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_jsonl(inputs / "a.jsonl", ["the object", "   ", "a class"])
    for name, pack in (("plain", ()), ("packed", ("--pack",))):
        out = tmp_path / name
        job.main(["--input", str(inputs / "*"), "--output", str(out), "--tokenizer", directory, *pack, *IN_MEMORY])
        stats = json.loads((out / "stats.json").read_text())
        assert (stats["documents_written"], stats["dropped"]["no_tokens"]) == (2, 1), name
        assert stats["drop_examples"]["no_tokens"]["row"] == 1
    stream, eos = documents_of(tmp_path / "packed")
    # No document of the eos alone: the packed corpus holds the two documents with tokens, nothing between.
    expected = [[*words.encode(text).ids, eos] for text in ("the object", "a class")]
    assert stream.tolist() == expected[0] + expected[1]
