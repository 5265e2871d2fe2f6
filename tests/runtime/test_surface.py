"""The public surface of dew.data: exactly these names, no implementation module among its attributes,
and every module still reachable as `dew.data.<module>`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import dew.data

PUBLIC = [
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
KINDS = [
    "ArrayRecordImages",
    "CC3M",
    "CC12M",
    "ChatMessages",
    "ClipShards",
    "Combined30M",
    "CombinedMsml612",
    "CombinedOnline",
    "DiffusionDB",
    "HFImages",
    "HubDataset",
    "Laion2bAesthetic",
    "Laion12mCoco",
    "LocalVideos",
    "OnlineImages",
    "OxfordFlowers",
    "PackedTokens",
    "PreferencePairs",
    "PreparedTFDS",
    "Prompts",
    "TokenWindows",
    "VoxCeleb2",
]


def test_dir_lists_the_public_names_and_the_kinds_and_nothing_else() -> None:
    assert dew.data.__all__ == PUBLIC
    # The toy kind (tests/toy_kind/) is added in a copy of the sources, so no test leaves a kind behind here.
    assert dir(dew.data) == sorted(PUBLIC + KINDS)


def test_each_public_name_and_kind_is_reachable() -> None:
    for name in PUBLIC:
        assert getattr(dew.data, name) is not None, name
    for name in KINDS:
        kind = getattr(dew.data, name)
        assert kind is getattr(dew.data.datasets, name) is dew.data.datasets[kind.kind]


def test_importing_the_package_leaves_no_implementation_module_among_its_attributes() -> None:
    """Checked in a fresh interpreter: here other tests have imported modules the registry then set."""
    script = (
        "import json, types, dew.data\n"
        "print(json.dumps(sorted(n for n, v in vars(dew.data).items() if isinstance(v, types.ModuleType))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == ["position"]


def test_a_module_is_still_reached_as_an_attribute_and_a_missing_name_is_refused() -> None:
    from dew.data import formats

    assert dew.data.formats is formats and dew.data.tokens.packed.PackedTokens is dew.data.PackedTokens
    with pytest.raises(AttributeError, match="has no attribute 'nothing_by_this_name'"):
        dew.data.nothing_by_this_name  # noqa: B018
