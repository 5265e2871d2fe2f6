"""The decode-clips job end to end on DirectRunner: videos made here (two codecs, sizes and frame rates,
with and without audio, broken in every way the job names), frames and audio checked against what was
written, the books, determinism across workers and crashes, and the shards read back by ClipShards,
whose has_audio agrees with VideoDataset's over the same files."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.data.loading import Loading
from dew.data.video.clip_shards import ClipShards
from dew.data.video.decode import ClipShape
from dew.pipelines import decode_clips_job
from dew.preprocess.clip_sources import SourceOptions, find_sources
from dew.preprocess.read_documents import BadInputError
from dew.preprocess.write_clips import ClipsPlan
from tests.runtime.video_support import dominant_frequency, frame_indices, write_video
from tests.support import assert_refused_quietly, assert_resume_exact, inspect_text, read_global, run_preprocess

IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
CLIP = ("--frames", "8", "--frame_size", "32", "--frame_rate", "25", "--audio_rate", "16000")
FLAGS = (*CLIP, "--every", "0.4", "--num_shards", "2", "--caption_template", "{folder}: {stem}")
RATE = 16000
FAST = Loading(workers=0, threads=2, read_buffer=8)


def run(output: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    return decode_clips_job.main(["--output", str(output), *flags, *runner])


def listing(directory: Path) -> dict[str, str]:
    return {p.name: formats.sha256_file(str(p)) for p in sorted(directory.iterdir()) if p.is_file()}


def every_clip(directory: Path) -> list[dict]:
    records = ClipShards(path=str(directory)).records()
    batch = records.read_batch(np.arange(len(records)))
    return [{key: value[i] for key, value in batch.items()} for i in range(len(records))]


def _faststart_cut(source: str, target: Path) -> None:
    """An mp4 with its index up front, cut at two thirds: it opens, and its later clips are missing."""
    import av

    whole = target.with_suffix(".whole")
    with av.open(source) as read, av.open(str(whole), "w", format="mp4", options={"movflags": "faststart"}) as out:
        streams = {s.index: out.add_stream_from_template(s) for s in read.streams}
        for packet in read.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                out.mux(packet)
    data = whole.read_bytes()
    target.write_bytes(data[: len(data) * 2 // 3])
    whole.unlink()


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("videos") / "in"
    (root / "talk").mkdir(parents=True)
    (root / "broken").mkdir()
    write_video(str(root / "talk" / "tone.mp4"), frames=50)  # h264 64×48 25 fps, 2 s of tone
    write_video(str(root / "talk" / "quiet.mp4"), codec="mpeg4", fps=30, frames=60, size=(96, 64), audio=False)
    write_video(str(root / "talk" / "short-audio.mp4"), frames=50, audio_seconds=1.0)
    write_video(str(root / "broken" / "cut.mkv"), frames=50)
    whole = (root / "broken" / "cut.mkv").read_bytes()
    (root / "broken" / "cut.mkv").write_bytes(whole[: len(whole) * 2 // 3])
    _faststart_cut(str(root / "talk" / "tone.mp4"), root / "broken" / "cut-late.mp4")
    (root / "broken" / "zero.mp4").write_bytes(b"")
    (root / "broken" / "notes.mp4").write_text("not a video at all\n")
    write_video(str(root / "broken" / "tiny.mp4"), frames=4)  # 0.16 s: shorter than one clip
    unknown = root / "broken" / "unknown.avi"
    write_video(str(unknown), codec="mpeg4", frames=20, audio=False)
    unknown.write_bytes(unknown.read_bytes().replace(b"FMP4", b"ZZZZ"))  # a codec tag FFmpeg has no decoder for
    return root


@pytest.fixture(scope="module")
def committed(videos: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("clips") / "one"
    return out, run(out, "--input", str(videos), *FLAGS)


@pytest.mark.beam
def test_frames_audio_and_books_of_every_video(committed: tuple[Path, dict], videos: Path) -> None:
    out, found = committed
    stats = json.loads((out / "stats.json").read_text())
    want = {"truncated": 2, "empty": 1, "corrupt": 1, "too_short": 1, "unsupported_codec": 1}
    assert {reason: n for reason, n in stats["dropped"].items() if n} == want
    assert stats["videos_in"] == 9 == stats["videos_written"] + sum(stats["dropped"].values()) == found["videos_in"]
    assert {Path(d["path"]).name: d["reason"] for d in stats["dropped_inputs"]}["cut-late.mp4"] == "truncated"
    # 2 s at 25 fps holds 43 starts of a 0.32 s clip; every 0.4 s (10 starts) cuts 5 clips a video.
    assert (
        stats["clips_written"] == 15 and found["clips_decoded"] > 15
    )  # cut-late's first clips were decoded, then dropped
    meta = formats.read_meta(str(out), kind="clips")
    assert (meta.section.frames, meta.section.frame_size, meta.section.fields) == (
        8,
        32,
        ("frames", "audio", "has_audio", "caption", "source", "span"),
    )
    clips = every_clip(out)
    assert sorted(Path(c["source"]).name for c in clips) == sorted(["tone.mp4", "quiet.mp4", "short-audio.mp4"] * 5)
    for clip in clips:
        name, (start, end) = Path(clip["source"]).name, clip["span"]
        assert clip["caption"] == f"talk: {Path(name).stem}" and math.isclose(end - start, 0.32)
        fps = 30 if name == "quiet.mp4" else 25
        # Frame k shows the source frame on screen at start + k / 25: the last one not after it.
        assert frame_indices(clip["frames"]) == [math.floor((start + k / 25) * fps + 1e-6) for k in range(8)], name
        audio = clip["audio"]
        assert audio.shape == (5120,) and audio.dtype == np.float32
        # A video without an audio stream says so; one whose audio track ends early does not.
        assert clip["has_audio"] == (name != "quiet.mp4"), name
        if name == "quiet.mp4" or (name == "short-audio.mp4" and start >= 1.05):
            assert np.abs(audio).max() < 1e-3, (name, start)  # no audio, or past its end: silence
        elif end <= 1.0 or name == "tone.mp4":
            assert abs(dominant_frequency(audio, RATE) - 440) < 10 and 0.4 < np.abs(audio).max() < 0.6
    assert found["frames_decoded"] == 8 * found["clips_decoded"]
    # The parked clips went with the temporary directory once the corpus committed.
    assert sorted(p.name for p in out.iterdir()) == sorted(listing(out)) and not (out / ".dew-tmp").exists()


@pytest.mark.parametrize("name", ["list.csv", "list.jsonl"])
def test_a_list_of_videos_with_a_byte_order_mark_reads_its_first_row(videos: Path, tmp_path: Path, name: str) -> None:
    """A list saved by a Windows tool starts with a byte order mark: it hid a csv's path column under the
    name '\ufeffpath' and made a jsonl's first line no JSON."""
    tone, quiet = videos / "talk" / "tone.mp4", videos / "talk" / "quiet.mp4"
    listed = tmp_path / name
    if name.endswith(".csv"):
        text = f"path,caption\n{tone},a tone\n{quiet},quiet\n"
    else:
        text = "".join(
            json.dumps({"path": str(p), "caption": c}) + "\n" for p, c in ((tone, "a tone"), (quiet, "quiet"))
        )
    listed.write_bytes(b"\xef\xbb\xbf" + text.encode())
    sources, _ = find_sources([str(listed)], SourceOptions())
    assert sorted((Path(s.path).name, s.caption) for s in sources) == [("quiet.mp4", "quiet"), ("tone.mp4", "a tone")]


@pytest.mark.beam
def test_inspect_shows_the_videos_read_and_each_drop_with_its_video(committed: tuple[Path, dict], videos: Path) -> None:
    out, _ = committed
    text = inspect_text(str(out), "--samples", "1")
    assert "videos: 3 written of 9 read" in text
    assert f"dropped empty: 1 (e.g. {videos / 'broken' / 'zero.mp4'}: " in text
    assert "sample 0: frames: 24,576 bytes, audio: 20,480 bytes, has_audio: 1 bytes" in text


@pytest.mark.beam
def test_one_or_two_workers_and_a_crash_rerun_write_the_same_bytes(
    committed: tuple[Path, dict], videos: Path, tmp_path: Path
) -> None:
    one, _ = committed
    flags = ("--input", str(videos), *FLAGS)
    run(tmp_path / "two", *flags, runner=TWO_WORKERS)
    assert listing(tmp_path / "two") == listing(one)

    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00002.array_record"
    blocker.mkdir(parents=True)  # a directory where a shard must go: writing that shard fails for real
    with pytest.raises(Exception, match="train-00001-of-00002"):
        run(crashed, *flags)
    assert not (crashed / formats.META).exists()
    blocker.rmdir()
    found = run(crashed, *flags)
    assert found.get("shards_skipped", 0) + found["shards_written"] == 2
    assert listing(crashed) == listing(one)
    assert run(crashed, *flags) == {}  # committed by this very job: nothing to do


@pytest.mark.beam
def test_a_run_left_by_another_decoder_version_is_not_resumed_into_mixed_shards(
    videos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dew.data.video import decode
    from dew.preprocess.commit import OutputConflictError

    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00002.array_record"
    blocker.mkdir(parents=True)
    monkeypatch.setattr(decode, "DECODER_VERSION", decode.DECODER_VERSION - 1)
    with pytest.raises(Exception, match="train-00001-of-00002"):
        run(crashed, "--input", str(videos), *FLAGS)  # shard 0 committed by the older decoder
    blocker.rmdir()
    monkeypatch.undo()
    with pytest.raises(OutputConflictError, match=r"decoder.*--overwrite"):
        run(crashed, "--input", str(videos), *FLAGS)


@pytest.mark.beam
def test_has_audio_of_every_clip_is_what_video_dataset_gives_for_its_video(videos: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from dew.data import DataPartition, LocalVideos

    folder = tmp_path / "pair"
    folder.mkdir()
    shutil.copy(videos / "talk" / "quiet.mp4", folder / "a-quiet.mp4")
    shutil.copy(videos / "talk" / "tone.mp4", folder / "b-tone.mp4")
    run(tmp_path / "out", "--input", str(folder), *CLIP, "--every", "0.8")
    data = ClipShards(path=str(tmp_path / "out"), loading=FAST).load(batch=6)
    assert data.records == 6  # 3 clips a video: one batch holds them all
    (batch,), _ = read_global(data.train, 1, 1)
    assert batch["has_audio"].dtype == bool and batch["has_audio"].shape == (6,)
    offline = {(Path(path).name, bool(flag)) for path, flag in zip(batch["source"], batch["has_audio"], strict=True)}

    model = str(tmp_path / "wav2vec2")
    transformers.Wav2Vec2FeatureExtractor(sampling_rate=RATE, do_normalize=False).save_pretrained(model)
    # One video held out for validation and one left to train on: each batch is one known video.
    spec = LocalVideos(
        path=str(folder), audio_model=model, frames=8, frame_size=32, audio_padding=0, val_batches=1, loading=FAST
    )
    online = spec.load(batch=1)
    first, second = (Path(r["video_path"]).name for r in spec.source())
    (held,) = list(online.val(DataPartition()))
    (trained,), _ = read_global(online.train, 1, 1)
    assert held["has_audio"].dtype == batch["has_audio"].dtype and held["has_audio"].shape == (1,)
    online_flags = {(first, bool(held["has_audio"][0])), (second, bool(trained["has_audio"][0]))}
    assert offline == online_flags == {("a-quiet.mp4", False), ("b-tone.mp4", True)}


@pytest.mark.beam
def test_a_run_left_by_a_dew_whose_records_lacked_has_audio_is_not_resumed_into_mixed_shards(
    videos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dew.preprocess import write_clips
    from dew.preprocess.commit import OutputConflictError

    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00002.array_record"
    blocker.mkdir(parents=True)
    old_fields = write_clips.section_fields
    monkeypatch.setattr(
        write_clips, "section_fields", lambda audio: tuple(f for f in old_fields(audio) if f != "has_audio")
    )
    with pytest.raises(Exception, match="train-00001-of-00002"):
        run(crashed, "--input", str(videos), *FLAGS)  # shard 0 committed in the older layout
    blocker.rmdir()
    monkeypatch.undo()
    with pytest.raises(OutputConflictError, match=r"differs in fields.*--overwrite"):
        run(crashed, "--input", str(videos), *FLAGS)


@pytest.mark.beam
def test_voxceleb_tree_and_a_list_per_video_jpeg_int16_dropping_silent_videos(videos: Path, tmp_path: Path) -> None:
    vox = tmp_path / "vox" / "dev" / "id0001" / "abc"
    vox.mkdir(parents=True)
    shutil.copy(videos / "talk" / "tone.mp4", vox / "00001.mp4")
    shutil.copy(videos / "talk" / "quiet.mp4", vox / "00002.mp4")
    out = tmp_path / "vox-out"
    per = ("--per_video", "3", "--frame_encoding", "jpeg", "--audio_dtype", "int16", "--no_audio", "drop")
    template = ("--caption_template", "speaker {identity} ({split}/{clip}/{utterance})")
    run(out, "--input", str(tmp_path / "vox"), "--layout", "voxceleb2", *CLIP, *per, *template)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dropped"]["no_audio"] == 1 and stats["clips_written"] == 3
    clips = sorted(every_clip(out), key=lambda c: c["span"][0])
    assert [c["caption"] for c in clips] == ["speaker id0001 (dev/abc/00001)"] * 3
    assert [round(c["span"][0], 2) for c in clips] == [0.0, 0.84, 1.68]  # first, middle and last of 43 starts
    for clip in clips:
        want = [round((clip["span"][0] + k / 25) * 25) for k in range(8)]
        assert max(abs(a - b) for a, b in zip(frame_indices(clip["frames"]), want, strict=True)) == 0
        assert abs(dominant_frequency(clip["audio"], RATE) - 440) < 10 and clip["has_audio"]

    rows = tmp_path / "list.jsonl"
    lines = [{"path": str(videos / "talk" / "tone.mp4"), "caption": "a tone"}, {"path": "gone.mp4", "caption": "x"}]
    rows.write_text("\n".join(json.dumps(line) for line in [*lines, {"caption": "no path"}]) + "\n")
    sources, _ = find_sources([str(rows)], SourceOptions())
    assert sorted((s.caption, s.problem) for s in sources) == [
        ("", "missing_field"),
        ("a tone", None),
        ("x", "missing_file"),
    ]


def test_strict_stops_at_the_first_bad_video_naming_it(videos: Path) -> None:
    from dew.preprocess.write_clips import _DecodeVideo

    sources, _ = find_sources([str(videos / "broken" / "zero.mp4")], SourceOptions())
    plan = ClipsPlan(output="unused", shape=ClipShape(frames=8, frame_size=32, frame_rate=25.0), strict=True)
    decode = _DecodeVideo(plan)
    decode.setup()
    with pytest.raises(BadInputError, match=r"zero\.mp4: empty"):
        list(decode.process(sources[0]))


def test_a_video_that_fails_part_way_hands_on_no_clip_and_leaves_no_parked_file(videos: Path, tmp_path: Path) -> None:
    from dew.preprocess.write_clips import TALLY_TAG, _DecodeVideo

    sources, _ = find_sources(
        [str(videos / "broken" / "cut-late.mp4"), str(videos / "talk" / "tone.mp4")], SourceOptions()
    )
    shape = ClipShape(frames=8, frame_size=32, frame_rate=25.0, audio_rate=16000)
    decode = _DecodeVideo(ClipsPlan(output=str(tmp_path), shape=shape, every=0.4))
    decode.setup()
    late, tone = ([*decode.process(source)] for source in sources)
    assert [out.tag for out in late] == [TALLY_TAG] and late[0].value["reason"] == "truncated"
    assert len(tone) == 6 and tone[-1].value["clips"] == 5  # five parked clips, then the tally
    (parked,) = {where.path for _, (where, _) in tone[:-1]}
    assert [Path(p).name for p in (tmp_path / ".dew-tmp").iterdir()] == [Path(parked).name]


def test_clips_are_cut_every_k_seconds_or_n_per_video_evenly() -> None:
    shape = ClipShape(frames=8, frame_size=32, frame_rate=25.0)
    assert ClipsPlan(output="o", shape=shape).clip_indices(43) == [0, 8, 16, 24, 32, 40]
    assert ClipsPlan(output="o", shape=shape, every=0.4).clip_indices(43) == [0, 10, 20, 30, 40]
    assert ClipsPlan(output="o", shape=shape, per_video=3).clip_indices(43) == [0, 21, 42]
    assert ClipsPlan(output="o", shape=shape, per_video=1).clip_indices(43) == [21]
    assert ClipsPlan(output="o", shape=shape, per_video=5).clip_indices(2) == [0, 1]


def test_clip_shards_resume_exactly_on_another_share_count(committed: tuple[Path, dict]) -> None:
    out, _ = committed
    data = ClipShards(path=str(out), seed=3, loading=FAST).load(batch=4)
    assert data.records == 15
    assert_resume_exact(data.train, steps=5, stop_at=2, count_before=2, count_after=1)
    (batch,), _ = read_global(data.train, 1, 1)
    assert batch["frames"].shape == (4, 8, 32, 32, 3) and batch["audio"].shape == (4, 5120)
    assert batch["has_audio"].dtype == bool and batch["has_audio"].shape == (4,)
    with pytest.raises(ValueError, match="no tokenize="):
        ClipShards(path=str(out)).load(batch=4, tokenize=lambda captions: captions)
    assert data.val is None  # one split, and nothing held out unless val_batches asks


@pytest.mark.beam
@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ((), r"the job wrote no clip of 6 videos, so nothing was committed\. Drops by reason:\n  \w+: \d+, e\.g\. /"),
        (("--strict",), r"\S+: \w+: .* \(--strict stops at the first bad video"),
    ],
)
def test_a_job_of_bad_videos_fails_in_one_message_naming_one(videos: Path, tmp_path: Path, flags, said) -> None:
    """On worker processes as on Dataflow: the launcher's message names a video and why, and no worker's
    traceback buries it."""
    where = ("--input", str(videos / "broken"), "--output", str(tmp_path / "out"))
    done = run_preprocess("decode-clips", *where, *CLIP, *flags, *TWO_WORKERS)
    assert_refused_quietly(done)
    assert re.search(f"dew-preprocess decode-clips: {said}", done.stderr), done.stderr[-3000:]
    assert not (tmp_path / "out" / "meta.json").exists()
