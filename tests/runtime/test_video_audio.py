"""AutoAudioProcessor over wav2vec2 and Whisper feature extractors saved here: no hub."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dew.data import AutoAudioProcessor
from tests.runtime import video_support as support

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def wav2vec2(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("wav2vec2"))
    transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def whisper(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("whisper"))
    transformers.WhisperFeatureExtractor(feature_size=80, sampling_rate=16000).save_pretrained(directory)
    return directory


def test_wav2vec2_gets_its_raw_input_values(wav2vec2) -> None:
    waves = np.stack([support.tone(8000, 16000), support.tone(8000, 16000, 1000.0)])
    out = AutoAudioProcessor(modelname=wav2vec2)(waves)
    assert set(out) == {"input_values"} and out["input_values"].shape == (2, 8000)
    # Normalised to zero mean and unit variance per waveform, as the extractor's config asks.
    np.testing.assert_allclose(out["input_values"].std(axis=1), 1.0, rtol=1e-3)


def test_whisper_gets_80_mel_features_padded_to_30_seconds(whisper) -> None:
    out = AutoAudioProcessor(modelname=whisper)(support.tone(16000, 16000))
    assert set(out) == {"input_features"} and out["input_features"].shape == (1, 80, 3000)


def test_waveforms_at_another_rate_are_resampled_to_the_extractors(wav2vec2) -> None:
    processor = AutoAudioProcessor(modelname=wav2vec2, sampling_rate=44100)
    out = processor(support.tone(44100, 44100)[None])
    values = out["input_values"][0]
    assert abs(len(values) - 16000) <= 1
    assert abs(support.dominant_frequency(values, 16000) - support.TONE) < 2


def test_the_processor_travels_as_its_name(wav2vec2) -> None:
    processor = AutoAudioProcessor(modelname=wav2vec2)
    assert processor.rate == 16000
    copy = pickle.loads(pickle.dumps(processor))
    assert repr(copy) == repr(processor) and copy._extractor is None
    with pytest.raises(ValueError, match="must name a feature extractor"):
        AutoAudioProcessor(modelname="")
