"""Why a video file cannot give a clip: VideoError and its reasons, the names the clips job counts drops by."""

from __future__ import annotations

# Why a file is refused; the offline job counts its drops under these names.
EMPTY = "empty"
CORRUPT = "corrupt"
NO_VIDEO = "no_video"
TOO_SHORT = "too_short"
TRUNCATED = "truncated"
UNSUPPORTED_CODEC = "unsupported_codec"
REASONS = (EMPTY, CORRUPT, NO_VIDEO, TOO_SHORT, TRUNCATED, UNSUPPORTED_CODEC)


class VideoError(ValueError):
    """A video file that cannot give the clip asked of it, for `reason` (one of REASONS)."""

    def __init__(self, path: str, reason: str, detail: str) -> None:
        super().__init__(f"{path}: {reason}: {detail}")
        self.path, self.reason = path, reason
