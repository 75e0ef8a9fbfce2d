"""A content-addressed cache in one SQLite file: the base of the embedding cache and the token cache.

A key is a hash of everything that makes an entry (model or tokenizer configuration, exact text), so a key
never changes meaning and entries are never invalidated; a cache is safe to share between runs and studies.
The file holds one table whose first column is ``key TEXT PRIMARY KEY``; a subclass names the table and its
other columns and reads and writes its entries through :meth:`SqliteCache._rows` and :meth:`SqliteCache._put`.

Connection settings: a 60 s busy timeout (another process writing waits rather than fails), ``synchronous =
NORMAL``, and, for a cache several processes write at once (the token cache's workers), the write-ahead log
(``wal = True``).  The journal mode is a property of the file, so a cache without ``wal`` leaves an existing
file's header as it is (the committed demo embedding cache stays byte-identical when only read).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar, Self

BUSY_TIMEOUT_S = 60
LOOKUP_CHUNK = 500   # keys per SELECT ... IN (...): below SQLite's default limit of bound parameters


class SqliteCache:
    """Entries ``key → columns`` in table :attr:`table` of one SQLite file, created on first use.

    Parameters
    ----------
    path : the SQLite file; its folder is created if missing.

    A context manager (the connection is closed on exit); ``len(cache)`` counts its entries.
    """

    table: ClassVar[str]
    columns: ClassVar[str]      # the columns after ``key``, as in CREATE TABLE (``model_id TEXT NOT NULL, ...``)
    wal: ClassVar[bool] = False

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        if self.wal:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, {self.columns})")
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return self._db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    def _rows(self, keys: Sequence[str], columns: str) -> Iterator[tuple]:
        """``(key, *columns)`` of every cached key among ``keys`` (each key once, missing ones absent)."""
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), LOOKUP_CHUNK):
            part = unique[start:start + LOOKUP_CHUNK]
            marks = ",".join("?" * len(part))
            yield from self._db.execute(f"SELECT key, {columns} FROM {self.table} WHERE key IN ({marks})", part)

    def _put(self, columns: str, rows: Sequence[tuple]) -> None:
        """Insert or replace ``rows`` (``(key, *columns)`` each) in one transaction."""
        marks = ",".join("?" * (1 + len(columns.split(","))))
        with self._db:
            self._db.executemany(f"INSERT OR REPLACE INTO {self.table} (key, {columns}) VALUES ({marks})", rows)
