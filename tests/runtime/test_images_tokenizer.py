"""AutoTextTokenizer over a tiny CLIP-style tokenizer trained here, alone and as an image spec's tokenize=."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import ArrayRecordImages, AutoTextTokenizer, Batch, Loading
from tests.runtime import image_support as support
from tests.support import assert_resume_exact, read_global

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def clip_like(tmp_path_factory) -> str:
    """A word-level tokenizer saved in the Hugging Face layout with CLIP's context of 77."""
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="<unk>"))
    model.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.WordLevelTrainer(special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"])
    model.train_from_iterator([f"photo {i} of a flower — é" for i in range(50)], trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=model, model_max_length=77, pad_token="<pad>", unk_token="<unk>"
    )
    directory = str(tmp_path_factory.mktemp("clip-like"))
    fast.save_pretrained(directory)
    return directory


def test_captions_are_padded_and_cut_to_the_model_context(clip_like) -> None:
    tokenize = AutoTextTokenizer(tensor_type="np", modelname=clip_like)
    assert tokenize.context_length == 77
    out = tokenize(["photo 3 of a flower", "flower " * 200])
    assert set(out) == {"input_ids", "attention_mask"}
    assert out["input_ids"].dtype == np.int32 and out["input_ids"].shape == (2, 77)
    assert out["attention_mask"][0].tolist() == [1] * 5 + [0] * 72
    assert out["attention_mask"][1].sum() == 77  # cut at the context
    assert tokenize("photo 3")["input_ids"].shape == (1, 77)


def test_it_travels_by_name_and_loads_again_where_it_is_unpickled(clip_like) -> None:
    tokenize = AutoTextTokenizer(modelname=clip_like)
    tokenize(["photo"])
    copy = pickle.loads(pickle.dumps(tokenize))
    assert copy._tokenizer is None and copy.modelname == clip_like
    np.testing.assert_array_equal(copy(["photo 1"])["input_ids"], tokenize(["photo 1"])["input_ids"])


def test_an_image_spec_stores_its_tokenized_captions_under_text(clip_like, tmp_path) -> None:
    support.write_committed(str(tmp_path), {"train": [support.records(8)]})
    images = ArrayRecordImages(str(tmp_path), image_size=16, val_batches=0, loading=Loading(workers=0, threads=2))
    tokenize = AutoTextTokenizer(modelname=clip_like)
    (batch,), _ = read_global(images.load(batch=4, tokenize=tokenize).train, 1, 1)
    np.testing.assert_array_equal(batch["text"]["input_ids"], tokenize(batch["caption"])["input_ids"])
    assert batch["text"]["attention_mask"].shape == (4, 77)
    assert set(batch) <= set(Batch.__annotations__)  # Batch names every key an image spec emits


@pytest.fixture(scope="module")
def twelve(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("twelve"))
    support.write_committed(directory, {"train": [support.records(12)]})
    return directory


@given(
    stop_at=st.integers(0, 5),
    counts=st.sampled_from([(1, 2), (2, 1), (2, 4), (4, 1), (1, 1)]),
    seed=st.integers(0, 20),
)
@settings(max_examples=5, deadline=None)
def test_a_tokenized_augmented_stream_resumes_on_another_share_count(clip_like, twelve, stop_at, counts, seed) -> None:
    images = ArrayRecordImages(
        twelve,
        image_size=16,
        crop_scale=1.25,
        random_crop=True,
        flip=True,
        seed=seed,
        val_batches=0,
        loading=Loading(workers=0, threads=2),
    )
    data = images.load(batch=4, tokenize=AutoTextTokenizer(modelname=clip_like))
    assert_resume_exact(data.train, steps=5, stop_at=stop_at, count_before=counts[0], count_after=counts[1])


def test_a_tokenizer_without_a_context_is_refused(tmp_path) -> None:
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<pad>": 0, "<unk>": 1}, unk_token="<unk>"))
    transformers.PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>").save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="declares no context length"):
        AutoTextTokenizer(modelname=str(tmp_path))(["x"])


def test_stored_ids_accept_the_same_tokenizer_under_another_path_and_refuse_another(clip_like, tmp_path) -> None:
    tokenize = AutoTextTokenizer(modelname=clip_like)
    rows = support.records(4)
    for row in rows:
        ids = tokenize(row["caption"].decode())
        row["input_ids"], row["attention_mask"] = (ids[k][0].astype("<i4").tobytes() for k in ids)
    support.write_committed(
        str(tmp_path / "d"),
        {"train": [rows]},
        caption_tokenizer="elsewhere/clip-like",
        caption_tokenizer_hash=tokenize.fingerprint(),
        caption_length=77,
    )
    images = ArrayRecordImages(str(tmp_path / "d"), image_size=16, val_batches=0, loading=Loading(workers=0, threads=2))
    images.load(batch=2, tokenize=AutoTextTokenizer(modelname=clip_like + "/"))
    other = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<pad>": 0, "<unk>": 1, "photo": 2}, unk_token="<unk>"))
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=other, model_max_length=77, pad_token="<pad>"
    ).save_pretrained(str(tmp_path / "other"))
    with pytest.raises(ValueError, match=r"tokenized offline by 'elsewhere/clip-like', and tokenize= is '.*other'"):
        images.load(batch=2, tokenize=AutoTextTokenizer(modelname=str(tmp_path / "other")))


def _stored_at(directory, tokenize: AutoTextTokenizer, length: int) -> None:
    """A committed directory whose records hold ids `tokenize` wrote, cut to `length` as the job's --max_length."""
    rows = support.records(12)
    for row in rows:
        ids = tokenize.tokenizer(row["caption"].decode(), padding="max_length", truncation=True, max_length=length)
        row["input_ids"], row["attention_mask"] = (np.asarray(ids[k], "<i4").tobytes() for k in TEXT)
    support.write_committed(
        str(directory),
        {"train": [rows]},
        caption_tokenizer=tokenize.modelname,
        caption_tokenizer_hash=tokenize.fingerprint(),
        caption_length=length,
    )


TEXT = ("input_ids", "attention_mask")


def test_stored_ids_of_another_length_are_not_passed_off_as_the_asked_for_context(clip_like, tmp_path, caplog) -> None:
    _stored_at(tmp_path, AutoTextTokenizer(modelname=clip_like), 16)
    images = ArrayRecordImages(
        str(tmp_path),
        image_size=16,
        random_crop=True,
        flip=True,
        seed=1,
        val_batches=0,
        loading=Loading(workers=0, threads=2),
    )
    tokenize = AutoTextTokenizer(modelname=clip_like)
    with caplog.at_level("WARNING", logger="dew.data.images.base"):
        data = images.load(batch=4, tokenize=tokenize)
    (batch,), _ = read_global(data.train, 1, 1)
    assert batch["text"]["input_ids"].shape == (4, 77)  # the tokenizer's context, as asked, not the stored 16
    np.testing.assert_array_equal(batch["text"]["input_ids"], tokenize(batch["caption"])["input_ids"])
    assert not set(TEXT) & set(batch)  # the stored ids do not leak out beside text
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "16" in warned[0] and "77" in warned[0] and "--max_length 77" in warned[0]
    assert_resume_exact(data.train, steps=4, stop_at=2, count_before=1, count_after=2)


def test_stored_ids_of_the_asked_for_length_are_read_and_nothing_is_tokenized(clip_like, tmp_path, caplog) -> None:
    _stored_at(tmp_path, AutoTextTokenizer(modelname=clip_like), 77)
    images = ArrayRecordImages(str(tmp_path), image_size=16, val_batches=0, loading=Loading(workers=0, threads=2))

    class Counted(AutoTextTokenizer):
        calls = 0

        def __call__(self, captions):  # type: ignore[no-untyped-def]
            Counted.calls += 1
            return super().__call__(captions)

    tokenize = Counted(modelname=clip_like)
    with caplog.at_level("WARNING", logger="dew.data.images.base"):
        data = images.load(batch=4, tokenize=tokenize)
    (batch,), _ = read_global(data.train, 1, 1)
    np.testing.assert_array_equal(batch["text"]["input_ids"], tokenize(batch["caption"])["input_ids"])
    assert Counted.calls == 1 and not caplog.records  # only the comparison above tokenized
