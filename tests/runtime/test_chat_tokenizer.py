"""HFTokenizer over a chat tokenizer: ids, round trips, and an export transformers loads as it is."""

from __future__ import annotations

import pickle

from dew.data import HFTokenizer, tokenizer_for
from tests.runtime.chat_support import chat_tokenizer  # noqa: F401

CONVERSATION = [{"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "Seven."}]


def test_ids_and_round_trip(chat_tokenizer: str) -> None:  # noqa: F811
    tokenizer = tokenizer_for(chat_tokenizer, local_files_only=True)
    assert isinstance(tokenizer, HFTokenizer)
    assert tokenizer.eos_id == tokenizer.encode("<|im_end|>")[0]
    assert tokenizer.bos_id is None  # the template opens every turn itself; there is no bos token
    text = "def f(x):\n    return x + 1  # naïve"
    ids = tokenizer.encode(text)
    assert all(isinstance(i, int) for i in ids) and tokenizer.decode(ids) == text
    assert tokenizer.encode_batch([text, "pass"]) == [ids, tokenizer.encode("pass")]


def test_export_loads_in_transformers_as_it_is(tmp_path, chat_tokenizer: str) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tokenizer = tokenizer_for(chat_tokenizer, local_files_only=True)
    tokenizer.save_pretrained(tmp_path / "export")
    exported = AutoTokenizer.from_pretrained(str(tmp_path / "export"), local_files_only=True)
    rendered = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=False)
    assert exported.apply_chat_template(CONVERSATION, tokenize=False) == rendered
    assert exported.encode(rendered, add_special_tokens=False) == tokenizer.encode(rendered)
    assert HFTokenizer(str(tmp_path / "export")).fingerprint() == tokenizer.fingerprint()


def test_pickles_without_the_loaded_tokenizer(chat_tokenizer: str) -> None:  # noqa: F811
    tokenizer = tokenizer_for(chat_tokenizer)
    tokenizer.encode("warm")
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy._tokenizer is None and copy.encode("warm") == tokenizer.encode("warm")
