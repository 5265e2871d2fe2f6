"""Every signature the dew.data reference page gives, pinned: parameter names, order, kinds and defaults.

SIGNATURES is the page's own text, one entry per class, function and method it signs. The code may take
more than the page (a later keyword-only option, or a positional one after all of the page's), as long
as each added parameter has a default, so every call the page shows still means the same thing. The
page's annotations are compared too, apart from the few spellings in SPELLINGS, which name the same type.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
from typing import Any

import numpy as np
import pytest

import dew.data

# The page's signatures (its private `_DEFAULT_DTYPE` written as the value it holds, uint16).
SIGNATURES = {
    "AutoAudioProcessor": "(tensor_type='np', modelname='facebook/wav2vec2-base-960h', sampling_rate=None)",
    "AutoTextTokenizer": "(tensor_type='np', modelname='openai/clip-vit-large-patch14')",
    "ByteTokenizer": "()",
    "ByteTokenizer.encode": "(text: str) -> list[int]",
    "ByteTokenizer.decode": "(ids: ArrayLike | Sequence[int]) -> str",
    "Checkpointable.get_state": "() -> Position",
    "Checkpointable.set_state": "(state: Position) -> None",
    "CombinedOnline": (
        "(sources: tuple[str, ...] = ('gs://dew-datasets-regional/datasets/laion-aesthetics-12m+mscoco-2017', "
        "'gs://dew-datasets-regional/datasets/coyo700m-aesthetic-5.4_25M', "
        "'gs://dew-datasets-regional/datasets/leonardo-liked-1.8m', "
        "'gs://dew-datasets-regional/datasets/leonardo-liked-1.8m', "
        "'gs://dew-datasets-regional/datasets/leonardo-liked-1.8m', 'gs://dew-datasets-regional/datasets/cc12m', "
        "'gs://dew-datasets-regional/datasets/playground-liked', "
        "'gs://dew-datasets-regional/datasets/leonardo-liked-1.8m', "
        "'gs://dew-datasets-regional/datasets/leonardo-liked-1.8m', 'gs://dew-datasets-regional/datasets/cc3m', "
        "'gs://dew-datasets-regional/datasets/cc3m', "
        "'gs://dew-datasets-regional/datasets/laion2B-en-aesthetic-4.2_37M'), image_size: int = 256, min_image_size: "
        "int = 128, timeout: int = 15, retries: int = 3, *, seed: int = 0, loading: Loading = Loading(workers=16, "
        "threads=512, worker_buffer=20))"
    ),
    "Corpus": "(name: str, source: Records, weight: float, offset: int = 0)",
    "DataPartition": "(index: int = 0, count: int = 1, readers: int = 1, reader: int = 0)",
    "DataPartition.rows": "(batch: int) -> int",
    "DataPhase": "(path: str | Mapping[str, float], until_step: int | None = None)",
    "Dataset": "(train: Reader, val: Reader | None, records: int | None, batch: int, ramp: Ramp | None = None)",
    "Dataset.from_grain": (
        "(train: GrainPipeline, *, batch: int, validation: GrainPipeline | None = None, records: int | None = None, "
        "loading: Loading = Loading()) -> Dataset"
    ),
    "Dataset.epoch_steps": "(epochs: int = 1) -> int",
    "DatasetSpec": "(*, seed: int = 0, loading: Loading = Loading())",
    "DatasetSpec.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "DatasetSpec.uncaptioned": "(tokenize: Tokenize | None) -> None",
    "HFDatasetSource": (
        "(name: str | None = None, split: str = 'train', dataset=None, options: HFOptions | None = None)"
    ),
    "HFOptions": (
        "(config: str | None = None, data_dir: str | None = None, data_files: str | Sequence[str] | Mapping[str, str | "
        "Sequence[str]] | None = None, cache_dir: str | None = None, features: Features | None = None, download_config:"
        " DownloadConfig | None = None, download_mode: DownloadMode | str | None = None, verification_mode: "
        "VerificationMode | str | None = None, keep_in_memory: bool | None = None, save_infos: bool = False, revision: "
        "str | Version | None = None, token: str | bool | None = None, num_proc: int | None = None, storage_options: "
        "Mapping[str, Any] | None = None)"
    ),
    "HFOptions.load": "(path: str, split: str, *, streaming: bool)",
    "HFTokenizer": "(name: str, *, local_files_only: bool = False)",
    "HFTokenizer.encode": "(text: str) -> list[int]",
    "HFTokenizer.decode": "(ids: ArrayLike | Sequence[int]) -> str",
    "HFTokenizer.save_pretrained": "(directory) -> None",
    "HubDataset": (
        "(name: Named = '', split: str = 'train', val_split: str | None = None, val_batches: int | None = None, "
        "records: int | None = None, preprocess: Preprocess | None = None, streaming: bool = False, shuffle_buffer: int"
        " = 0, options: HubOptions = HFOptions(), *, seed: int = 0, loading: Loading = Loading())"
    ),
    "HubDataset.read": "(name: str, split: str) -> Records",
    "HubDataset.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "HubDataset.rows": "(*, batch: int, dataset: ArrowDataset | IterableDataset | None) -> Dataset",
    "Loading": "(workers: int = 32, threads: int = 64, read_buffer: int = 128, worker_buffer: int = 2)",
    "LocalVideos": (
        "(frame_size: int = 256, frames: int = 16, audio_padding: int = 3, audio_model: str = "
        "'facebook/wav2vec2-base-960h', val_batches: int | None = 4, count: int | None = None, path: str | None = None,"
        " extensions: tuple[str, ...] = ('.mp4', '.avi', '.mov', '.webm'), caption: str = '', *, seed: int = 0, "
        "loading: Loading = Loading())"
    ),
    "LocalVideos.source": "()",
    "OnlineImages": (
        "(sources: tuple[str, ...] = (), image_size: int = 256, min_image_size: int = 128, timeout: int = 15, retries: "
        "int = 3, *, seed: int = 0, loading: Loading = Loading(workers=16, threads=512, worker_buffer=20))"
    ),
    "OnlineImages.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "PackedTokens": (
        "(path: str | Mapping[str, float] | None = None, phases: Annotated[tuple[DataPhase, ...], "
        "json_list_argument(DataPhase)] = (), seq_len: int = 256, val_batches: int | None = 4, field: str | None = "
        "None, packing_bins: int = 8, *, seed: int = 0, loading: Loading = Loading())"
    ),
    "PackedTokens.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "PreferencePairs": (
        "(path: str | None = None, records: tuple[str, ...] = (), val_path: str | None = None, seq_len: int = 256, "
        "pad_id: int = 0, val_batches: int | None = 4, *, seed: int = 0, loading: Loading = Loading())"
    ),
    "PreferencePairs.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "PreparedTFDS": (
        "(name: Named = '', split: str = 'train', val_split: str | None = None, val_batches: int | None = None, "
        "records: int | None = None, preprocess: Preprocess | None = None, options: PreparedOptions = TFDSOptions(), *,"
        " seed: int = 0, loading: Loading = Loading())"
    ),
    "PreparedTFDS.read": "(name: str, split: str) -> Records",
    "PreparedTFDS.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "Prompts": (
        "(tokenizer: str, path: str | None = None, records: tuple[str, ...] = (), val_path: str | None = None, "
        "max_prompt_len: int = 128, pad_id: int = 0, val_batches: int | None = 4, thinking: bool | None = None, *, "
        "seed: int = 0, loading: Loading = Loading())"
    ),
    "Prompts.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "Ramp": "(start: int, increment: int, samples: int)",
    "Ramp.stages": "(final: int) -> tuple[Stage, ...]",
    "Ramp.steps_for": "(records: int, final: int) -> int",
    "Stage": "(batch: int, records: int)",
    "TFDSOptions": (
        "(path: str | None = None, config: str | None = None, version: str | None = None, decoders: DecoderTree | None "
        "= None)"
    ),
    "TFDSOptions.source": "(name: str, split: str) -> Records",
    "TokenBytes": "(path: str, eos_id: int | None = None)",
    "TokenBytes.open_handle": "() -> np.memmap",
    "TokenColumn": (
        "(paths: Sequence[str], *, column: str | None = None, dtype: np.dtype = np.dtype('uint16'), eos_id: int | None "
        "= None)"
    ),
    "TokenColumn.piece": "(index: int) -> np.ndarray",
    "TokenDocumentSource": "(tokens: TokenSource, eos_id: int | None = None)",
    "TokenRecords": (
        "(paths: Sequence[str], *, field: str | None = None, dtype: np.dtype = np.dtype('uint16'), eos_id: int | None ="
        " None)"
    ),
    "TokenRecords.piece": "(index: int) -> np.ndarray",
    "TokenRecords.open_handle": "()",
    "TokenWindowSource": "(tokens: TokenSource, seq_len: int)",
    "TokenWindows": (
        "(path: str | None = None, seq_len: int = 256, val_batches: int | None = 4, field: str | None = None, *, seed: "
        "int = 0, loading: Loading = Loading())"
    ),
    "TokenWindows.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "VideoDataset": (
        "(frame_size: int = 256, frames: int = 16, audio_padding: int = 3, audio_model: str = "
        "'facebook/wav2vec2-base-960h', val_batches: int | None = 4, count: int | None = None, *, seed: int = 0, "
        "loading: Loading = Loading())"
    ),
    "VideoDataset.source": "() -> list[dict[str, str]]",
    "VideoDataset.load": "(*, batch: int, tokenize: Tokenize | None = None) -> Dataset",
    "VoxCeleb2": (
        "(frame_size: int = 256, frames: int = 16, audio_padding: int = 3, audio_model: str = "
        "'facebook/wav2vec2-base-960h', val_batches: int | None = 4, count: int | None = None, path: str | None = None,"
        " split: str = 'train', extensions: tuple[str, ...] = ('.mp4', '.avi'), prompt_template: str = 'a video of a "
        "person speaking', *, seed: int = 0, loading: Loading = Loading())"
    ),
    "VoxCeleb2.source": "()",
    "load": (
        "(source: Named, *, batch: int, options: HFOptions | TFDSOptions | None = None, split: str = 'train', "
        "val_split: str | None = None, val_batches: int | None = None, records: int | None = None, preprocess: "
        "Preprocess | None = None, seed: int = 0, shuffle_buffer: int = 0, streaming: bool = False, loading: Loading = "
        "Loading(), dataset: ArrowDataset | IterableDataset | None = None) -> Dataset"
    ),
    "mixture": "(corpora: Sequence[Corpus], seed: int | None) -> pygrain.MapDataset[Batch]",
    "ramped": "(dataset: Dataset, ramp: Ramp) -> Dataset",
    "tokenizer_for": "(name: str, *, local_files_only: bool = False)",
}

# Annotations the page spells otherwise for the same type: (page, code) per signature and parameter.
SPELLINGS = {
    # The page's alias names for the one options type each provider takes.
    ("HubDataset", "options"): ("HubOptions", "HFOptions"),
    ("PreparedTFDS", "options"): ("PreparedOptions", "TFDSOptions"),
    # TFDSRecords is the Records the tfds provider reads; a narrower return type than the page's.
    ("TFDSOptions.source", "return"): ("Records", "TFDSRecords"),
    # grain.MapDataset is pygrain.MapDataset under grain's own import name; its items are records.
    ("mixture", "return"): ("pygrain.MapDataset[Batch]", "grain.MapDataset"),
}

POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def page_parameters(signature: str) -> tuple[list[tuple[str, Any, str | None, str | None]], str | None]:
    """(name, kind, default source, annotation source) per parameter the page gives, and its return type."""
    params, _, returns = signature.partition(" -> ")
    arguments = ast.parse(f"def f{params}: pass").body[0].args  # type: ignore[attr-defined]
    defaults = [None] * (len(arguments.args) - len(arguments.defaults)) + list(arguments.defaults)
    out = [(a.arg, POSITIONAL, d, a.annotation) for a, d in zip(arguments.args, defaults, strict=True)]
    kw = zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    out += [(a.arg, inspect.Parameter.KEYWORD_ONLY, d, a.annotation) for a, d in kw]
    return [
        (name, kind, None if d is None else ast.unparse(d), None if a is None else ast.unparse(a))
        for name, kind, d, a in out
    ], returns or None


def resolve(head: str) -> Any:
    obj: Any = dew.data
    for part in head.split("."):
        obj = getattr(obj, part)
    return obj


def default_of(obj: Any, parameter: inspect.Parameter) -> Any:
    """A parameter's default, a dataclass field's default_factory called."""
    if dataclasses.is_dataclass(obj) and repr(parameter.default) == "<factory>":
        return {f.name: f for f in dataclasses.fields(obj)}[parameter.name].default_factory()  # type: ignore[misc]
    return parameter.default


def spelled(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("head", sorted(SIGNATURES))
def test_the_code_takes_the_page_signature(head: str) -> None:
    obj = resolve(head)
    wanted, returns = page_parameters(SIGNATURES[head])
    got = [p for name, p in inspect.signature(obj).parameters.items() if name not in ("self", "cls")]
    positional = [p.name for p in got if p.kind == POSITIONAL]
    page_positional = [w[0] for w in wanted if w[1] == POSITIONAL]
    assert positional[: len(page_positional)] == page_positional, f"{head}: positional {positional}, page {wanted}"
    by_name = {p.name: p for p in got}
    env = {**vars(dew.data), **{n: getattr(dew.data, n) for n in dir(dew.data)}, "np": np}
    env.update(vars(sys.modules[obj.__module__]))
    for name, kind, default, annotation in wanted:
        assert name in by_name, f"{head}: takes no {name}, which the page gives"
        parameter = by_name[name]
        assert parameter.kind == kind, f"{head}({name}): {parameter.kind.name}, the page {kind.name}"
        if default is None:
            assert parameter.default is inspect.Parameter.empty, f"{head}({name}) has a default the page lacks"
        else:
            assert default_of(obj, parameter) == eval(default, env), f"{head}({name}): the page's default {default}"
        if annotation is not None:
            page, code = SPELLINGS.get((head, name), (annotation, annotation))
            assert spelled(page) == spelled(annotation) and spelled(parameter.annotation) == spelled(code), (
                f"{head}({name}): annotated {parameter.annotation!r}, the page {annotation!r}"
            )
    for parameter in got:
        if parameter.name not in {w[0] for w in wanted}:
            assert parameter.default is not inspect.Parameter.empty, f"{head}: {parameter.name} added without default"
    if returns is not None:
        page, code = SPELLINGS.get((head, "return"), (returns, returns))
        assert spelled(inspect.signature(obj).return_annotation) == spelled(code), f"{head}: returns, page {page}"


def test_the_page_signs_every_class_and_function_of_its_table_that_has_a_signature() -> None:
    # The table's names with no signature block of their own: constants, aliases, protocols, the kinds
    # the page documents elsewhere (dew.data.images, dew.data.chat) and Batch (a TypedDict).
    unsigned = {
        "CC3M", "CC12M", "IDS_KEY", "MASK_KEY", "ArrayRecordImages", "Batch", "ChatMessages", "Checkpointable",
        "Combined30M", "CombinedMsml612", "DiffusionDB", "HFImages", "ImageDataset", "Laion2bAesthetic",
        "Laion12mCoco", "OxfordFlowers", "Reader", "Role", "TokenSource",
    }  # fmt: skip
    signed = {head for head in SIGNATURES if "." not in head}
    kinds = {kind.__name__ for kind in dew.data.datasets.values()}
    for name in signed | unsigned:
        assert name in dir(dew.data), name
    assert signed.isdisjoint(unsigned)
    assert {"TokenWindows", "PackedTokens", "PreferencePairs", "Prompts", "HubDataset", "PreparedTFDS"} <= kinds
