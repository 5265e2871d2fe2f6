"""dew.data: dataset specs, the Dataset their load gives, tokenizers, and saved data positions.

`datasets.X(...).load(batch=)` turns a frozen spec into batch iterators. Importing this package
registers every dataset kind and loads none of the heavy stacks (cv2, tensorflow, HF datasets,
transformers, av, apache_beam, jax); a spec imports what it needs when it is used.

Dataset kinds are not imported here by name: the registry finds every `@datasets(...)` declaration
itself (dew.data.registry), and `dew.data.<KindClass>` reaches a kind through it, so a new kind is one
module and no line in this file.
"""

from typing import Any

from dew.data import position
from dew.data.batch import Batch, CaptionIds
from dew.data.captions import AutoTextTokenizer
from dew.data.chat import Role
from dew.data.config import json_list_argument
from dew.data.dataset import Checkpointable, Dataset, Reader, ramped
from dew.data.images.base import ImageDataset
from dew.data.loading import Loading
from dew.data.mixture import Corpus, mixed_records, mixture
from dew.data.partition import DataPartition
from dew.data.phases import DataPhase, PhasedStream
from dew.data.preference import IDS_KEY, MASK_KEY
from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hf_source import HFDatasetSource
from dew.data.providers.load import load
from dew.data.providers.tfds import TFDSOptions
from dew.data.ramp import Ramp, Stage
from dew.data.records import Records
from dew.data.registry import datasets
from dew.data.spec import DatasetSpec, Tokenize
from dew.data.stream import GlobalStream
from dew.data.text import ByteTokenizer, HFTokenizer, tokenizer_for
from dew.data.tokenized import tokenized
from dew.data.tokens import (
    PackedWindows,
    TokenBytes,
    TokenColumn,
    TokenDocumentSource,
    TokenRecords,
    TokenSource,
    TokenWindowSource,
)
from dew.data.video.audio import AutoAudioProcessor
from dew.data.video.base import VideoDataset

# The package's own names. Kinds are left out: they are known once the registry has found them, and
# `dir(dew.data)` or `datasets.names()` lists them.
__all__ = [
    "IDS_KEY",
    "MASK_KEY",
    "AutoAudioProcessor",
    "AutoTextTokenizer",
    "Batch",
    "ByteTokenizer",
    "CaptionIds",
    "Checkpointable",
    "Corpus",
    "DataPartition",
    "DataPhase",
    "Dataset",
    "DatasetSpec",
    "GlobalStream",
    "HFDatasetSource",
    "HFOptions",
    "HFTokenizer",
    "ImageDataset",
    "Loading",
    "PackedWindows",
    "PhasedStream",
    "Ramp",
    "Reader",
    "Records",
    "Role",
    "Stage",
    "TFDSOptions",
    "TokenBytes",
    "TokenColumn",
    "TokenDocumentSource",
    "TokenRecords",
    "TokenSource",
    "TokenWindowSource",
    "Tokenize",
    "VideoDataset",
    "datasets",
    "json_list_argument",
    "load",
    "mixed_records",
    "mixture",
    "position",
    "ramped",
    "tokenized",
    "tokenizer_for",
]


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(datasets, name)
    except AttributeError as error:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} ({error})") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *(kind.__name__ for kind in datasets.values())})
