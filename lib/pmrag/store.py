"""The SQLite store (through SQLAlchemy Core): messages, chunks, chunk_messages, questions, qrels.

``chunk_messages`` is the paper's ``line_chunk_messages``.  Times are stored as naive local time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
from sqlalchemy import (
    Boolean, Column, DateTime, Engine, Float, Index, Integer, MetaData, String, Table, Text, create_engine, delete, event,
    func, insert, select,
)

from pmrag._parallel import ordered_map
from pmrag.chunking import Chunk, ChunkingParams, ChunkMessage, chunk_source
from pmrag.errors import InputError
from pmrag.ids import timestamp_text
from pmrag.records import QuestionRecord, SourceBatch

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

stages = Table(
    "stages", metadata,
    Column("name", String, primary_key=True),
    Column("key", String(64), nullable=False),
    Column("info", Text, nullable=False),
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


@dataclass(frozen=True)
class StoreReport:
    """Reconciliation of one file: ``read == stored + already_present + rejected``."""

    path: str
    format: str
    encoding: str
    dialect: str
    read: int
    stored: int
    already_present: int
    rejected: int
    questions_read: int
    questions_stored: int
    questions_rejected: int

    def line(self) -> str:
        text = (
            f"{self.path}: {self.format} ({self.dialect}; {self.encoding}): read {self.read}, stored {self.stored}, "
            f"already present {self.already_present}, rejected {self.rejected}"
        )
        if self.questions_read:
            text += f"; questions read {self.questions_read}, stored {self.questions_stored}, rejected {self.questions_rejected}"
        return text


def _sql_datetime(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS``: text that SQLAlchemy's SQLite ``DateTime`` type reads back as a datetime."""
    return timestamp_text(value)


def _bulk_insert(conn, table: Table, rows: list[tuple], prefix: str = "") -> None:
    """``executemany`` straight to the driver: SQLAlchemy's per-row parameter processing cost ~2x at 358k rows.

    ``rows`` are tuples in the table's column order, datetimes already as :func:`_sql_datetime` text.
    """
    if not rows:
        return
    names = ", ".join(c.name for c in table.columns)
    marks = ", ".join("?" for _ in table.columns)
    conn.exec_driver_sql(f"INSERT {prefix} INTO {table.name} ({names}) VALUES ({marks})", rows)


def message_rows(batch: SourceBatch) -> list[tuple]:
    """Rows in primary-key (message ID) order, so inserts walk the index in order instead of at random."""
    return sorted(
        (m.message_id, m.source, m.source_order, m.date_order, m.occurred_text, m.time_unknown,
         m.sender, m.type, m.text, m.native_id, m.location)
        for m in batch.messages
    )


def _count(conn, table) -> int:
    return conn.execute(select(func.count()).select_from(table)).scalar_one()


def _resolve_evidence(conn, path: str, question: QuestionRecord) -> dict[str, int]:
    """``message_id -> relevance`` (the higher relevance wins when a message is listed twice)."""
    resolved: dict[str, int] = {}
    for index, ev in enumerate(question.evidence):
        where = f"question {question.question_id!r}, evidence[{index}]"
        if ev.message_id is not None:
            found = conn.execute(select(messages.c.message_id).where(messages.c.message_id == ev.message_id)).first()
            if found is None:
                raise InputError(path, where, f"message_id {ev.message_id!r} is not in the store; ingest its source first")
            mid = ev.message_id
        else:
            rows = conn.execute(
                select(messages.c.message_id).where(messages.c.source == ev.source, messages.c.source_order == ev.source_order)
            ).all()
            if len(rows) != 1:
                state = "no message" if not rows else f"{len(rows)} messages"
                raise InputError(path, where, f"source {ev.source!r} source_order {ev.source_order} matches {state}; expected one")
            mid = rows[0][0]
        resolved[mid] = max(resolved.get(mid, 0), ev.relevance)
    return resolved


def store_batch(engine: Engine, batch: SourceBatch, sha256: str, rows: list[tuple] | None = None) -> StoreReport:
    """Store one adapter batch; a message already in the store (same message ID) is not stored twice.

    ``rows`` are the batch's :func:`message_rows` when a worker process already built them (the batch's
    ``messages`` list is then empty: tuples cross a process boundary far cheaper than records).
    """
    rows = message_rows(batch) if rows is None else rows
    with engine.begin() as conn:
        before = _count(conn, messages)
        _bulk_insert(conn, messages, rows, "OR IGNORE")
        stored = _count(conn, messages) - before
        for question in batch.questions:
            evidence = _resolve_evidence(conn, batch.path, question)
            conn.execute(delete(question_evidence).where(question_evidence.c.question_id == question.question_id))
            conn.execute(insert(questions).prefix_with("OR REPLACE"), [{
                "question_id": question.question_id, "text": question.text, "type": question.type,
                "answer": question.answer, "source": question.source,
            }])
            conn.execute(insert(question_evidence), [
                {"question_id": question.question_id, "message_id": mid, "relevance": rel} for mid, rel in evidence.items()
            ])
        conn.execute(delete(rejections).where(rejections.c.sha256 == sha256))
        if batch.rejected:
            conn.execute(insert(rejections), [
                {"sha256": sha256, "kind": r.kind, "location": r.location, "reason": r.reason} for r in batch.rejected
            ])
        conn.execute(insert(files).prefix_with("OR REPLACE"), [{
            "sha256": sha256, "path": batch.path, "format": batch.format, "encoding": batch.encoding,
            "dialect": batch.dialect, "records_read": batch.records_read, "rejected": len(batch.rejected),
        }])
    rejected_messages = sum(r.kind == "message" for r in batch.rejected)
    return StoreReport(
        path=batch.path, format=batch.format, encoding=batch.encoding, dialect=batch.dialect,
        read=batch.records_read, stored=stored, already_present=len(rows) - stored, rejected=rejected_messages,
        questions_read=batch.questions_read, questions_stored=len(batch.questions),
        questions_rejected=batch.questions_read - len(batch.questions),
    )


PARALLEL_CHUNKING_MIN_MESSAGES = 50_000  # below this, starting worker processes costs more than it saves
_MESSAGE_COLUMNS = "message_id, source, source_order, occurred_at, sender, text"


def _chunk_messages(rows: list[tuple]) -> list[ChunkMessage]:
    """Rows ``(message_id, source, source_order, occurred_at text, sender, text)`` as chunking input.

    Sorted by ``(source_order, message_id)`` first: that makes chunking's stable sort deterministic even
    when one source came from several files (two messages may then share a ``source_order``).  Parsed
    with ``datetime.fromisoformat``: SQLAlchemy's per-row result processing took longer than chunking.
    """
    parse = datetime.fromisoformat
    rows.sort(key=lambda r: (r[2], r[0]))
    return [ChunkMessage(mid, src, order, parse(at), sender, text) for mid, src, order, at, sender, text in rows]


def _sources(dbapi_connection) -> list[str]:
    return [s for (s,) in dbapi_connection.execute("SELECT DISTINCT source FROM messages ORDER BY source")]


def load_chunk_messages(engine: Engine) -> dict[str, list[ChunkMessage]]:
    """All messages grouped by source (sources in name order, messages in ``source_order``)."""
    grouped: dict[str, list[tuple]] = {}
    with engine.connect() as conn:
        for row in conn.connection.dbapi_connection.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages"):
            grouped.setdefault(row[1], []).append(row)
    return {source: _chunk_messages(grouped[source]) for source in sorted(grouped)}


def _chunk_store_rows(new_chunks: Sequence[Chunk]) -> tuple[list[tuple], list[tuple]]:
    """``chunks`` and ``chunk_messages`` rows in primary-key order (sequential B-tree inserts are ~1.5x faster)."""
    chunk_rows = sorted(
        (c.chunk_id, c.source, c.chunk_index, c.session_index, c.window_index, _sql_datetime(c.start_at),
         _sql_datetime(c.end_at), c.n_messages, c.n_trimmed, c.raw_text)
        for c in new_chunks
    )
    link_rows = sorted((c.chunk_id, i, mid) for c in new_chunks for i, mid in enumerate(c.message_ids))
    return chunk_rows, link_rows


def _chunked_source(database: str, source: str, params: ChunkingParams) -> tuple[list[tuple], list[tuple]]:
    """Read and chunk one source of ``database``: its ``(chunks rows, chunk_messages rows)``.

    Opens its own read-only connection, so it can run in a worker process: WAL lets it read the
    committed messages while the parent holds the write transaction that receives the rows.
    """
    import sqlite3

    connection = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE source = ?", (source,)).fetchall()
    finally:
        connection.close()
    return _chunk_store_rows(chunk_source(source, _chunk_messages(rows), params))


def rebuild_chunks(engine: Engine, params: ChunkingParams = ChunkingParams(), *, workers: int | None = None) -> int:
    """Chunk every source in the store, replacing all chunks and their message links; returns the count.

    ``workers`` processes read and chunk sources while this process inserts the rows of the ones already
    done (default: 2 once the store holds ``PARALLEL_CHUNKING_MIN_MESSAGES`` messages, else 0: chunked here).
    Every path inserts the same rows in the same order: sources are chunked independently and stored in
    name order.  The ``message_id`` index of ``chunk_messages`` is rebuilt after the inserts (one sort
    instead of 400k random B-tree inserts).
    """
    database = engine.url.database
    with engine.connect() as conn:
        sources = _sources(conn.connection.dbapi_connection)
        if workers is None:
            workers = 2 if _count(conn, messages) >= PARALLEL_CHUNKING_MIN_MESSAGES else 0
    n_chunks = 0
    with engine.begin() as conn:
        conn.execute(delete(chunk_messages))
        conn.execute(delete(chunks))
        _chunk_messages_by_message.drop(conn)
        for chunk_rows, link_rows in ordered_map(_chunked_source, [(database, s, params) for s in sources], workers):
            _bulk_insert(conn, chunks, chunk_rows)
            _bulk_insert(conn, chunk_messages, link_rows)
            n_chunks += len(chunk_rows)
        _chunk_messages_by_message.create(conn)
    return n_chunks


def replace_chunks(engine: Engine, new_chunks: Sequence[Chunk]) -> None:
    """Replace every chunk (and its message links) with ``new_chunks``, chunked elsewhere."""
    chunk_rows, link_rows = _chunk_store_rows(new_chunks)
    with engine.begin() as conn:
        conn.execute(delete(chunk_messages))
        conn.execute(delete(chunks))
        _bulk_insert(conn, chunks, chunk_rows)
        _bulk_insert(conn, chunk_messages, link_rows)


def derive_qrels(engine: Engine) -> None:
    """Chunk-level gold from message-level evidence through ``chunk_messages`` (paper §4.2–4.3).

    A chunk containing primary evidence gets relevance 2 (every overlapping window counts separately, as
    in the paper); a chunk containing only supporting evidence gets 1.
    """
    with engine.begin() as conn:
        conn.execute(delete(qrels))
        rows = conn.execute(
            select(question_evidence.c.question_id, chunk_messages.c.chunk_id, func.max(question_evidence.c.relevance))
            .join(chunk_messages, chunk_messages.c.message_id == question_evidence.c.message_id)
            .group_by(question_evidence.c.question_id, chunk_messages.c.chunk_id)
        ).all()
        if rows:
            conn.execute(insert(qrels), [{"question_id": q, "chunk_id": c, "relevance": r} for q, c, r in rows])


def read_table(engine: Engine, table: Table | str, order_by: Iterable[str] = ()) -> pd.DataFrame:
    """A whole table as a DataFrame (sorted by ``order_by`` columns when given)."""
    table = metadata.tables[table] if isinstance(table, str) else table
    query = select(table)
    if order_by:
        query = query.order_by(*(table.c[name] for name in order_by))
    with engine.connect() as conn:
        return pd.read_sql(query, conn)


def get_stage(engine: Engine, name: str) -> tuple[str, dict] | None:
    with engine.connect() as conn:
        row = conn.execute(select(stages.c.key, stages.c.info).where(stages.c.name == name)).first()
    return None if row is None else (row.key, json.loads(row.info))


def set_stage(engine: Engine, name: str, key: str, info: dict) -> None:
    with engine.begin() as conn:
        conn.execute(insert(stages).prefix_with("OR REPLACE"), [{"name": name, "key": key, "info": json.dumps(info, sort_keys=True)}])
