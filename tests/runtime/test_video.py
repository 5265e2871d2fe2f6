"""The video specs over a directory of videos made here: batches, clip sampling, held-out head, resume."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, Loading, LocalVideos, Ramp, VoxCeleb2, ramped
from dew.data.order import record_rng
from tests.runtime import video_support as support
from tests.support import assert_resume_exact, read_global

transformers = pytest.importorskip("transformers")
pytest.importorskip("av")

FAST = Loading(workers=0, threads=2, read_buffer=4)


@pytest.fixture(scope="module")
def wav2vec2(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("wav2vec2"))
    transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=False).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> str:
    """Eight 1.2 s videos at 30 fps (one silent, one nested deeper), and a file that is no video."""
    root = tmp_path_factory.mktemp("videos")
    (root / "deeper").mkdir()
    for i in range(8):
        name = f"deeper/v{i}.mp4" if i == 7 else f"v{i}.mp4"
        support.write_video(str(root / name), frames=36, fps=30, size=(64 - 8 * (i % 2), 48), audio=i != 5)
    (root / "notes.txt").write_text("not a video")
    return str(root)


def spec(path: str, model: str, **fields) -> LocalVideos:
    defaults = {"frame_size": 16, "frames": 4, "audio_padding": 1, "val_batches": 0, "loading": FAST}
    return LocalVideos(path=path, audio_model=model, **{**defaults, **fields})


def test_source_lists_every_video_in_name_order(videos, wav2vec2) -> None:
    records = spec(videos, wav2vec2, caption="a clip").source()
    names = [r["video_path"][len(videos) + 1 :] for r in records]
    assert names == ["deeper/v7.mp4", *[f"v{i}.mp4" for i in range(7)]]
    assert {r["caption"] for r in records} == {"a clip"}


def test_a_batch_holds_uint8_clips_and_the_audio_models_inputs(videos, wav2vec2) -> None:
    data = spec(videos, wav2vec2).load(batch=4)
    assert data.records == 8 and data.val is None
    (batch,), _ = read_global(data.train, 1, 1)
    assert batch["frames"].dtype == np.uint8 and batch["frames"].shape == (4, 4, 16, 16, 3)
    # 4 frames and 1 frame of padding either side at 25 fps, at wav2vec2's 16 kHz: 0.24 s.
    assert set(batch["audio"]) == {"input_values"} and batch["audio"]["input_values"].shape == (4, 3840)
    assert batch["has_audio"].dtype == bool and len(batch["caption"]) == 4
    for row in range(4):
        indices = support.frame_indices(batch["frames"][row])
        # 25 fps from a 30 fps file: consecutive grid times are 1 or 2 source frames apart.
        assert all(1 <= b - a <= 2 for a, b in itertools.pairwise(indices))
        if batch["has_audio"][row]:
            wave = batch["audio"]["input_values"][row]
            assert abs(support.dominant_frequency(wave, 16000) - support.TONE) < 10


def test_the_clip_start_is_drawn_from_the_records_global_index(videos, wav2vec2) -> None:
    (batch,), _ = read_global(spec(videos, wav2vec2, seed=7).load(batch=8).train, 1, 1)
    # A 1.2 s file holds 27 starts of a 4-frame clip at 25 fps; start j shows source frame j * 30 / 25.
    drawn = [int(record_rng(7, k).integers(27)) for k in range(8)]
    first = [support.frame_indices(batch["frames"][k])[0] for k in range(8)]
    assert first == [j * 30 // 25 for j in drawn]
    assert sorted(batch["has_audio"].tolist()) == [False] + [True] * 7


def test_val_batches_hold_out_the_head_in_source_order(videos, wav2vec2) -> None:
    videos_spec = spec(videos, wav2vec2, val_batches=1, count=6)
    data = videos_spec.load(batch=2)
    assert data.records == 4
    (val,) = list(data.val(DataPartition()))
    assert val["frames"].shape == (2, 4, 16, 16, 3)
    head = videos_spec.source()[:2]
    assert val["caption"] == [r["caption"] for r in head]
    with pytest.raises(ValueError, match="cannot spare 8 for validation"):
        spec(videos, wav2vec2, val_batches=2).load(batch=4)


@pytest.fixture(scope="module")
def vox(tmp_path_factory) -> str:
    """A VoxCeleb2-shaped tree: three speakers, two utterances each, one of them silent."""
    root = tmp_path_factory.mktemp("vox")
    for n, (identity, clip) in enumerate(itertools.product(("id00012", "id00456", "id01000"), ("abc", "def"))):
        (root / "dev" / identity / clip).mkdir(parents=True)
        support.write_video(str(root / "dev" / identity / clip / "00001.mp4"), frames=30, fps=30, audio=n != 3)
    return str(root)


def video_spec(kind: str, videos: str, vox: str, model: str, **fields) -> LocalVideos | VoxCeleb2:
    if kind == "local":
        return spec(videos, model, **fields)
    fields = {"frame_size": 16, "frames": 4, "audio_padding": 1, "loading": FAST, **fields}
    return VoxCeleb2(path=vox, split="dev", prompt_template="{identity} talking", audio_model=model, **fields)


@given(
    kind=st.sampled_from(["local", "vox"]),
    stop_at=st.integers(0, 3),
    counts=st.sampled_from([(1, 2), (2, 1), (2, 4), (4, 1), (1, 1)]),
    seed=st.integers(0, 20),
)
@settings(max_examples=5, deadline=None)
def test_a_resumed_run_decodes_the_same_clips_on_another_share_count(
    videos, vox, wav2vec2, kind, stop_at, counts, seed
) -> None:
    data = video_spec(kind, videos, vox, wav2vec2, seed=seed, val_batches=0).load(batch=4)
    assert_resume_exact(data.train, steps=3, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


@given(kind=st.sampled_from(["local", "vox"]), stop_at=st.integers(0, 2), counts=st.sampled_from([(1, 2), (2, 1)]))
@settings(max_examples=3, deadline=None)
def test_a_validation_pass_of_clips_resumes_exactly_on_another_share_count(
    videos, vox, wav2vec2, kind, stop_at, counts
) -> None:
    data = video_spec(kind, videos, vox, wav2vec2, seed=1, val_batches=2).load(batch=2)
    assert_resume_exact(data.val, steps=2, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


def test_a_bad_video_fails_its_batch_naming_the_file(tmp_path, wav2vec2) -> None:
    support.write_video(str(tmp_path / "good.mp4"), frames=30, fps=30)
    (tmp_path / "broken.mp4").write_bytes(b"\x00" * 100)
    data = spec(str(tmp_path), wav2vec2).load(batch=2)
    with pytest.raises(ValueError, match=r"broken\.mp4: corrupt"):
        read_global(data.train, 1, 1)


def test_voxceleb2_captions_each_utterance_with_its_speaker(tmp_path, wav2vec2) -> None:
    for identity, clip in [("id00012", "abc"), ("id00012", "def"), ("id00456", "xyz/extra")]:
        (tmp_path / "vox" / "dev" / identity / clip).mkdir(parents=True)
        support.write_video(str(tmp_path / "vox" / "dev" / identity / clip / "00001.mp4"), frames=30, fps=30)
    vox = VoxCeleb2(
        path=str(tmp_path / "vox"),
        split="dev",
        prompt_template="{identity} talking",
        audio_model=wav2vec2,
        frame_size=16,
        frames=4,
        val_batches=0,
        loading=FAST,
    )
    assert [r["caption"] for r in vox.source()] == ["id00012 talking", "id00012 talking", "id00456 talking"]
    (batch,), _ = read_global(vox.load(batch=3).train, 1, 1)
    assert sorted(batch["caption"]) == ["id00012 talking", "id00012 talking", "id00456 talking"]
    with pytest.raises(FileNotFoundError, match=r"vox/test is not a directory"):
        VoxCeleb2(path=str(tmp_path / "vox"), split="test").source()
    with pytest.raises(FileNotFoundError, match=r"no \.avi file under"):
        VoxCeleb2(path=str(tmp_path / "vox"), split="dev", extensions=(".avi",)).source()


def caption_ids(captions: list[str]) -> dict[str, np.ndarray]:
    """A tokenize= hook: each caption's length and first byte, so a caption read out of place shows."""
    ids = np.array([[len(c), ord(c[:1] or " ")] for c in captions], np.int32)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


@given(stop_at=st.integers(0, 4), counts=st.sampled_from([(1, 2), (2, 1)]))
@settings(max_examples=3, deadline=None)
def test_a_ramped_tokenized_run_resumes_exactly_across_its_stages(videos, wav2vec2, stop_at, counts) -> None:
    data = spec(videos, wav2vec2, seed=5, caption="a clip").load(batch=4, tokenize=caption_ids)
    run = ramped(data, Ramp(start=2, increment=2, samples=4))  # two steps of 2 clips, then 4 a step
    assert_resume_exact(run.train, steps=4, stop_at=stop_at, count_before=counts[0], count_after=counts[1])
