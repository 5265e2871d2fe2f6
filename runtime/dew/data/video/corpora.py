"""The video kinds: every video file under a directory, and a VoxCeleb2 tree captioned by speaker."""

from __future__ import annotations

import dataclasses
import os

from dew.data import remote
from dew.data.registry import datasets
from dew.data.video.base import VideoDataset


def video_files(path: str | None, extensions: tuple[str, ...], *, kind: str) -> list[tuple[str, str]]:
    """(file, its path relative to `path`) for every file at any depth under `path` whose extension is
    one of `extensions` (case aside), in name order, so a source's order is the same on every host."""
    if not path:
        raise ValueError(f"{kind}.path must name a directory of videos")
    wanted = tuple(e.lower() for e in extensions)
    root = remote.resolve(path.rstrip("/"))  # `~` is the home folder, as in every reader
    if remote.is_remote(root):
        found = remote.find(root)
    elif os.path.isdir(root):
        found = [os.path.join(d, name) for d, _, names in os.walk(root) for name in names]
    else:
        raise FileNotFoundError(f"{kind}: {path} is not a directory")
    files = sorted(f for f in found if f.lower().endswith(wanted))
    if not files:
        raise FileNotFoundError(f"{kind}: no {'/'.join(extensions)} file under {path}")
    return [(f, f[len(root) + 1 :]) for f in files]


@datasets("local_videos")
@dataclasses.dataclass(frozen=True)
class LocalVideos(VideoDataset):
    """Reads every video file under path, captioned with caption.

    The scan is recursive and a file counts by its extension; a gs:// path is listed and each video
    fetched into the local cache as it is read.

    Args:
        path: The directory to scan (local or gs://).
        extensions: The file endings that count as videos.
        caption: The caption of every clip.
        frame_size: As VideoDataset says (frames, audio_padding, audio_model, val_batches, count and
            frame_rate too).

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.LocalVideos(path="videos", frames=8, frame_size=112, caption="a cat")
        >>> spec.frames, spec.extensions[0]
        (8, '.mp4')
    """

    path: str | None = None
    extensions: tuple[str, ...] = (".mp4", ".avi", ".mov", ".webm")
    caption: str = ""

    def source(self) -> list[dict[str, str]]:
        files = video_files(self.path, self.extensions, kind=type(self).__name__)
        return [{"video_path": f, "caption": self.caption} for f, _ in files]


@datasets("voxceleb2")
@dataclasses.dataclass(frozen=True)
class VoxCeleb2(VideoDataset):
    """Reads a VoxCeleb2 tree, `<path>/<split>/<identity>/<clip>/<utterance>.mp4`.

    The scan is recursive, so extra nesting below an identity is tolerated. The caption is
    prompt_template with {identity} replaced by the speaker directory (id00012); the template's other
    text is kept as it is, braces included.

    Args:
        path: The root of the tree.
        split: The split directory under path.
        extensions: The file endings that count as videos.
        prompt_template: The caption, with {identity} the speaker.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.VoxCeleb2(path="voxceleb2", prompt_template="{identity} speaking")
        >>> spec.split
        'train'
    """

    path: str | None = None
    split: str = "train"
    extensions: tuple[str, ...] = (".mp4", ".avi")
    prompt_template: str = "a video of a person speaking"

    def source(self) -> list[dict[str, str]]:
        if not self.path:
            raise ValueError("VoxCeleb2.path must name the directory holding the split directories")
        root = f"{self.path.rstrip('/')}/{self.split}"
        files = video_files(root, self.extensions, kind=type(self).__name__)
        return [
            {"video_path": f, "caption": self.prompt_template.replace("{identity}", relative.split("/")[0])}
            for f, relative in files
        ]
