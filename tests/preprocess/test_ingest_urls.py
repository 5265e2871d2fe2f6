"""The ingest-urls job end to end on DirectRunner against a local image server on 127.0.0.1: every way a
url goes wrong counted once, byte-identical output on 1 and 2 workers and after a crash-rerun, and a
--refetch_failed run that asks the server again for the failed rows only.
"""

from __future__ import annotations

import collections
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dew.data import formats
from dew.data.images import pixels
from dew.pipelines import ingest_urls_job
from tests.preprocess.test_images_job import IN_MEMORY, TWO_WORKERS, compressed, listing, read_records
from tests.support import inspect_text

pytest.importorskip("cv2")
pytest.importorskip("skimage.data")

from tests.runtime.online_support import KINDS, MAX_BYTES, ImageServer, _Handler

pytestmark = pytest.mark.beam
SIZE = 64
# Short enough that hung urls cost little, long enough that a loaded machine answers every photograph.
FETCH = ("--timeout", "3", "--retries", "1", "--threads", "8", "--max_bytes", str(MAX_BYTES), "--size", str(SIZE))


class _RecoveringHandler(_Handler):
    """/flaky/<i> answers 500 until the server recovers, then the photograph."""

    def _answer(self, count: int) -> None:
        if not self.path.startswith("/flaky/"):
            return super()._answer(count)
        if not self.server.recovered:  # type: ignore[attr-defined]
            return self._send(500, b"down", "text/plain")
        return self._send(200, self.server.photos[int(self.path.split("/")[-1].split(".")[0]) % 4], "image/jpeg")


@pytest.fixture(scope="module")
def server() -> Iterator[ImageServer]:
    served = ImageServer()
    served.RequestHandlerClass = _RecoveringHandler
    served.recovered = False  # type: ignore[attr-defined]
    served.start()
    try:
        yield served
    finally:
        served.stop()


def every_kind(server: ImageServer) -> list[tuple[str | None, str | None]]:
    """(url, the reason it is dropped for, None when written) for every kind the server has, some twice."""
    rows = [(server.url("photo", i), None) for i in range(6)]
    rows += [(server.url(kind, i), reason) for i, (kind, reason) in enumerate(KINDS.items()) if kind != "photo"]
    rows += [(f"{server.base}/redirect/3/7.jpg", None), (f"{server.base}/loop/a/8.jpg", "redirect_loop")]
    return [(url, reason) for url, reason in rows]


def write_url_lists(directory: Path, rows: list[tuple[str, str | None]]) -> None:
    """The rows spread over a parquet, a jsonl and a csv file, plus a row without a url and a broken jsonl line."""
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    third = len(rows) // 3
    urls = [url for url, _ in rows]
    parquet = [*urls[:third], None]
    captions = [f"image {i}" for i in range(len(urls))]
    pq.write_table(pa.table({"url": parquet, "caption": [*captions[:third], "no url"]}), directory / "a.parquet")
    lines = [
        json.dumps({"url": u, "caption": c}) for u, c in zip(urls[third : 2 * third], captions[third:], strict=False)
    ]
    (directory / "b.jsonl").write_text("\n".join([*lines, "{broken"]) + "\n")
    with open(directory / "c.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["url", "caption"])
        writer.writerows(zip(urls[2 * third :], captions[2 * third :], strict=True))


def run(output: Path, inputs: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    return ingest_urls_job.main(["--input", str(inputs / "*"), "--output", str(output), *FETCH, *flags, *runner])


def statuses(output: Path) -> dict[str, tuple[str, str]]:
    """url → (status, reason) over every status table of the directory."""
    import pyarrow.parquet as pq

    found = {}
    for table in sorted(output.glob("*.status.parquet")):
        for row in pq.read_table(table).to_pylist():
            found[row["url"]] = (row["status"], row["reason"])
    return found


def test_every_url_is_counted_once_and_output_is_the_same_on_two_workers_and_after_a_crash(
    server: ImageServer, tmp_path: Path
) -> None:
    rows = every_kind(server)
    write_url_lists(tmp_path / "in", rows)
    flags = ("--rows_per_shard", "9", "--val_fraction", "0.2")
    one = tmp_path / "one"
    found = run(one, tmp_path / "in", *flags)

    stats = json.loads((one / "stats.json").read_text())
    want = collections.Counter(reason for _, reason in rows if reason)
    want.update(missing_field=1, malformed_json=1)
    assert {k: v for k, v in stats["dropped"].items() if v} == dict(want)
    assert stats["urls_in"] == len(rows) + 2 == stats["images_written"] + sum(stats["dropped"].values())
    assert found["urls_fetched"] == len(rows) and found["images_encoded"] == stats["images_written"]
    written = stats["images_written"]
    assert f"images: {written} written of {len(rows) + 2} urls read" in inspect_text(str(one), "--samples", "1")
    assert statuses(one) == {url: ("dropped", r) if r else ("written", "") for url, r in rows}

    meta = formats.read_meta(str(one), kind="images")
    assert meta.section.fields == ("image", "caption", "url", "width", "height")
    records = [r for split in meta.splits for r in read_records(one, split)]
    assert sorted(r["url"].decode() for r in records) == sorted(url for url, reason in rows if reason is None)
    for record in records:
        assert pixels.decode(record["image"]).shape == (SIZE, SIZE, 3)
        assert int(record["width"]) >= 160 and int(record["height"]) >= 160

    run(tmp_path / "two", tmp_path / "in", *flags, runner=TWO_WORKERS)
    assert listing(tmp_path / "two") == listing(one)

    shards = [shard.name for split in sorted(meta.splits) for shard in meta.shards(split)]
    crashed = tmp_path / "crashed"
    blocker = crashed / meta.shards("train")[1].name
    blocker.mkdir(parents=True)  # a directory where a shard must go: that shard fails for real
    with pytest.raises(Exception, match=blocker.name):
        run(crashed, tmp_path / "in", *flags)
    assert not (crashed / formats.META).exists()
    committed = {p.name for p in crashed.iterdir() if p.is_file() and formats.parse_shard_name(p.name)}
    blocker.rmdir()
    found = run(crashed, tmp_path / "in", *flags)
    assert found.get("shards_skipped", 0) == len(committed) and found["shards_written"] == len(shards) - len(committed)
    assert listing(crashed) == listing(one)
    # Shard-level resume: the rerun fetched the rows of the shards it wrote, and none of the committed ones.
    missing = [name for name in shards if name not in committed]
    assert found["urls_fetched"] == sum(len(_urls(one / _status(name))) for name in missing)


def test_zstd_url_lists_give_the_plain_lists_rows_and_one_cut_short_is_a_damaged_input(
    server: ImageServer, tmp_path: Path
) -> None:
    """Url lists are often shipped as .zst. Read through the text jobs' opener
    (document_rows.decompressed), a .jsonl.zst and a .csv.zst list of several frames give the rows their
    plain lists give, fetched and written alike; a list cut inside its last frame keeps the rows before the
    cut and is counted as a damaged input under truncated_input, the reason tokenize and clean use."""
    rows = [(server.url("photo", i), None) for i in range(7)] + [(server.url("tiny", 0), "too_small")]
    plain, zst = tmp_path / "plain", tmp_path / "zst"
    write_url_lists(plain, rows)
    zst.mkdir()
    shutil.copy(plain / "a.parquet", zst / "a.parquet")
    for name in ("b.jsonl", "c.csv"):
        lines = (plain / name).read_bytes().splitlines(keepends=True)
        (zst / f"{name}.zst").write_bytes(compressed([b"".join(lines[:2]), b"".join(lines[2:])], ".zst")[0])
    cut = [json.dumps({"url": server.url("photo", i), "caption": f"cut {i}"}).encode() + b"\n" for i in (10, 11, 12)]
    data, last = compressed([cut[0] + cut[1], cut[2]], ".zst")
    (zst / "d.jsonl.zst").write_bytes(data[: (last + len(data)) // 2])
    run(tmp_path / "from-plain", plain)
    run(tmp_path / "from-zst", zst)

    before_cut = {server.url("photo", i): ("written", "") for i in (10, 11)}
    assert statuses(tmp_path / "from-zst") == statuses(tmp_path / "from-plain") | before_cut

    def records(output: Path) -> list[dict[str, bytes]]:
        meta = formats.read_meta(str(output), kind="images")
        return sorted((r for split in meta.splits for r in read_records(output, split)), key=lambda r: r["url"])

    from_zst = records(tmp_path / "from-zst")
    assert [r for r in from_zst if r["url"].decode() not in before_cut] == records(tmp_path / "from-plain")
    want, stats = (json.loads((tmp_path / out / "stats.json").read_text()) for out in ("from-plain", "from-zst"))
    want["dropped"]["truncated_input"] = 1
    assert stats["dropped"] == want["dropped"] and stats["urls_in"] == want["urls_in"] + 3
    (damaged,) = stats["damaged_inputs"]
    assert damaged["path"] == str(zst / "d.jsonl.zst") and damaged["reason"] == "truncated_input"


def test_refetch_failed_asks_again_for_the_failed_rows_only(server: ImageServer, tmp_path: Path) -> None:
    import datasets

    rows = [(server.url("photo", i), None) for i in range(5)] + [(server.url("flaky", i), None) for i in range(4)]
    rows += [(server.url("tiny", 0), "too_small")]
    write_url_lists(tmp_path / "in", rows[:6])
    # The rest as a saved HF dataset, the fourth kind of url list.
    rest = rows[6:]
    hf = datasets.Dataset.from_dict({"url": [u for u, _ in rest], "caption": [f"hf {i}" for i in range(len(rest))]})
    hf.save_to_disk(str(tmp_path / "hf"))
    out = tmp_path / "out"
    flags = ("--input", str(tmp_path / "hf"), "--rows_per_shard", "4", "--format", "parquet")
    server.recovered = False  # type: ignore[attr-defined]
    run(out, tmp_path / "in", *flags)
    flaky = {url for url, _ in rows if "/flaky/" in url}
    first = statuses(out)
    assert {url for url, (_, reason) in first.items() if reason == "http_error"} == flaky
    assert json.loads((out / "stats.json").read_text())["refetchable"] == len(flaky)
    written = {r["url"]: r for split in ("train",) for r in read_records(out, split)}
    untouched = {p.name: formats.sha256_file(str(p)) for p in out.glob("*.parquet")}

    server.recovered = True  # type: ignore[attr-defined]
    before = collections.Counter(server.requests)
    found = run(out, tmp_path / "in", *flags, "--refetch_failed")
    asked = collections.Counter(server.requests) - before
    assert {f"{server.base}{path}" for path in asked} == flaky and found["urls_refetched"] == len(flaky)

    after = {r["url"]: r for r in read_records(out)}
    assert set(after) == set(written) | {url.encode() for url in flaky}
    assert all(after[url] == record for url, record in written.items())  # kept byte for byte
    stats = json.loads((out / "stats.json").read_text())
    assert stats["refetchable"] == 0 and {k: v for k, v in stats["dropped"].items() if v} == {
        "too_small": 1,
        "missing_field": 1,
        "malformed_json": 1,
    }
    assert statuses(out)[server.url("tiny", 0)] == ("dropped", "too_small")
    # Shards without a failed row were not rewritten.
    shard_of = {url: table for table in out.glob("*.status.parquet") for url in _urls(table)}
    clean = {shard_of[url].name.replace(".status.parquet", ".parquet") for url, _ in rows} - {
        shard_of[url].name.replace(".status.parquet", ".parquet") for url in flaky
    }
    assert clean and all(formats.sha256_file(str(out / name)) == untouched[name] for name in clean)
    assert run(out, tmp_path / "in", *flags) == {}  # committed again by the same job


def _status(shard: str) -> str:
    return shard.rsplit(".", 1)[0] + ".status.parquet"


def _urls(table: Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(table, columns=["url"]).column("url").to_pylist()


def test_a_run_that_writes_nothing_and_could_refetch_nothing_fails_uncommitted(tmp_path: Path) -> None:
    from dew.preprocess.drops import TooManyDropsError

    (tmp_path / "in").mkdir()
    rows = [json.dumps({"url": f"http://127.0.0.1:9/{i}.jpg", "caption": "c"}) for i in range(3)]
    (tmp_path / "in" / "urls.jsonl").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    with pytest.raises(TooManyDropsError, match=r"wrote none of 3 urls(.|\n)*missing_field: 3 .*--url_field"):
        run(out, tmp_path / "in", "--url_field", "URL")
    assert not (out / "meta.json").exists() and not list(out.glob("*.status.parquet"))
