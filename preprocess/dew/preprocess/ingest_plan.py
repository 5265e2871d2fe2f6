"""IngestPlan: what an ingest-urls run writes (the images job's plan) and how politely it fetches.

The images job's ImagesPlan decides every stored byte — rules, resize, encoding, fields, splits — and
an ingest run reuses it whole; its records add the url and the original width and height to the
image and caption. The config that names the directory (meta.json, the claim a rerun must match) holds
what decides which rows are written given the same responses: the ImagesPlan, rows per shard, and the
fetch limits that drop an image (body size, redirects, the robots opt-out). Timeout, retries, threads
and per-host limits are how hard to try, not what to keep; a rerun may change them, which is the point
of `--refetch_failed --timeout 60`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from dew.data.images.fetch import FetchPolicy
from dew.preprocess.write_images import ImagesPlan
from dew.preprocess.writing import Sharding

# The fields every record holds after image and caption, before the row's extra fields.
URL_FIELDS = ("url", "width", "height")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngestPlan:
    """images: what is stored (its `read.image_field` is the url column, `extras` start with URL_FIELDS).

    rows_per_shard: each split gets ceil(its input rows / rows_per_shard) shards, or train `images.num_shards`.
    timeout, retries, threads, policy: how each url is fetched (dew.data.images.fetch).
    """

    images: ImagesPlan
    rows_per_shard: int = 10_000
    timeout: float = 10.0
    retries: int = 1
    threads: int = 64
    policy: FetchPolicy = dataclasses.field(default_factory=FetchPolicy)

    def __post_init__(self) -> None:
        if self.images.extras[: len(URL_FIELDS)] != URL_FIELDS:
            raise ValueError(f"ingest records hold {URL_FIELDS} after image and caption, got {self.images.extras}")
        if self.images.dedupe:
            raise ValueError("ingest-urls writes each shard on its own and cannot dedupe across them")
        if self.rows_per_shard < 1 or self.threads < 1 or self.retries < 0 or not self.timeout > 0:
            raise ValueError("rows_per_shard and threads must be positive, retries non-negative, timeout positive")

    def config(self) -> dict[str, Any]:
        """meta.json's config: what decides the directory's bytes given the same responses."""
        config = self.images.config()
        # Image files, sidecars and shard sizing by bytes belong to the images job; ingest never uses them.
        for unused in ("caption_template", "sidecar", "shard_bytes", "dedupe"):
            config.pop(unused)
        config["url_field"] = config.pop("image_field")
        config.update(
            job="ingest-urls",
            rows_per_shard=self.rows_per_shard,
            max_bytes=self.policy.max_bytes,
            max_redirects=self.policy.max_redirects,
            respect_optout=self.policy.respect_optout,
        )
        return json.loads(json.dumps(config))

    def sharding(self) -> Sharding:
        """Each split's shard count from its input rows, so it never depends on what the fetches give."""
        images = self.images
        return Sharding(
            val_fraction=images.val_fraction,
            per_shard=self.rows_per_shard,
            num_shards=images.num_shards,
            flag="--rows_per_shard",
            unit="rows",
        )
