"""The SQLite store's schema (through SQLAlchemy Core): messages, chunks, chunk_messages, questions, qrels, ...

Each stage writes its own tables through its own module (:mod:`pmrag.ingest.store`,
:mod:`pmrag.chunking.store`, :mod:`pmrag.represent.summarize`, ...); this module only declares them.

``chunk_messages`` is the paper's ``line_chunk_messages``.  Times are stored as naive local time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import pandas as pd
from sqlalchemy import (
    Boolean, Column, DateTime, Engine, Float, Index, Integer, MetaData, String, Table, Text, create_engine, event, func,
    select,
)

from pmrag.core.ids import timestamp_text

metadata = MetaData()

files = Table(
    "files", metadata,
    Column("sha256", String(64), primary_key=True),
    Column("path", Text, nullable=False),
    Column("format", String, nullable=False),
    Column("encoding", String),
    Column("dialect", String),
    Column("records_read", Integer, nullable=False),
    Column("rejected", Integer, nullable=False),
)

rejections = Table(
    "rejections", metadata,
    Column("sha256", String(64), nullable=False, index=True),
    Column("kind", String, nullable=False),
    Column("location", Text, nullable=False),
    Column("reason", Text, nullable=False),
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
    Index("ix_messages_source_order", "source", "source_order"),
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

stages = Table(                                          # one row per study stage: its key and manifest
    "stages", metadata,
    Column("name", String, primary_key=True),
    Column("key", String(64), nullable=False),
    Column("info", Text, nullable=False),
)

file_fingerprints = Table(                               # content hash of an input file, by size + mtime
    "file_fingerprints", metadata,
    Column("path", Text, primary_key=True),
    Column("size", Integer, nullable=False),
    Column("mtime_ns", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
)


def _sqlite_pragmas(dbapi_connection, _record):
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA cache_size=-262144")  # 256 MiB page cache: bulk inserts into random-key B-trees
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()


def open_store(path) -> Engine:
    """Open (creating if needed) the SQLite database at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", _sqlite_pragmas)
    metadata.create_all(engine)
    return engine


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sql_datetime(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS``: text that SQLAlchemy's SQLite ``DateTime`` type reads back as a datetime."""
    return timestamp_text(value)


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


def read_table(engine: Engine, table: Table | str, order_by: Iterable[str] = ()) -> pd.DataFrame:
    """A whole table as a DataFrame (sorted by ``order_by`` columns when given)."""
    table = metadata.tables[table] if isinstance(table, str) else table
    query = select(table)
    if order_by:
        query = query.order_by(*(table.c[name] for name in order_by))
    with engine.connect() as conn:
        return pd.read_sql(query, conn)


