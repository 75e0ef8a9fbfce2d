"""Storing chunks: every source chunked (in worker processes at scale), message links, and chunk-level gold."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from sqlalchemy import Engine, delete, func, select

from pmrag.chunking.windows import Chunk, ChunkMessage, chunk_sessions, source_sessions
from pmrag.core.memory import collection_paused
from pmrag.core.params import ChunkingSection
from pmrag.core.parallel import ordered_map
from pmrag.core.store import (
    _chunk_messages_by_message, bulk_insert, chunk_messages, chunks, count_rows, messages, qrels, question_evidence,
    read_table, rows_frame, sql_datetime,
)
from sqlalchemy import insert


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


def _chunk_store_rows(new_chunks: Sequence[Chunk]) -> tuple[list[tuple], list[tuple]]:
    """``chunks`` and ``chunk_messages`` rows in primary-key order (sequential B-tree inserts are ~1.5x faster)."""
    chunk_rows = sorted(
        (c.chunk_id, c.source, c.chunk_index, c.session_index, c.window_index, sql_datetime(c.start_at),
         sql_datetime(c.end_at), c.n_messages, c.n_trimmed, c.raw_text)
        for c in new_chunks
    )
    link_rows = sorted((c.chunk_id, i, mid) for c in new_chunks for i, mid in enumerate(c.message_ids))
    return chunk_rows, link_rows


def _chunk_speakers(new_chunks: Sequence[Chunk], messages: Sequence[ChunkMessage]) -> list[tuple[str, str]]:
    """``(chunk_id, "A, B")`` of each chunk: its distinct senders in order of first appearance, as
    :func:`pmrag.chunking.stats.chunk_speakers` finds them from the stored links and messages."""
    sender_of = {m.message_id: m.sender for m in messages}
    return [(c.chunk_id, ", ".join(dict.fromkeys(sender_of[mid] for mid in c.message_ids))) for c in new_chunks]


def _chunked_source(database: str, source: str,
                    params: ChunkingSection) -> tuple[list[tuple], list[tuple], list[tuple[str, str]],
                                                      list[tuple[int, int]]]:
    """Read and chunk one source of ``database``: its ``(chunks rows, chunk_messages rows, speakers, sessions)``,
    a session as ``(messages, of which in no chunk)``.  The speakers (:func:`_chunk_speakers`) and the sessions
    are counted here, where the messages are at hand: joined afterwards, 4.1 million links with 3.6 million stored
    messages by string id took 24 s at 10× the paper's scale, reading their times back to split sessions again
    17 s, and SQLite's count of the messages no link names 5.7 s.

    Opens its own read-only connection, so it can run in a worker process: WAL lets it read the
    committed messages while the parent holds the write transaction that receives the rows.  The cyclic garbage
    collector is paused meanwhile (:func:`~pmrag.core.memory.collection_paused`): the messages and chunks hold no
    cycle, and collections that walked them took a quarter of the work at the paper's scale.
    """
    import sqlite3

    with collection_paused():
        connection = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = connection.execute(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE source = ?", (source,)).fetchall()
        finally:
            connection.close()
        source_messages = _chunk_messages(rows)
        sessions = source_sessions(source_messages, params)
        new_chunks = chunk_sessions(source, sessions, params)
        chunked = {mid for c in new_chunks for mid in c.message_ids}
        return (*_chunk_store_rows(new_chunks), _chunk_speakers(new_chunks, source_messages),
                [(len(session), sum(m.message_id not in chunked for m in session)) for session in sessions])


def rebuild_chunks(engine: Engine, params: ChunkingSection | None = None, *, workers: int | None = None) -> int:
    """Chunk every source in the store, replacing all chunks and their message links; returns the count
    (:func:`store_chunks`'s rows, without the frames it builds of them)."""
    return sum(len(chunk_rows) for _, chunk_rows, _, _, _ in _inserted_chunks(engine, params, workers))


class StoredChunks(NamedTuple):
    """What :func:`store_chunks` stored, as :func:`~pmrag.core.store.read_table` would read it back: ``chunks`` in
    ``(source, chunk_index)`` order, their links ``members`` in ``(chunk_id, position)`` order; ``speakers``:
    each chunk's distinct senders (``chunk_id → "A, B"``, in ID order, as
    :func:`pmrag.chunking.stats.chunk_speakers` finds them); and ``sessions``: each session's ``source``,
    ``messages`` (as :func:`pmrag.chunking.stats.session_sizes` counts them) and ``in_no_chunk`` (those no window
    holds: the paper's fixed trim can leave the end of a trimmed window out), sources in name order, sessions in
    time order."""

    chunks: pd.DataFrame
    members: pd.DataFrame
    speakers: pd.Series
    sessions: pd.DataFrame


def store_chunks(engine: Engine, params: ChunkingSection | None = None, *,
                 workers: int | None = None) -> StoredChunks:
    """Chunk every source in the store, replacing all chunks and their message links; returns them.

    ``workers`` processes read and chunk sources while this process inserts the rows of the ones already
    done (default: 2 once the store holds ``PARALLEL_CHUNKING_MIN_MESSAGES`` messages, else 0: chunked here).
    Every path inserts the same rows in the same order: sources are chunked independently and stored in
    name order.  The ``message_id`` index of ``chunk_messages`` is rebuilt after the inserts (one sort
    instead of 400k random B-tree inserts).  ``params`` default to the paper's.

    The rows inserted are returned as frames, not read back: 104k chunks and their 4.1 million links took
    16.7 s to read at 10× the paper's scale.
    """
    speakers: list[tuple[str, str]] = []
    session_sources: list[str] = []
    session_counts: list[tuple[int, int]] = []
    by_index: list[pd.DataFrame] = []   # each source's chunks in chunk_index order
    by_id: list[pd.DataFrame] = []      # and in ID order, as their links are
    links: list[pd.DataFrame] = []
    for source, chunk_rows, link_rows, source_speakers, counts in _inserted_chunks(engine, params, workers):
        frame = rows_frame(chunks, chunk_rows)
        by_id.append(frame[["chunk_id", "n_messages"]])
        by_index.append(frame.sort_values("chunk_index", kind="stable"))
        links.append(rows_frame(chunk_messages, link_rows))
        speakers += source_speakers
        session_sources += [source] * len(counts)
        session_counts += counts
    speakers.sort()
    counted = np.array(session_counts, dtype="int64").reshape(-1, 2)
    sessions = pd.DataFrame({"source": session_sources, "messages": counted[:, 0], "in_no_chunk": counted[:, 1]})
    if not by_id:
        return StoredChunks(rows_frame(chunks, []), rows_frame(chunk_messages, []),
                            pd.Series([], index=pd.Index([], name="chunk_id"), name="speakers"), sessions)
    ids = pd.concat(by_id, ignore_index=True)
    return StoredChunks(
        pd.concat(by_index, ignore_index=True),
        _in_id_order(pd.concat(links, ignore_index=True), ids["chunk_id"].to_numpy(), ids["n_messages"].to_numpy()),
        pd.Series([names for _, names in speakers],
                  index=pd.Index([chunk_id for chunk_id, _ in speakers], name="chunk_id"), name="speakers"),
        sessions)


def _inserted_chunks(engine: Engine, params: ChunkingSection | None, workers: int | None) -> Iterator[tuple]:
    """Replace all chunks and links, source by source in name order (:func:`store_chunks`), yielding each source's
    ``(source, chunk rows, link rows, speakers, session counts)`` once its rows are inserted; the whole replacement
    is one transaction, committed after the last source is yielded."""
    params = ChunkingSection() if params is None else params
    database = engine.url.database
    with engine.connect() as conn:
        sources = _sources(conn.connection.dbapi_connection)
        if workers is None:
            workers = 2 if count_rows(conn, messages) >= PARALLEL_CHUNKING_MIN_MESSAGES else 0
    with engine.begin() as conn:
        conn.execute(delete(chunk_messages))
        conn.execute(delete(chunks))
        _chunk_messages_by_message.drop(conn)
        for source, (chunk_rows, link_rows, source_speakers, counts) in zip(sources, ordered_map(
                _chunked_source, [(database, s, params) for s in sources], workers)):
            bulk_insert(conn, chunks, chunk_rows)
            bulk_insert(conn, chunk_messages, link_rows)
            yield source, chunk_rows, link_rows, source_speakers, counts
        _chunk_messages_by_message.create(conn)


def _in_id_order(links: pd.DataFrame, chunk_ids: np.ndarray, sizes: np.ndarray) -> pd.DataFrame:
    """``links``, a block of ``sizes[i]`` rows for each chunk ``chunk_ids[i]`` in that order (each source's chunks
    in ID order, sources in name order), with the blocks in chunk ID order: one permutation of the rows, not a
    sort of 4.1 million string keys."""
    order = np.argsort(chunk_ids, kind="stable")
    starts = np.cumsum(sizes) - sizes
    lengths = sizes[order]
    rows = np.repeat(starts[order] - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
    return links.take(rows).reset_index(drop=True)


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




@dataclass(frozen=True)
class Chunked:
    """A study's chunks (§3.2, in ``(source, chunk_index)`` order), which messages each holds (``members``: the
    paper's line_chunk_messages, in position order), the chunk-level gold of every question (``qrels``), each
    chunk's distinct senders (``speakers``) and the messages of each session (``sessions``): :class:`StoredChunks`."""

    chunks: pd.DataFrame
    members: pd.DataFrame
    qrels: pd.DataFrame
    speakers: pd.Series
    sessions: pd.DataFrame


def chunk_study(engine: Engine, params: ChunkingSection) -> Chunked:
    """Chunk every source the store holds (:func:`store_chunks`), derive chunk-level gold from the stored
    evidence (:func:`derive_qrels`) and read back what was stored."""
    stored = store_chunks(engine, params)
    derive_qrels(engine)
    return Chunked(stored.chunks, stored.members, read_table(engine, "qrels", ("question_id", "chunk_id")),
                   stored.speakers, stored.sessions)
