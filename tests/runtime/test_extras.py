"""A missing optional stack is named with the extra that installs it, at the sites that import one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dew.data import HFOptions, HFTokenizer, remote, rows
from dew.data.extras import EXTRAS, extra_of, require
from dew.data.providers.tfds import TFDSRecords

ROOT = Path(__file__).resolve().parents[2]


def hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Makes `module` and its loaded submodules unimportable, as on a host without the extra."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")] + [module]:
        monkeypatch.setitem(sys.modules, name, None)


def prepared_tfds(directory: Path) -> TFDSRecords:
    """A split whose metadata is in place, so that reading it is the first thing to need tensorflow_datasets."""
    (directory / "dataset_info.json").write_text(json.dumps({"splits": [{"name": "train"}]}))
    return TFDSRecords(str(directory), "dew_tiny", "train")


def test_every_extra_named_is_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(declared)
    assert extra_of("pyarrow.parquet") == "parquet" and extra_of("google.cloud.storage") == "gcs"
    with pytest.raises(KeyError, match="in no dew extra"):
        extra_of("numpy")


def test_a_missing_stack_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "pyarrow")
    message = "PackedTokens over parquet needs pyarrow: pip install 'dew[parquet]'"
    with pytest.raises(ImportError, match=re.escape(message)):
        require("pyarrow.parquet", for_what="PackedTokens over parquet")


def test_online_images_name_the_streaming_extra_which_installs_what_they_need(monkeypatch: pytest.MonkeyPatch) -> None:
    from dew.data.images.online_rows import UrlRows

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"datasets", "pillow", "opencv-python-headless"} <= {d.split(">")[0] for d in declared["streaming"]}
    assert "streaming" in declared["all"][0]
    hide(monkeypatch, "datasets")
    with pytest.raises(ImportError, match=re.escape("OnlineImages needs datasets: pip install 'dew[streaming]'")):
        UrlRows.open(["urls/cc3m"])


def test_a_stack_missing_a_dependency_of_its_own_keeps_its_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "broken_stack.py").write_text("import no_such_dependency_of_broken_stack\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(EXTRAS, "broken_stack", "parquet")
    with pytest.raises(ModuleNotFoundError, match="No module named 'no_such_dependency_of_broken_stack'"):
        require("broken_stack", for_what="a test")


def test_an_installed_stack_is_returned() -> None:
    assert require("pyarrow.parquet", for_what="parquet").__name__ == "pyarrow.parquet"


@pytest.mark.parametrize(
    ("module", "extra", "use"),
    [
        ("pyarrow", "parquet", lambda tmp: rows.read_table(str(tmp / "x.parquet"), ["tokens"])),
        ("transformers", "hf", lambda tmp: HFTokenizer("gpt2").tokenizer),
        ("datasets", "hf", lambda tmp: HFOptions().load("json", "train", streaming=False)),
        ("google", "gcs", lambda tmp: remote.exists("gs://bucket/x")),
        ("tensorflow_datasets", "tfds", lambda tmp: prepared_tfds(tmp).open()),
    ],
)
def test_each_site_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module, extra, use) -> None:
    # Real Cloud Storage, not the emulator an earlier test may have pointed the session at: only real
    # credentials need google.auth, which the gcs extra installs.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    hide(monkeypatch, module)
    with pytest.raises(ImportError, match=re.escape(f"needs {module}: pip install 'dew[{extra}]'")):
        use(tmp_path)


def test_loading_transformers_through_dew_does_not_advise_installing_pytorch() -> None:
    """dew loads only tokenizers and processors from transformers; its import-time advice about a missing
    PyTorch was printed by every job and every worker."""
    code = (
        "from dew.data.extras import require; require('transformers', for_what='a test'); import os; "
        "print('TRANSFORMERS_NO_ADVISORY_WARNINGS' in os.environ)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "PyTorch" not in done.stderr, done.stderr
    assert done.stdout.strip() == "False"  # the user's own environment is left as it was


def test_a_stack_another_thread_is_still_importing_is_waited_for(tmp_path: Path, monkeypatch) -> None:
    """Decode threads ask for cv2 at once on a stream's first batch: one that found it in sys.modules
    while another thread was still importing it got the module half made ("partially initialized
    module 'cv2' has no attribute 'INTER_AREA'"). It waits for the import, as import_module does."""
    import threading
    import time

    (tmp_path / "slow_stack.py").write_text("import time\ntime.sleep(0.5)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_stack", raising=False)
    first = threading.Thread(target=require, args=("slow_stack",), kwargs={"for_what": "a test", "extra": "x"})
    first.start()
    deadline = time.monotonic() + 10
    while "slow_stack" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.001)
    assert "slow_stack" in sys.modules, "the first thread began importing it"
    second = require("slow_stack", for_what="a test", extra="x")
    whole = getattr(second, "DONE", False)  # now: the module object is the same one, finished later
    first.join(10)
    assert whole, "the second thread got the module before its import ended"
