"""The host's cache of gs:// shard blocks: sparse local mirrors, bounded on disk at every moment.

Each shard read by range (dew.data.ranges) has a mirror file under $DEW_CACHE_DIR/blocks holding only
the blocks fetched so far; the rest are holes and take no disk. One SQLite ledger beside them, shared
by every process of the host, records per page (PAGE_BYTES of a mirror: 16 blocks of 4 KiB, 256 of
256 bytes) which blocks are held, the disk they take and when the page was last used. A process that
brings new blocks takes the ledger's write lock, punches out least recently used pages (fallocate
PUNCH_HOLE, which frees the disk at once even while another process has the mirror open) until the
new blocks fit in $DEW_CACHE_BYTES, writes them, records them and commits: so the mirrors never hold
more than the budget, with no directory walk, and no evicted file lingering open. A read the cache
serves whole takes no write lock: the ledger is asked for all its pages in one query, and their last
use waits in the process's memory until its next store, or a read a second later, writes it
(dew.data.block_uses: another process's LRU order lags by that much).

The ledger's own file (dew.data.block_ledger) is opened again where it was deleted, and made anew where
sqlite can no longer read it, its maker punching out every mirror first: blocks no ledger counts are
never left on disk.

A store writes its blocks under the ledger's write lock, having named its pages in a journal
(journals/writing-N.json, N the store's number, which its transaction commits): a process killed
between its writes and its commit leaves blocks its lost transaction never counted, and the next store
of any process finds a journal whose number never committed and punches out those pages and drops
their rows. A journal whose number did commit is a finished store's not yet removed: it is removed.

Nothing read from a mirror is trusted: every block is checked against its recorded crc32c as it is
read (a punched block reads as zeros and fails), so an eviction racing a read costs a refetch, never a
wrong byte. The ledger charges a page the filesystem blocks its held blocks touch (a block smaller than
the filesystem's costs the whole filesystem block it lies in, shared with its neighbours in it), plus
room for the extent records a fragmented file needs, so the allocated size of the mirrors (st_blocks)
stays within what it counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from dew.data import block_ledger, block_uses, mirrors, remote
from dew.data.mirrors import charge, page_blocks
from dew.data.mirrors import fs_block as _fs_block

if TYPE_CHECKING:
    import sqlite3

_ledger = block_ledger.connection  # this thread's connection to the host's ledger


def held(wanted: Mapping[str, Iterable[int]]) -> dict[str, dict[int, set[int]]]:
    """The blocks the ledger says are held of each page of each mirror in `wanted` (path → pages), by
    path and page, in one query for them all (each block is still checked as it is read)."""
    asked = {path: sorted(set(pages)) for path, pages in wanted.items()}
    rows = block_ledger.using(lambda ledger: _rows(ledger, asked))
    return {
        path: {page: _blocks_of(rows[path, page][0]) if (path, page) in rows else set() for page in pages}
        for path, pages in asked.items()
    }


def held_pages(path: str, pages: Iterable[int]) -> dict[int, set[int]]:
    """held() of one mirror."""
    return held({path: pages})[path]


def _rows(ledger: sqlite3.Connection, wanted: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], tuple[bytes, int]]:
    """The ledger's (mask, bytes) of each (path, page) of `wanted` (path → pages) it has a row for, by
    its primary key: one query for up to 400 pages of any mirrors."""
    pairs = [(path, page) for path, pages in wanted.items() for page in pages]
    found: dict[tuple[str, int], tuple[bytes, int]] = {}
    for lo in range(0, len(pairs), 400):
        chunk = pairs[lo : lo + 400]
        values = ",".join(["(?, ?)"] * len(chunk))
        query = (  # CROSS JOIN keeps the asked pairs outside: each a search of the primary key, never a scan
            f"SELECT p.path, p.page, p.mask, p.bytes FROM (VALUES {values}) AS v CROSS JOIN pages AS p "
            "ON p.path = v.column1 AND p.page = v.column2"
        )
        rows = ledger.execute(query, [field for pair in chunk for field in pair])
        found.update(((path, page), (mask, size)) for path, page, mask, size in rows)
    return found


def _blocks_of(mask: bytes) -> set[int]:
    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def _mask(blocks: Iterable[int], block_bytes: int) -> bytes:
    value = 0
    for bit in blocks:
        value |= 1 << bit
    return value.to_bytes(-(-page_blocks(block_bytes) // 8), "little")


def store(
    writes: Mapping[str, Mapping[int, bytes]], block_bytes: Mapping[str, int], touched: Mapping[str, Iterable[int]]
) -> int:
    """Writes the fetched blocks `writes` (mirror path → block index → bytes) into their mirrors, evicting
    least recently used pages first so the ledger's total stays within the budget, and marks the pages
    in `touched` (mirror path → pages read) as just used. Blocks that cannot fit even in an empty cache
    are left out (the caller has them in memory), and so are all of a store that finds the filesystem
    full (a warning says so, once). Returns the bytes evicted."""
    try:
        return block_ledger.using(lambda ledger: _store(ledger, writes, block_bytes, touched))
    except Exception as error:  # the filesystem full though the budget is not: the caller has the blocks
        if not block_ledger.out_of_disk(error):
            raise
        block_ledger.warn_out_of_disk(error)
        return 0


def _store(
    ledger: sqlite3.Connection,
    writes: Mapping[str, Mapping[int, bytes]],
    block_bytes: Mapping[str, int],
    touched: Mapping[str, Iterable[int]],
) -> int:
    budget, now = remote.cache_budget(), time.time_ns()
    if not writes:  # a read the cache served: its pages' last use waits in memory (dew.data.block_uses)
        block_uses.note(touched, now)
        if block_uses.due():
            _write_uses(ledger)
        return 0
    ledger.execute("BEGIN IMMEDIATE")
    uses: list[tuple[int, str, int]] = []
    try:
        number = _recover(ledger) + 1
        block_uses.note(touched, now)
        uses = block_uses.take()  # this process's reads since its last store, before anything is evicted
        ledger.executemany(_USED, uses)
        keep = {(path, page) for path, pages in touched.items() for page in pages}
        keep |= {(path, b // page_blocks(block_bytes[path])) for path, blocks in writes.items() for b in blocks}
        plan: list[tuple[str, int | None, dict[int, bytes], set[int], int, int]] = []
        incoming = 0
        for path, blocks in writes.items():
            by_page: dict[int, dict[int, bytes]] = {}
            per_page = page_blocks(block_bytes[path])
            for block, data in blocks.items():
                by_page.setdefault(block // per_page, {})[block % per_page] = data
            rows = _rows(ledger, {path: by_page})
            for page, new in by_page.items():
                row = rows.get((path, page))
                have = _blocks_of(row[0]) if row else set()
                after = have | set(new)
                held = charge(block_bytes[path], page, after)
                cost = held - (row[1] if row else 0)
                plan.append((path, page, new, after, held, cost))
                incoming += cost
        for path in writes:
            if ledger.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is None:
                plan.insert(0, (path, None, {}, set(), 0, mirrors.file_charge()))  # its directory, first
                incoming += mirrors.file_charge()
        total = ledger.execute("SELECT bytes FROM total").fetchone()[0]
        evicted = _evict(ledger, total + incoming - budget, keep) if total + incoming > budget else 0
        total -= evicted
        unregistered = {path for path, slot, *_ in plan if slot is None}
        journal = [(path, slot) for path, slot, *_ in plan if slot is not None]
        if journal:
            with open(_journal(number), "w") as f:  # before the first write: what a kill from here on leaves
                json.dump(journal, f)
            ledger.execute("UPDATE stores SET last = ?", (number,))
        for path, slot, new, after, held, cost in plan:
            if total + cost > budget or (slot is not None and path in unregistered):
                continue  # larger than what the budget leaves: served from memory, not cached
            if slot is None:
                ledger.execute("INSERT INTO files VALUES (?)", (path,))
                unregistered.discard(path)
                total += cost
                continue
            _write(path, block_bytes[path], slot, new)
            ledger.execute(
                "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                (path, slot, _mask(after, block_bytes[path]), held, now),
            )
            total += cost
        ledger.execute("UPDATE total SET bytes = ?", (total,))
        ledger.execute("COMMIT")
    except BaseException:
        if ledger.in_transaction:  # the journal stays: the next store frees what this one wrote
            ledger.execute("ROLLBACK")
        block_uses.put_back(uses)
        raise
    if journal:  # another store may have removed it already, seeing its number committed
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_journal(number))
    return evicted


_USED = "UPDATE pages SET used = MAX(used, ?) WHERE path = ? AND page = ?"  # another process's may be later


def _write_uses(ledger: sqlite3.Connection) -> None:
    """Writes this process's waiting marks of last use, in one transaction."""
    ledger.execute("BEGIN IMMEDIATE")
    uses = block_uses.take()
    try:
        ledger.executemany(_USED, uses)
        ledger.execute("COMMIT")
    except BaseException:
        if ledger.in_transaction:
            ledger.execute("ROLLBACK")
        block_uses.put_back(uses)
        raise


_JOURNAL = "writing-"


def _journals() -> str:  # their own folder: finding them lists a few names, not a folder a shard
    return os.path.join(remote.blocks_dir(), block_ledger.JOURNALS)


def _journal(number: int) -> str:
    os.makedirs(_journals(), exist_ok=True)
    return os.path.join(_journals(), f"{_JOURNAL}{number}.json")


def _recover(ledger: sqlite3.Connection) -> int:
    """Under the write lock: punches out the pages a store that never committed (killed, or its commit
    failed) was writing, and drops their rows, so the mirrors hold nothing the ledger does not count;
    removes the journals of stores that did commit. Returns the last committed store's number."""
    last = int(ledger.execute("SELECT last FROM stores").fetchone()[0])
    try:
        names = os.listdir(_journals())
    except FileNotFoundError:
        return last
    for name in names:
        if not (name.startswith(_JOURNAL) and name.endswith(".json")):
            continue
        path = os.path.join(_journals(), name)
        with contextlib.suppress(ValueError, FileNotFoundError):
            if int(name[len(_JOURNAL) : -len(".json")]) > last:
                with open(path) as f:
                    _forget(ledger, f.read())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return last


def _forget(ledger: sqlite3.Connection, journal: str) -> None:
    """Punches out and unrecords the pages a journal names (a page it wrote over that held committed
    blocks loses those too: a refetch, never a wrong byte)."""
    pages: list[tuple[str, int]] = []
    with contextlib.suppress(ValueError):  # cut short as it was written: killed before any page was
        pages = [(str(path), int(page)) for path, page in json.loads(journal)]
    for path, page in pages:
        _punch(path, page)
        row = ledger.execute("SELECT bytes FROM pages WHERE path = ? AND page = ?", (path, page)).fetchone()
        if row is not None:
            ledger.execute("DELETE FROM pages WHERE path = ? AND page = ?", (path, page))
            ledger.execute("UPDATE total SET bytes = bytes - ?", (row[0],))


def _evict(ledger: sqlite3.Connection, need: int, keep: set[tuple[str, int]]) -> int:
    """Punches out least recently used pages, other than `keep`, until `need` bytes are freed.

    The oldest pages come from the ledger's index on last use, a few at a time: an eviction reads the
    pages it frees (and the kept ones it passes), never the whole ledger.
    """
    freed = passed = 0
    query = "SELECT path, page, bytes FROM pages ORDER BY used LIMIT 64 OFFSET ?"
    while freed < need:
        rows = ledger.execute(query, (passed,)).fetchall()
        if not rows:
            break
        for path, page, size in rows:
            if freed >= need:
                break
            if (path, page) in keep:
                passed += 1  # it stays, ahead of the rows still to come
                continue
            _punch(path, page)
            ledger.execute("DELETE FROM pages WHERE path = ? AND page = ?", (path, page))
            freed += size
    return freed


def _punch(path: str, page: int) -> None:
    block_bytes, fs = mirrors.block_bytes_of(path), _fs_block()
    lo = page * page_blocks(block_bytes) * block_bytes
    hi = lo + page_blocks(block_bytes) * block_bytes
    # Out to whole filesystem blocks, which a page of blocks that do not divide PAGE_BYTES may share
    # with its neighbours: a punch of part of one frees nothing. A neighbour's blocks in it then read as
    # zeros and are fetched again; what the ledger charges the neighbour stays an upper bound.
    mirrors.punch(path, lo // fs * fs, -(-hi // fs) * fs - lo // fs * fs)


def mirror(key: str, name: str, block_bytes: int) -> str:
    """The mirror file of the shard `name` cached under `key`, with blocks of `block_bytes`."""
    return mirrors.mirror(remote.blocks_dir(), key, name, block_bytes)


def _write(path: str, block_bytes: int, page: int, blocks: Mapping[int, bytes]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    except FileNotFoundError:  # a shard's first blocks: its directory too
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:  # one write a run of adjacent blocks, not one a block
        first, start = page * page_blocks(block_bytes), 0
        run: list[bytes] = []
        for block in sorted(blocks):
            if run and block != start + len(run):
                os.pwrite(fd, b"".join(run), (first + start) * block_bytes)
                run = []
            if not run:
                start = block
            run.append(blocks[block])
        if run:
            os.pwrite(fd, b"".join(run), (first + start) * block_bytes)
    finally:
        os.close(fd)


def used() -> int:
    """The bytes the ledger counts as held by every mirror of the host."""
    return int(block_ledger.using(lambda ledger: ledger.execute("SELECT bytes FROM total").fetchone()[0]))


def allocated() -> int:
    """The disk the mirrors and their directories take now (allocated blocks, st_blocks), the ledger and
    the journals left out: a diagnostic that walks the directory, never called on a read."""
    root, total = remote.blocks_dir(), 0
    for directory, _, names in os.walk(root):
        if directory != root and os.path.basename(directory) != block_ledger.JOURNALS:
            total += os.stat(directory).st_blocks * 512  # a mirror's own directory
        for name in names:
            if not name.startswith((block_ledger.NAME, _JOURNAL)):
                total += os.stat(os.path.join(directory, name)).st_blocks * 512
    return total
