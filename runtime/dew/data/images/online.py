"""OnlineImages and CombinedOnline: images fetched by url as they are read, an endless stream with no position.

What a share yields is whichever fetches succeed first, so two reads of one share differ: the stream
has no get_state/set_state (a run over it trains with checkpoint_every=None), and a partition whose
shares have several readers is refused. docs/online-images.md says what is counted and how it stops.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from dew.data import validate
from dew.data.dataset import Dataset
from dew.data.images.batches import Captions
from dew.data.images.fetch import FetchPolicy
from dew.data.images.online_pool import FETCHED, FetchPool, Plan
from dew.data.images.online_rows import UrlRows, share_size
from dew.data.loading import Loading
from dew.data.partition import DataPartition
from dew.data.registry import datasets
from dew.data.spec import DatasetSpec, Tokenize

log = logging.getLogger(__name__)

WARN_BELOW = 0.2  # a rolling success rate under this is a run fetching mostly nothing: say so
WARN_WINDOW = 500  # the finished fetches that rate is measured over
_TICK = 0.25  # how often a reader waiting for a batch looks at stop requests and the success rate

BUCKET = "gs://dew-datasets-regional"


@dataclasses.dataclass(frozen=True)
class FetchStats:
    """Rows fetched and dropped by reason since the stream opened."""

    counts: Mapping[str, int]

    @property
    def fetched(self) -> int:
        return self.counts[FETCHED]

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    @property
    def dropped(self) -> int:
        return self.finished - self.fetched

    @property
    def success_rate(self) -> float | None:
        """fetched / finished, None before any fetch finished."""
        return self.fetched / self.finished if self.finished else None


class OnlineStream:
    """One reader's batches: `image` uint8 [B, S, S, 3], `caption`, and `text` when tokenize= was given.

    Iterate it, read `stats()` at any time, `request_stop()` from any thread to end the iteration, and
    `close()` (or leave the with block) to stop the fetch pool: no process or thread of it remains.
    """

    def __init__(self, pool: FetchPool, captions: Captions) -> None:
        self._pool, self._captions = pool, captions
        self._stop_requested = False
        self._closed = False
        self._seen: collections.deque[tuple[int, int]] = collections.deque([(0, 0)])
        self._warned = False

    def __iter__(self) -> OnlineStream:
        return self

    def __next__(self) -> dict[str, Any]:
        while not self._stop_requested and not self._closed:
            got = self._pool.get(_TICK)
            self._watch()
            if got is not None:
                images, captions = got
                batch: dict[str, Any] = {"image": images, "caption": captions}
                text = self._captions.text(batch)
                if text is not None:
                    batch["text"] = text
                return batch
        raise StopIteration

    def stats(self) -> FetchStats:
        return FetchStats(self._pool.counts())

    def request_stop(self) -> None:
        """Ends the iteration at the next batch boundary; thread-safe, and close() is still the caller's."""
        self._stop_requested = True
        self._pool.stop()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> OnlineStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _watch(self) -> None:
        """Warns once when the success rate over the last WARN_WINDOW fetches falls under WARN_BELOW."""
        stats = self.stats()
        now = (stats.finished, stats.fetched)
        while len(self._seen) > 1 and now[0] - self._seen[1][0] >= WARN_WINDOW:
            self._seen.popleft()
        if now[0] - self._seen[0][0] >= WARN_WINDOW:
            rate = (now[1] - self._seen[0][1]) / (now[0] - self._seen[0][0])
            if rate < WARN_BELOW and not self._warned:
                drops = {k: v for k, v in stats.counts.items() if k != FETCHED and v}
                log.warning(
                    "online images: only %.0f%% of the last %d fetches gave an image (drops so far: %s); "
                    "check the sources' urls, the network and the politeness settings",
                    100 * rate,
                    now[0] - self._seen[0][0],
                    drops,
                )
            self._warned = rate < WARN_BELOW
        if now != self._seen[-1]:
            self._seen.append(now)


@dataclasses.dataclass(frozen=True)
class OnlineReader:
    """Opens one share's stream: the Reader of an online Dataset."""

    spec: OnlineImages
    rows: UrlRows
    batch: int
    captions: Captions

    def __call__(self, partition: DataPartition | None = None) -> OnlineStream:
        partition = partition or DataPartition()
        if partition.readers > 1:
            raise ValueError(
                f"{type(self.spec).__name__} fetches over the network and drops what fails, so no two reads of "
                f"one share agree: a partition with readers={partition.readers} is refused; read on the "
                "share's first reader and hand its batch to the others (dew.data.distributed.first_reader_batch)"
            )
        rows = share_size(len(self.rows), partition.index, partition.count)
        if rows == 0:
            raise ValueError(f"share {partition.index} of {partition.count} holds none of {len(self.rows)} urls")
        spec = self.spec
        plan = Plan(
            rows=self.rows,
            seed=spec.seed,
            index=partition.index,
            count=partition.count,
            batch=partition.rows(self.batch),
            image_size=spec.image_size,
            min_image_size=spec.min_image_size,
            timeout=float(spec.timeout),
            retries=spec.retries,
            policy=spec.fetch,
            convert_to_rgb=spec.convert_to_rgb,
        )
        return OnlineStream(FetchPool(plan, spec.loading, rows), self.captions)


def _online_loading() -> Loading:
    return Loading(workers=16, threads=512, worker_buffer=20)


@datasets("online_images")
@dataclasses.dataclass(frozen=True)
class OnlineImages(DatasetSpec):
    """Fetches images by url as they are read, an endless stream.

    sources are hub datasets or save_to_disk directories (local or gs://) whose rows carry a url and a
    caption. They are concatenated, shuffled once by the seed and cut into the reader's share; each
    reader walks its share for ever, shuffled afresh each pass. A url is dropped and counted when it
    gives no image (fetch.REASONS) or when the image is not RGB, under min_image_size on its shorter
    side, more than 2.4 times as long as wide, or one flat colour (pixels.REASONS); convert_to_rgb=True
    converts grey, palette, alpha and CMYK images instead of dropping them as not_rgb. Kept images are
    scaled to image_size on the shorter side and centre-cropped. loading is the fetch pool's: workers
    processes of threads fetches each, worker_buffer batches ahead (online_pool.fit fits them to the
    host); fetch holds the politeness settings. Needs the hf and images extras.

    Args:
        sources: Hub datasets or save_to_disk directories whose rows hold a url and a caption.
        image_size: The side of the square images, in pixels.
        min_image_size: Images whose shorter side is smaller are dropped and counted.
        timeout: Seconds one fetch may take.
        retries: Further tries of a fetch that failed for a reason worth retrying.
        seed: Shuffles the urls and keys each pass's reshuffle.
        loading: The fetch pool's processes, threads and batches ahead.
        fetch: Politeness: fetches per host, redirects, bytes, waits and opt-outs (FetchPolicy).
        convert_to_rgb: Convert grey, palette, alpha and CMYK images instead of dropping them.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.OnlineImages(sources=("gs://bucket/urls",), image_size=128, retries=1)
        >>> spec.sources, spec.min_image_size
        (('gs://bucket/urls',), 128)
    """

    sources: tuple[str, ...] = ()
    image_size: int = 256
    min_image_size: int = 128
    timeout: int = 15
    retries: int = 3
    loading: Loading = dataclasses.field(default_factory=_online_loading, kw_only=True)
    fetch: FetchPolicy = dataclasses.field(default_factory=FetchPolicy, kw_only=True)
    convert_to_rgb: bool = dataclasses.field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        if isinstance(self.sources, str):
            raise TypeError(f"{type(self).__name__}.sources is a list of datasets, got the one string {self.sources!r}")
        object.__setattr__(self, "sources", tuple(self.sources))
        validate.fields(self, positive=("image_size", "timeout"), non_negative=("min_image_size", "retries"))

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        if not self.sources:
            raise ValueError(f"{type(self).__name__}.sources is empty: name the url datasets to fetch")
        validate.positive_int("batch", batch)
        reader = OnlineReader(self, UrlRows.open(self.sources), batch, Captions(tokenize=tokenize))
        return Dataset(train=reader, val=None, records=None, batch=batch)


DEFAULT_SOURCES = tuple(
    f"{BUCKET}/datasets/{name}"
    for name in (
        "laion-aesthetics-12m+mscoco-2017",
        "coyo700m-aesthetic-5.4_25M",
        "leonardo-liked-1.8m",
        "leonardo-liked-1.8m",
        "leonardo-liked-1.8m",
        "cc12m",
        "playground-liked",
        "leonardo-liked-1.8m",
        "leonardo-liked-1.8m",
        "cc3m",
        "cc3m",
        "laion2B-en-aesthetic-4.2_37M",
    )
)


@datasets("combined_online")
@dataclasses.dataclass(frozen=True)
class CombinedOnline(OnlineImages):
    """Every url dataset of the dew-datasets-regional bucket; the liked sets are listed several times over,
    which weights them up. `CombinedOnline.under(root)` reads the same list from a copy under another root.

    Args:
        sources: The bucket's url datasets; the other fields are OnlineImages's.

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.CombinedOnline.under("/mnt/regional", image_size=128)
        >>> all(source.startswith("/mnt/regional/") for source in spec.sources)
        True
    """

    sources: tuple[str, ...] = DEFAULT_SOURCES

    @classmethod
    def under(cls, root: str, **fields: Any) -> CombinedOnline:
        """The default sources re-rooted from the bucket to `root` (a bucket, a mount, a local copy)."""
        moved = tuple(root.rstrip("/") + source[len(BUCKET) :] for source in DEFAULT_SOURCES)
        return cls(sources=moved, **fields)
