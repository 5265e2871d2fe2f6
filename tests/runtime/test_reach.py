"""An unreachable bucket or hub fails in one line naming what was asked for and the network's answer,
not after a minute of a library's retries in an aiohttp or transformers traceback. The endpoints are a
closed port on 127.0.0.1, given as the storage emulator, the hub endpoint or a proxy."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from dew.data import reach


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the with ends: nothing listens there


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("STORAGE_EMULATOR_HOST", "HF_HUB_OFFLINE")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120, check=False
    )


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    for library in ("aiohttp", "requests.exceptions", "urllib3", "huggingface_hub", "During handling"):
        assert library not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_a_bucket_that_does_not_answer_is_named_with_the_refusal(tmp_path) -> None:
    port = closed_port()
    done = run(
        "from dew.data import PackedTokens; PackedTokens(path='gs://dew-b/corpora/wiki', seq_len=8).load(batch=2)",
        STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}",
        DEW_CACHE_DIR=str(tmp_path),
    )
    line = last_line(done)
    assert line.startswith("dew.data.reach.Unreachable: gs://dew-b/corpora/wiki"), line
    assert line.endswith(f"Cloud Storage: cannot reach 127.0.0.1:{port}: the connection was refused"), line


def test_an_online_images_gs_source_keeps_its_scheme_in_the_message(tmp_path) -> None:
    port = closed_port()
    done = run(
        "from dew.data.images.online_rows import UrlRows; UrlRows.open(['gs://dew-datasets-regional/urls/cc3m'])",
        STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path),
    )
    line = last_line(done)
    assert "gs://dew-datasets-regional/urls/cc3m: Cloud Storage: cannot reach" in line and "gs:/dew" not in line


def test_a_hub_name_that_cannot_be_fetched_says_so_in_one_line(tmp_path) -> None:
    port = closed_port()
    done = run(
        "from dew.data import AutoTextTokenizer; AutoTextTokenizer(modelname='nobody/no-such-tokenizer')(['x'])",
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path),
    )
    assert last_line(done) == (
        "dew.data.reach.Unreachable: tokenizer 'nobody/no-such-tokenizer' is no local directory, and the hub: "
        f"cannot reach 127.0.0.1:{port}: the connection was refused; it is not in the local cache either"
    )


def test_a_closed_proxy_is_the_endpoint_that_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert reach.address("https://huggingface.co") == ("127.0.0.1", port)
    with pytest.raises(reach.Unreachable, match=f"^a test: cannot reach 127.0.0.1:{port}: the connection was refused$"):
        reach.ensure("https://huggingface.co", what="a test")


def test_an_endpoint_that_answers_is_asked_once() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        reach.ensure(url, what="a test")
        assert ("127.0.0.1", server.getsockname()[1]) in reach._reached
    reach.ensure(url, what="a test")  # closed now, and not asked again: later failures meet the retries


def test_a_job_whose_tokenizer_is_behind_an_unreachable_hub_says_one_line(tmp_path) -> None:
    port = closed_port()
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    argv = ["tokenize", "--input", str(tmp_path / "a.jsonl"), "--output", str(tmp_path / "out")]
    argv += ["--tokenizer", "org/tok"]
    done = run(
        f"import sys; from dew.pipelines.cli import main; sys.exit(main({argv!r}))",
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path / "hf"),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "dew-preprocess tokenize: tokenizer 'org/tok' is no local directory, and the hub: "
        f"cannot reach 127.0.0.1:{port}: the connection was refused; it is not in the local cache either"
    )


def test_a_hub_dataset_behind_an_unreachable_hub_is_named_with_the_way_to_its_cache(tmp_path) -> None:
    port = closed_port()
    done = run(
        "from dew.data import HFOptions; HFOptions().load('nobody/no-such-urls', 'train', streaming=False)",
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path),
    )
    assert last_line(done) == (
        "dew.data.reach.Unreachable: hf dataset 'nobody/no-such-urls' is no local path, and the hub "
        f"(HF_DATASETS_OFFLINE=1 reads a cached copy): cannot reach 127.0.0.1:{port}: the connection was refused"
    )


def test_the_reference_pages_bare_hub_name_behind_an_unreachable_hub_says_one_line(tmp_path) -> None:
    # load("hf/wiki", ...) is the page's own example: a name without an org is a hub dataset too, unless
    # it is one of the library's packaged builders (json, parquet, ...), which need no hub at all.
    port = closed_port()
    done = run(
        "from dew.data import HFOptions, load; load('hf/wiki', batch=32, options=HFOptions(config='20231101.en'))",
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path),
    )
    assert last_line(done) == (
        "dew.data.reach.Unreachable: hf dataset 'wiki' is no local path, and the hub "
        f"(HF_DATASETS_OFFLINE=1 reads a cached copy): cannot reach 127.0.0.1:{port}: the connection was refused"
    )


def test_a_packaged_builder_name_never_asks_the_hub(tmp_path) -> None:
    port = closed_port()
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    done = run(
        "from dew.data import HFOptions; "
        f"print(len(HFOptions(data_files={str(tmp_path / 'a.jsonl')!r}).load('json', 'train', streaming=False)))",
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(tmp_path / "hf"),
    )
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
