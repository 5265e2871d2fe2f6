"""Batch: the keys a training batch may hold, as every dew reader emits them and every objective reads them."""

from __future__ import annotations

from typing import TypedDict

import numpy as np


class CaptionIds(TypedDict):
    """A tokenized caption batch: ids and their mask, each int32 [B, context].

    Examples:
        >>> import numpy as np
        >>> from dew.data import CaptionIds
        >>> ids: CaptionIds = {"ids": np.zeros((2, 8), np.int32), "mask": np.ones((2, 8), np.int32)}
        >>> sorted(ids)
        ['ids', 'mask']
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray


class Batch(TypedDict, total=False):
    """One batch a Dataset's stream yields: whichever of these keys the spec that read it emits.

    Arrays lead with the batch axis B. Images and video frames are uint8 in [0, 255]. A Batch is a plain
    dict at run time; the TypedDict only tells a type checker which keys there can be.

    Examples:
        >>> import numpy as np
        >>> from dew.data import Batch
        >>> batch: Batch = {"text": np.zeros((4, 9), np.int32)}
        >>> batch["text"].shape
        (4, 9)
    """

    text: np.ndarray | CaptionIds
    """A token window, int32 [B, seq_len + 1]; or an image or clip's tokenized caption."""
    text_segment_ids: np.ndarray
    """Packed windows: int32 [B, seq_len + 1], which document each token is from, 0 for padding."""
    text_positions: np.ndarray
    """Packed windows: int32 [B, seq_len + 1], each token's position inside its document."""
    image: np.ndarray
    """uint8 [B, size, size, 3] RGB."""
    caption: list[str]
    """The caption of each image or clip, as text."""
    video: np.ndarray
    """uint8 [B, frames, size, size, 3] RGB clips."""
    audio: dict[str, np.ndarray]
    """What the audio model's feature extractor emits for each clip (input_values, input_features, ...)."""
    input_ids: np.ndarray
    """Preference pairs: int32 [B, 2, seq_len], chosen at index 0 (dew.data.IDS_KEY)."""
    completion_mask: np.ndarray
    """Preference pairs: [B, 2, seq_len], 1 on completion tokens (dew.data.MASK_KEY)."""
    prompt: np.ndarray
    """Prompts: int32 [B, max_prompt_len], left-padded."""
    prompt_length: np.ndarray
    """Prompts: int32 [B], the prompt's own length."""
