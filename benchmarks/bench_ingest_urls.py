"""The ingest-urls job's images/s against img2dataset itself, on the same local server, images, output size and cores.

The baseline is stated in one line in BASELINE below and printed first.

A local HTTP server on 127.0.0.1 (tests/runtime/online_support.py, real skimage.data photographs of
160-480 px as JPEG, PNG and WebP), in a process of its own, serves URLS urls. Both tools fetch them all,
resize to a 256 px centre crop, encode JPEG q95 and write shards of ROWS_PER_SHARD rows on 2 processes: the job on
DirectRunner with 2 workers (ArrayRecord shards, status tables, commit; --per_host opened to the threads,
since img2dataset has no per-host limit and one host serves every url here), img2dataset with
processes_count=2 (webdataset tars). Both get 64 threads a process, timeout 10 s, one retry.

img2dataset's pins clash with ours, so it gets its own venv under bench-out/ (gitignored), created once
with pip and reused. When that fails the reason is printed and only the second baseline runs: a plain
ThreadPoolExecutor loop in one process doing fetch (urllib) + decode + resize + encode + write a file.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

BASELINE = (
    "baseline: img2dataset (pip, own venv) on the same url parquet and server, processes_count=2 thread_count=64, "
    "center_crop 256, JPEG q95, webdataset; second baseline: a plain ThreadPoolExecutor(64) fetch+decode+resize+write"
)
URLS = 3000
ROWS_PER_SHARD = 500
SIZE = 256
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "bench-out", "img2dataset-venv")


def img2dataset_binary() -> tuple[str | None, str]:
    """The img2dataset executable of the cached venv, installing it once; (None, why) when it cannot be had."""
    binary = os.path.join(VENV, "bin", "img2dataset")
    if os.path.exists(binary):
        return binary, "cached"
    try:
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True, capture_output=True, timeout=300)
        pip = [os.path.join(VENV, "bin", "pip"), "install", "-q", "img2dataset"]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as error:
        return None, f"creating its venv failed: {error}"
    if done.returncode or not os.path.exists(binary):
        return None, f"pip install img2dataset failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
    return binary, "installed now"


# The server runs in a process of its own: the job's launcher is then a process of its own, as the
# dew-preprocess program is (one thread, so it may fork its workers), and no baseline shares its GIL.
_SERVE = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); from tests.runtime.online_support import ImageServer; "
    "server = ImageServer(); server.start(); print(server.base, flush=True); sys.stdin.read()"
)


def serve() -> tuple[subprocess.Popen[str], str]:
    """The local image server in a child process (stopped when its stdin closes), and its base url."""
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVE, ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def write_urls(base: str, path: str) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    urls = [f"{base}/photo/{i}.jpg" for i in range(URLS)]
    pq.write_table(pa.table({"url": urls, "caption": [f"photo {i}" for i in range(URLS)]}), path)
    return urls


def run_job(parquet: str, out: str) -> tuple[float, int]:
    from dew.pipelines import ingest_urls_job, zygotes

    zygotes.allow()  # this benchmark is a launcher of its own, as the dew-preprocess program is
    flags = ["--input", parquet, "--output", out, "--size", str(SIZE), "--rows_per_shard", str(ROWS_PER_SHARD)]
    # img2dataset has no per-host limit: one host serves every url here, so ours is opened to the thread count.
    flags += ["--threads", "64", "--per_host", "64", "--timeout", "10", "--retries", "1", "--quality", "95"]
    start = time.perf_counter()
    ingest_urls_job.main([*flags, "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    seconds = time.perf_counter() - start
    with open(os.path.join(out, "stats.json")) as f:
        return seconds, json.load(f)["images_written"]


def run_img2dataset(binary: str, parquet: str, out: str) -> tuple[float, int, str]:
    command = [binary, f"--url_list={parquet}", "--input_format=parquet", "--url_col=url", "--caption_col=caption"]
    command += [f"--output_folder={out}", "--output_format=webdataset", "--processes_count=2", "--thread_count=64"]
    command += [f"--image_size={SIZE}", "--resize_mode=center_crop", "--encode_quality=95", "--timeout=10"]
    command += ["--retries=1", f"--number_sample_per_shard={ROWS_PER_SHARD}", "--enable_wandb=False"]
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - start
    if done.returncode:
        return seconds, 0, f"img2dataset exited {done.returncode}: {done.stderr.strip()[-800:]}"
    success = 0
    for stats in glob.glob(os.path.join(out, "*_stats.json")):
        with open(stats) as f:
            success += json.load(f)["successes"]
    return seconds, success, ""


def run_plain(urls: list[str], out: str) -> tuple[float, int]:
    import urllib.request

    import cv2
    import numpy as np

    os.makedirs(out, exist_ok=True)

    def one(item: tuple[int, str]) -> bool:
        i, url = item
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                data = response.read()
        except OSError:
            return False
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if pixels is None:
            return False
        height, width = pixels.shape[:2]
        scale = SIZE / min(height, width)
        target = (max(SIZE, round(width * scale)), max(SIZE, round(height * scale)))
        resized = cv2.resize(pixels, target, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LANCZOS4)
        top, left = (resized.shape[0] - SIZE) // 2, (resized.shape[1] - SIZE) // 2
        ok, encoded = cv2.imencode(
            ".jpg", resized[top : top + SIZE, left : left + SIZE], [cv2.IMWRITE_JPEG_QUALITY, 95]
        )
        with open(os.path.join(out, f"{i:06d}.jpg"), "wb") as f:
            f.write(encoded.tobytes())
        return bool(ok)

    start = time.perf_counter()
    with ThreadPoolExecutor(64) as pool:
        success = sum(pool.map(one, enumerate(urls)))
    return time.perf_counter() - start, success


def main() -> None:
    print(BASELINE)
    binary, how = img2dataset_binary()
    print(f"img2dataset: {binary or 'unavailable'} ({how})")
    server, base = serve()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ingest-") as work:
            parquet = os.path.join(work, "urls.parquet")
            urls = write_urls(base, parquet)
            job_s, job_ok = run_job(parquet, os.path.join(work, "dew"))
            print(f"dew ingest-urls: {job_ok}/{URLS} written in {job_s:.1f} s = {job_ok / job_s:.1f} images/s")
            if binary is not None:
                base_s, base_ok, error = run_img2dataset(binary, parquet, os.path.join(work, "img2dataset"))
                if error:
                    print(f"img2dataset could not run here: {error}")
                else:
                    print(f"img2dataset: {base_ok}/{URLS} written in {base_s:.1f} s = {base_ok / base_s:.1f} images/s")
                    print(f"ratio dew / img2dataset: {(job_ok / job_s) / (base_ok / base_s):.2f}x (goal >= 1.0x)")
            plain_s, plain_ok = run_plain(urls, os.path.join(work, "plain"))
            print(f"plain ThreadPoolExecutor: {plain_ok}/{URLS} in {plain_s:.1f} s = {plain_ok / plain_s:.1f} images/s")
            print(f"ratio dew / plain: {(job_ok / job_s) / (plain_ok / plain_s):.2f}x")
    finally:
        server.communicate()  # closes its stdin: it stops


if __name__ == "__main__":
    main()
