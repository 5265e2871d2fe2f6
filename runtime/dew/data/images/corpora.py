"""The named image corpora of the msml612 bucket: raw ArrayRecord shard sets under one root.

Each corpus is a shard set `<root>/arrayrecord2/<name>/NNNNN.array_record`, as img2dataset and
FlaxDiff's converters wrote them. Where the shard count is known, a root missing a shard is refused
by its name, except a shard known to be missing from the bucket itself (CC3M's 00039). The combined
corpora read their sets as a weighted mixture (dew.data.mixture), so a combined run's position is
one global record count and resumes like any mixture.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar

from dew.data.images import image_records
from dew.data.images.base import ImageDataset, Opened
from dew.data.images.image_records import ImageRecords
from dew.data.mixture import Corpus
from dew.data.registry import datasets

BUCKET = "gs://msml612-diffusion-data"


@dataclasses.dataclass(frozen=True)
class ShardSet:
    """One shard set: its directory under the root, how many shards it has, which are known missing."""

    directory: str
    shards: int | None = None
    missing: tuple[int, ...] = ()

    def files(self, root: str) -> list[str]:
        """The set's shard files under `root`, refusing a root that lacks an expected shard."""
        directory = os.path.join(root, self.directory)
        files = image_records.raw_files(directory, asked=True)
        if self.shards is None:
            return files
        expected = [f"{i:05d}.array_record" for i in range(self.shards) if i not in self.missing]
        present = {os.path.basename(f) for f in files}
        absent = [name for name in expected if name not in present]
        if absent:
            raise FileNotFoundError(
                f"{directory} lacks shard {absent[0]}"
                + (f" and {len(absent) - 1} more" if len(absent) > 1 else "")
                + f" of its {self.shards}; copy the set whole, or read what is there with ArrayRecordImages"
            )
        return [os.path.join(directory, name) for name in expected]

    def records(self, root: str) -> ImageRecords:
        return image_records.raw(os.path.join(root, self.directory), self.files(root))


LAION12M_COCO = ShardSet("arrayrecord2/laion12m_coco", 228)
LAION2B_AESTHETIC = ShardSet("arrayrecord2/laion2B-en-aesthetic", 569)
DIFFUSIONDB = ShardSet("arrayrecord2/diffusiondb", 31)
CC3M_SET = ShardSet("arrayrecord2/cc3m", 50, missing=(39,))
CC12M_SET = ShardSet("arrayrecord2/cc12m")


@dataclasses.dataclass(frozen=True)
class ImageCorpus(ImageDataset):
    """A named corpus: its shard sets (SETS) under root, a gs:// bucket or a local copy or mount of it.

    One set is read as one corpus; several are mixed at `weights`, one a set in SETS's order, or, when
    weights is empty, at their record counts, which reads each record as often as one corpus of all
    of them would.

    Args:
        root: Where the shard sets lie: the bucket, or a local copy or mount of it.
        weights: One weight per set in SETS's order; empty mixes the sets at their record counts.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.CC3M(root="/mnt/msml612", image_size=128)
        >>> spec.root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = ()

    root: str = BUCKET
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weights and len(self.weights) != len(self.SETS):
            raise ValueError(
                f"{type(self).__name__}.weights gives {len(self.weights)} weights for {len(self.SETS)} shard sets"
            )

    def open(self, batch: int) -> Opened:
        sets = [s.records(self.root) for s in self.SETS]
        if len(sets) == 1:
            train, val = self.held_out(sets[0], batch, where=os.path.join(self.root, self.SETS[0].directory))
            return Opened(train=train, val=val, captioned=sets[0].captioned)
        weights = self.weights or tuple(float(len(s)) for s in sets)
        corpora, held = [], []
        shared = _shared_extras(sets)
        for shard_set, records, weight in zip(self.SETS, sets, weights, strict=True):
            # Every set keeps only the fields all of them share: a batch holds one set of keys.
            records.fields = dataclasses.replace(records.fields, extras=shared)
            train, val = self.held_out(records, batch, where=os.path.join(self.root, shard_set.directory))
            corpora.append(Corpus(shard_set.directory, train, weight))
            if val is not None:
                held.append(Corpus(shard_set.directory, val, weight))
        captioned = all(s.captioned for s in sets)
        if not captioned:
            raise ValueError(f"{type(self).__name__}: some of {self.root}'s shard sets carry no caption field")
        return Opened(corpora=corpora, val_corpora=held, captioned=True)


def _shared_extras(sets: list[image_records.ImageRecords]) -> tuple[str, ...]:
    first = sets[0].fields.extras
    return tuple(name for name in first if all(name in s.fields.extras for s in sets[1:]))


@datasets("cc3m")
@dataclasses.dataclass(frozen=True)
class CC3M(ImageCorpus):
    """Conceptual Captions 3M: 50 shards, 37 GiB, about 3.3M samples (shard 00039 missing).

    Examples:
        >>> from dew.data import datasets
        >>> datasets.CC3M(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (CC3M_SET,)


@datasets("cc12m")
@dataclasses.dataclass(frozen=True)
class CC12M(ImageCorpus):
    """Conceptual Captions 12M, in the arrayrecord2 layout of the msml612 bucket (shard count not recorded).

    Examples:
        >>> from dew.data import datasets
        >>> datasets.CC12M(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (CC12M_SET,)


@datasets("diffusiondb")
@dataclasses.dataclass(frozen=True)
class DiffusionDB(ImageCorpus):
    """DiffusionDB (Stable Diffusion images and their prompts): 31 shards, 60 GiB, 1.97M samples.

    Examples:
        >>> from dew.data import datasets
        >>> datasets.DiffusionDB(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (DIFFUSIONDB,)


@datasets("laion2b_aesthetic")
@dataclasses.dataclass(frozen=True)
class Laion2bAesthetic(ImageCorpus):
    """The laion-2B-en aesthetic >= 4.2 subset: 569 shards, 550 GiB, larger than Laion12mCoco but noisier.

    Examples:
        >>> from dew.data import datasets
        >>> datasets.Laion2bAesthetic(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (LAION2B_AESTHETIC,)


@datasets("laion12m_coco")
@dataclasses.dataclass(frozen=True)
class Laion12mCoco(ImageCorpus):
    """laion-aesthetics-12M (score >= 6) plus MS-COCO 2017: 228 shards, 236 GiB, about 15M samples.

    Examples:
        >>> from dew.data import datasets
        >>> datasets.Laion12mCoco(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (LAION12M_COCO,)


@datasets("combined_msml612")
@dataclasses.dataclass(frozen=True)
class CombinedMsml612(ImageCorpus):
    """The four msml612 corpora together (Laion12mCoco, Laion2bAesthetic, DiffusionDB, CC3M): about 883 GiB
    and 20M samples.

    Examples:
        >>> from dew.data import datasets
        >>> datasets.CombinedMsml612(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (LAION12M_COCO, LAION2B_AESTHETIC, DIFFUSIONDB, CC3M_SET)


@datasets("combined_30m")
@dataclasses.dataclass(frozen=True)
class Combined30M(ImageCorpus):
    """Four arrayrecord2 shard sets of the msml612 bucket, about 30M samples: laion-aesthetics-12M with
    MS-COCO 2017, CC12M, an aesthetic COYO subset, and playground + leonardo (×4) + CC3M.

    Examples:
        >>> from dew.data import datasets
        >>> datasets.Combined30M(root="/mnt/msml612", image_size=128).root
        '/mnt/msml612'
    """

    SETS: ClassVar[tuple[ShardSet, ...]] = (
        ShardSet("arrayrecord2/laion-aesthetics-12m+mscoco-2017"),
        CC12M_SET,
        ShardSet("arrayrecord2/aestheticCoyo_0.26_clip_5.5aesthetic_256plus"),
        ShardSet("arrayrecord2/playground+leonardo_x4+cc3m.parquet"),
    )
