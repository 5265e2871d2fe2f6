"""HFOptions: datasets.load_dataset's arguments as one typed value both HF routes call through."""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dew.data import reach, validate
from dew.data.extras import require

if TYPE_CHECKING:
    from datasets import DownloadConfig, DownloadMode, Features, VerificationMode
    from datasets.utils.version import Version
else:
    # The config round-trip reads these annotations at run time; datasets is not imported for that.
    DownloadConfig = DownloadMode = Features = VerificationMode = Version = object


@dataclasses.dataclass(frozen=True)
class HFOptions:
    """The arguments of datasets.load_dataset, in the library's own types.

    Both the Arrow route and the streamed route load through `load`, so what one forwards the other
    forwards too. Every field is load_dataset's, under the library's name, except `config`: that is
    load_dataset's `name`, which dew already uses for which dataset a spec reads. Enum values are kept
    as their strings, which load_dataset accepts, so the options have a JSON form.

    Args:
        config: load_dataset's `name`: which configuration of the dataset (a wikipedia dump's date).
        data_dir: The data directory within the dataset's repository or folder.
        data_files: A file, files, or {split: files}; a JSON list and a tuple give equal options.
        cache_dir: Where the library caches what it downloads and the Arrow files it writes.
        features: The schema to read the files as.
        download_config: The library's download settings.
        download_mode: Whether to reuse a cached download or dataset ("reuse_dataset_if_exists"...).
        verification_mode: Which checks of the downloaded files to run ("basic_checks"...).
        keep_in_memory: Whether to copy the table into memory rather than memory-map its cache.
        save_infos: Whether to save what the library records of the dataset (checksums, sizes, splits).
        revision: The repository's branch, tag or commit.
        token: The hub token, or True for the one the hub login saved.
        num_proc: Processes that download and prepare the dataset.
        storage_options: Options of the fsspec filesystem a remote path is read through.

    Examples:
        >>> from dew.data import HFOptions
        >>> options = HFOptions(config="20231101.en", data_files=["a.jsonl", "b.jsonl"])
        >>> options.data_files  # lists and tuples give equal options
        ('a.jsonl', 'b.jsonl')
        >>> options == HFOptions(config="20231101.en", data_files=("a.jsonl", "b.jsonl"))
        True
    """

    config: str | None = None
    data_dir: str | None = None
    data_files: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None
    cache_dir: str | None = None
    features: Features | None = None
    download_config: DownloadConfig | None = None
    download_mode: DownloadMode | str | None = None
    verification_mode: VerificationMode | str | None = None
    keep_in_memory: bool | None = None
    save_infos: bool = False
    revision: str | Version | None = None
    token: str | bool | None = None
    num_proc: int | None = None
    # datasets hands this to fsspec, whose backends each declare their own options.
    storage_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        # Lists from a JSON config and tuples from code must give equal options.
        if self.data_files is not None and not isinstance(self.data_files, str):
            if isinstance(self.data_files, Mapping):
                set_(self, "data_files", {str(k): _files(v, f"data_files[{k!r}]") for k, v in self.data_files.items()})
            else:
                set_(self, "data_files", _files(self.data_files, "data_files"))
        for name in ("download_mode", "verification_mode"):
            value = getattr(self, name)
            if isinstance(value, enum.Enum):
                set_(self, name, value.value)
        if self.revision is not None and not isinstance(self.revision, str):
            set_(self, "revision", str(self.revision))
        if self.storage_options is not None:
            if not isinstance(self.storage_options, Mapping):
                raise TypeError(f"HFOptions.storage_options is a mapping, got {type(self.storage_options).__name__}")
            set_(self, "storage_options", dict(self.storage_options))
        validate.positive_int("HFOptions.num_proc", self.num_proc, optional=True)
        if self.config is not None and not isinstance(self.config, str):
            raise TypeError(f"HFOptions.config is load_dataset's name=, a str; got {self.config!r}")

    def load(self, path: str, split: str, *, streaming: bool) -> Any:
        """The split at `path`: datasets.Dataset, or datasets.IterableDataset when streaming.

        load_dataset downloads a hub dataset and writes its Arrow cache on its own terms, or streams the
        split as it reads. A directory written by save_to_disk is what load_dataset refuses to read, so
        that one opens through load_from_disk (streamed through to_iterable_dataset).
        """
        datasets = require("datasets", for_what=f"hf dataset {path!r}")

        if saved_to_disk(path, self.storage_options):
            return self._from_disk(path, split, streaming)
        if "://" in path:
            # load_dataset would take the url for a local path and report it as one ("gs:/bucket/...").
            raise FileNotFoundError(
                f"{path} holds no dataset written by save_to_disk (no dataset_dict.json or state.json there); "
                "a remote source is read as a save_to_disk directory"
            )
        hub = reach.is_hub_id(path) and not os.path.exists(path) and not _packaged(path)
        if hub and not reach.offline("HF_DATASETS_OFFLINE"):
            # load_dataset retries an unreachable hub for a minute, then ends in a traceback of its own.
            reach.ensure(
                reach.hub_endpoint(),
                what=f"hf dataset {path!r} is no local path, and the hub (HF_DATASETS_OFFLINE=1 reads a cached copy)",
            )
        try:
            return datasets.load_dataset(path, name=self.config, split=split, streaming=streaming, **self._forwarded())
        except ValueError as error:
            if "Unknown split" in str(error) or "Bad split" in str(error):
                where = f"hf dataset {path!r} (config {self.config!r})"
                raise ValueError(f"{where} has no split {split!r}: {error}") from None
            raise

    def _forwarded(self) -> dict[str, Any]:
        names = [f.name for f in dataclasses.fields(self) if f.name != "config"]
        forwarded = {name: getattr(self, name) for name in names}
        # datasets resolves data_files as lists only; tuples here keep equal options equal.
        files = self.data_files
        if isinstance(files, tuple):
            forwarded["data_files"] = list(files)
        elif isinstance(files, Mapping):
            forwarded["data_files"] = {k: list(v) if isinstance(v, tuple) else v for k, v in files.items()}
        return forwarded

    def _from_disk(self, path: str, split: str, streaming: bool) -> Any:
        datasets = require("datasets", for_what=f"hf dataset {path!r}")

        loaded = datasets.load_from_disk(path, keep_in_memory=self.keep_in_memory, storage_options=self.storage_options)
        several = isinstance(loaded, datasets.DatasetDict)
        splits = dict(loaded) if several else {str(loaded.split or "train"): loaded}
        chosen = splits[split] if split in splits else _expression(split, splits, path, several=several)
        return chosen.to_iterable_dataset() if streaming else chosen


def _packaged(path: str) -> bool:
    """Whether `path` names one of the library's own builders (json, parquet, ...), read without the hub.

    Any other name without a slash ("wiki", the reference page's example) is a hub dataset like "org/name".
    """
    try:  # a private table of datasets': its builders' names, should a release move it
        from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES as builders
    except ImportError:
        builders = _BUILDERS
    return path in builders or path.endswith(".py")


# The builders datasets 5 ships (datasets.packaged_modules), for a release that moves its table.
_BUILDERS = frozenset(
    {
        "arrow",
        "audiofolder",
        "conll",
        "csv",
        "eval",
        "fasta",
        "fastq",
        "genbank",
        "harbor",
        "hdf5",
        "iceberg",
        "imagefolder",
        "json",
        "lance",
        "meshfolder",
        "mmcif",
        "niftifolder",
        "pandas",
        "parquet",
        "pdb",
        "pdffolder",
        "text",
        "tsfile",
        "videofolder",
        "vortex",
        "webdataset",
        "xml",
    }
)


def _expression(split: str, splits: Mapping[str, Any], path: str, *, several: bool) -> Any:
    """A split expression ("train[:10%]", "train[:5]+test") over saved splits, read as load_dataset reads
    one: datasets' own ReadInstruction parses it and places every bound, so the rows are the same."""
    import datasets

    try:
        parts = datasets.ReadInstruction.from_spec(split).to_absolute({name: len(d) for name, d in splits.items()})
    except (ValueError, AssertionError) as error:
        if several:
            raise ValueError(
                f"{path} (saved with save_to_disk) has no split {split!r}; its splits: {', '.join(splits)} ({error})"
            ) from None
        raise ValueError(f"{path} holds one saved split, {next(iter(splits))!r}, not {split!r} ({error})") from None
    pieces = [splits[part.splitname].select(range(part.from_, part.to)) for part in parts]
    return pieces[0] if len(pieces) == 1 else datasets.concatenate_datasets(pieces)


def saved_to_disk(path: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether `path` is a directory save_to_disk wrote (a Dataset or a DatasetDict)."""
    markers = ("dataset_dict.json", "state.json")
    if "://" not in path:
        return os.path.isdir(path) and any(os.path.isfile(os.path.join(path, m)) for m in markers)
    import fsspec

    if path.startswith("gs://"):
        from dew.data import remote

        require("gcsfs", for_what=f"reading {path}")  # a missing extra is said before the network is asked
        remote.reachable(path)
    fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
    return any(fs.isfile(f"{root.rstrip('/')}/{m}") for m in markers)


def _files(value: Any, where: str) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"HFOptions.{where} is a path or a list of paths, got {value!r}")
