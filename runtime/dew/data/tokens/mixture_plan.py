"""A mixture plan (mixture.json, written by `dew-preprocess plan-mixture`) read back as the mixture it describes.

The plan names each corpus with its weight and the fingerprint of what it held when planned, and the
token budget as windows of seq_len + 1. A run over the plan mixes the same corpora at the same weights
and runs for the budget, so the numbers the plan showed (windows, epochs per corpus) are the run's. A
corpus rewritten since is refused by name: its epochs, and the plan's reason to exist, no longer hold.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any, TypeGuard

from dew.data import formats, remote

MIXTURE_FORMAT = "dew.mixture/1"


def is_plan(path: object) -> TypeGuard[str]:
    """Whether a spec's path names a mixture plan file rather than a corpus (a directory or a data file)."""
    return isinstance(path, str) and path.endswith(".json")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MixturePlan:
    """What a run needs of a plan: per corpus its weight and fingerprint, and the budget in windows."""

    path: str
    weights: Mapping[str, float]
    fingerprints: Mapping[str, str]
    seq_len: int
    packing_bins: int
    split: str
    windows: int

    @classmethod
    def read(cls, path: str) -> MixturePlan:
        data = _load(path)
        if not isinstance(data, Mapping) or data.get("format") != MIXTURE_FORMAT:
            raise ValueError(f"{path} is not a {MIXTURE_FORMAT} plan; write one with dew-preprocess plan-mixture")
        try:
            corpora = data["corpora"]
            return cls(
                path=path,
                weights={c["path"]: float(c["weight"]) for c in corpora},
                fingerprints={c["path"]: str(c["fingerprint"]) for c in corpora},
                seq_len=int(data["seq_len"]),
                packing_bins=int(data["packing_bins"]),
                split=str(data["split"]),
                windows=int(data["windows"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: a malformed mixture plan ({error!r}); rewrite it with plan-mixture") from None

    def check(self, *, seq_len: int, packing_bins: int) -> None:
        """Refuses a run the plan did not plan: other windows, another split, or a corpus changed since."""
        if (seq_len, packing_bins) != (self.seq_len, self.packing_bins):
            raise ValueError(
                f"{self.path} plans windows of seq_len {self.seq_len}, packing_bins {self.packing_bins}; "
                f"the spec asks for {seq_len}, {packing_bins}. Use the plan's, or plan again with yours"
            )
        if self.split != "train":
            raise ValueError(f"{self.path} plans split {self.split!r}; PackedTokens trains on 'train'")
        changed = [
            path
            for path, fingerprint in self.fingerprints.items()
            if formats.read_meta(path, kind="tokens").fingerprint() != fingerprint
        ]
        if changed:
            raise ValueError(
                f"{self.path}: corpus {', '.join(changed)} changed since the plan was made (its fingerprint "
                "differs), so the plan's windows and epochs no longer describe it. Run plan-mixture again"
            )


def _load(path: str) -> Any:
    if remote.is_remote(path):
        return json.loads(remote.read_bytes(path))
    if not os.path.isfile(remote.resolve(path)):
        raise FileNotFoundError(f"no mixture plan at {path}")
    with open(remote.resolve(path)) as f:
        return json.load(f)
