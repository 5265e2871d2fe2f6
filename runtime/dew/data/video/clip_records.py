"""One decoded clip as a `dew.clips/1` record, and back: the bytes the decode-clips job writes.

A record is a packed dict (dew.data.codec) holding, in the section's field order:
- `frames`: raw, the uint8 [frames, S, S, 3] array's bytes; jpeg, a packed dict of one JPEG a frame
  under the keys "0", "1", ... (so a reader decodes only the frames it keeps, with no framing of ours);
- `audio` (when the section has an audio_rate): mono samples, float32 in [-1, 1] or int16 scaled by
  32767, little-endian;
- `has_audio` (beside `audio`): one byte, 1 where the video has an audio stream and 0 where it has none
  and `audio` is silence standing in for it, so a trainer can mask the audio loss of those clips;
- `caption`: UTF-8;
- `source`: the video's path, UTF-8, and `span`: float64 [start, end] seconds of the clip in that file,
  so any clip can be traced to, and cut again from, the file it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays
from dew.data.images import pixels
from dew.data.sections import ClipsSection

CLIP_FIELDS = ("frames", "audio", "has_audio", "caption", "source", "span")
AUDIO_FIELDS = ("audio", "has_audio")
_INT16_SCALE = 32767.0
_FLAGS = {b"\x00": False, b"\x01": True}


def section_fields(audio: bool) -> tuple[str, ...]:
    """The fields every record of a clips directory holds, in order."""
    return tuple(f for f in CLIP_FIELDS if audio or f not in AUDIO_FIELDS)


def audio_samples(section: ClipsSection) -> int:
    """Samples of a clip's audio: its frames at audio_rate (the job pads no audio beyond them)."""
    return 0 if section.audio_rate is None else round(section.frames / section.frame_rate * section.audio_rate)


def pack_clip(
    section: ClipsSection,
    frames: np.ndarray,
    audio: np.ndarray,
    *,
    caption: str,
    source: str,
    span: tuple[float, float],
    has_audio: bool,
    quality: int = 95,
) -> bytes:
    """The record of one clip: frames uint8 [F, S, S, 3], audio float32 [samples] in [-1, 1], and whether
    its video has an audio stream (False: `audio` is silence standing in for none)."""
    want = (section.frames, section.frame_size, section.frame_size, 3)
    if frames.shape != want or frames.dtype != np.uint8:
        raise ValueError(f"a clip's frames are uint8 {want}, got {frames.dtype} {frames.shape}")
    if section.frame_encoding == "jpeg":
        stored: Any = pack_dict_of_byte_arrays(
            {str(i): pixels.encode(f, "jpeg", quality) for i, f in enumerate(frames)}
        )
    else:
        stored = frames
    entries: dict[str, Any] = {"frames": stored}
    if "audio" in section.fields:
        if section.audio_dtype == "int16":
            entries["audio"] = np.round(np.clip(audio, -1.0, 1.0) * _INT16_SCALE).astype("<i2")
        else:
            entries["audio"] = audio.astype("<f4")
    entries["has_audio"] = b"\x01" if has_audio else b"\x00"
    entries.update(caption=caption.encode("utf-8"), source=source.encode("utf-8"), span=np.array(span, dtype="<f8"))
    return pack_dict_of_byte_arrays({name: entries[name] for name in section.fields})


def unpack_clips(section: ClipsSection, records: Sequence[bytes], where: Sequence[str]) -> dict[str, Any]:
    """A batch of records as arrays: frames uint8 [B, F, S, S, 3], audio float32 [B, samples] in [-1, 1]
    whichever dtype stored it, has_audio bool [B] where the section holds it, caption and source as
    lists of str, span float64 [B, 2]."""
    size, count = section.frame_size, section.frames
    frames = np.empty((len(records), count, size, size, 3), dtype=np.uint8)
    audio, flags, captions, sources, spans = [], [], [], [], []
    dtype = np.dtype("<i2" if section.audio_dtype == "int16" else "<f4")
    for row, (record, at) in enumerate(zip(records, where, strict=True)):
        fields = unpack_dict_of_byte_arrays(record, at)
        if section.frame_encoding == "jpeg":
            jpegs = unpack_dict_of_byte_arrays(fields["frames"], f"{at} frames")
            for i in range(count):
                frames[row, i] = pixels.decode(jpegs[str(i)])
        else:
            frames[row] = np.frombuffer(fields["frames"], dtype=np.uint8).reshape(count, size, size, 3)
        if "audio" in section.fields:
            audio.append(np.frombuffer(fields["audio"], dtype=dtype))
        if "has_audio" in section.fields:
            flag = _FLAGS.get(fields["has_audio"])
            if flag is None:
                raise ValueError(f"{at}: has_audio is {fields['has_audio'][:8]!r}, not one byte 0 or 1")
            flags.append(flag)
        captions.append(fields["caption"].decode("utf-8"))
        sources.append(fields["source"].decode("utf-8"))
        spans.append(np.frombuffer(fields["span"], dtype="<f8"))
    batch: dict[str, Any] = {"frames": frames, "caption": captions, "source": sources, "span": np.stack(spans)}
    if audio:
        stacked = np.stack(audio).astype(np.float32)
        batch["audio"] = stacked / _INT16_SCALE if section.audio_dtype == "int16" else stacked
    if "has_audio" in section.fields:
        batch["has_audio"] = np.array(flags, dtype=bool)
    return batch
