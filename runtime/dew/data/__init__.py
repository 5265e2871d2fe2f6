"""dew.data: dataset specs, the Dataset their load gives, tokenizers, and saved data positions.

`datasets.X(...).load(batch=)` turns a frozen spec into batch iterators. Importing this package
registers every dataset kind and loads none of the heavy stacks (cv2, tensorflow, HF datasets,
transformers, av, apache_beam, jax); a spec imports what it needs when it is used.
"""

from dew.data import position
from dew.data.chat import ChatMessages, Role
from dew.data.config import json_list_argument
from dew.data.dataset import Checkpointable, Dataset, Reader, ramped
from dew.data.loading import Loading
from dew.data.mixture import Corpus, mixed_records, mixture
from dew.data.partition import DataPartition
from dew.data.phases import DataPhase
from dew.data.preference import IDS_KEY, MASK_KEY, PreferencePairs
from dew.data.prompts import Prompts
from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hf_source import HFDatasetSource
from dew.data.providers.hub import HubDataset
from dew.data.providers.load import load
from dew.data.providers.tfds import PreparedTFDS, TFDSOptions
from dew.data.ramp import Ramp, Stage
from dew.data.records import Records
from dew.data.registry import datasets
from dew.data.spec import DatasetSpec, Tokenize
from dew.data.stream import GlobalStream
from dew.data.text import ByteTokenizer, HFTokenizer, tokenizer_for
from dew.data.tokens import (
    PackedTokens,
    TokenBytes,
    TokenColumn,
    TokenDocumentSource,
    TokenRecords,
    TokenSource,
    TokenWindows,
    TokenWindowSource,
)

__all__ = [
    "IDS_KEY",
    "MASK_KEY",
    "ByteTokenizer",
    "ChatMessages",
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
    "HubDataset",
    "Loading",
    "PackedTokens",
    "PreferencePairs",
    "PreparedTFDS",
    "Prompts",
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
    "TokenWindows",
    "Tokenize",
    "datasets",
    "json_list_argument",
    "load",
    "mixed_records",
    "mixture",
    "position",
    "ramped",
    "tokenizer_for",
]
