"""ingest-urls end to end against the hostile web (tests/hostile_http.py): every committed record holds the image
its own url served, every url's row says the reason its behaviour earns, the books balance, and the job ends
with no single url stopping it."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dew.data import formats
from dew.pipelines import ingest_urls_job
from tests.preprocess.test_images_job import IN_MEMORY, read_records

pytest.importorskip("cv2")
pytest.importorskip("skimage.data")

from tests.hang_guard import bounded
from tests.hostile_http import BEHAVIOURS, HostileWeb
from tests.hostile_wire import SIDES

pytestmark = pytest.mark.beam
SIZE = 64
RETRIES = 1
FLAGS = ("--timeout", "2", "--retries", str(RETRIES), "--threads", "8", "--per_host", "4")
FLAGS += ("--size", str(SIZE), "--min_size", str(SIZE), "--rows_per_shard", "8")
GUARD = 600.0  # a hang guard, never a speed test


def write_rows(path: Path, url_list: list[str]) -> None:
    """A parquet url list, row i captioned with its index."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"url": url_list, "caption": [str(i) for i in range(len(url_list))]}), path)


def reasons_by_row(output: Path) -> dict[int, tuple[str, str]]:
    """row → (status, reason) over every status table of the directory."""
    import pyarrow.parquet as pq

    found = {}
    for table in sorted(output.glob("*.status.parquet")):
        for row in pq.read_table(table).to_pylist():
            assert row["row"] not in found, f"row {row['row']} is in two status tables"
            found[row["row"]] = (row["status"], row["reason"])
    return found


def run_and_check(web: HostileWeb, rows: list[str], tmp_path: Path) -> None:
    """Ingests `rows` from `web` and checks every row's reason, the books and every committed record's image."""
    write_rows(tmp_path / "in" / "urls.parquet", rows)
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in" / "urls.parquet"), "--output", str(out), *FLAGS, *IN_MEMORY]
    with bounded(GUARD):
        found = ingest_urls_job.main(argv)

    want = {row: web.outcome(url, RETRIES) for row, url in enumerate(rows)}
    assert reasons_by_row(out) == {
        row: ("dropped", reason) if reason else ("written", "") for row, reason in want.items()
    }
    stats = json.loads((out / "stats.json").read_text())
    written = sum(reason is None for reason in want.values())
    assert stats["urls_in"] == len(rows) == stats["images_written"] + sum(stats["dropped"].values())
    assert stats["images_written"] == written == found["images_encoded"]
    assert {k: v for k, v in stats["dropped"].items() if v} == {
        reason: sum(r == reason for r in want.values()) for reason in set(want.values()) - {None}
    }

    plan, _, _ = ingest_urls_job.plan_from(ingest_urls_job.parser().parse_known_args(argv)[0])
    meta = formats.read_meta(str(out), kind="images")
    records = [record for split in meta.splits for record in read_records(out, split)]
    assert len(records) == written
    for record in records:
        url = rows[int(record["caption"])]
        served = web.served(url)
        assert served is not None and want[int(record["caption"])] is None, f"{url} should not have been written"
        assert record["url"].decode() == url.strip()
        # The stored image is what the job makes of this url's own bytes, and its sides are the served image's.
        assert record["image"] == plan.images.image_bytes(served), f"the record of {url} holds another image"
        assert (int(record["width"]), int(record["height"])) == SIDES[::-1]


def test_every_committed_record_holds_its_own_urls_image_beside_every_lie(hostile_web: HostileWeb, tmp_path) -> None:
    web = hostile_web
    rows = web.every_behaviour(0)
    first = len(rows)  # honest neighbours and odd spellings after every behaviour, each with an image of its own
    rows += [web.url("honest", i) for i in range(first, first + 6)] + web.odd_urls(first + 6) + web.bad_urls()
    run_and_check(web, rows, tmp_path)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    behaviours=st.lists(st.sampled_from(sorted(BEHAVIOURS)), min_size=2, max_size=8),
    honest=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_a_random_mix_of_behaviours_through_the_job(behaviours: list[str], honest: int, seed: int) -> None:
    web = HostileWeb()  # a fresh server each example: what a url answers may depend on what it was asked before
    try:
        rows = [web.url(behaviour, i) for i, behaviour in enumerate(behaviours)]
        rows += [web.url("honest", i) for i in range(len(behaviours), len(behaviours) + honest)]
        random.Random(seed).shuffle(rows)
        with tempfile.TemporaryDirectory() as tmp:
            run_and_check(web, rows, Path(tmp))
    finally:
        web.stop()
