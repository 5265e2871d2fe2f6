"""The url rows an online reader fetches: HF datasets of url + caption, and the order each worker walks them in.

The sources are concatenated and shuffled once by the seed; the reader's share is every count-th row of
that order from index on, and each pass over the share is shuffled again. Both shuffles are the keyed
bijection of dew.data.order, so no worker holds a table of the order, whatever the corpus's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dew.data.extras import require
from dew.data.order import permute
from dew.data.providers.hf_options import HFOptions

URL_COLUMNS = ("url", "URL")  # img2dataset's parquet names it url, LAION's metadata URL
CAPTION_COLUMNS = ("caption", "text", "TEXT")
_CHUNK = 1024  # rows a worker reads from Arrow at a time


class UrlRows:
    """Url and caption of every row of several datasets.Dataset, end to end.

    A Dataset on Arrow files pickles as their paths, so the tables reach worker processes without being
    copied, and a gs:// source downloaded once by the parent is not downloaded again by each worker.
    """

    def __init__(self, tables: Sequence[Any], names: Sequence[str]) -> None:
        self.tables, self.names = list(tables), list(names)
        self.offsets = np.cumsum([0] + [len(t) for t in self.tables])
        self._arrow: list[Any] | None = None

    @classmethod
    def open(cls, sources: Sequence[str], options: HFOptions | None = None) -> UrlRows:
        """Each source's train split (a hub name or a save_to_disk directory, local or gs://)."""
        require("datasets", for_what="OnlineImages", extra="streaming")
        options = options or HFOptions()
        tables = []
        for source in sources:
            table = options.load(source, "train", streaming=False)
            columns = table.column_names
            url = next((c for c in URL_COLUMNS if c in columns), None)
            caption = next((c for c in CAPTION_COLUMNS if c in columns), None)
            if url is None or caption is None:
                raise ValueError(
                    f"{source} has no {'url' if url is None else 'caption'} column: a url source needs one of "
                    f"{URL_COLUMNS} and one of {CAPTION_COLUMNS}; its columns are {columns}"
                )
            table = table.select_columns([url, caption])
            if (url, caption) != ("url", "caption"):
                table = table.rename_columns({url: "url", caption: "caption"})
            tables.append(table)
        rows = cls(tables, sources)
        if not len(rows):
            raise ValueError(f"the url sources {list(sources)} hold no rows")
        return rows

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_arrow": None}

    def read(self, rows: np.ndarray) -> tuple[list[str], list[str]]:
        """(urls, captions) of global `rows`, in their order."""
        if self._arrow is None:
            self._arrow = [t.with_format("arrow") for t in self.tables]
        rows = np.asarray(rows, dtype=np.int64)
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        urls: list[str] = [""] * len(rows)
        captions: list[str] = [""] * len(rows)
        for source in np.unique(which).tolist():
            at = np.flatnonzero(which == source)
            taken = self._arrow[source][(rows[at] - self.offsets[source]).tolist()]
            texts = taken["caption"].to_pylist()
            for i, url, caption in zip(at.tolist(), taken["url"].to_pylist(), texts, strict=True):
                urls[i], captions[i] = url or "", "" if caption is None else str(caption)
        return urls, captions


def share_size(size: int, index: int, count: int) -> int:
    """The rows of `size` that share `index` of `count` holds: every count-th from index on."""
    return max(0, -(-(size - index) // count))


def walk(size: int, seed: int, index: int, count: int, worker: int, workers: int) -> Iterator[np.ndarray]:
    """Chunks of global rows, for ever: `worker`'s every workers-th place of each pass over the share.

    Pass p visits the share in its own shuffle, keyed by (seed, index, count, p), so a reader that runs
    for days keeps meeting its rows in new orders and its workers never fetch one row twice in a pass.
    """
    shard = share_size(size, index, count)
    if worker >= shard:
        raise ValueError(f"worker {worker} of {workers} has no rows in a share of {shard}")
    epoch = 0
    while True:
        for start in range(worker, shard, workers * _CHUNK):
            places = np.arange(start, min(shard, start + workers * _CHUNK), workers, dtype=np.int64)
            in_share = permute(places, shard, seed, index, count, epoch)
            yield permute(index + in_share * count, size, seed)
        epoch += 1
