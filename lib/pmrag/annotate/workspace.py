"""An annotation store beside a study (000 §4.2–4.3): candidates, pools and grades kept apart from the study.

A study's own store holds its stages' results, cached by content; grades written there would mix a person's
work with what a rerun recomputes.  The annotation store is a store of its own (a file, e.g. in the run folder)
holding a copy of the history it is graded against (``messages``, ``chunks``, ``chunk_messages``), so the
grading widget, hint recovery and the export read everything from it; the study's store is only read, once per
:func:`annotation_store` call, and the copy is replaced there by what the study holds now.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine

from pmrag.core.store import PAGE_CACHE_KIB, StoreError, metadata, open_store

HISTORY_TABLES = ("messages", "chunks", "chunk_messages")


def annotation_store(path, study_store) -> Engine:
    """Open (creating it when missing) the annotation store at ``path`` with the history of the store file
    ``study_store`` copied in (:data:`HISTORY_TABLES`, replacing what it held of them; its candidates, hints,
    pools and grades are kept).  The two must be different files: the study's store is never written."""
    path, study_store = Path(path), Path(study_store)
    if not study_store.is_file():
        raise StoreError(f"{study_store}: no study store to copy the history from")
    if path.exists() and path.resolve() == study_store.resolve():
        raise StoreError(f"{path}: the annotation store must be another file than the study's store")
    engine = open_store(path)
    connection = sqlite3.connect(_uri(path), uri=True, timeout=60)
    connection.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")   # the store's own size: SQLite's default 2 MiB made
    try:                                                         # copying 3.6M messages' random-key indexes 3× slower
        connection.execute("ATTACH DATABASE ? AS study", (_uri(study_store) + "?mode=ro",))
        with connection:
            for table in HISTORY_TABLES:
                _copy_table(connection, table)
    except sqlite3.Error as exc:
        engine.dispose()
        raise StoreError(f"{study_store}: cannot copy the history into {path.name} ({exc})") from None
    finally:
        connection.close()
    return engine


def _copy_table(connection: sqlite3.Connection, table: str) -> None:
    """Replace ``main.table``'s rows by ``study.table``'s.  Its secondary indexes are dropped first and made
    again after the copy, from their own SQL: an index made over the rows sorts them once, where filling them row by
    row (the merge key's index takes 3.6 million random keys at 10× the paper's scale) made the first copy of that
    history take 104 s instead of 55 s."""
    indexes = connection.execute("SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ? "
                                 "AND sql IS NOT NULL", (table,)).fetchall()
    for name, _ in indexes:
        connection.execute(f'DROP INDEX main."{name}"')
    columns = ", ".join(f'"{column.name}"' for column in metadata.tables[table].columns)
    connection.execute(f"DELETE FROM main.{table}")
    connection.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM study.{table}")
    for _, sql in indexes:
        connection.execute(sql)


def _uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve()))
