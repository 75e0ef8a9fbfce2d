"""An annotation store beside a study (000 §4.2–4.3): candidates, pools and grades kept apart from the study.

A study's own store holds its stages' results, cached by content; grades written there would mix a person's
work with what a rerun recomputes.  The annotation store is a store of its own (a file, e.g. in the run folder)
holding a copy of the history it is graded against (``messages``, ``chunks``, ``chunk_messages``), so the
grading widget, hint recovery and the export read everything from it; the study's store is only read, once per
:func:`annotation_store` call, and the copy is replaced there by what the study holds now.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine

from pmrag.core.store import PAGE_CACHE_KIB, StoreError, metadata, open_store

HISTORY_TABLES = ("messages", "chunks", "chunk_messages")


def annotation_store(path, study_store) -> Engine:
    """Open (creating it when missing) the annotation store at ``path`` with the history of the store file
    ``study_store`` copied in (:data:`HISTORY_TABLES`, replacing what it held of them; its candidates, hints,
    pools and grades are kept).  The two must be different files: the study's store is never written.

    A new store is made whole under another name and then put in place (:func:`_new_store`); an existing one gets
    the history in one transaction."""
    path, study_store = Path(path), Path(study_store)
    if not study_store.is_file():
        raise StoreError(f"{study_store}: no study store to copy the history from")
    if path.exists() and path.resolve() == study_store.resolve():
        raise StoreError(f"{path}: the annotation store must be another file than the study's store")
    if (not path.exists() or path.stat().st_size == 0) and _new_store(path, study_store):
        return open_store(path)
    engine = open_store(path)   # an existing store, or a folder where no file could be made: open_store says why
    connection = _copying_connection(path, study_store)
    try:
        with connection:
            for table in HISTORY_TABLES:
                _copy_table(connection, table)
    except sqlite3.Error as exc:
        engine.dispose()
        raise _copy_error(study_store, path, exc) from None
    finally:
        connection.close()
    return engine


def _new_store(path: Path, study_store: Path) -> bool:
    """A new annotation store at ``path`` holding the history: made in a file of its own name
    (``<name>.<random>.partial``) with no journal and no syncing, which a stopped copy leaves as an unused file
    instead of a store without its history, then linked into place.  Without a journal each page is written
    once (WAL writes it to the log and again at the checkpoint): 4.6–4.8 s against 5.8–6.9 s at the paper's
    scale.  Where another process made the store meanwhile, that one is kept.  False where no file can be made
    beside ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".partial", dir=path.parent)
    except OSError:
        return False
    os.close(handle)
    partial = Path(name)
    try:
        open_store(partial).dispose()   # the schema, stamped; left in WAL mode, which the copy turns off
        connection = _copying_connection(partial, study_store, isolation_level=None)
        try:
            connection.execute("PRAGMA main.journal_mode=OFF")   # main only: the study is attached read-only
            connection.execute("PRAGMA main.synchronous=OFF")
            connection.execute("BEGIN")
            for table in HISTORY_TABLES:
                _copy_table(connection, table)
            connection.execute("COMMIT")
            connection.execute("DETACH DATABASE study")
            connection.execute("PRAGMA main.journal_mode=WAL")
        finally:
            connection.close()
        _put_in_place(partial, path)
    except sqlite3.Error as exc:
        raise _copy_error(study_store, path, exc) from None
    finally:
        _remove_database(partial)
    return True


def _put_in_place(partial: Path, path: Path) -> None:
    """``partial`` at ``path`` too, unless a store is there already (another process made it meanwhile): linked,
    which never replaces a file; an empty file there (nothing in it) is replaced, and so is a missing one on a
    file system without hard links."""
    try:
        os.link(partial, path)
    except FileExistsError:
        if path.stat().st_size == 0:
            os.replace(partial, path)
    except OSError:
        if not path.exists():
            os.replace(partial, path)


def _copying_connection(path: Path, study_store: Path, **options) -> sqlite3.Connection:
    connection = sqlite3.connect(_uri(path), uri=True, timeout=60, **options)
    connection.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")   # the store's own size: SQLite's default 2 MiB
    connection.execute("ATTACH DATABASE ? AS study", (_uri(study_store) + "?mode=ro",))   # made copying 3.6M
    return connection                                              # messages' random-key indexes 3× slower


def _copy_error(study_store: Path, path: Path, exc: sqlite3.Error) -> StoreError:
    return StoreError(f"{study_store}: cannot copy the history into {path.name} ({exc})")


def _remove_database(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)


def _copy_table(connection: sqlite3.Connection, table: str) -> None:
    """Replace ``main.table``'s rows by ``study.table``'s.

    Where the two are defined alike (:func:`_same_definition`), one ``INSERT INTO … SELECT *`` copies them, and
    SQLite copies the stored rows and each index's entries as they are, in order (its transfer optimisation, which
    VACUUM uses): 10.9 s instead of 31.7 s for the history of 10× the paper's scale.  Otherwise (a study store
    migrated from an older schema, its columns in another order) the rows are inserted by column name, the secondary
    indexes dropped first and made again after the copy from their own SQL: an index made over the rows sorts them
    once, where filling them row by row (the merge key's index takes 3.6 million random keys at 10× the paper's
    scale) made the first copy of that history take 104 s instead of 55 s."""
    connection.execute(f"DELETE FROM main.{table}")
    if _same_definition(connection, table):
        connection.execute(f"INSERT INTO main.{table} SELECT * FROM study.{table}")
        return
    indexes = connection.execute("SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ? "
                                 "AND sql IS NOT NULL", (table,)).fetchall()
    for name, _ in indexes:
        connection.execute(f'DROP INDEX main."{name}"')
    connection.execute(f"INSERT INTO main.{table} ({_column_list(table)}) {study_rows(table)}")
    for _, sql in indexes:
        connection.execute(sql)


def _same_definition(connection: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` and its indexes are made by the same SQL in ``main`` and ``study`` (so ``SELECT *`` gives
    the columns in ``main``'s order)."""
    return _definition(connection, "main", table) == _definition(connection, "study", table)


def _definition(connection: sqlite3.Connection, schema: str, table: str) -> list[tuple]:
    return sorted(connection.execute(f"SELECT type, name, sql FROM {schema}.sqlite_master WHERE tbl_name = ?",
                                     (table,)).fetchall(), key=repr)


def study_rows(table: str) -> str:
    """The SELECT of ``study.table``'s rows in the order the table stores them: a rowid table by rowid, a WITHOUT
    ROWID table by its primary key.  Unordered, SQLite read ``chunk_messages`` through its covering index on
    ``message_id``, so the copy filled the primary key in random order: 33 s instead of 2.5 s for the 4.1 million
    rows of 10× the paper's scale."""
    definition = metadata.tables[table]
    if definition.dialect_options["sqlite"].get("with_rowid") is False:
        order = ", ".join(f'"{column.name}"' for column in definition.primary_key.columns)
    else:
        order = "rowid"
    return f"SELECT {_column_list(table)} FROM study.{table} ORDER BY {order}"


def _column_list(table: str) -> str:
    """``table``'s columns, quoted, in the schema's order."""
    return ", ".join(f'"{column.name}"' for column in metadata.tables[table].columns)


def _uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve()))
