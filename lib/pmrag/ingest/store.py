"""Storing ingested batches: messages (once per message ID), questions, evidence, rejections and files.

A file is stored in one transaction (or, given a connection in a transaction, a savepoint of it: the study's
ingest stores every file in one, :func:`pmrag.ingest.pipeline.ingest_study`), its messages inserted
:data:`INSERT_ROWS` at a time as they arrive (a large export is never held whole).  Its counts come from that transaction alone: ``stored`` is the number
of rows its ``INSERT OR IGNORE`` statements inserted, so another process writing to the same database at
the same time cannot move them (a before/after ``COUNT(*)`` could, down to a negative "already present").

Questions are counted the same way: a question whose ID is already stored with the same text, type, answer,
source and resolved evidence is already present and is not written again; one whose ID is stored with other
content replaces it (the newer file wins, as it always has for a question file ingested again) and counts as
stored.  A file's rejections, and the notes on its LoCoMo evidence ids (``kind`` ``evidence``, ``action``
``normalised`` or ``dropped``), replace those of its earlier ingest in the ``rejections`` table.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, func, insert, select

from pmrag.core.errors import InputError
from pmrag.core.records import MessageRecord, QuestionRecord, SourceBatch, tags_json
from pmrag.core.store import bump_revision, files, messages, question_evidence, questions, rejections

INSERT_ROWS = 10_000
"""Message rows per ``executemany``."""

INSERT_CACHE_KIB = 32 << 10
"""SQLite page cache while a file's messages are inserted, whatever the connection's own size
(:data:`pmrag.core.store.PAGE_CACHE_KIB`): at 256 MiB a large export filled it (a 40 MB export peaked 140 MB
higher); inserting a million messages took as long at this size, within the noise of a shared machine."""

_INSERT_MESSAGES = (
    f"INSERT OR IGNORE INTO {messages.name} ({', '.join(c.name for c in messages.columns)}) "
    f"VALUES ({', '.join('?' for _ in messages.columns)})"
)


@dataclass(frozen=True)
class StoreReport:
    """Reconciliation of one file: ``read == stored + already_present + rejected`` for its messages and
    ``questions_read == questions_stored + questions_already_present + questions_rejected`` for its questions.

    ``evidence_normalised`` / ``evidence_dropped`` count the LoCoMo evidence ids read as their one obvious
    reading or dropped (the ``evidence`` rows of ``rejections``); they are not records and reconcile nothing.
    """

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
    questions_already_present: int
    questions_rejected: int
    evidence_normalised: int
    evidence_dropped: int
    same_as: str | None = None   # the name under which the same content was ingested before

    def line(self) -> str:
        text = (
            f"{self.path}: {self.format} ({self.dialect}; {self.encoding}): read {self.read}, stored {self.stored}, "
            f"already present {self.already_present}, rejected {self.rejected}"
        )
        if self.same_as:
            text += f"; the same content as {self.same_as}, ingested before"
        if self.questions_read:
            text += (f"; questions read {self.questions_read}, stored {self.questions_stored}, "
                     f"already present {self.questions_already_present}, rejected {self.questions_rejected}")
        if self.evidence_normalised or self.evidence_dropped:
            text += f"; evidence ids normalised {self.evidence_normalised}, dropped {self.evidence_dropped}"
        return text


class MergeKeys:
    """The merge key of each message of one file, in file order (``merge=False``: none, the paper's rule).

    Re-exports overlap: LINE exports the whole history every time, so days 2–4 arrive after days 1–3.  A
    message is the same message when it is in the same conversation (its source: the chat's name for a LINE
    ``.txt``, the file's name for the paper's JSON, the sample for LoCoMo), at the same time, from the same
    sender, of the same type, with the same text, and is the same occurrence among identical ones (two "OK"
    stickers in one minute are two messages).  Its key is the SHA-1 of those; the store keeps one message per
    key, so a message already stored counts as already present.  Occurrences are counted per timestamp over
    the last :data:`RECENT_TIMES` timestamps seen, so memory stays bounded on any file (messages come in time
    order; identical messages further apart than that are told apart by their time anyway).
    """

    RECENT_TIMES = 1_000

    def __init__(self, merge: bool = True):
        self.merge = merge
        self._seen: OrderedDict[tuple[str, str], dict] = OrderedDict()

    def __call__(self, m: MessageRecord) -> str | None:
        if not self.merge:
            return None
        moment = (m.source, m.occurred_text)
        counts = self._seen.get(moment)
        if counts is None:   # a plain dict: a Counter per timestamp (nearly one per message) took 0.6 µs to make
            counts = self._seen[moment] = {}
            if len(self._seen) > self.RECENT_TIMES:
                self._seen.popitem(last=False)
        content = (m.sender, m.type, m.text)
        occurrence = counts.get(content, 0)
        counts[content] = occurrence + 1
        joined = "\x1f".join((m.source, m.occurred_text, m.sender, m.type, m.text, str(occurrence)))
        return hashlib.sha1(joined.encode("utf-8")).hexdigest()


def message_row(m: MessageRecord, merge_key: str | None = None) -> tuple:
    """One message as a row of ``messages``, in the table's column order."""
    return (m.message_id, m.source, m.source_order, m.date_order, m.occurred_text, m.time_unknown,
            m.sender, m.type, m.text, m.native_id, m.location, merge_key)


def keyed_rows(records, merge: bool = True) -> Iterator[tuple]:
    """Rows of ``records`` (one file's messages, in file order) with their merge keys (:class:`MergeKeys`)."""
    keys = MergeKeys(merge)
    return (message_row(m, keys(m)) for m in records)


def message_rows(batch: SourceBatch, merge: bool = True) -> list[tuple]:
    """Rows in primary-key (message ID) order, so inserts walk the index in order instead of at random."""
    return sorted(keyed_rows(batch.messages, merge))


Bind = Engine | Connection
"""Where a file is stored: an engine (a transaction each) or a connection in a transaction (a savepoint each)."""


@contextmanager
def _transaction(bind: Bind) -> Iterator[Connection]:
    """A transaction of the engine, or a savepoint of the connection's transaction."""
    if isinstance(bind, Connection):
        with bind.begin_nested():
            yield bind
    else:
        with bind.begin() as conn:
            yield conn


@contextmanager
def _reading(bind: Bind) -> Iterator[Connection]:
    if isinstance(bind, Connection):
        yield bind
    else:
        with bind.connect() as conn:
            yield conn


def already_ingested(bind: Bind, sha256: str) -> dict | None:
    """The ``files`` row of content ``sha256`` stored under any name before, else None."""
    with _reading(bind) as conn:
        row = conn.execute(select(files).where(files.c.sha256 == sha256).order_by(files.c.path)).first()
    return None if row is None else dict(row._mapping)


def record_same_file(bind: Bind, path: str, sha256: str, earlier: dict) -> StoreReport:
    """Record ``path`` as one more name of a file already ingested, storing no message twice: every message it
    holds is already present (the reconciliation of the earlier ingest, rejections included, carries over)."""
    with _transaction(bind) as conn:
        conn.execute(insert(files).prefix_with("OR REPLACE"), [{**earlier, "path": path}])
        bump_revision(conn)
        rejected = conn.execute(select(func.count()).select_from(rejections).where(
            rejections.c.sha256 == sha256, rejections.c.kind == "message")).scalar_one()
    return StoreReport(path=path, format=earlier["format"], encoding=earlier["encoding"] or "",
                       dialect=earlier["dialect"] or "", read=earlier["records_read"], stored=0,
                       already_present=earlier["records_read"] - rejected, rejected=rejected, questions_read=0,
                       questions_stored=0, questions_already_present=0, questions_rejected=0,
                       evidence_normalised=0, evidence_dropped=0, same_as=earlier["path"])


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


def store_batch(bind: Bind, batch: SourceBatch, sha256: str,
                rows: list[tuple] | Iterator[list[tuple]] | None = None, merge: bool = True) -> StoreReport:
    """Store one adapter batch; a message already in the store (same message ID, or with ``merge`` the same
    merge key: :class:`MergeKeys`) is not stored twice.

    ``rows`` are the batch's message rows (:func:`message_row`) when they were built elsewhere (the batch's
    ``messages`` list is then empty: tuples cross a process boundary far cheaper than records): a list, or a
    one-pass iterator of row lists that completes the batch as it is read
    (:func:`pmrag.ingest.pipeline.read_all`); the batch's counts and rejections are only read after it.
    """
    rows = message_rows(batch, merge) if rows is None else rows
    chunks = _batched(rows, INSERT_ROWS) if isinstance(rows, list) else rows
    del rows
    with _transaction(bind) as conn, _page_cache(conn, INSERT_CACHE_KIB):
        bump_revision(conn)
        offered, stored = _insert_messages(conn, chunks)
        if offered != batch.kept_messages:
            raise AssertionError(f"{batch.path}: {offered} message rows for {batch.kept_messages} messages kept")
        questions_stored = 0
        for question in batch.questions:
            questions_stored += _store_question(conn, question, _resolve_evidence(conn, batch.path, question))
        conn.execute(delete(rejections).where(rejections.c.sha256 == sha256))
        if batch.rejected:
            conn.execute(insert(rejections), [
                {"sha256": sha256, "kind": r.kind, "location": r.location, "reason": r.reason, "action": r.action}
                for r in batch.rejected
            ])
        conn.execute(insert(files).prefix_with("OR REPLACE"), [{
            "sha256": sha256, "path": batch.path, "format": batch.format, "encoding": batch.encoding,
            "dialect": batch.dialect, "records_read": batch.records_read,
            "rejected": sum(r.action == "rejected" for r in batch.rejected),
        }])
    actions = Counter((r.kind, r.action) for r in batch.rejected)
    return StoreReport(
        path=batch.path, format=batch.format, encoding=batch.encoding, dialect=batch.dialect,
        read=batch.records_read, stored=stored, already_present=offered - stored, rejected=actions["message", "rejected"],
        questions_read=batch.questions_read, questions_stored=questions_stored,
        questions_already_present=len(batch.questions) - questions_stored,
        questions_rejected=batch.questions_read - len(batch.questions),
        evidence_normalised=actions["evidence", "normalised"], evidence_dropped=actions["evidence", "dropped"],
    )


def _store_question(conn, question: QuestionRecord, evidence: dict[str, int]) -> bool:
    """Write ``question`` with its resolved ``evidence`` (``message_id -> relevance``) unless the store already
    holds it with the same content; True when it was written (new, or replacing other content)."""
    row = {"question_id": question.question_id, "text": question.text, "type": question.type,
           "answer": question.answer, "source": question.source, "tags": tags_json(question.tags)}
    stored = conn.execute(select(questions).where(questions.c.question_id == question.question_id)).first()
    if stored is not None and dict(stored._mapping) == row:
        stored_evidence = conn.execute(
            select(question_evidence.c.message_id, question_evidence.c.relevance)
            .where(question_evidence.c.question_id == question.question_id)
        ).all()
        if dict(stored_evidence) == evidence:
            return False
    conn.execute(delete(question_evidence).where(question_evidence.c.question_id == question.question_id))
    conn.execute(insert(questions).prefix_with("OR REPLACE"), [row])
    conn.execute(insert(question_evidence), [
        {"question_id": question.question_id, "message_id": mid, "relevance": rel} for mid, rel in evidence.items()
    ])
    return True


def _insert_messages(conn, chunks: Iterator[list[tuple]]) -> tuple[int, int]:
    """Insert each chunk of rows (ignoring a message ID already stored): ``(rows offered, rows inserted)``.

    ``executemany`` straight to the driver (SQLAlchemy's per-row parameter processing cost ~2x at 358k rows);
    its ``rowcount`` sums the rows each statement changed, and an ignored row changes none, so the count is
    this transaction's own.
    """
    offered = inserted = 0
    for chunk in chunks:
        offered += len(chunk)
        inserted += conn.exec_driver_sql(_INSERT_MESSAGES, chunk).rowcount
        del chunk   # not held while the next chunk is read
    return offered, inserted


def _batched(rows: list[tuple], size: int) -> Iterator[list[tuple]]:
    """Consecutive slices of ``rows``, ``size`` rows each (the last shorter)."""
    return (rows[start : start + size] for start in range(0, len(rows), size))


@contextmanager
def _page_cache(conn, kib: int) -> Iterator[None]:
    """Hold this connection's SQLite page cache to ``kib`` KiB for the block, then restore its size."""
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql(f"PRAGMA cache_size=-{int(kib)}")
    try:
        yield
    finally:  # on the raw connection: after an interrupt SQLAlchemy's connection may refuse statements
        conn.connection.dbapi_connection.execute(f"PRAGMA cache_size={int(before)}")
