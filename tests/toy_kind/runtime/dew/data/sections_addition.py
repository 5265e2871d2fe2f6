"""Step 1 of docs/contributing.md: what meta.json says a pairs directory holds. Everything from the
marker on is appended to runtime/dew/data/sections.py, where defining the class registers it."""

import dataclasses
from typing import ClassVar

from dew.data.sections import Section

# --- appended to runtime/dew/data/sections.py ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class PairsSection(Section):
    KIND: ClassVar[str] = "pairs"
    READERS: ClassVar[str] = "ToyPairs"
    WRITER: ClassVar[str] = "dew-preprocess toy-pairs"
    fields: tuple[str, ...] = ("left", "right")
