"""OxfordFlowers: Oxford Flowers 102, prepared as a committed images directory, captioned from class names."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from dew.data import formats, locations
from dew.data.images.arrayrecord import ArrayRecordImages
from dew.data.images.base import Opened
from dew.data.records import BatchRecords, describe_source, read_batch
from dew.data.registry import datasets

# The 102 classes in the dataset's own order (imagelabels.mat numbers them 1..102; TFDS 0..101).
FLOWER_NAMES = (
    "pink primrose",
    "hard-leaved pocket orchid",
    "canterbury bells",
    "sweet pea",
    "english marigold",
    "tiger lily",
    "moon orchid",
    "bird of paradise",
    "monkshood",
    "globe thistle",
    "snapdragon",
    "colt's foot",
    "king protea",
    "spear thistle",
    "yellow iris",
    "globe-flower",
    "purple coneflower",
    "peruvian lily",
    "balloon flower",
    "giant white arum lily",
    "fire lily",
    "pincushion flower",
    "fritillary",
    "red ginger",
    "grape hyacinth",
    "corn poppy",
    "prince of wales feathers",
    "stemless gentian",
    "artichoke",
    "sweet william",
    "carnation",
    "garden phlox",
    "love in the mist",
    "mexican aster",
    "alpine sea holly",
    "ruby-lipped cattleya",
    "cape flower",
    "great masterwort",
    "siam tulip",
    "lenten rose",
    "barbeton daisy",
    "daffodil",
    "sword lily",
    "poinsettia",
    "bolero deep blue",
    "wallflower",
    "marigold",
    "buttercup",
    "oxeye daisy",
    "common dandelion",
    "petunia",
    "wild pansy",
    "primula",
    "sunflower",
    "pelargonium",
    "bishop of llandaff",
    "gaura",
    "geranium",
    "orange dahlia",
    "pink-yellow dahlia",
    "cautleya spicata",
    "japanese anemone",
    "black-eyed susan",
    "silverbush",
    "californian poppy",
    "osteospermum",
    "spring crocus",
    "bearded iris",
    "windflower",
    "tree poppy",
    "gazania",
    "azalea",
    "water lily",
    "rose",
    "thorn apple",
    "morning glory",
    "passion flower",
    "lotus",
    "toad lily",
    "anthurium",
    "frangipani",
    "clematis",
    "hibiscus",
    "columbine",
    "desert-rose",
    "tree mallow",
    "magnolia",
    "cyclamen",
    "watercress",
    "canna lily",
    "hippeastrum",
    "bee balm",
    "ball moss",
    "foxglove",
    "bougainvillea",
    "camellia",
    "mallow",
    "mexican petunia",
    "bromelia",
    "blanket flower",
    "trumpet creeper",
    "blackberry lily",
)
# Where prepared datasets live when a spec is given no path: $DEW_DATA_DIR, else ~/dew_datasets (as TFDS
# keeps ~/tensorflow_datasets). Not under the dew cache ($DEW_CACHE_DIR), whose budget evicts files.
DATA_DIR_ENV = "DEW_DATA_DIR"
FLOWERS_DIRECTORY = "oxford_flowers102"


def data_dir() -> str:
    """The directory prepared datasets are looked for in: $DEW_DATA_DIR, or ~/dew_datasets."""
    return os.path.expanduser(os.environ.get(DATA_DIR_ENV) or os.path.join("~", "dew_datasets"))


_BY_NAME = {name: name for name in FLOWER_NAMES} | {name.replace(" ", "_"): name for name in FLOWER_NAMES}


def flower_name(label: bytes, where: str) -> str:
    """The class a record's `label` names: a class number 1..102 (the folder names of the usual
    ImageFolder copy, and imagelabels.mat's numbering) or the class name itself."""
    text = label.decode("utf-8", errors="replace").strip()
    if text.isdigit():
        number = int(text)
        if not 1 <= number <= len(FLOWER_NAMES):
            raise ValueError(f"{where}: label {number} is not an Oxford Flowers class number 1..102")
        return FLOWER_NAMES[number - 1]
    name = _BY_NAME.get(text.lower())
    if name is None:
        raise ValueError(f"{where}: label {text!r} is neither a class number 1..102 nor an Oxford Flowers class name")
    return name


class Captioned(BatchRecords):
    """A source of labelled flower records whose caption is written from each record's class."""

    def __init__(self, source: Any, template: str) -> None:
        self.source, self.template = source, template

    def __len__(self) -> int:
        return len(self.source)

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        batch = dict(read_batch(self.source, indices))
        where = batch.get("__where__") or [f"record {i}" for i in np.asarray(indices).tolist()]
        names = [flower_name(label, at) for label, at in zip(batch.pop("label"), where, strict=True)]
        batch["caption"] = [self.template.format(name=name) for name in names]
        return batch

    def describe(self) -> dict[str, Any]:
        return {"captions": self.template, "source": describe_source(self.source)}


@datasets("oxford_flowers")
@dataclasses.dataclass(frozen=True)
class OxfordFlowers(ArrayRecordImages):
    """Reads prepared Oxford Flowers 102 ArrayRecords, captioned from their class names.

    Prepared means a committed images directory (dew.images/1) whose records carry a `label` field:
    what the images job writes over an ImageFolder copy of the dataset, one folder a class, named by
    class number (1..102) or by class name. The caption is caption_template with {name} the class
    name, so the 8189 photographs become 102 captions a text encoder can tell apart. path is that
    directory, by default $DEW_DATA_DIR/oxford_flowers102 (DEW_DATA_DIR defaults to ~/dew_datasets);
    the dataset's own captions, if a copy carries any, are replaced.

    Args:
        path: The prepared directory; None reads $DEW_DATA_DIR/oxford_flowers102.
        shards: As ArrayRecordImages has it.
        split: The split to train on.
        caption_template: The caption, with {name} the class name.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.OxfordFlowers(path="flowers102", image_size=64)
        >>> spec.caption_template.format(name="tiger lily")
        'a photo of a tiger lily, a type of flower'
    """

    caption_template: str = "a photo of a {name}, a type of flower"

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            self.caption_template.format(name="rose")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"OxfordFlowers.caption_template takes only {{name}}: {error}") from None

    def root(self) -> str:
        """path, or the default directory; either must hold a committed images directory."""
        path = self.path or os.path.join(data_dir(), FLOWERS_DIRECTORY)
        if not locations.exists(os.path.join(path, formats.META)):
            default = f" (path is unset: ${DATA_DIR_ENV}/{FLOWERS_DIRECTORY}, ~/dew_datasets by default)"
            looked = "" if self.path else default
            raise FileNotFoundError(
                f"no prepared Oxford Flowers 102 at {path}{looked}: it holds no committed {formats.META}. Prepare it "
                "from an ImageFolder copy of the dataset (one folder a class, named 1..102 or by class name) with\n"
                f"    dew-preprocess images --input <the ImageFolder copy> --output {path} --val_fraction 0.05\n"
                "or give OxfordFlowers(path=...) a directory that job wrote"
            )
        return path

    def open(self, batch: int) -> Opened:
        opened = super().open(batch)
        for source in (opened.train, opened.val):
            if source is not None and "label" not in _extras(source):
                raise ValueError(f"{self.root()}: its records carry no `label` field, so no class names caption them")
        return Opened(
            train=self.captioned(opened.train),
            val=None if opened.val is None else self.captioned(opened.val),
            captioned=True,
        )

    def captioned(self, source: Any) -> Captioned:
        return Captioned(_uncaptioned(source), self.caption_template)


def _extras(source: Any) -> tuple[str, ...]:
    inner = getattr(source, "source", source)
    return inner.fields.extras


def _uncaptioned(source: Any) -> Any:
    """The source with any stored caption left out, and the token ids stored for it: the class name
    writes the caption instead, and ids of the caption it replaces would describe another text."""
    inner = getattr(source, "source", source)
    inner.fields = dataclasses.replace(inner.fields, caption=None, token_ids=False)
    return source
