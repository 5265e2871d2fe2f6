"""A tiny chat tokenizer trained in the test run, saved where transformers loads it as it is.

The BPE is trained with the `tokenizers` library on CPython's own help topics, so no hub or network is
involved. Its chat template is ChatML (<|im_start|>role ... <|im_end|>) with a system block listing the
tools when a conversation has some, and a Qwen3-style enable_thinking switch: False closes an empty
<think></think> block after the generation prompt, True or undefined leaves the model to open one.
The template has no {% generation %} markers, so assistant spans have to be found by rendering prefixes.
"""

from __future__ import annotations

import os

import pytest

CHATML = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n' -}}"
    "{%- for tool in tools -%}{{- (tool | tojson) + '\\n' -}}{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (message.role == 'system' and loop.first) -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def corpus() -> list[str]:
    from pydoc_data.topics import topics

    # A slice of the topics keeps training well under a second and the merges the same every run.
    return [topics[key] for key in sorted(topics)[:40]]


def save_chat_tokenizer(directory: str | os.PathLike[str], *, vocab_size: int = 600, template: str = CHATML) -> str:
    """Trains a byte-level BPE, saves it with `template` as its chat template, returns the directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
        chat_template=template,
    )
    tokenizer.save_pretrained(os.fspath(directory))
    return os.fspath(directory)


@pytest.fixture(scope="session")
def chat_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory holding the tiny ChatML tokenizer, trained once per test session."""
    return save_chat_tokenizer(tmp_path_factory.mktemp("chat-tokenizer"))
