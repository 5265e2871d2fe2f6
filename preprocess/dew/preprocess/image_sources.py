"""Where the images job's inputs are, decided on the launcher: each input file (or dataset) is one Source.

Three layouts are read, told apart by what an `--input` names:
- a directory holding `state.json`: a Hugging Face dataset written by `save_to_disk` (one Source);
- any other directory: an ImageFolder tree, `root/<class>/<image>`, one Source per image, labelled by
  its class directory (a `<stem>.txt` beside an image is its sidecar caption). Every other file of the
  tree is accounted for by its name alone, on the launcher: hidden files and folders and known text
  or metadata files are left out and counted (`ignored`); any other file may be an image in a format
  dew does not read (HEIC, AVIF, no suffix), so it becomes an `unsupported` Source that the reader
  counts as a dropped image, `unsupported_format`, and the books still balance. A file whose path is
  not UTF-8 (a local name in another encoding) is a `non_utf8_name` Source, counted the same way: its
  class folder and stem are its label and caption, which are UTF-8 text, and gs:// cannot hold it
  either. A symlinked folder is not followed (it could repeat the tree or loop) and is left out and
  counted as `symlinked_folder`, and so is a folder the job may not list, as `unreadable_folder`
  (what it holds is unknown); a symlink leading nowhere is counted by the reader under its reason;
- a file or glob: images (one Source each, unlabelled), or `.parquet` / `.jsonl` rows naming an image
  (bytes or a path) and a caption; a jsonl file may be compressed (`.jsonl.gz`, `.jsonl.zst`), read as
  the text jobs read theirs (document_rows.decompressed).

Sources are sorted by path and numbered: the number is the file index of every record's (file, row) key.
Each Source also carries its `name`, its path relative to the input it came from, which decides the
split a record goes to: the same image lands in the same split wherever the inputs are stored and
whatever else is added beside it. Sources are read in units (`reads`): up to FILES_PER_READ image files
at a time, each still its own Source.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import unicodedata
from collections.abc import Mapping, Sequence

from apache_beam.io.filesystems import FileSystems

from dew.preprocess import files
from dew.preprocess.document_rows import COMPRESSIONS, without_compression
from dew.preprocess.files import InputFile

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")
# Files an image folder holds beside its images that are clearly no image: left out, counted.
NOT_IMAGE_SUFFIXES = (".txt", ".json", ".jsonl", ".csv", ".tsv", ".xml", ".yaml", ".yml", ".md", ".html", ".pdf")
NOT_IMAGE_NAMES = ("readme", "license", "licence", "notice", "thumbs.db", "desktop.ini")
HIDDEN, NOT_IMAGE, SYMLINKED_FOLDER = "hidden", "not_image", "symlinked_folder"
# A folder of the tree that cannot be listed (no read or search permission): its files are unknown.
UNREADABLE_FOLDER = "unreadable_folder"
FOLDER_REASONS = (SYMLINKED_FOLDER, UNREADABLE_FOLDER)
UNSUPPORTED = "unsupported"
NON_UTF8_NAME = "non_utf8_name"
# Kinds of Source that are one file, read in units of many (see reads).
FILE_KINDS = ("image", UNSUPPORTED, NON_UTF8_NAME)
ROW_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
# Kinds of row file that may also be compressed: their name ends in .gz, .zst or .zstd besides (COMPRESSIONS).
COMPRESSIBLE = ("jsonl", "csv")
HF_STATE = "state.json"
HF_DICT = "dataset_dict.json"
# The field the class directory of an ImageFolder input goes into.
LABEL = "label"
# Image files read as one unit (see reads): enough to make the runner's cost per unit small beside
# decoding them, few enough that a folder of a few hundred images still spreads over many workers.
FILES_PER_READ = 16


@dataclasses.dataclass(frozen=True)
class Found:
    """What the inputs hold: the Sources, the files to fingerprint, and the files left out by reason."""

    sources: tuple[Source, ...]
    manifest: tuple[InputFile, ...]
    ignored: dict[str, list[str]]

    def left_out(self) -> list[str]:
        """Lines for the launcher saying which files are not written as images, and what to do; a file
        counted as dropped is named under the reason stats.json counts it by."""
        lines = []
        by_reason: dict[str, list[str]] = {}
        for source in self.sources:
            if source.kind in FILE_KINDS and (reason := files.link_problem(source.path) or _drop_kind(source)):
                by_reason.setdefault(reason, []).append(source.path)
        for reason, paths in sorted(by_reason.items()):
            said, hint = _SAID[reason]
            lines.append(f"{len(paths)} files {said} ({_shown(paths)}); they count as dropped, {reason}{hint}")
        for reason, paths in sorted(self.ignored.items()):
            what = "folders" if reason in FOLDER_REASONS else "files"
            lines.append(f"{len(paths)} {what} left out as {reason} ({_shown(paths)}){_IGNORED_HINTS.get(reason, '')}")
        return lines


def _drop_kind(source: Source) -> str | None:
    return {UNSUPPORTED: "unsupported_format", NON_UTF8_NAME: NON_UTF8_NAME}.get(source.kind)


# What a counted file is, and what to do about it, by the reason stats.json counts it under.
_SAID = {
    "unsupported_format": (
        "in an image folder are no image dew reads",
        f": convert them to one of {' '.join(IMAGE_SUFFIXES)} to include them",
    ),
    NON_UTF8_NAME: ("have a path that is not UTF-8", ": rename them to UTF-8 (e.g. convmv -f latin1 -t utf8)"),
    files.DANGLING_SYMLINK: ("are symlinks leading to no file", ""),
    files.SYMLINK_LOOP: ("are symlinks that loop", ""),
}
_IGNORED_HINTS = {
    SYMLINKED_FOLDER: ": a symlinked folder is not followed; move or copy the folder itself into the tree",
    UNREADABLE_FOLDER: ": the job may not list them (chmod a+rx), so what they hold is not read",
}


def _shown(paths: Sequence[str]) -> str:
    shown = [files.shown_path(path) for path in paths[:3]]
    return ", ".join(shown) + (", ..." if len(paths) > 3 else "")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One unit of input: an image file, a row file, or a saved HF dataset.

    kind: "image", "parquet", "jsonl", "hf", or "unsupported" (a file of a folder that is read as a
    dropped image); label: the ImageFolder class of an image, else None ("" for a file of a folder
    outside any class folder, so a tree's Sources all give the label field).
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
        # A row file's name that is not UTF-8 is hashed as its own bytes; every other name as its UTF-8.
        key = f"{self.name}\0{row}".encode("utf-8", "surrogateescape")
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


def reads(sources: Sequence[Source]) -> list[tuple[Source, ...]]:
    """The Sources in read units: runs of up to FILES_PER_READ consecutive image files (and unsupported
    files) of the numbered order, and every row file or dataset alone.

    A unit is one element to the runner: one shuffle, one read call and one tally for all its files.
    One image file each cost the runner more than decoding it. Each file keeps its own Source (index,
    name, label), so every record's key and draw, and so the output, are those of the file alone.
    """
    units: list[tuple[Source, ...]] = []
    run: list[Source] = []
    for source in sources:
        if source.kind in FILE_KINDS:
            run.append(source)
            if len(run) < FILES_PER_READ:
                continue
        if run:
            units.append(tuple(run))
            run = []
        if source.kind not in FILE_KINDS:
            units.append((source,))
    if run:
        units.append(tuple(run))
    return units


def row_kind(path: str, suffixes: Mapping[str, str] = ROW_SUFFIXES) -> str | None:
    """The kind of row file `path` names by its suffix (any case), compressed or not; None for no row file."""
    name = without_compression(path)
    kind = next((kind for suffix, kind in suffixes.items() if name.endswith(suffix)), None)
    return kind if name == path.lower() or kind in COMPRESSIBLE else None


def row_suffixes(suffixes: Mapping[str, str] = ROW_SUFFIXES) -> str:
    """The row file names `suffixes` allow, for a message: `.parquet, .jsonl, .ndjson; jsonl also .gz, .zst, .zstd`."""
    compressible = "/".join(sorted({kind for kind in suffixes.values() if kind in COMPRESSIBLE}))
    return f"{', '.join(suffixes)}; {compressible} also {', '.join(COMPRESSIONS)}"


def _is_image(path: str) -> bool:
    return path.lower().endswith(IMAGE_SUFFIXES)


def _is_directory(pattern: str) -> bool:
    if files.is_local(pattern):
        return os.path.isdir(pattern)
    return pattern.endswith("/")  # an object store has no directories; a trailing slash names one


def _not_image(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    return base.endswith(NOT_IMAGE_SUFFIXES) or base.split(".")[0] in NOT_IMAGE_NAMES or base in NOT_IMAGE_NAMES


def _folder(root: str, ignored: dict[str, list[str]]) -> tuple[list[tuple[str, str, str, str | None]], list[InputFile]]:
    """An ImageFolder tree's Sources and files to fingerprint; the files it leaves out go into `ignored`.

    Two listings of the tree, once, on the launcher: every file (hidden ones too, to count them) and
    the files expand_inputs gives (dangling symlinks included, for the reader to count).
    """
    prefix = root.rstrip("/") + "/"
    everything = FileSystems.match([files.join(root, "**")])[0].metadata_list
    ignored.setdefault(HIDDEN, []).extend(
        sorted(m.path for m in everything if any(p.startswith(".") for p in m.path[len(prefix) :].split("/")))
    )
    found: list[tuple[str, str, str, str | None]] = []
    strays: list[tuple[str, str, str, str | None]] = []
    listed = []
    for item in files.expand_inputs([files.join(root, "**")]):
        name = item.path[len(prefix) :] if item.path.startswith(prefix) else item.path
        parts = name.split("/")
        if any(part.startswith(".") for part in parts):
            continue  # counted above
        in_class = len(parts) == 2
        # The label is text: a class folder named with combining accents (as macOS's HFS+ stores names)
        # gives the precomposed spelling a folder named otherwise gives, not a second class.
        label = unicodedata.normalize("NFC", parts[0])
        if in_class:
            listed.append(item)
        if not files.utf8_name(item.path) and not (_not_image(name) and not _is_image(name)):
            found.append((NON_UTF8_NAME, item.path, name, ""))
            if not in_class:
                listed.append(item)
        elif _is_image(name):
            (found if in_class else strays).append(("image", item.path, name, label))
        elif _not_image(name):
            ignored.setdefault(NOT_IMAGE, []).append(item.path)
        else:
            found.append((UNSUPPORTED, item.path, name, label if in_class else ""))
            if not in_class:  # counted in the books, so part of what the output is made from
                listed.append(item)
    linked, unreadable = _odd_folders(root)
    ignored.setdefault(SYMLINKED_FOLDER, []).extend(linked)
    ignored.setdefault(UNREADABLE_FOLDER, []).extend(unreadable)
    if not any(kind == "image" for kind, *_ in found):
        raise FileNotFoundError(f"--input {root} holds no image in root/<class>/<image> (ImageFolder) layout")
    _refuse_strays(root, [name for _, _, name, _ in strays])
    return found, listed


def _odd_folders(root: str) -> tuple[list[str], list[str]]:
    """The symlinks to folders inside a local tree, and its folders that cannot be listed (outside
    hidden folders): Beam's listing neither follows the one nor reports the other, so without this a
    linked or locked class folder would be left out without a word."""
    if not files.is_local(root):
        return [], []
    linked: list[str] = []
    unreadable: list[str] = []

    def refused(error: OSError) -> None:
        if error.filename is not None and os.path.normpath(error.filename) != os.path.normpath(root):
            unreadable.append(os.fsdecode(error.filename))

    for directory, folders, _ in os.walk(root, onerror=refused):
        folders[:] = [name for name in folders if not name.startswith(".")]
        linked += [os.path.join(directory, name) for name in folders if os.path.islink(os.path.join(directory, name))]
    return sorted(linked), sorted(unreadable)


def _refuse_strays(root: str, strays: Sequence[str]) -> None:
    """Refuses images of an ImageFolder tree at another depth than root/<class>/<image>.

    Listing root/*/* alone would leave an image beside the class folders, or one folder deeper, out of
    the corpus without a word, where every other image that is not written is counted.
    """
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


def find_sources(patterns: Sequence[str]) -> Found:
    """Every Source the --input patterns name, numbered in path order, the files to fingerprint, and
    the files of image folders left out, by reason.

    An input that is none of the three layouts, a saved DatasetDict (name one split's directory) or
    mixed inputs whose records would hold different fields are refused before any worker starts.
    """
    if not patterns:
        raise ValueError("no input given: pass --input with an image folder, a saved HF dataset, or files")
    found: dict[str, tuple[str, str, str, str | None]] = {}
    manifest: dict[str, InputFile] = {}
    ignored: dict[str, list[str]] = {}
    for pattern in patterns:
        if files.exists(files.join(pattern, HF_DICT)):
            splits = sorted(json.loads(files.read_bytes(files.join(pattern, HF_DICT))).get("splits", []))
            raise ValueError(f"--input {pattern} is a saved DatasetDict; name one split's directory: {splits}")
        if files.exists(files.join(pattern, HF_STATE)):
            sources, listed = _hf(pattern)
        elif _is_directory(pattern):
            sources, listed = _folder(pattern, ignored)
        else:
            listed = list(files.expand_inputs([pattern]))
            sources = []
            for item in listed:
                kind = "image" if _is_image(item.path) else row_kind(item.path)
                if kind == "image" and not files.utf8_name(item.path):
                    kind = NON_UTF8_NAME
                if kind is None:
                    raise ValueError(
                        f"{item.path}: not an image ({', '.join(IMAGE_SUFFIXES)}) nor rows "
                        f"({row_suffixes()}); an image folder or saved HF dataset is given as its directory"
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
    manifest_files = tuple(manifest[path] for path in sorted(manifest))
    return Found(numbered, manifest_files, {reason: sorted(set(paths)) for reason, paths in ignored.items() if paths})
