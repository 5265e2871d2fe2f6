"""Stray bytes libjpeg skips in a JPEG, found where its own marker reader would skip them and taken out of
a copy, so a strict decode of the copy can look past the warning they raise (dew.data.images.jpeg_strict).

libjpeg finds a marker as `_marker_after` does: past any bytes that are not 0xFF, and past 0xFF 0x00
pairs, the next run of 0xFF followed by a byte that is not 0x00; what it passes over on the way it counts
("N extraneous bytes before marker 0xXX", a 0xFF run with its 0x00 counted as two bytes). Between the
segments of a file (the header's, and the tables and scan headers between the scans of a progressive
JPEG) segment lengths say exactly where such bytes start: `without_stray_bytes` takes them out.

After a scan's entropy-coded data they cannot be told from it by their bytes: a scan's data is any bytes
whose 0xFF are stuffed (FF 00) or restart markers (FF D0..D7), and where the data ends is known only to
the decoder that read its last block. libjpeg's count says: its progressive decoder reads a scan's bytes
only as far as its bit buffer asks, so the N bytes its marker reader then counts, right before the
marker, are bytes the scan did not need. `without_stray_scan_end` takes exactly those N out, counted as
libjpeg counts them; the few the bit buffer had already read stay, as unused there as in the file.
"""

from __future__ import annotations

import re

# Markers that stand alone, with no length after them: TEM and the restart markers.
_STANDALONE = (0x01, *range(0xD0, 0xD8))
_SOS, _EOI = 0xDA, 0xD9
_PROGRESSIVE = 0xC2  # the start-of-frame marker of a progressive Huffman JPEG
# The next marker: a run of 0xFF and its code. In a scan's data, restart markers are part of the data,
# as the entropy decoder reads them; a leftmost match starts at its run's first 0xFF.
_MARKER = re.compile(rb"\xff+[^\x00\xff]")
_MARKER_AFTER_SCAN = re.compile(rb"\xff+[^\x00\xd0-\xd7\xff]")


def _marker_after(data: bytes, at: int, *, in_scan: bool) -> tuple[int, int] | None:
    """(first 0xFF of its fill run, its code's index) of the next marker from `at`, or None at the end."""
    found = (_MARKER_AFTER_SCAN if in_scan else _MARKER).search(data, at)
    return None if found is None else (found.start(), found.end() - 1)


def progressive_scans(data: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each scan's entropy-coded data of a progressive Huffman JPEG: from the end of its
    header to where the bytes before the next marker start (or the end of `data`). None for any other
    JPEG, or when a segment runs past the end of `data`."""
    layout = _layout(data)
    if layout is None or not any(data[code_at] == _PROGRESSIVE for _, _, code_at, _ in layout):
        return None
    ends = [start for start, _, _, _ in layout[1:]] + [len(data)]
    return [(end, after) for (_, _, code_at, end), after in zip(layout, ends, strict=True) if data[code_at] == _SOS]


def _layout(data: bytes) -> list[tuple[int, int, int, int]] | None:
    """Each marker segment after the start-of-image marker, up to the end-of-image marker or the end of
    `data`: (where the bytes before it start, its first 0xFF, its code's index, its end). A scan's
    segment ends with its header; the bytes before the next marker start where the scan's data ends.
    None when a segment runs past the end of `data`."""
    segments: list[tuple[int, int, int, int]] = []
    at, size = 2, len(data)
    while (found := _marker_after(data, at, in_scan=False)) is not None:
        run, code_at = found
        code = data[code_at]
        if code == _EOI or code in _STANDALONE:
            end = code_at + 1
        elif code_at + 3 > size:
            return None
        else:
            end = code_at + 1 + ((data[code_at + 1] << 8) | data[code_at + 2])
            if end > size:
                return None
        segments.append((at, run, code_at, end))
        if code == _EOI:
            break
        at = end
        if code == _SOS:
            found = _marker_after(data, end, in_scan=True)
            if found is None:
                break
            at = found[0]
    return segments


def without_stray_bytes(data: bytes) -> bytes | None:
    """`data` with the bytes libjpeg skips between segments taken out (not those at the end of a scan's
    data), or None when there are none or a segment runs past the end of `data`."""
    layout = _layout(data)
    if layout is None or all(start == run for start, run, _, _ in layout):
        return None
    out, copied = bytearray(data[:2]), 2
    for start, run, _, end in layout:
        out += data[copied:start]  # a scan's data, after its header; nothing after any other segment
        out += data[run:end]
        copied = end
    return bytes(out + data[copied:])


def without_stray_scan_end(data: bytes, start: int, end: int, count: int) -> bytes | None:
    """`data` without the `count` bytes libjpeg counted as extraneous right before `end`, the marker
    after the scan data that begins at `start`: each byte not 0xFF as one, a 0xFF run with its 0x00 as
    two. None when they do not make exactly `count`, or would take a marker or reach the scan's start."""
    at, counted = end, 0
    while counted < count:
        if at - 1 < start or data[at - 1] == 0xFF:
            return None
        if at - 2 >= start and data[at - 2] == 0xFF:
            if data[at - 1] != 0x00:
                return None  # a restart marker: libjpeg's count would have stopped there
            at -= 2
            while at - 1 >= start and data[at - 1] == 0xFF:
                at -= 1
            counted += 2
        else:
            at -= 1
            counted += 1
    return data[:at] + data[end:] if counted == count else None
