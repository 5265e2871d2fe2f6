"""Captioned images: the pixel rules every image path shares, the packed-dict record they are stored in,
and the image specs (ImageDataset and its kinds, in the modules beside this one, found by the registry).

`pack_dict_of_byte_arrays` and `unpack_dict_of_byte_arrays` are the runtime's one record codec
(dew.data.codec), named here too because image records are where most callers meet them.

`dew.data.images.CC3M`, `.OxfordFlowers`, `.ImageDataset` and every other image kind are reached here,
where the dew.data reference documents them, through the registry, so this file keeps no list of kinds
and importing it imports none of their modules.
"""

import importlib.util
from typing import Any

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays

__all__ = ["pack_dict_of_byte_arrays", "unpack_dict_of_byte_arrays"]


def __getattr__(name: str) -> Any:
    # A submodule is the import system's to load: answering for it here would run the registry's
    # discovery from inside an image module's own `from dew.data.images import ...`.
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "ImageDataset":
        from dew.data.images.base import ImageDataset

        return ImageDataset
    kind = next((cls for cls in _kinds() if cls.__name__ == name), None)
    if kind is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return kind


def __dir__() -> list[str]:
    return sorted({*globals(), "ImageDataset", *(cls.__name__ for cls in _kinds())})


def _kinds() -> list[type]:
    from dew.data.registry import datasets

    return [cls for cls in datasets.values() if cls.__module__.startswith(f"{__name__}.")]
