"""TFDSOptions and PreparedTFDS, registered as "tfds": splits of a prepared TFDS builder, read by index.

A preparation run (builder.download_and_prepare with file_format="array_record") leaves
<data_dir>/<builder>/[<config>/]<version>/ holding dataset_info.json and the record shards. Reading
needs only that directory: tfds.builder_from_directory rebuilds the builder from its metadata, so
neither the builder's code nor tensorflow has to be installed, and ArrayRecord gives random access.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from dew.data.extras import require
from dew.data.providers.base import ProviderSpec
from dew.data.providers.hooks import Hooked, Preprocess, collate_rows
from dew.data.records import Records
from dew.data.registry import datasets

if TYPE_CHECKING:
    from tensorflow_datasets.core.decode.partial_decode import DecoderArg
    from tensorflow_datasets.typing import TreeDict

    # TFDS's nested dict of decoders, as builder.as_data_source takes it.
    DecoderTree: TypeAlias = TreeDict[DecoderArg]
else:
    DecoderTree = object  # read at run time by the config round-trip; tfds is not imported for it

_INFO = "dataset_info.json"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


@dataclasses.dataclass(frozen=True)
class TFDSOptions:
    """Where a prepared TFDS dataset is, and which of it to read.

    `path` is what preparation wrote: a version directory (holding dataset_info.json) or the data_dir
    above it; None is TFDS's own default, $TFDS_DATA_DIR or ~/tensorflow_datasets. `config` and
    `version` pick the directory inside a data_dir (the newest prepared version when unset), and the
    prepared metadata must agree with both either way. `decoders` is TFDS's own decoder tree, handed
    to the builder unchanged: {"image": tfds.decode.SkipDecoding()} reads the bytes on disk. A decoder
    tree has no JSON form, so a spec holding one has no config. The builder's name and the split are
    not here because one set of options reads every builder of a mixture.

    Args:
        path: The version directory or data_dir preparation wrote; None for TFDS's default.
        config: The builder config to read, inside a data_dir.
        version: The prepared version to read; the newest when unset.
        decoders: TFDS's decoder tree, passed to the builder as it is.

    Examples:
        >>> from dew.data import TFDSOptions
        >>> TFDSOptions(path="/data/tfds", config="plain_text").config
        'plain_text'
    """

    path: str | None = None
    config: str | None = None
    version: str | None = None
    decoders: DecoderTree | None = None

    def __post_init__(self) -> None:
        for name in ("path", "config", "version"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"TFDSOptions.{name} is a non-empty str or None, got {value!r}")
        if self.version is not None and not _VERSION.match(self.version):
            raise ValueError(f"TFDSOptions.version is MAJOR.MINOR.PATCH, got {self.version!r}")

    def source(self, name: str, split: str) -> TFDSRecords:
        """Split `split` of the prepared builder `name`, read by index."""
        return TFDSRecords(self.prepared(name), name, split, self.decoders)

    def prepared(self, name: str) -> str:
        """The version directory of builder `name` these options point at, checked against its metadata."""
        root = os.path.expanduser(self.path or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
        leaf = os.path.basename(os.path.normpath(root))
        # A version directory (or an interrupted preparation's) is read as one, to name what it lacks.
        is_version = os.path.isfile(os.path.join(root, _INFO)) or _VERSION.match(leaf) or leaf.startswith("incomplete.")
        directory = root if is_version else self._find(root, name)
        info = _read_info(directory)
        for field, want, key in (("builder", name, "name"), ("config", self.config, "configName")):
            if want is not None and info.get(key) != want:
                raise ValueError(f"{directory} was prepared as {field} {info.get(key)!r}, not {want!r}")
        if self.version is not None and info.get("version") != self.version:
            raise ValueError(f"{directory} holds version {info.get('version')!r}, not {self.version!r}")
        if info.get("fileFormat") != "array_record":
            raise ValueError(
                f"{directory} was prepared as {info.get('fileFormat') or 'tfrecord'}, which TFDS cannot read by "
                "index; prepare it again with download_and_prepare(file_format='array_record')"
            )
        return directory

    def _find(self, data_dir: str, name: str) -> str:
        base = os.path.join(data_dir, name)
        if not os.path.isdir(base):
            present = sorted(d for d in _listdir(data_dir) if not d.startswith((".", "downloads")))
            raise FileNotFoundError(
                f"no prepared TFDS dataset {name!r} under {data_dir}"
                + (f"; it holds {', '.join(present)}" if present else " (nothing is prepared there)")
            )
        if self.config is not None:
            base = os.path.join(base, self.config)
            if not os.path.isdir(base):
                configs = _configs(os.path.dirname(base))
                raise FileNotFoundError(
                    f"{name!r} has no prepared config {self.config!r} under {data_dir}; prepared: {', '.join(configs)}"
                )
        elif not _versions(base, prepared=False):
            configs = _configs(base)
            if len(configs) != 1:
                raise ValueError(
                    f"{name!r} under {data_dir} has {'several' if configs else 'no'} prepared configs"
                    f"{': ' + ', '.join(configs) if configs else ''}; choose one with TFDSOptions(config=)"
                )
            base = os.path.join(base, configs[0])
        prepared = _versions(base, prepared=True)
        if self.version is not None:
            if self.version not in prepared:
                raise FileNotFoundError(
                    f"{base} holds no prepared version {self.version}; prepared: {', '.join(prepared) or 'none'}"
                )
            return os.path.join(base, self.version)
        if not prepared:
            raise FileNotFoundError(
                f"{base} holds no prepared version (no {_INFO} in any version directory): run the builder's "
                "download_and_prepare(file_format='array_record') first"
            )
        return os.path.join(base, prepared[-1])


class TFDSRecords:
    """One split of a prepared builder by index; pickles as its directory, split and decoders."""

    def __init__(self, directory: str, name: str, split: str, decoders: Any = None, preprocess: Any = None) -> None:
        self.directory, self.name, self.split, self.decoders = directory, name, split, decoders
        self.preprocess = preprocess
        info = _read_info(directory)
        self._info = info
        splits = {s["name"]: s for s in info.get("splits", [])}
        asked = [part.split("[", 1)[0].strip() for part in split.split("+")]
        missing = [s for s in asked if s not in splits]
        if missing:
            raise ValueError(
                f"split {missing[0]!r} is not prepared in {directory}; prepared splits: {', '.join(splits) or 'none'}"
            )
        self.label = f"tfds {name!r} split {split!r}"
        self._hooked = None if preprocess is None else Hooked(preprocess, self.label)
        self._source: Any = None
        self._lock = threading.Lock()

    def with_preprocess(self, preprocess: Preprocess | None) -> TFDSRecords:
        return TFDSRecords(self.directory, self.name, self.split, self.decoders, preprocess)

    def open(self) -> Any:
        """TFDS's data source for the split, opened once per process."""
        if self._source is None:
            with self._lock:
                if self._source is None:
                    tfds = require("tensorflow_datasets", for_what=f"tfds {self.name!r}")
                    builder = tfds.builder_from_directory(self.directory)
                    self._source = builder.as_data_source(self.split, decoders=self.decoders)
        return self._source

    def __len__(self) -> int:
        return len(self.open())

    def __getitem__(self, index: int) -> Any:
        return self.rows([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        return self.rows(indices)

    def rows(self, indices: Sequence[int] | np.ndarray) -> list[Any]:
        indices = [int(i) for i in indices]
        size = len(self)
        bad = [i for i in indices if not 0 <= i < size]
        if bad:
            raise IndexError(f"record {bad[0]} is outside {self.label}, which holds {size} records")
        records = self.open().__getitems__(indices)
        return records if self._hooked is None else self._hooked.apply(records, indices)

    def read_batch(self, indices: np.ndarray) -> Any:
        return collate_rows(self.rows(indices), self.label, [int(i) for i in indices])

    def describe(self) -> dict[str, Any]:
        splits = {s["name"]: s for s in self._info.get("splits", [])}
        return {
            "tfds": self.name,
            "config": self._info.get("configName"),
            "version": self._info.get("version"),
            "split": self.split,
            "records": len(self),
            "bytes": {name: s.get("numBytes") for name, s in sorted(splits.items())},
            "preprocess": None if self.preprocess is None else str(self.preprocess),
        }

    def __getstate__(self) -> dict[str, Any]:
        keys = ("directory", "name", "split", "decoders", "preprocess")
        return {k: getattr(self, k) for k in keys}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, **state)


@datasets("tfds")
@dataclasses.dataclass(frozen=True)
class PreparedTFDS(ProviderSpec):
    """Reads splits of a prepared TFDS builder where preparation left them, by index.

    `name` is the builder's name (or several with their weights), `split` and `val_split` TFDS split
    expressions ("train", "train[:90%]", "train+test"). Records come back as TFDS decodes them (text as
    bytes), through the preprocess hook when one is set. The training stream is a seeded shuffle of
    every epoch, positioned by one global record count.

    Args:
        name: The builder's name, or a {name: weight} mixture of builders.
        split: The TFDS split expression to train on.
        val_split: The split expression to validate on.
        val_batches: Batches a validation pass reads at most; None reads all.
        records: Training records of one pass, instead of the split's length.
        preprocess: A hook run on every record before batching.
        options: Where the prepared data lies (TFDSOptions).

    Examples:
        >>> from dew.data import TFDSOptions, datasets
        >>> spec = datasets.PreparedTFDS(name="mnist", val_split="test", options=TFDSOptions(path="tfds"))
        >>> spec.options.path
        'tfds'
    """

    options: TFDSOptions = dataclasses.field(default_factory=TFDSOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.options, TFDSOptions):
            kind = type(self.options).__name__
            hint = " (HFOptions belong to the hf provider, HubDataset)" if kind == "HFOptions" else ""
            raise TypeError(f"PreparedTFDS.options is TFDSOptions, got {kind}{hint}")

    def read(self, name: str, split: str) -> Records:
        return self.options.source(name, split).with_preprocess(self.preprocess)


def _read_info(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, _INFO)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{directory} is not a prepared TFDS version directory (no {_INFO}): run the builder's "
            "download_and_prepare(file_format='array_record') first"
        )
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); prepare the dataset again") from None


def _listdir(path: str) -> list[str]:
    return os.listdir(path) if os.path.isdir(path) else []


def _versions(directory: str, *, prepared: bool) -> list[str]:
    """Version directories under `directory`, oldest first; prepared ones hold dataset_info.json."""
    found = [
        d
        for d in _listdir(directory)
        if _VERSION.match(d) and (not prepared or os.path.isfile(os.path.join(directory, d, _INFO)))
    ]
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def _configs(directory: str) -> list[str]:
    return sorted(d for d in _listdir(directory) if not d.startswith(".") and os.path.isdir(os.path.join(directory, d)))
