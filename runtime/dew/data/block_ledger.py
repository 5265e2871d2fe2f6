"""The block cache's ledger (dew.data.blockcache): one SQLite file beside the mirrors, shared by every
process of the host, whose counts are what bounds the mirrors' disk. A block on disk that no ledger
counts is disk past $DEW_CACHE_BYTES, so the ledger's own loss is handled here:

- A thread's connection is made again when the ledger file is no longer the one it opened (deleted by a
  cleanup of the cache directory, or replaced below): one stat a use.
- The process that creates a ledger removes every mirror under the blocks directory and its directory
  (punching its blocks out first), and drops the journals, in the transaction that creates it, before
  any store can write: what a lost ledger counted is never left on disk uncounted. (A reader with a
  mirror open reads zeros there, which fail its checks, and fetches again.)
- A ledger sqlite cannot read (SQLITE_CORRUPT, SQLITE_NOTADB: a disk error, a file cut short) is
  removed, by one process at a time under a lock file and only while it is still the file found
  unreadable, and the work is done again on a new one: a damaged ledger costs the host its cached
  blocks, where it failed every read of every process with sqlite's own "file is not a database".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from dew.data import mirrors, remote

if TYPE_CHECKING:
    import sqlite3

_T = TypeVar("_T")
NAME = "ledger.sqlite"  # the mirrors' diagnostics leave out every file whose name starts so
JOURNALS = "journals"
_LEDGER = threading.local()
_OPENING = threading.Lock()
_OPEN_TRIES = 200
_UNREADABLE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_UNWRITABLE = ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM")
_WARNED: set[str] = set()  # the blocks directories this process has warned are out of disk
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pages (path TEXT, page INTEGER, mask BLOB, bytes INTEGER, used INTEGER, "
    "PRIMARY KEY (path, page))",
    "CREATE INDEX IF NOT EXISTS pages_used ON pages (used)",
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS total (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER)",
    "INSERT OR IGNORE INTO total VALUES (0, 0)",
    "CREATE TABLE IF NOT EXISTS stores (id INTEGER PRIMARY KEY CHECK (id = 0), last INTEGER)",
    "INSERT OR IGNORE INTO stores VALUES (0, 0)",
)


def _fresh_opening_lock() -> None:  # a lock held by a thread at a fork would stay held in the child
    global _OPENING
    _OPENING = threading.Lock()


os.register_at_fork(after_in_child=_fresh_opening_lock)


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def connection() -> sqlite3.Connection:
    """This thread's connection to the host's ledger (one per thread, process id and cache directory,
    made again when the file is not the one it opened)."""
    root = remote.blocks_dir()
    where = os.path.join(root, NAME)
    held = getattr(_LEDGER, "connection", None)
    if held is not None and held[0] == os.getpid() and held[1] == root and held[3] == _inode(where):
        return held[2]
    _drop()
    import sqlite3

    os.makedirs(root, exist_ok=True)
    connection = sqlite3.connect(where, timeout=600, isolation_level=None)
    # Turning a new ledger to WAL takes its lock without waiting on the busy timeout, so the threads of
    # a process (the stream's read-ahead) open it one at a time, and another process's open is waited out.
    with _OPENING:
        for attempt in range(_OPEN_TRIES):
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or attempt == _OPEN_TRIES - 1:
                    raise
                time.sleep(0.05)
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("BEGIN IMMEDIATE")
        try:
            new = connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'stores'").fetchone() is None
            for statement in _SCHEMA:
                connection.execute(statement)
            if new:
                _empty(root)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            connection.close()
            raise
    _LEDGER.connection = (os.getpid(), root, connection, _inode(where))
    return connection


def _drop() -> None:
    held = getattr(_LEDGER, "connection", None)
    _LEDGER.connection = None
    if held is not None and held[0] == os.getpid():
        with contextlib.suppress(Exception):
            held[2].close()


def _empty(root: str) -> None:
    """Under a new ledger's write lock: removes every mirror under `root` and its directory (no ledger
    counts them now), punching its blocks out first (which frees them even under a reader that has it
    open), and removes the journals (of another ledger's stores)."""
    shutil.rmtree(os.path.join(root, JOURNALS), ignore_errors=True)
    for directory, _, names in os.walk(root, topdown=False):
        if directory == root:
            continue  # the ledger's own files
        for name in names:
            path = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                mirrors.punch(path, 0, os.stat(path).st_size)
                os.unlink(path)
        with contextlib.suppress(OSError):  # one a store of the old ledger wrote into meanwhile stays
            os.rmdir(directory)


def using(work: Callable[[sqlite3.Connection], _T]) -> _T:
    """work(this thread's ledger); once more on a new ledger when sqlite cannot read this one, which is
    removed first (only by one process, and only while it is still the file found unreadable)."""
    import sqlite3

    where = os.path.join(remote.blocks_dir(), NAME)
    found = _inode(where)
    try:
        return work(connection())
    except sqlite3.DatabaseError as error:
        name = getattr(error, "sqlite_errorname", "")
        if name in _UNWRITABLE:  # sqlite's own message names no file
            raise OSError(
                f"the block cache's ledger {where} cannot be opened or written ({error}): DEW_CACHE_DIR "
                f"({remote.cache_dir()}) must be a writable directory on a local filesystem"
            ) from error
        if name not in _UNREADABLE:
            raise
    _drop()
    with open(where + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found is not None and _inode(where) == found:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(where + suffix)
    return work(connection())


def out_of_disk(error: BaseException) -> bool:
    """Whether `error` is the cache's filesystem out of room (ENOSPC, a quota, sqlite's SQLITE_FULL)."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    return getattr(error, "sqlite_errorname", "") == "SQLITE_FULL"


def warn_out_of_disk(error: BaseException) -> None:
    """Says once a process and cache that a store found no room on disk (its blocks are served uncached)."""
    root = remote.blocks_dir()
    if root not in _WARNED:
        _WARNED.add(root)
        warnings.warn(
            f"dew's block cache under {root} is out of disk ({error}): batches are served from memory, not "
            f"cached, until there is room. Set DEW_CACHE_BYTES ({remote.cache_budget()}) below that "
            "filesystem's free space",
            RuntimeWarning,
            stacklevel=3,
        )
