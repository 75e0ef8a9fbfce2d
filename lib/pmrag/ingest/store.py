"""Storing ingested batches: messages (once per message ID), questions, evidence, rejections and files."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, delete, insert, select

from pmrag.core.errors import InputError
from pmrag.core.records import QuestionRecord, SourceBatch
from pmrag.core.store import (
    bulk_insert, count_rows, files, messages, question_evidence, questions, rejections,
)


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


def message_rows(batch: SourceBatch) -> list[tuple]:
    """Rows in primary-key (message ID) order, so inserts walk the index in order instead of at random."""
    return sorted(
        (m.message_id, m.source, m.source_order, m.date_order, m.occurred_text, m.time_unknown,
         m.sender, m.type, m.text, m.native_id, m.location)
        for m in batch.messages
    )


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
        before = count_rows(conn, messages)
        bulk_insert(conn, messages, rows, "OR IGNORE")
        stored = count_rows(conn, messages) - before
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


