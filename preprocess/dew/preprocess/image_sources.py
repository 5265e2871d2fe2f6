"""Where the images job's inputs are, decided on the launcher: each input file (or dataset) is one Source.

Three layouts are read, told apart by what an `--input` names:
- a directory holding `state.json`: a Hugging Face dataset written by `save_to_disk` (one Source);
- any other directory: an ImageFolder tree, `root/<class>/<image>`, one Source per image, labelled by
  its class directory (a `<stem>.txt` beside an image is its sidecar caption);
- a file or glob: images (one Source each, unlabelled), or `.parquet` / `.jsonl` rows naming an image
  (bytes or a path) and a caption.

Sources are sorted by path and numbered: the number is the file index of every record's (file, row) key.
Each Source also carries its `name`, its path relative to the input it came from, which decides the
split a record goes to: the same image lands in the same split wherever the inputs are stored and
whatever else is added beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence

from dew.preprocess import files
from dew.preprocess.files import InputFile

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")
ROW_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".ndjson": "jsonl"}
HF_STATE = "state.json"
HF_DICT = "dataset_dict.json"
# The field the class directory of an ImageFolder input goes into.
LABEL = "label"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One unit of input: an image file, a row file, or a saved HF dataset.

    kind: "image", "parquet", "jsonl" or "hf"; label: the ImageFolder class of an image, else None.
    """

    index: int
    kind: str
    path: str
    name: str
    label: str | None = None

    @property
    def extras(self) -> tuple[str, ...]:
        """The fields beyond image and caption this Source gives without being asked: an ImageFolder's label."""
        return (LABEL,) if self.label is not None else ()

    def draw(self, row: int) -> int:
        """A record's place in [0, 2^64) from where it came from alone; it picks the record's split and shard."""
        return int.from_bytes(hashlib.sha256(f"{self.name}\0{row}".encode()).digest()[:8], "little")


def _row_kind(path: str) -> str | None:
    lower = path.lower()
    return next((kind for suffix, kind in ROW_SUFFIXES.items() if lower.endswith(suffix)), None)


def _is_image(path: str) -> bool:
    return path.lower().endswith(IMAGE_SUFFIXES)


def _is_directory(pattern: str) -> bool:
    if files.is_local(pattern):
        return os.path.isdir(pattern)
    return pattern.endswith("/")  # an object store has no directories; a trailing slash names one


def _folder(root: str) -> tuple[list[tuple[str, str, str, str | None]], list[InputFile]]:
    listed = files.expand_inputs([files.join(root, "*", "*")])
    prefix = root.rstrip("/") + "/"
    found = []
    for item in listed:
        name = item.path[len(prefix) :] if item.path.startswith(prefix) else item.path
        if _is_image(item.path):
            found.append(("image", item.path, name, name.split("/")[0]))
    if not found:
        raise FileNotFoundError(f"--input {root} holds no image in root/<class>/<image> (ImageFolder) layout")
    _refuse_strays(root, prefix)
    return found, list(listed)


def _refuse_strays(root: str, prefix: str) -> None:
    """Refuses images of an ImageFolder tree at another depth than root/<class>/<image>.

    Listing root/*/* alone would leave an image beside the class folders, or one folder deeper, out of
    the corpus without a word, where every other image that is not written is counted.
    """
    names = [item.path[len(prefix) :] for item in files.expand_inputs([files.join(root, "**")])]
    strays = [
        name
        for name in names
        if _is_image(name) and name.count("/") != 1 and not any(part.startswith(".") for part in name.split("/"))
    ]
    if strays:
        shown = ", ".join(strays[:3]) + (", ..." if len(strays) > 3 else "")
        raise ValueError(
            f"--input {root} is read as an ImageFolder tree, root/<class>/<image>, and {len(strays)} images "
            f"lie elsewhere in it ({shown}); move each into its class folder, or give them as an --input of "
            "their own (a file or glob)"
        )


def _hf(root: str) -> tuple[list[tuple[str, str, str, str | None]], list[InputFile]]:
    # The arrow files and state.json name the dataset's content; a fingerprint of them names the input.
    return [("hf", root.rstrip("/"), "", None)], list(files.expand_inputs([files.join(root, "*")]))


def find_sources(patterns: Sequence[str]) -> tuple[tuple[Source, ...], tuple[InputFile, ...]]:
    """Every Source the --input patterns name, numbered in path order, and the files to fingerprint.

    An input that is none of the three layouts, a saved DatasetDict (name one split's directory) or
    mixed inputs whose records would hold different fields are refused before any worker starts.
    """
    if not patterns:
        raise ValueError("no input given: pass --input with an image folder, a saved HF dataset, or files")
    found: dict[str, tuple[str, str, str, str | None]] = {}
    manifest: dict[str, InputFile] = {}
    for pattern in patterns:
        if files.exists(files.join(pattern, HF_DICT)):
            splits = sorted(json.loads(files.read_bytes(files.join(pattern, HF_DICT))).get("splits", []))
            raise ValueError(f"--input {pattern} is a saved DatasetDict; name one split's directory: {splits}")
        if files.exists(files.join(pattern, HF_STATE)):
            sources, listed = _hf(pattern)
        elif _is_directory(pattern):
            sources, listed = _folder(pattern)
        else:
            listed = list(files.expand_inputs([pattern]))
            sources = []
            for item in listed:
                kind = "image" if _is_image(item.path) else _row_kind(item.path)
                if kind is None:
                    raise ValueError(
                        f"{item.path}: not an image ({', '.join(IMAGE_SUFFIXES)}) nor rows "
                        f"({', '.join(ROW_SUFFIXES)}); an image folder or saved HF dataset is given as its directory"
                    )
                sources.append((kind, item.path, os.path.basename(item.path), None))
        for source in sources:
            found[source[1]] = source
        manifest.update((item.path, item) for item in listed)
    numbered = tuple(
        Source(index=i, kind=kind, path=path, name=name, label=label)
        for i, (kind, path, name, label) in enumerate(found[path] for path in sorted(found))
    )
    extras = {source.extras for source in numbered}
    if len(extras) > 1:
        raise ValueError(
            "the inputs mix ImageFolder trees (whose records hold a label) with inputs without one; "
            "write them to separate directories"
        )
    return numbered, tuple(manifest[path] for path in sorted(manifest))
