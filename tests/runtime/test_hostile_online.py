"""OnlineImages against the hostile web (tests/hostile_http.py): every batched image is the one its url served,
every fetch is counted under its url's reason, no url stops the stream, and no fetch process outlives a
trainer killed outright."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dew.data
from dew.data import DataPartition, Loading
from dew.data.images import pixels
from dew.data.images.fetch import BAD_URL, FetchPolicy
from dew.data.images.online import OnlineImages
from dew.data.images.online_pool import FETCHED

pytest.importorskip("cv2")
pytest.importorskip("datasets")
pytest.importorskip("skimage.data")

from tests.hang_guard import bounded
from tests.hostile_http import BEHAVIOURS, HostileWeb, behaviour_of, outcomes

SIZE = 64
TIMEOUT, RETRIES = 2, 1
GUARD = 300.0  # a hang guard, never a speed test
SCRIPT_SECONDS = 120  # a trainer imports datasets and spawns its workers on a small, shared machine
ORPHAN_SECONDS = 15  # workers watch their trainer once a second: gone well within this


def saved_rows(directory: Path, url_list: list[str]) -> str:
    """A save_to_disk dataset of the urls, each row's caption its index."""
    import datasets as hf

    hf.Dataset.from_dict({"url": url_list, "caption": [str(i) for i in range(len(url_list))]}).save_to_disk(directory)
    return str(directory)


def own_pixels(web: HostileWeb, url: str) -> np.ndarray:
    """What the stream makes of the body `url` served: decoded, scaled and centre-cropped to SIZE."""
    served = web.served(url)
    assert served is not None, f"{url} serves no image"
    rules = pixels.ImageRules(min_size=SIZE)
    return pixels.square(pixels.decode(served, rules=rules, size=SIZE, convert=False), SIZE)


def settled(check: Callable[[], bool], seconds: float) -> bool:
    """Whether `check` holds within `seconds`: a bound on a test that would otherwise hang, not a speed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def read_and_rest(
    web: HostileWeb,
    rows: list[str],
    source: str,
    *,
    batch: int,
    batches: int,
    retries: int,
    threads: int = 8,
    workers: int = 0,
) -> Any:
    """Reads `batches` batches from a stream over `rows`, waits for its pool to rest and checks its books: every
    attempt the server saw belongs to a finished fetch counted under its url's reason, and every batched image
    is the one its url served. The stream's stats at rest."""
    spec = OnlineImages(
        (source,),
        image_size=SIZE,
        min_image_size=SIZE,
        timeout=TIMEOUT,
        retries=retries,
        loading=Loading(workers=workers, threads=threads, worker_buffer=1),
        fetch=FetchPolicy(per_host=8),
    )
    with bounded(GUARD), spec.load(batch=batch).train(DataPartition()) as stream:
        taken = [next(stream) for _ in range(batches)]

        def counted() -> dict[str, float]:
            want: collections.Counter[str] = collections.Counter()
            for url in rows:
                if url not in web.bad_urls():
                    found = outcomes(behaviour_of(url)[0], web.main.requests_to(url), retries)
                    want.update({reason or FETCHED: n for reason, n in found.items() if reason != BAD_URL})
            return {reason: n for reason, n in want.items() if n}

        def at_rest() -> bool:
            # The reader takes no more batches, so every fetch thread comes to wait with an image in hand.
            got = {reason: n for reason, n in stream.stats().counts.items() if n and reason != BAD_URL}
            return got == counted()

        assert settled(at_rest, GUARD / 2), (stream.stats().counts, counted())
        stats = stream.stats()
    for taken_batch in taken:
        assert taken_batch["image"].shape == (batch, SIZE, SIZE, 3)
        for image, caption in zip(taken_batch["image"], taken_batch["caption"], strict=True):
            url = rows[int(caption)]
            assert np.array_equal(image, own_pixels(web, url)), f"row {caption} holds another image than {url}"
    assert stats.fetched + stats.dropped == stats.finished
    return stats


# In the reader's process, and in a spawned fetch process whose batches cross a multiprocessing queue.
@pytest.mark.parametrize("workers", [0, 1])
def test_every_batched_image_is_its_urls_own_and_every_fetch_is_counted(
    hostile_web: HostileWeb, tmp_path, workers: int
) -> None:
    web = hostile_web
    rows = web.every_behaviour(0)
    first = len(rows)  # honest neighbours and odd spellings after every behaviour, each with an image of its own
    rows += [web.url("honest", i) for i in range(first, first + 6)] + web.odd_urls(first + 6) + web.bad_urls()
    good = sum(web.outcome(url, RETRIES) is None for url in rows)
    # More images than a pass holds, so every url is fetched at least once.
    source = saved_rows(tmp_path / "rows", rows)
    stats = read_and_rest(web, rows, source, batch=4, batches=-(-2 * good // 4), retries=RETRIES, workers=workers)
    assert stats.counts[BAD_URL] > 0
    reasons = {web.outcome(url, RETRIES) or FETCHED for url in rows}
    assert reasons == {reason for reason, n in stats.counts.items() if n}, stats.counts


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    behaviours=st.lists(st.sampled_from(sorted(BEHAVIOURS)), min_size=1, max_size=8), retries=st.sampled_from([0, 1])
)
def test_a_random_mix_of_behaviours_through_the_stream(tmp_path_factory, behaviours: list[str], retries: int) -> None:
    web = HostileWeb()  # a fresh pair each example: what a url answers may depend on what it was asked before
    try:
        rows = [web.url(behaviour, i) for i, behaviour in enumerate(behaviours)]
        rows += [web.url("honest", i) for i in range(len(rows), len(rows) + 3)]
        random.Random(len(rows)).shuffle(rows)
        source = saved_rows(tmp_path_factory.mktemp("rows"), rows)
        read_and_rest(web, rows, source, batch=2, batches=2, retries=retries, threads=3)
    finally:
        web.stop()


_TRAINER = """
    import json, sys, time
    import psutil
    from dew.data import DataPartition, Loading
    from dew.data.images.online import OnlineImages

    if __name__ == "__main__":
        loading = Loading(workers=2, threads=4, worker_buffer=2)
        spec = OnlineImages((sys.argv[1],), image_size=64, min_image_size=64, timeout=30, retries=0, loading=loading)
        stream = spec.load(batch=2).train(DataPartition())
        next(stream)
        me = psutil.Process()
        print(json.dumps([p.pid for p in me.children(recursive=True)]), flush=True)
        time.sleep(600)
"""


def _gone(pids: list[int]) -> bool:
    """Every pid has exited (a zombie no init has reaped yet counts as exited)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


@pytest.mark.slow
def test_no_fetch_process_outlives_a_trainer_killed_outright(hostile_web: HostileWeb, tmp_path) -> None:
    web = hostile_web
    # Fetch threads hung on silent and dripping servers as well as fetching: the workers are mid-read at the kill.
    rows = [web.url("honest", i) for i in range(8)] + [web.url(b, 8 + i) for i, b in enumerate(("silent", "drip_body"))]
    source = saved_rows(tmp_path / "rows", rows)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_TRAINER))
    runtime = str(Path(dew.data.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([runtime, os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "stderr", "w") as stderr:
        trainer = subprocess.Popen(
            [sys.executable, str(script), source], env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    children: list[int] = []
    try:
        with bounded(GUARD):
            line = trainer.stdout.readline()
        assert line, (tmp_path / "stderr").read_text()
        children = json.loads(line)
        names = [" ".join(psutil.Process(pid).cmdline()) for pid in children]
        # Fetch workers (as many as the host's spare cores allow, up to two) and the spawn context's resource tracker.
        assert any("spawn_main" in name for name in names) and any("resource_tracker" in n for n in names), names
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=SCRIPT_SECONDS)
        assert settled(lambda: _gone(children), ORPHAN_SECONDS), [
            " ".join(psutil.Process(pid).cmdline()) for pid in children if not _gone([pid])
        ]
    finally:
        trainer.kill()
        trainer.wait()
        trainer.stdout.close()
        for pid in children:  # a failed run must not leave its processes behind for the next test
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                continue
