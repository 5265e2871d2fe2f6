"""The flags of every job that writes images (images, ingest-urls): the pixel rules and the stored form.

Their choices are the images section's own (dew.data.sections), so a flag offers what the contract allows.
"""

from __future__ import annotations

import argparse
from typing import Any

from dew.data.images import pixels
from dew.data.sections import IMAGE_ENCODINGS, RESIZE_POLICIES


def add(p: argparse.ArgumentParser) -> None:
    """The pixel rules and the stored form, shared by every job that writes images (images, ingest-urls)."""
    p.add_argument("--min_size", type=int, default=128, help="images with a shorter side are dropped as too_small")
    p.add_argument("--max_aspect", type=float, default=2.4, help="longer side over shorter beyond this is bad_aspect")
    p.add_argument("--max_pixels", type=int, default=pixels.MAX_PIXELS, help="more pixels is too_many_pixels")
    p.add_argument("--resize", default="center_crop", choices=RESIZE_POLICIES, help="resize")
    p.add_argument("--size", type=int, default=256, help="the shorter side, or the square's side, in pixels")
    p.add_argument("--encoding", default="jpeg", choices=IMAGE_ENCODINGS, help="how images are stored")
    p.add_argument("--quality", type=int, default=95, help="JPEG and WebP quality, 1..100")
    p.add_argument("--format", default="array_record", choices=("array_record", "parquet"), help="shard file kind")


def plan_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ImagesPlan fields that add()'s flags give."""
    return {
        "rules": pixels.ImageRules(min_size=args.min_size, max_aspect=args.max_aspect, max_pixels=args.max_pixels),
        "resize": args.resize,
        "size": None if args.resize == "keep" else args.size,
        "encoding": args.encoding,
        "quality": args.quality,
        "ext": args.format,
    }
