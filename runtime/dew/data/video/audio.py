"""AutoAudioProcessor: raw waveforms to whatever inputs an HF audio model's feature extractor makes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import reach
from dew.data.extras import require


class AutoAudioProcessor:
    """Turns raw waveforms into the inputs of any HF audio model.

    The model's own feature extractor decides the keys (input_values for wav2vec2 and HuBERT,
    input_features for Whisper and AST, an attention_mask where its config asks for one), and they
    pass through unchanged, so switching audio models changes nothing here. modelname is a hub name
    or a local directory in the HF layout; transformers loads on the first call, in the process making
    it, so the processor travels to grain workers as its name. sampling_rate is the rate of the
    waveforms it is given; None means they are already at the extractor's rate (`rate`), and any other
    rate is resampled to it first, by the resampler video clips use (dew.data.video.audio_track.resample).

    Args:
        tensor_type: What the arrays come back as ("np": numpy arrays).
        modelname: A hub name or a local feature-extractor directory (docs/offline.md makes one).
        sampling_rate: The rate of the waveforms given; None when they are at the extractor's rate.

    Examples:
        >>> from dew.data import AutoAudioProcessor
        >>> AutoAudioProcessor(modelname="local/wav2vec2", sampling_rate=16_000)  # loads on first call
        AutoAudioProcessor(tensor_type='np', modelname='local/wav2vec2', sampling_rate=16000)
    """

    def __init__(
        self, tensor_type: str = "np", modelname: str = "facebook/wav2vec2-base-960h", sampling_rate: int | None = None
    ) -> None:
        if not isinstance(modelname, str) or not modelname:
            raise ValueError(f"AutoAudioProcessor.modelname must name a feature extractor, got {modelname!r}")
        if sampling_rate is not None and (not isinstance(sampling_rate, int) or sampling_rate < 1):
            raise ValueError(f"AutoAudioProcessor.sampling_rate must be a positive int or None, got {sampling_rate!r}")
        self.tensor_type, self.modelname, self.sampling_rate = tensor_type, modelname, sampling_rate
        self._extractor: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"tensor_type": self.tensor_type, "modelname": self.modelname, "sampling_rate": self.sampling_rate}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["tensor_type"], state["modelname"], state["sampling_rate"])

    def __repr__(self) -> str:
        return (
            f"AutoAudioProcessor(tensor_type={self.tensor_type!r}, modelname={self.modelname!r}, "
            f"sampling_rate={self.sampling_rate!r})"
        )

    @property
    def extractor(self) -> Any:
        with self._lock:
            if self._extractor is None:
                transformers = require("transformers", for_what=f"AutoAudioProcessor {self.modelname!r}")
                self._extractor = reach.from_hub(
                    transformers.AutoFeatureExtractor.from_pretrained, self.modelname, what="feature extractor"
                )
        return self._extractor

    @property
    def rate(self) -> int:
        """The sampling rate the model's extractor reads (16 kHz for wav2vec2 and Whisper)."""
        return int(self.extractor.sampling_rate)

    def __call__(self, waveforms: np.ndarray | Sequence[np.ndarray]) -> dict[str, Any]:
        """The extractor's outputs for a batch of mono waveforms ([B, samples], or one 1-D waveform).

        Waveforms of one length batch under every extractor; ragged ones batch under those that pad
        by default (Whisper pads each to 30 s, wav2vec2 pads nothing).
        """
        if isinstance(waveforms, np.ndarray) and waveforms.ndim == 1:
            waveforms = waveforms[None]
        waves = [np.asarray(w, dtype=np.float32) for w in waveforms]
        rate = self.rate
        if self.sampling_rate is not None and self.sampling_rate != rate:
            from dew.data.video.audio_track import resample

            waves = [resample(w, self.sampling_rate, rate) for w in waves]
        encoded = self.extractor(waves, sampling_rate=rate, return_tensors=self.tensor_type)
        return dict(encoded.items())
