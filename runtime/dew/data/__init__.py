"""dew.data: dataset specs, the Dataset their load gives, tokenizers, and saved data positions.

`datasets.X(...).load(batch=)` turns a frozen spec into batch iterators. Importing this package
registers every dataset kind and loads none of the heavy stacks (cv2, tensorflow, HF datasets,
transformers, av, apache_beam, jax); a spec imports what it needs when it is used.

Dataset kinds are not imported here by name: the registry finds every `@datasets(...)` declaration
itself (dew.data.registry), and `dew.data.<KindClass>` reaches a kind through it, so a new kind is one
module and no line in this file (type checkers learn the kinds from the generated dew.data.kinds).

The surface is `__all__` and the kinds: `dir(dew.data)` lists those and nothing else. The modules behind
them are implementation, not attributes of the package until used: `dew.data.formats` still reaches
one, but `import dew.data` leaves none of them in its namespace.
"""

from importlib import import_module as _import_module
from importlib.util import find_spec as _find_spec
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any

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


if TYPE_CHECKING:
    from dew.data.kinds import *  # noqa: F403 (each kind as dew.data.<Kind>, generated)

# The import system set each submodule imported above as an attribute of this package; they are reached
# through __getattr__ instead, so that the namespace holds the public names only.
for _name, _value in list(globals().items()):
    if isinstance(_value, _ModuleType) and _name not in __all__ and _value.__name__.startswith(f"{__name__}."):
        del globals()[_name]
del _name, _value


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _find_spec(f"{__name__}.{name}") is not None:
        # A module, `dew.data.formats`, as any package gives it; an attribute from its first use on.
        module = globals()[name] = _import_module(f"{__name__}.{name}")
        return module
    try:
        return getattr(datasets, name)
    except AttributeError as error:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} ({error})") from None


def __dir__() -> list[str]:
    return sorted({*__all__, *(kind.__name__ for kind in datasets.values())})
