"""The images job's images/s on DirectRunner (2 workers) against a plain loop doing the same work on 2 processes.

The baseline is stated in one line in BASELINE below and printed first.

Both sides work on the same ImageFolder tree of real photographs (skimage.data, colour, 300-1000 px, JPEG
q90, each photograph flipped and cropped into distinct files). The job reads, decodes, checks the rules,
resizes, encodes, packs, shards, writes ArrayRecord and commits. Two ratios, job / baseline images/s:
- steady state (the goal, >= 0.7): the job's marginal rate, the IMAGES more images of a job over
  2 × IMAGES than of one over IMAGES per extra second (each run twice, the faster kept). Subtracting a
  one-image run's start-up (~8 s of worker start) from a ~10 s run instead left a difference of two noisy
  numbers, which read anywhere from 0.9 to 2.2 for the same code;
- wall clock: everything a user waits for, Beam's fixed start-up included (it shrinks as inputs grow).
Each job runs in a fresh launcher process, as `dew-preprocess images` does (its workers are then forked
from it, not started afresh: dew.pipelines.zygotes); its seconds are those of main(), as when the jobs ran
in this process, and the whole launcher process's are printed beside them.
The job's images/s per core is printed beside img2dataset's published ~80 images/s per core, which
includes downloading. The machine is shared, so the baseline is timed before and after the job.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

BASELINE = (
    "baseline: multiprocessing.Pool(2) of a plain function: read the file, decode (the faster of Pillow with draft "
    "mode and cv2.imdecode), scale the shorter side to 256 and centre-crop (cv2), encode JPEG q95; nothing written"
)
IMAGES = 1200
RUNS = 2
TWO = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
SIZE = 256
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field", "cat")


def write_folder(root: str, images: int = IMAGES) -> list[str]:
    import numpy as np
    from PIL import Image
    from skimage import data

    paths = []
    for i in range(images):
        pixels = getattr(data, PHOTOS[i % len(PHOTOS)])()
        step = i // len(PHOTOS)
        pixels = pixels[:, ::-1] if step % 2 else pixels
        pixels = np.ascontiguousarray(pixels[step % 17 :, step % 13 :])  # distinct files, as a crawl holds
        directory = os.path.join(root, f"class{i % 2}")
        os.makedirs(directory, exist_ok=True)
        paths.append(os.path.join(directory, f"{i:05d}.jpg"))
        Image.fromarray(pixels).save(paths[-1], format="JPEG", quality=90)
    return paths


def _square(pixels: Any, cv2: Any) -> Any:
    height, width = pixels.shape[:2]
    scale = SIZE / min(height, width)
    target = (max(SIZE, round(width * scale)), max(SIZE, round(height * scale)))
    resized = cv2.resize(pixels, target, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LANCZOS4)
    top, left = (resized.shape[0] - SIZE) // 2, (resized.shape[1] - SIZE) // 2
    return resized[top : top + SIZE, left : left + SIZE]


def plain_pillow(path: str) -> int:
    import io

    import cv2
    import numpy as np
    from PIL import Image

    with open(path, "rb") as f:
        image = Image.open(io.BytesIO(f.read()))
    image.draft("RGB", (SIZE, SIZE))
    pixels = _square(np.asarray(image.convert("RGB")), cv2)
    _, encoded = cv2.imencode(".jpg", np.ascontiguousarray(pixels[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 95])
    return len(encoded)


def plain_cv2(path: str) -> int:
    import cv2
    import numpy as np

    with open(path, "rb") as f:
        pixels = cv2.imdecode(np.frombuffer(f.read(), np.uint8), cv2.IMREAD_COLOR)
    _, encoded = cv2.imencode(".jpg", np.ascontiguousarray(_square(pixels, cv2)), [cv2.IMWRITE_JPEG_QUALITY, 95])
    return len(encoded)


def baseline(pool: Any, paths: list[str]) -> tuple[float, str]:
    """The best plain images/s over both decoders, the pool already started and warm."""
    best = (0.0, "")
    for fn in (plain_pillow, plain_cv2):
        pool.map(fn, paths[:8])
        start = time.perf_counter()
        pool.map(fn, paths, chunksize=16)
        best = max(best, (len(paths) / (time.perf_counter() - start), fn.__name__))
    return best


# One job in a fresh launcher process, as `dew-preprocess images` runs it (a launcher of its own may fork
# its workers: dew.pipelines.zygotes); the seconds of main() alone, the job module already imported, as
# before, and of the whole process, interpreter start and imports included.
_LAUNCH = (
    "import json, sys, time; from dew.pipelines import images_job, zygotes; zygotes.allow(); "
    "start = time.perf_counter(); images_job.main(json.loads(sys.argv[1])); print(time.perf_counter() - start)"
)


def run_job(inputs: str, output: str) -> float:
    flags = ["--input", inputs, "--output", output, "--size", str(SIZE), "--encoding", "jpeg", "--quality", "95", *TWO]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, json.dumps(flags)], capture_output=True, text=True, check=True
    )
    whole = time.perf_counter() - start
    seconds = float(done.stdout.split()[-1])
    print(f"  {os.path.basename(inputs)}: {seconds:.1f} s in main(), {whole:.1f} s the whole launcher process")
    return seconds


def main() -> None:
    print(BASELINE)
    with tempfile.TemporaryDirectory() as work:
        double = write_folder(os.path.join(work, "double"), 2 * IMAGES)
        paths = double[:IMAGES]  # the first IMAGES of the double folder, linked: the same files
        for path in paths:
            linked = os.path.join(work, "folder", os.path.relpath(path, os.path.join(work, "double")))
            os.makedirs(os.path.dirname(linked), exist_ok=True)
            os.link(path, linked)
        one = os.path.join(work, "one")
        os.makedirs(os.path.join(one, "class0"))
        os.link(paths[0], os.path.join(one, "class0", "00000.jpg"))
        with mp.get_context("spawn").Pool(2) as pool:
            before, decoder = baseline(pool, paths)
            startup = run_job(one, os.path.join(work, "out-one"))
            runs: dict[str, list[float]] = {"folder": [], "double": []}
            for run in range(RUNS):
                for name in runs:
                    runs[name].append(run_job(os.path.join(work, name), os.path.join(work, f"out-{name}-{run}")))
            after, _ = baseline(pool, paths)
    plain = (before + after) / 2
    seconds, doubled = min(runs["folder"]), min(runs["double"])
    steady = IMAGES / max(doubled - seconds, 1e-9)
    wall = IMAGES / seconds
    print(f"plain loop ({decoder}, 2 processes): {before:,.0f} before, {after:,.0f} after the job images/s")
    print(
        f"job: {seconds:.1f} s wall for {IMAGES} images, {doubled:.1f} s for {2 * IMAGES} (best of {RUNS}), "
        f"start-up {startup:.1f} s"
    )
    print(f"job steady state: {steady:,.0f} images/s, ratio {steady / plain:.2f} (goal >= 0.7)")
    print(f"job wall clock:   {wall:,.0f} images/s, ratio {wall / plain:.2f}")
    print(f"job per core: {steady / 2:,.0f} images/s (img2dataset publishes ~80 per core, download included)")


if __name__ == "__main__":
    sys.exit(main())
