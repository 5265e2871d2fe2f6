"""Optional stacks, each behind the dew extra that installs it.

A spec imports its stack when it is first read, so a host without that stack only learns of it then.
`require` makes that moment say what to install instead of a bare ModuleNotFoundError. Which extra
installs which module is EXTRAS, generated from pyproject.toml (dew.data.extra_modules).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

from dew.data.extra_modules import EXTRAS


def extra_of(module: str) -> str:
    """The extra that installs `module` (or the package it is part of)."""
    for name, extra in EXTRAS.items():
        if module == name or module.startswith(name + "."):
            return extra
    raise KeyError(f"{module!r} is in no dew extra; dew.data.extra_modules lists the optional stacks")


def require(module: str, *, for_what: str, extra: str | None = None) -> ModuleType:
    """`module`, imported; when its stack is not installed, an ImportError naming the extra to install.

    `for_what` is what needs it, as the user knows it ("PackedTokens over parquet"). `extra` names a
    narrower extra that also installs the module, for a feature that has one of its own (OnlineImages:
    `streaming`); by default the module's own extra. A module that is installed but fails on a missing
    dependency of its own keeps its own error: that is not ours to name.
    """
    # Asked on every image decoded, where the lookups below cost ~80 µs: a module already imported is
    # returned at once, but not one another thread is still importing (its spec says so), which
    # import_module waits for and a bare lookup would hand out half made.
    loaded = sys.modules.get(module)
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return loaded
    extra = extra or extra_of(module)
    try:
        with _quiet_import(module):
            return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
            raise
        raise ModuleNotFoundError(
            f"{for_what} needs {module.split('.')[0]}: pip install 'dew[{extra}]'", name=error.name
        ) from error


@contextlib.contextmanager
def _quiet_import(module: str) -> Iterator[None]:
    """Keeps transformers from advising, as it is imported, that PyTorch is missing: dew only loads its
    tokenizers and processors, which need no PyTorch, and every job and worker printed the line."""
    if module.split(".")[0] != "transformers" or "TRANSFORMERS_NO_ADVISORY_WARNINGS" in os.environ:
        yield
        return
    os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    try:
        yield
    finally:
        del os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"]
