"""A content-addressed cache in one SQLite file: the base of the embedding cache and the token cache.

A key is a hash of everything that makes an entry (model or tokenizer configuration, exact text), so a key
never changes meaning and entries are never invalidated; a cache is safe to share between runs and studies.
The file holds one table whose first column is ``key TEXT PRIMARY KEY``; a subclass names the table and its
other columns and reads and writes its entries through :meth:`SqliteCache._rows` and :meth:`SqliteCache._put`.

Connection settings: a 60 s busy timeout (another process writing waits rather than fails), ``synchronous =
NORMAL``, and, for a cache several processes write at once (the token cache's workers), the write-ahead log
(``wal = True``).  The journal mode is a property of the file, so a cache without ``wal`` leaves an existing
file's header as it is (the committed demo embedding cache stays byte-identical when only read).  A file
without any write permission bit is opened read-only (even by root): it is read, and refused only when an
entry must be stored.

A cache trusts nothing it reads back:

* **A file it cannot use** (not a SQLite database, corrupt pages, a folder in its place, another program's
  tables or other columns, a read-only file where an entry must be stored, a lock held past the busy timeout,
  a full disk) raises :class:`CacheError`: one line naming the file, what is wrong and what to do, never
  "the study's store", never a value the file holds.  A damaged file is **not** moved aside or rebuilt
  automatically, although it only holds outputs that can be recomputed: recomputing them costs time (the
  demo's vectors are half an hour of CPU) or money (a remote embedding API), the damage may be a failing disk
  that the user should hear about, and a path that points at someone else's file must never be deleted by
  us.  The message says that deleting the file rebuilds it; the user decides.
* **An entry that reads but fails its cache's checks** (a vector that is not finite, of another dimension or
  not of unit length; tokens that are not UTF-8 text or hold an empty token; an entry filed under another
  model or configuration) is *refused*: the lookup leaves it out, so the caller treats it as a miss,
  recomputes it and stores it again (insert or replace), at the cost of those entries only.  Refusals are
  counted by reason and reported in one warning line per cache file when the cache is closed, or, inside
  :func:`one_warning_per_file` (``pmrag study``), once per file at the end of the run.  The line holds counts,
  never a key's text.
* **A lookup that returns a key it was not asked for, or a key twice** (a corrupt index), is a damaged file;
  a lookup's missing keys are misses, never silently short: the caller computes every key it did not get.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Self

from pmrag.core.errors import PmragError

BUSY_TIMEOUT_S = 60
LOOKUP_CHUNK = 500   # keys per SELECT ... IN (...): below SQLite's default limit of bound parameters


class CacheError(PmragError):
    """A cache file that cannot be used: one line naming the file, what is wrong and what to do."""


# SQLite's own messages (lower case, as they start) → what is wrong, and whether the file is damaged (deleting it
# rebuilds it) or the situation is (a lock, a permission, a full disk: deleting would not help or would hurt).
_DAMAGED = {
    "file is not a database": "not a SQLite database",
    "database disk image is malformed": "its pages are corrupt",
    "malformed database schema": "its schema is corrupt",
    "no such column": "its table has other columns",
    "no such table": "its table is missing",
    "could not decode to utf-8": "a text column is not UTF-8 text",
}
_SITUATIONS = {
    "database is locked": "is still locked by another process after {timeout} s; try again when it is done",
    "database table is locked": "is still locked by another process after {timeout} s; try again when it is done",
    "attempt to write a readonly database": ("is read-only and new entries must be stored in it; make it writable, "
                                             "or set cache_dir to a folder of your own"),
    "unable to open database file": ("cannot be opened or created (check the file, its folder and their "
                                     "permissions: SQLite writes a journal next to it)"),
    "database or disk is full": "cannot store new entries: the disk is full",
    "disk i/o error": "cannot be read or written: the disk reports an I/O error",
}


def _writable(path: Path) -> bool:
    """Writable by this process and marked writable (some write bit set), even for root."""
    return os.access(path, os.W_OK) and bool(stat.S_IMODE(path.stat().st_mode) & 0o222)


class SqliteCache:
    """Entries ``key → columns`` in table :attr:`table` of one SQLite file, created on first use.

    Parameters
    ----------
    path : the SQLite file; its folder is created if missing.

    A context manager (the connection is closed on exit); ``len(cache)`` counts its entries.  Raises
    :class:`CacheError` for a file it cannot use (module docstring); :attr:`refused` counts, by reason, the
    entries this cache object refused (reported on :meth:`close`).
    """

    table: ClassVar[str]
    columns: ClassVar[str]      # the columns after ``key``, as in CREATE TABLE (``model_id TEXT NOT NULL, ...``)
    wal: ClassVar[bool] = False
    what: ClassVar[str] = "cache"          # the cache in messages: "the <what> is damaged"
    holds: ClassVar[str] = "recomputable outputs"   # what deleting it loses: "(it only holds <holds>)"

    def __init__(self, path):
        self.path = Path(path)
        self.refused: Counter[str] = Counter()
        self._db = None
        if self.path.is_dir():
            raise self.damaged("a folder is in its place")
        if self.path.exists() and not self.path.is_file():
            raise self.damaged("not a regular file")
        self.read_only = self.path.is_file() and not _writable(self.path)
        try:
            with self.sqlite_errors():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.read_only:
                    self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                               timeout=BUSY_TIMEOUT_S)
                else:
                    self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
                self._claim()
        except CacheError:
            if self._db is not None:
                self._db.close()
            raise

    def _claim(self) -> None:
        """Check the file holds this cache's table and no other table, view or trigger (a trigger could rewrite
        or drop entries unseen), creating the table in an empty file."""
        objects = self._db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') "
                                   "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
        mine = [name for kind, name in objects if kind == "table" and name == self.table]
        if len(objects) > len(mine):
            raise self.damaged(f"it holds {len(objects) - len(mine)} other table(s), view(s) or trigger(s): "
                               f"it is no {self.what}")
        if mine:
            found = [row[1] for row in self._db.execute(f"PRAGMA table_info({self.table})")]
            expected = ["key"] + [column.split()[0] for column in self.columns.split(",")]
            if found != expected:
                raise self.damaged("its table has other columns")
        if self.wal and not self.read_only:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        if not mine:
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, {self.columns})")
            self._db.commit()

    # ----------------------------------------------------------------------------------------- errors

    def damaged(self, reason: str) -> CacheError:
        """The one line for a damaged file: what is wrong, and that deleting it rebuilds it."""
        files = "it and its -wal and -shm files" if self.wal else "it"
        return CacheError(f"{self.path}: the {self.what} is damaged ({reason}); delete {files} to rebuild it "
                          f"(it only holds {self.holds})")

    def error(self, exc: BaseException) -> CacheError:
        """The one line for a SQLite or file-system error met using this cache (SQLite's reason, never a value)."""
        if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
            reason = exc.strerror or type(exc).__name__
            return CacheError(f"{self.path}: the {self.what} cannot be opened or created ({reason})")
        reason = (str(exc.args[0]) if exc.args else "").splitlines()
        reason = reason[0] if reason else type(exc).__name__
        lower = reason.lower()
        for start, what in _DAMAGED.items():
            if lower.startswith(start):
                return self.damaged(what)
        for start, what in _SITUATIONS.items():
            if lower.startswith(start):
                return CacheError(f"{self.path}: the {self.what} {what.format(timeout=BUSY_TIMEOUT_S)}")
        return CacheError(f"{self.path}: the {self.what} cannot be used (SQLite error: {reason[:200]})")

    @contextmanager
    def sqlite_errors(self):
        """Inside: a SQLite or file-system error becomes this cache's :class:`CacheError` (a misuse, such as a
        closed cache, stays the ``sqlite3.ProgrammingError`` it is)."""
        try:
            yield
        except sqlite3.ProgrammingError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self.error(exc) from None

    # ------------------------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection and report this object's refused entries (:func:`report_refused`)."""
        if self._db is not None:
            self._db.close()
        if self.refused:
            report_refused(self.path, self.what, self.refused)
            self.refused = Counter()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        with self.sqlite_errors():
            return self._db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    def refuse(self, reason: str, count: int = 1) -> None:
        """Count ``count`` entries refused for ``reason`` (said in the warning line: "3 not finite")."""
        if count:
            self.refused[reason] += count

    # ------------------------------------------------------------------------------------ entries

    def _rows(self, keys: Sequence[str], columns: str) -> Iterator[tuple]:
        """``(key, *columns)`` of every cached key among ``keys`` (each key once, missing ones absent).

        A row for a key that was not asked for, or a key returned twice, means a corrupt index: :meth:`damaged`.
        """
        unique = list(dict.fromkeys(keys))
        asked, seen = set(unique), set()
        with self.sqlite_errors():
            for start in range(0, len(unique), LOOKUP_CHUNK):
                part = unique[start:start + LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                for row in self._db.execute(f"SELECT key, {columns} FROM {self.table} WHERE key IN ({marks})", part):
                    if row[0] not in asked or row[0] in seen:
                        raise self.damaged("a lookup returned a key it was not asked for, or one key twice: "
                                           "its index is corrupt")
                    seen.add(row[0])
                    yield row

    def _put(self, columns: str, rows: Sequence[tuple]) -> None:
        """Insert or replace ``rows`` (``(key, *columns)`` each) in one transaction."""
        marks = ",".join("?" * (1 + len(columns.split(","))))
        with self.sqlite_errors(), self._db:
            stored = self._db.executemany(
                f"INSERT OR REPLACE INTO {self.table} (key, {columns}) VALUES ({marks})", rows).rowcount
            if stored != len(rows):
                raise self.damaged(f"{stored} of {len(rows)} entries were stored")


# ------------------------------------------------------------------------------------------ refusals

_collecting: dict[Path, tuple[str, Counter]] | None = None
_collecting_lock = threading.Lock()


def refused_line(path, what: str, refused: Counter) -> str:
    """``warning: <path>: the <what> refused N entries (3 not finite, 1 of another dimension); ...``: counts only."""
    total = sum(refused.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(refused.items(), key=lambda item: (-item[1], item[0])))
    entries = "entry" if total == 1 else "entries"
    return (f"warning: {path}: the {what} refused {total} {entries} ({reasons}); treated as cache misses: "
            "recomputed and stored again")


def report_refused(path, what: str, refused: Counter) -> None:
    """Print :func:`refused_line` on stderr, or add the counts to the run's (:func:`one_warning_per_file`)."""
    with _collecting_lock:
        if _collecting is not None:
            _, counts = _collecting.setdefault(Path(path), (what, Counter()))
            counts.update(refused)
            return
    print(refused_line(path, what, refused), file=sys.stderr, flush=True)


@contextmanager
def one_warning_per_file():
    """Inside, refused entries are summed per cache file and reported in one warning line per file on leaving
    (a ``pmrag study`` run opens the embedding cache once per stage that embeds).  Nested uses report once, at
    the outermost."""
    global _collecting
    with _collecting_lock:
        outermost = _collecting is None
        if outermost:
            _collecting = {}
    try:
        yield
    finally:
        if outermost:
            with _collecting_lock:
                collected, _collecting = _collecting, None
            for path, (what, counts) in collected.items():
                print(refused_line(path, what, counts), file=sys.stderr, flush=True)
