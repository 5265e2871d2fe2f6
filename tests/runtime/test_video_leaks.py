"""Decoding clip after clip holds no more file descriptors or memory than decoding one."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

import pytest

from dew.data.video.decode import ClipShape, Video
from tests.runtime import video_support as support

psutil = pytest.importorskip("psutil")
pytest.importorskip("av")

DECODES = 500
# A leaked frame a decode would hold about 6 MiB here, a leaked container hundreds; what stays is noise.
RSS_SLACK = 4 << 20
# A descriptor leaked a decode would be 500 here. Other tests' threads in this process (servers, pools)
# may open or close a few while the loop runs, so the count is bounded rather than held equal.
FD_SLACK = 8


def _resident(process) -> int:
    """Resident bytes once freed memory is given back: threaded decoders free across glibc's per-thread
    arenas, whose free pages would otherwise stay resident and look like growth."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None
    if trim is not None:
        trim(0)
    return process.memory_info().rss


def test_500_decodes_leak_no_descriptors_and_no_memory(tmp_path) -> None:
    path = support.write_video(str(tmp_path / "tiny.mp4"), frames=12, size=(64, 64), audio=True)
    shape = ClipShape(frames=4, frame_size=32, frame_rate=25, audio_rate=16000, audio_padding=1)
    process = psutil.Process()

    def decode(times: int) -> None:
        for i in range(times):
            with Video(path) as video:
                video.clip(shape, i % video.starts(shape))

    decode(50)  # warm: codec tables, thread pools and the allocator's arenas reach their steady size
    # Resident size first: it collects garbage, and so closes what earlier tests left to the collector,
    # which would otherwise count as descriptors this loop freed.
    rss = _resident(process)
    fds = process.num_fds()
    decode(DECODES)
    assert process.num_fds() - fds < FD_SLACK
    assert not [f for f in process.open_files() if f.path == path], "the video file is still open"
    # A leak grows in every round alike; what another test's thread left running in this process
    # allocates meanwhile (seen once in a full run: 6.4 MiB) lands in one round, so a second round is
    # read and the smaller growth is the one bounded.
    middle = _resident(process)
    decode(DECODES)
    grown = (middle - rss, _resident(process) - middle)
    assert min(grown) < RSS_SLACK, f"resident memory grew {grown[0]} and {grown[1]} bytes in two rounds"
