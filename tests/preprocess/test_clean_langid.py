"""The clean job with a language-id model, end to end: a local model, a gs:// one, and one replaced.

The filter itself is tested in test_quality_langid; here the job's side of it: the model's bytes name the
config (a model replaced at its path is another run, never mixed with the first's committed shards), and a
model on gs://, which fastText cannot open, is copied to each worker's disk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dew.data import formats
from dew.pipelines import clean_job as job
from dew.pipelines.flags import UsageError
from dew.preprocess.commit import OutputConflictError
from tests.preprocess.quality_corpus import HELD_OUT, base, train_language_model
from tests.preprocess.test_clean_job import IN_MEMORY, kept_records

fasttext = pytest.importorskip("fasttext", reason="language id needs the langid extra (fasttext-numpy2-wheel)")
pytestmark = pytest.mark.beam
# Language id alone decides: the other families off.
ONLY_LANGUAGE = ["--no-gopher_repetition", "--no-gopher_quality", "--no-c4", "--no-fineweb", "--languages", "en"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("langid")
    model = Path(train_language_model(root))
    inputs = root / "in.jsonl"
    inputs.write_text("".join(json.dumps({"text": t}) + "\n" for t in (base(), HELD_OUT["fr"], HELD_OUT["de"])))
    return {"model": model, "inputs": inputs, "root": root}


def clean(inputs: Path, output: Path | str, model: str, *flags: str) -> dict:
    argv = ["--input", str(inputs), "--output", str(output), "--language_model", model, *ONLY_LANGUAGE]
    return job.main([*argv, "--max_drop_fraction", "1", *flags, *IN_MEMORY])


def test_a_model_replaced_at_its_path_is_another_config(corpus, tmp_path: Path) -> None:
    model = tmp_path / "lid.bin"
    shutil.copy(corpus["model"], model)
    out = tmp_path / "out"
    clean(corpus["inputs"], out, str(model))
    assert [int(r["row"]) for r in kept_records(out)] == [0]
    config = formats.read_meta(str(out)).config
    assert config["language_model_sha256"] == formats.sha256_file(str(model))
    # Another model at the same path: a rerun must not take the first model's shards for its own.
    model.write_bytes(model.read_bytes() + b"\0")
    with pytest.raises(OutputConflictError, match="another config"):
        clean(corpus["inputs"], out, str(model))
    model.unlink()
    with pytest.raises(UsageError, match=r"--language_model .*lid\.bin: cannot be read"):
        clean(corpus["inputs"], tmp_path / "none", str(model))
    assert not (tmp_path / "none").exists()


@pytest.mark.gcs
def test_a_model_on_gs_is_copied_to_the_worker(corpus, tmp_path: Path, gcs_emulator: str) -> None:
    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("dew-test")
    bucket.blob("models/lid.bin").upload_from_filename(str(corpus["model"]))
    clean(corpus["inputs"], tmp_path / "local", str(corpus["model"]))
    clean(corpus["inputs"], tmp_path / "remote", "gs://dew-test/models/lid.bin", "--no_auth")
    assert kept_records(tmp_path / "remote") == kept_records(tmp_path / "local")
    removed = json.loads((tmp_path / "remote" / "stats.json").read_text())["dropped"]["language"]
    assert removed == 2
