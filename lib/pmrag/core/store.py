"""The SQLite store's schema (through SQLAlchemy Core): messages, chunks, chunk_messages, questions, qrels, ...

Each stage writes its own tables through its own module (:mod:`pmrag.ingest.store`,
:mod:`pmrag.chunking.store`, :mod:`pmrag.represent.summarize`, ...); this module only declares them.

``chunk_messages`` is the paper's ``line_chunk_messages``.  Times are stored as naive local time.

Opening (:func:`open_store`) and concurrency:

- **Which databases are ours.**  A store is stamped when created: ``PRAGMA application_id`` =
  :data:`APPLICATION_ID` (``"pmrg"``) and ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`.  A database is
  opened as a store when it carries that stamp, when it is empty (a new or zero-byte file: tables are created
  and the stamp set), or when every table it holds is one of ours with our columns (a store written before
  the stamp existed: it is stamped).  Anything else (another program's SQLite file, or one stamped with
  another application ID) is refused and left exactly as it was: no table is added, no pragma written.
- **Refused locations** (:class:`StoreError`, one line naming the file, exit status 2): ``:memory:`` or an
  empty name (a store that vanishes at exit), a directory, a file or folder without write permission (judged
  by its permission bits too, so a read-only file stays read-only even for root), a file that is not a SQLite
  database.  Database errors are reported by SQLite's own message, never by SQLAlchemy's text, which quotes
  the statement's parameters (message texts).
- **Concurrency.**  Every transaction is ``BEGIN IMMEDIATE`` (the driver's implicit transactions are off):
  a writer takes the write lock before its first read, so its counts are those of its own transaction, and a
  second writer waits for the first (``busy_timeout`` :data:`BUSY_TIMEOUT_S`) instead of failing with
  ``database is locked``.  Creating the tables and the stamp happen in one such transaction, after looking
  at what the file holds: two processes creating one new store at once both succeed.  The journal is WAL,
  so readers outside a transaction (the chunking workers) never wait.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import pandas as pd
from sqlalchemy import (
    Boolean, Column, DateTime, Engine, Float, Index, Integer, MetaData, String, Table, Text, create_engine, event, func,
    select, type_coerce,
)
from sqlalchemy.exc import DBAPIError

from pmrag.core.errors import PmragError
from pmrag.core.ids import timestamp_text
from pmrag.core.memory import collection_paused

APPLICATION_ID = 0x706D7267   # "pmrg": ``PRAGMA application_id`` of a pmrag store
SCHEMA_VERSION = 9            # ``PRAGMA user_version`` of a pmrag store (2: messages.merge_key, files by path;
                              # 3: rejections.action; 4: graph_nodes, graph_edges; 5: graph_extractions;
                              # 6: revisions; 7: the gold-annotation tables; 8: candidate_hints.batch;
                              # 9: questions.tags)
BUSY_TIMEOUT_S = 3600.0       # how long a transaction waits for another process's write lock: storing one
                              # export is one all-or-nothing transaction (a 1 GB .txt takes about half an hour)

metadata = MetaData()

files = Table(                                           # one row per file ingested: the same content under two
    "files", metadata,                                   # names is two rows with one sha256
    Column("sha256", String(64), primary_key=True),
    Column("path", Text, primary_key=True),
    Column("format", String, nullable=False),
    Column("encoding", String),
    Column("dialect", String),
    Column("records_read", Integer, nullable=False),
    Column("rejected", Integer, nullable=False),
)

rejections = Table(                                      # what a file's ingest did not store as it was read
    "rejections", metadata,
    Column("sha256", String(64), nullable=False, index=True),
    Column("kind", String, nullable=False),              # message | question | evidence (a LoCoMo evidence id)
    Column("location", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("action", String, nullable=False, server_default="rejected"),   # rejected; evidence: normalised | dropped
)

messages = Table(
    "messages", metadata,
    Column("message_id", String(16), primary_key=True),
    Column("source", String, nullable=False),
    Column("source_order", Integer, nullable=False),
    Column("date_order", Integer, nullable=False),
    Column("occurred_at", DateTime, nullable=False),
    Column("time_unknown", Boolean, nullable=False),
    Column("sender", Text, nullable=False),
    Column("type", String, nullable=False),
    Column("text", Text, nullable=False),
    Column("native_id", String),
    Column("location", Text),
    Column("merge_key", String(40)),                     # NULL: never merged (the paper's rule, or an older store)
    Index("ix_messages_source_order", "source", "source_order"),
    Index("ix_messages_merge_key", "merge_key", unique=True),
)

chunks = Table(
    "chunks", metadata,
    Column("chunk_id", String(16), primary_key=True),
    Column("source", String, nullable=False, index=True),
    Column("chunk_index", Integer, nullable=False),
    Column("session_index", Integer, nullable=False),
    Column("window_index", Integer, nullable=False),
    Column("start_at", DateTime, nullable=False),
    Column("end_at", DateTime, nullable=False),
    Column("n_messages", Integer, nullable=False),
    Column("n_trimmed", Integer, nullable=False),
    Column("raw_text", Text, nullable=False),
)

chunk_messages = Table(
    "chunk_messages", metadata,
    Column("chunk_id", String(16), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("message_id", String(16), nullable=False),
    Index("ix_chunk_messages_message_id", "message_id"),
    sqlite_with_rowid=False,
)
_chunk_messages_by_message = next(iter(chunk_messages.indexes))

questions = Table(
    "questions", metadata,
    Column("question_id", String, primary_key=True),
    Column("text", Text, nullable=False),
    Column("type", String, nullable=False),
    Column("answer", Text),
    Column("source", String),
    Column("tags", Text),                                # a JSON object name -> value (sorted keys); NULL: none
)

question_evidence = Table(
    "question_evidence", metadata,
    Column("question_id", String, primary_key=True),
    Column("message_id", String(16), primary_key=True),
    Column("relevance", Integer, nullable=False),
)

qrels = Table(
    "qrels", metadata,
    Column("question_id", String, primary_key=True),
    Column("chunk_id", String(16), primary_key=True),
    Column("relevance", Integer, nullable=False),
)

summaries = Table(
    "summaries", metadata,
    Column("chunk_id", String(16), primary_key=True),
    Column("backend", String, nullable=False),            # openai | extractive
    Column("requested_model", String),
    Column("response_model", String),                     # the model the response reports
    Column("sdk_version", String),
    Column("input_chars", Integer, nullable=False),       # characters sent (the first 7,000 of raw_text)
    Column("input_sha256", String(64), nullable=False),
    Column("summary", Text),                              # NULL when status is 'error'
    Column("status", String, nullable=False),             # the paper's summary_status: ok | error
    Column("error", Text),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("latency_s", Float),
    Column("attempts", Integer, nullable=False),
    Column("run_id", String, nullable=False),
)

summary_runs = Table(
    "summary_runs", metadata,
    Column("run_id", String, primary_key=True),
    Column("backend", String, nullable=False),
    Column("params", Text, nullable=False),               # JSON of the summarizer params used
    Column("sdk_version", String),
    Column("started_at", String, nullable=False),
    Column("finished_at", String),
    Column("n_ok", Integer),
    Column("n_error", Integer),
    Column("status", String, nullable=False),             # running | done | stopped
)

embedding_inputs = Table(
    "embedding_inputs", metadata,
    Column("representation", String, primary_key=True),
    Column("model", String, primary_key=True),
    Column("chunk_id", String(16), primary_key=True),
    Column("row", Integer, nullable=False),               # row of this chunk in the .npy matrix
    Column("source_chars", Integer, nullable=False),      # representation length before shortening
    Column("text_sent", Text, nullable=False),            # exactly what the embedding call received
    Column("text_sha256", String(64), nullable=False),
)

rankings = Table(
    "rankings", metadata,
    Column("retriever", String, primary_key=True),
    Column("question_id", String, primary_key=True),
    Column("rank", Integer, primary_key=True),
    Column("chunk_id", String(16), nullable=False),
    Column("score", Float, nullable=False),
)

graph_nodes = Table(                                     # TOBUGraph's memory graph (pmrag.represent.graph):
    "graph_nodes", metadata,                             # one row per node of each named graph
    Column("graph", String, primary_key=True),           # the graph's name (several graphs can share a store)
    Column("node_id", Text, primary_key=True),
    Column("kind", String, nullable=False),              # memory | semantic | interest
    Column("subkind", String, nullable=False),           # chunk; summary, participant, person, place ...; interest's
    Column("label", Text, nullable=False),
    Column("aliases", Text, nullable=False),             # JSON list: the surface forms merged into an interest
)

graph_edges = Table(
    "graph_edges", metadata,
    Column("graph", String, primary_key=True),
    Column("source", Text, primary_key=True),            # always a memory node
    Column("target", Text, primary_key=True),            # a semantic or an interest node
    Column("kind", String, nullable=False),              # memory-semantic | memory-interest
)

graph_extractions = Table(                               # the JSON LLM steps' calls (pmrag.represent.llm):
    "graph_extractions", metadata,                       # one row per step and item, its last outcome
    Column("step", String, primary_key=True),            # semantic | interest (extract_llm) | relevance
                                                         # (graph_relevance_llm) | decomposition (subqueries)
                                                         # | question_candidates (pmrag.annotate.propose)
    Column("item_id", Text, primary_key=True),           # the memory id, the interest batch's id (its input's hash), or
                                                         # relevance: question id:question hash:label list hash;
                                                         # decomposition: question id:question hash:max_subqueries;
                                                         # question_candidates: the message batch's id
    Column("status", String, nullable=False),            # ok | error
    Column("requested_model", String, nullable=False),
    Column("response_model", String),                    # the model the response reports
    Column("sdk_version", String),
    Column("system_sha256", String(64), nullable=False), # the step's two prompt files
    Column("user_sha256", String(64), nullable=False),
    Column("input_chars", Integer, nullable=False),
    Column("input_sha256", String(64), nullable=False),  # what was sent after the user template
    Column("output", Text),                              # the validated JSON; NULL when status is 'error'
    Column("error", Text),                               # one line naming the item and the key, never chat text
    Column("dropped_ids", Integer),                      # interest: memory ids of the reply not in the batch, dropped;
                                                         # relevance: chosen interests not in the list, dropped;
                                                         # decomposition: sub-queries dropped by the clean-up
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("latency_s", Float),
    Column("attempts", Integer, nullable=False),
    Column("run_id", String, nullable=False),
    Column("created_at", String, nullable=False),
)

# ------------------------------------------------------------------ gold annotation (000 §4.2–4.3, pmrag.annotate)
# Candidate questions are proposed (a model) or typed (the researcher), with evidence hints; hints are matched to
# messages; a pool of candidate chunks is made per question (TREC-style: the top-depth chunks of several
# retrievers, plus the chunks holding matched messages); annotators grade pooled chunks 0/1/2.  Nothing here is
# ingested data: these tables never raise the ``ingested`` revision.

question_candidates = Table(                             # one row per proposed or typed question
    "question_candidates", metadata,
    Column("candidate_id", String, primary_key=True),    # stable: a hash of origin and text (pmrag.annotate)
    Column("text", Text, nullable=False),                # as proposed or typed
    Column("type", String, nullable=False),              # named_entity | contextual | aggregate, or the dataset's
    Column("origin", String, nullable=False),            # model | typed
    Column("model", String),                             # origin model: the model the response reports
    Column("prompt_sha256", String(64)),                 # origin model: the prompt files' hash
    Column("batch", String),                             # origin model: the message batch's id; typed: the file
    Column("status", String, nullable=False),            # proposed | accepted | edited | dropped
    Column("edited_text", Text),                         # status edited: the text graded and exported
    Column("reason", Text),                              # status dropped: why
    Column("created_at", String, nullable=False),
)

candidate_hints = Table(                                 # a candidate's evidence hints (time, speaker, excerpt)
    "candidate_hints", metadata,
    Column("candidate_id", String, primary_key=True),
    Column("hint", Integer, primary_key=True),           # 0, 1, ... within the candidate
    Column("time_from", DateTime),                       # a time, or a range's start (naive local time)
    Column("time_to", DateTime),                         # a range's end; NULL: time_from alone (with a tolerance)
    Column("speaker", Text),
    Column("excerpt", Text),
    Column("batch", String),                             # the batch (message batch or file) that gave the hint;
)                                                        # NULL: the candidate's own (a store of schema 7)

hint_matches = Table(                                    # what each hint matched, and how
    "hint_matches", metadata,
    Column("candidate_id", String, primary_key=True),
    Column("hint", Integer, primary_key=True),
    Column("message_id", String(16), primary_key=True),
    Column("how", String, nullable=False),               # text | time_speaker | excerpt_search
    Column("score", Float),                              # excerpt_search: the BM25 score; else NULL
)

pool = Table(                                            # candidate chunks per question, in blind grading order
    "pool", metadata,
    Column("pool", String, primary_key=True),            # the pool's name (several pools can share a store)
    Column("question_id", String, primary_key=True),     # a question id or an accepted candidate's id
    Column("chunk_id", String(16), primary_key=True),
    Column("position", Integer, nullable=False),         # blind order: a seeded shuffle, 0-based per question
    Column("origins", Text, nullable=False),             # JSON list: {"retriever": r, "rank": k} | {"hint": i}
)

judgments = Table(                                       # one annotator's grade of one pooled chunk
    "judgments", metadata,
    Column("question_id", String, primary_key=True),
    Column("chunk_id", String(16), primary_key=True),
    Column("annotator", String, primary_key=True),
    Column("relevance", Integer, nullable=False),        # 0 | 1 | 2 (the paper's grades)
    Column("note", Text),
    Column("pool", String),                              # the pool it was graded from
    Column("judged_at", String, nullable=False),
)

question_drops = Table(                                  # an annotator's "drop this question", with the reason
    "question_drops", metadata,
    Column("question_id", String, primary_key=True),
    Column("annotator", String, primary_key=True),
    Column("reason", Text, nullable=False),
    Column("dropped_at", String, nullable=False),
)

adjudications = Table(                                   # the grade settled where annotators disagreed
    "adjudications", metadata,
    Column("question_id", String, primary_key=True),
    Column("chunk_id", String(16), primary_key=True),
    Column("relevance", Integer, nullable=False),
    Column("adjudicator", String, nullable=False),
    Column("note", Text),
    Column("judged_at", String, nullable=False),
)

stages = Table(                                          # one row per study stage: its key and manifest
    "stages", metadata,
    Column("name", String, primary_key=True),
    Column("key", String(64), nullable=False),
    Column("info", Text, nullable=False),
)

revisions = Table(                                       # a counter per kind of data, raised by every write of it
    "revisions", metadata,                               # (``ingested``: messages, questions, evidence, files,
    Column("name", String, primary_key=True),            # rejections), so a stage that read it can tell the
    Column("revision", Integer, nullable=False),         # store changed under it
)
INGESTED = "ingested"

file_fingerprints = Table(                               # content hash of an input file, by size + mtime
    "file_fingerprints", metadata,
    Column("path", Text, primary_key=True),
    Column("size", Integer, nullable=False),
    Column("mtime_ns", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
)


PAGE_CACHE_KIB = 32 << 10
"""SQLite page cache of each store connection.  It was 256 MiB for bulk inserts into random-key B-trees; inserting
messages at 32 MiB was as fast (:data:`pmrag.ingest.store.INSERT_CACHE_KIB`), and a process that only reads (each
notebook kernel) kept up to 256 MiB of pages it read once: at the paper's scale, checking the three vector matrices
against the texts sent for them left 271 MB resident at 256 MiB, 191 MB at 32 MiB."""


class StoreError(PmragError):
    """A database that cannot serve as the store: one line naming the file, never a value it holds."""


def _on_connect(dbapi_connection, _record):
    """Per connection: the driver's implicit transactions off (:func:`_begin_immediate` begins them), and
    connection-local pragmas only: nothing here writes to the file, which may not be ours yet."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()


def _begin_immediate(conn):
    """SQLAlchemy's "begin" event (its documented pysqlite recipe): take the write lock at the start, so a
    transaction never has to upgrade a read lock, which SQLite refuses at once instead of waiting."""
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_store(path) -> Engine:
    """Open the pmrag store at ``path``, creating it (and its folder) when missing or empty.

    Raises :class:`StoreError` for a location that is not a writable file, a file that is not a SQLite
    database, or a database that is not a pmrag store (see the module docstring: such a file is left as it was).
    """
    path = _writable_location(path)
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT_S})
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _begin_immediate)
    try:
        _claim(engine, path)
    except DBAPIError as exc:
        engine.dispose()
        raise store_error(path, exc) from None
    except StoreError:
        engine.dispose()
        raise
    return engine


def _writable_location(path) -> Path:
    """``path`` as a file SQLite can write (its folder created); :class:`StoreError` otherwise."""
    text = str(path)
    if text in ("", ":memory:") or text.startswith("file:"):
        raise StoreError(f"{text or '(empty name)'}: not a database file; the store must be a file "
                         "(an in-memory database would lose everything at exit)")
    path = Path(path)
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a database file")
    if path.exists() and not path.is_file():
        raise StoreError(f"{path}: not a regular file")
    folder = next(folder for folder in path.absolute().parents if folder.exists())  # the nearest that exists
    if not folder.is_dir():
        raise StoreError(f"{path}: {folder} is a file, not a folder")
    if not _writable(folder):
        raise StoreError(f"{path}: its folder is read-only; SQLite writes its journal next to the database")
    if path.exists() and not _writable(path):
        raise StoreError(f"{path}: the file is read-only; the store is written to (make it writable or choose another file)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{path}: cannot create its folder ({exc.strerror})") from None
    return path


def _writable(path: Path) -> bool:
    """Writable by this process and not marked read-only (no write bit at all), even for root."""
    return os.access(path, os.W_OK) and bool(stat.S_IMODE(path.stat().st_mode) & 0o222)


def _claim(engine: Engine, path: Path) -> None:
    """Check what the file holds and create what is missing, in one immediate transaction (a second process
    creating the same store waits, then finds it made); then switch the journal to WAL (outside a transaction,
    as SQLite requires; the mode persists in the file)."""
    with engine.connect() as conn:
        found = _identify(conn, path)
        if found == "unstamped" or (found == "ours" and _user_version(conn) < SCHEMA_VERSION):
            _upgrade(conn)
        if found != "ours" or _missing_tables(conn) or _user_version(conn) < SCHEMA_VERSION:
            metadata.create_all(conn)
            conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
        _switch_to_wal(conn.connection.dbapi_connection)


def _switch_to_wal(dbapi, attempts: int = 600, pause_s: float = 0.05) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another process holds the file: SQLite answers a journal-mode
    change with "database is locked" at once, without calling the busy handler (seen when several processes
    create one store together)."""
    import sqlite3
    import time

    for attempt in range(attempts):
        try:
            if dbapi.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                dbapi.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(pause_s)


def _user_version(conn) -> int:
    return conn.exec_driver_sql("PRAGMA user_version").scalar_one()


def _columns(conn, name: str) -> list[str]:
    return [row[1] for row in conn.exec_driver_sql(f'PRAGMA table_info("{name}")').all()]


def _upgrade(conn) -> None:
    """Bring a store written by an earlier pmrag to :data:`SCHEMA_VERSION` (messages it already holds keep a
    NULL merge key: they are never merged with later exports; the rejections it holds are all ``rejected``).
    Versions 4, 5, 6 and 7 only add tables (``graph_nodes``, ``graph_edges``; ``graph_extractions``;
    ``revisions``; the gold-annotation tables), which :func:`_claim` creates; version 8 adds
    ``candidate_hints.batch`` (NULL for the hints already stored: the candidate's own batch); version 9 adds
    ``questions.tags`` (NULL for the questions already stored: no tags)."""
    tables = _schema_objects(conn)
    if "messages" in tables and "merge_key" not in _columns(conn, "messages"):
        conn.exec_driver_sql("ALTER TABLE messages ADD COLUMN merge_key VARCHAR(40)")
        conn.exec_driver_sql("CREATE UNIQUE INDEX IF NOT EXISTS ix_messages_merge_key ON messages (merge_key)")
    if "rejections" in tables and "action" not in _columns(conn, "rejections"):
        conn.exec_driver_sql("ALTER TABLE rejections ADD COLUMN action VARCHAR NOT NULL DEFAULT 'rejected'")
    if "candidate_hints" in tables and "batch" not in _columns(conn, "candidate_hints"):
        conn.exec_driver_sql("ALTER TABLE candidate_hints ADD COLUMN batch VARCHAR")
    if "questions" in tables and "tags" not in _columns(conn, "questions"):
        conn.exec_driver_sql("ALTER TABLE questions ADD COLUMN tags TEXT")
    if "files" in tables:
        key = [row[1] for row in conn.exec_driver_sql('PRAGMA table_info("files")').all() if row[5]]
        if key == ["sha256"]:   # version 1: one row per content, the path of the last name ingested
            conn.exec_driver_sql("ALTER TABLE files RENAME TO files_v1")
            files.create(conn)
            conn.exec_driver_sql(f"INSERT INTO files ({', '.join(c.name for c in files.columns)}) SELECT "
                                 f"{', '.join(c.name for c in files.columns)} FROM files_v1")
            conn.exec_driver_sql("DROP TABLE files_v1")


def _schema_objects(conn) -> dict[str, str]:
    """``name -> type`` of every table, view and trigger in the database (SQLite's own tables left out)."""
    rows = conn.exec_driver_sql(
        "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') AND name NOT LIKE 'sqlite_%'"
    ).all()
    return dict(rows)


_EARLIER_COLUMNS = {"messages": [c.name for c in messages.columns if c.name != "merge_key"],
                    "rejections": [c.name for c in rejections.columns if c.name != "action"],
                    "questions": [c.name for c in questions.columns if c.name != "tags"]}
"""Tables whose columns changed since schema version 1 (:func:`_upgrade`), as version 1 had them."""


def _is_our_table(conn, name: str, kind: str) -> bool:
    """A table of ours by name, with exactly our columns (another program's ``messages`` is not ours)."""
    if kind != "table" or name not in metadata.tables:
        return False
    columns = _columns(conn, name)
    ours = [column.name for column in metadata.tables[name].columns]
    return columns == ours or columns == _EARLIER_COLUMNS.get(name)


def _identify(conn, path: Path) -> str:
    """``ours`` (stamped), ``empty`` (nothing in it yet) or ``unstamped`` (only our tables: a store from before
    the stamp); :class:`StoreError` for anything else."""
    application_id = conn.exec_driver_sql("PRAGMA application_id").scalar_one()
    if application_id == APPLICATION_ID:
        return "ours"
    if application_id != 0:
        raise StoreError(f"{path}: not a pmrag store (SQLite application_id {application_id:#x}, another program's); "
                         "it was left unchanged; choose another file")
    objects = _schema_objects(conn)
    foreign = sorted(name for name, kind in objects.items() if not _is_our_table(conn, name, kind))
    if foreign:
        example = repr(foreign[0]) if len(foreign[0]) <= 40 else repr(foreign[0][:40] + "…")
        raise StoreError(f"{path}: not a pmrag store ({len(foreign)} table(s) or view(s) pmrag did not create, e.g. "
                         f"{example}); it was left unchanged; choose another file")
    return "unstamped" if objects else "empty"


def _missing_tables(conn) -> bool:
    """True when a table of the current schema is absent (a store from an earlier version of pmrag)."""
    return bool(set(metadata.tables) - set(_schema_objects(conn)))


_SQLITE_REASONS = {
    "file is not a database": "not a SQLite database (or an encrypted one)",
    "database is locked": f"still locked by another process after {BUSY_TIMEOUT_S:.0f} s; try again when it is done",
    "attempt to write a readonly database": "the database is read-only; the store is written to",
    "unable to open database file": "SQLite cannot open or create the file (check the folder and its permissions)",
    "database disk image is malformed": "the database file is damaged",
    "database or disk is full": "the disk is full",
}


def store_error(path, exc: BaseException) -> StoreError:
    """One line for a database error (a SQLAlchemy ``DBAPIError`` or the driver's own exception).

    Only SQLite's own message is used, never SQLAlchemy's text: that appends the statement and its
    parameters, which hold message texts.  (SQLite's messages name constraints and columns, never values.)
    """
    driver_error = getattr(exc, "orig", None) or exc
    reason = str(driver_error.args[0]) if driver_error.args else type(driver_error).__name__
    reason = (reason.splitlines() or [""])[0][:200]
    return StoreError(f"{path}: {_SQLITE_REASONS.get(reason.lower(), f'SQLite error: {reason}')}")


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sql_datetime(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS``: text that SQLAlchemy's SQLite ``DateTime`` type reads back as a datetime."""
    return timestamp_text(value)


def bump_revision(conn, name: str = INGESTED) -> None:
    """Raise ``name``'s revision by one, inside the caller's transaction (the one that wrote the data)."""
    conn.exec_driver_sql("INSERT INTO revisions (name, revision) VALUES (?, 1) "
                         "ON CONFLICT (name) DO UPDATE SET revision = revision + 1", (name,))


def read_revision(engine: Engine, name: str = INGESTED) -> int:
    """``name``'s revision: 0 before its first write."""
    with engine.connect() as conn:
        found = conn.execute(select(revisions.c.revision).where(revisions.c.name == name)).scalar_one_or_none()
    return int(found or 0)


def write_rankings(engine: Engine, retriever: str, ranked: pd.DataFrame) -> None:
    """Replace one retriever's rows of ``rankings`` by ``ranked`` (question_id, rank, chunk_id, score)."""
    with engine.begin() as conn:
        conn.execute(rankings.delete().where(rankings.c.retriever == retriever))
        bulk_insert(conn, rankings, list(zip([retriever] * len(ranked), ranked["question_id"].tolist(),
                                             ranked["rank"].tolist(), ranked["chunk_id"].tolist(),
                                             ranked["score"].tolist())))


def bulk_insert(conn, table: Table, rows: list[tuple], prefix: str = "") -> None:
    """``executemany`` straight to the driver: SQLAlchemy's per-row parameter processing cost ~2x at 358k rows.

    ``rows`` are tuples in the table's column order, datetimes already as :func:`sql_datetime` text.
    """
    if not rows:
        return
    names = ", ".join(c.name for c in table.columns)
    marks = ", ".join("?" for _ in table.columns)
    conn.exec_driver_sql(f"INSERT {prefix} INTO {table.name} ({names}) VALUES ({marks})", rows)


def count_rows(conn, table) -> int:
    return conn.execute(select(func.count()).select_from(table)).scalar_one()


def count_messages(engine: Engine) -> int:
    with engine.connect() as conn:
        return count_rows(conn, messages)


def distinct_values(engine: Engine, column, *, many: bool = False) -> set:
    """The distinct values of one stored ``column`` (a SQLAlchemy column of a table), in no order.

    SQLite's ``DISTINCT`` finds a few distinct values among millions of rows without handing every row to Python
    (a message's source, read from its index; its sender).  ``many=True`` (message texts) gathers them into a set
    here instead, as the column is scanned: SQLite's temporary B-tree took 10.9 s for the 3.6 million texts at 10×
    the paper's scale, the set 5.0 s."""
    query = f'SELECT {"" if many else "DISTINCT "}"{column.name}" FROM "{column.table.name}"'
    with engine.connect() as conn:
        return {value for (value,) in conn.connection.dbapi_connection.execute(query)}


def read_table(engine: Engine, table: Table | str, order_by: Iterable[str] = (),
               columns: Iterable[str] | None = None, where=None) -> pd.DataFrame:
    """A whole table as a DataFrame (sorted by ``order_by`` columns when given; only ``columns``, in that order,
    when given; only the rows a SQLAlchemy condition ``where`` holds for, when given)."""
    table = metadata.tables[table] if isinstance(table, str) else table
    chosen = list(table.c) if columns is None else [_column(table, name) for name in columns]
    as_text = [column.name for column in chosen if _parsed_here(column)]
    query = select(*(type_coerce(column, Text).label(column.name) if column.name in as_text else column
                     for column in chosen))
    if where is not None:
        query = query.where(where)
    if order_by:
        query = query.order_by(*(table.c[name] for name in order_by))
    shared = SharedStrings()
    with collection_paused(), engine.connect() as conn:   # rows of atoms: nothing for the collector to walk
        parts = [shared(_timestamps(part, as_text)) for part in pd.read_sql(query, conn, chunksize=READ_ROWS)]
    return parts[0] if len(parts) == 1 else _joined(parts)


def rows_frame(table: Table, rows: Sequence[tuple]) -> pd.DataFrame:
    """``rows`` of ``table`` as :func:`bulk_insert` stores them (tuples in the table's column order, datetimes as
    :func:`sql_datetime` text) in the frame :func:`read_table` reads back: for a writer that still holds what it
    stored (the values, dtypes and column order are the same; a repeated string is one object only where the rows
    hold it so, not by :class:`SharedStrings`)."""
    frame = pd.DataFrame.from_records(list(rows), columns=[column.name for column in table.c])
    return _timestamps(frame, [column.name for column in table.c if _parsed_here(column)])


def _parsed_here(column) -> bool:
    """A ``NOT NULL`` ``DateTime`` column is read as its stored text and parsed by pandas in one vectorised call
    (:func:`_timestamps`): SQLAlchemy's type parses each value with a regular expression into a ``datetime``, which
    pandas then converts again (8.7 of the 14.0 s that three columns of 3.6 million messages took).  A nullable one
    keeps SQLAlchemy's parsing, so a column NULL throughout stays as it was read."""
    return isinstance(column.type, DateTime) and not column.nullable


def _timestamps(part: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``part`` with the columns ``names`` (SQLAlchemy's SQLite ``DateTime`` text: ``YYYY-MM-DD HH:MM:SS`` and
    optionally ``.ffffff``) parsed to the timestamps, and dtype, SQLAlchemy's datetimes give."""
    for name in names:
        part[name] = pd.to_datetime(part[name], format="ISO8601")
    return part


class SharedStrings:
    """Each repeated string of a column as one object: the driver makes a new ``str`` for every cell, so a column
    of a few distinct values (a message's source, sender and type; a chunk's id in ``chunk_messages``) held one
    object per row — 3.6 million per column at 10× the paper's scale, about 80 bytes each.  Called on each block
    of one read: the columns are chosen on the first block (:func:`_repetitive`: strings, distinct values at most
    :data:`SHARED_AT_MOST` of its rows), and a value seen in an earlier block is that block's object.  The values,
    dtypes and order are unchanged; pickling keeps the sharing (pickle writes an object once)."""

    def __init__(self):
        self.columns: list[str] | None = None
        self.canonical: dict = {}

    def __call__(self, part: pd.DataFrame) -> pd.DataFrame:
        if self.columns is None:
            self.columns = [name for name in part.columns if _repetitive(part[name])]
        for name in self.columns:
            if pd.api.types.is_string_dtype(part[name]):   # a column NULL throughout the first block may hold numbers
                part[name] = self._shared(part[name])
        return part

    def _shared(self, column: pd.Series) -> pd.Series:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        canonical = pd.array([self.canonical.setdefault(value, value) for value in uniques], dtype=column.dtype)
        return pd.Series(canonical.take(codes), index=column.index, name=column.name)


SHARED_AT_MOST = 0.5
SHARED_MIN_ROWS = 1_000   # below it, nothing worth the factorising


def _repetitive(column: pd.Series) -> bool:
    """A column of strings (str, or object holding only strings and missing values: never numbers, which a dict
    would merge with their equals, ``1`` with ``True``) of at least :data:`SHARED_MIN_ROWS` rows whose distinct
    values are at most :data:`SHARED_AT_MOST` of them."""
    if len(column) < SHARED_MIN_ROWS or not pd.api.types.is_string_dtype(column):
        return False
    return column.nunique(dropna=False) <= SHARED_AT_MOST * len(column)


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Blocks of one query's rows as one frame with the dtypes a single read infers: a column whose blocks were
    inferred differently (NULL throughout one block: object, strings in another: str) is inferred again over all
    its values."""
    joined = pd.concat(parts, ignore_index=True)
    for name in joined.columns:
        if len({str(part[name].dtype) for part in parts}) > 1:
            joined[name] = pd.Series(joined[name].to_numpy(dtype=object)).infer_objects()
    return joined


READ_ROWS = 100_000
"""Rows :func:`read_table` turns into a DataFrame at a time: a whole table read at once holds every row as Python
objects beside the frame (3.6 million messages at 10× the paper's scale: a 4.7 GB peak); a block at a time, the
frame and one block (3.4 GB)."""


def _column(table: Table, name: str):
    if name not in table.c:
        raise KeyError(f"table {table.name!r} has no column {name!r}; it has {', '.join(table.c.keys())}")
    return table.c[name]


MESSAGE_ORDER = ("source", "occurred_at", "source_order")
"""The order the study reads messages in: by source, time and position in the file."""


def stored_messages(engine: Engine, columns: Iterable[str] | None = None,
                    ids: Iterable[str] | None = None, *, ordered: bool = True) -> pd.DataFrame:
    """The store's messages in :data:`MESSAGE_ORDER`: every column, or only ``columns`` (a reader that needs a
    few columns of millions of messages reads a fraction of the table); every message, or only those ``ids``
    names (an id the store lacks is simply not there: the caller that must have it checks).  ``ordered=False``
    reads every message in the store's own order, for a reader whose result does not depend on it.

    The order is made here, not by SQLite: the rows are read as the table is scanned and sorted by a stable sort
    (ties, which the order's columns leave only between two files naming one source, stay in the table's order, as
    SQLite's sorter leaves them).  SQLite sorting millions of rows spills to temporary files: two columns of 3.6
    million messages took 16.9 s read in order against 7.5 s scanned."""
    columns = None if columns is None else list(columns)   # read twice below: an iterator would be spent
    names = None if columns is None else list(dict.fromkeys([*columns, *MESSAGE_ORDER]))
    if ids is None:
        if not ordered:
            return read_table(engine, messages, (), columns)
        parts = [read_table(engine, messages, (), names)]
    else:
        wanted = sorted(set(ids))
        parts = [read_table(engine, messages, (), names, where=messages.c.message_id.in_(wanted[at:at + ID_BATCH]))
                 for at in range(0, max(len(wanted), 1), ID_BATCH)]
    frame = parts[0] if len(parts) == 1 else _joined(parts)
    frame = frame.sort_values(list(MESSAGE_ORDER), ignore_index=True, kind="stable")
    return frame if columns is None else frame[columns]


ID_BATCH = 10_000
"""Message ids bound in one ``IN (…)`` query (SQLite allows 32,766 variables since 3.32)."""


