"""Settling the grades annotators disagree on (000 §8): disagreements, adjudications, the adjudicated gold.

A *disagreement* is a (question, chunk) that two or more annotators graded and whose grades differ.  An
adjudicator settles it with one grade (and a note), a row of the store's ``adjudications`` table, kept apart
from every annotator's own grades (``judgments``), which are never changed.  The adjudicated grades are
:func:`pmrag.annotate.export.annotator_grades` with ``annotator="adjudicated"`` (the one rule: the adjudication
where there is one, else the grade every annotator agreed on; an unsettled disagreement is left out and counted):
:func:`adjudicated_grades`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd
from sqlalchemy import Engine, and_, select

from pmrag.annotate.agreement import grade_matrix, store_grades
from pmrag.annotate.export import ADJUDICATED, annotator_grades
from pmrag.annotate.judgments import JudgmentError, check_annotator, check_relevance
from pmrag.core.store import adjudications, judgments

ADJUDICATION_COLUMNS = ("question_id", "chunk_id", "relevance", "adjudicator", "note", "judged_at")


@dataclass(frozen=True)
class Adjudication:
    """The grade an adjudicator settled for one (question, chunk) (an ``adjudications`` row)."""

    question_id: str
    chunk_id: str
    relevance: int
    adjudicator: str
    note: str | None
    judged_at: str


def _read(conn, question_id: str, chunk_id: str) -> Adjudication | None:
    found = conn.execute(select(*adjudications.columns).where(and_(
        adjudications.c.question_id == question_id, adjudications.c.chunk_id == chunk_id))).first()
    return None if found is None else Adjudication(*found)


def _write(conn, settled: Adjudication) -> None:
    conn.exec_driver_sql(
        "INSERT INTO adjudications (question_id, chunk_id, relevance, adjudicator, note, judged_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (question_id, chunk_id) DO UPDATE SET relevance = excluded.relevance, "
        "adjudicator = excluded.adjudicator, note = excluded.note, judged_at = excluded.judged_at",
        (settled.question_id, settled.chunk_id, settled.relevance, settled.adjudicator, settled.note,
         settled.judged_at))


def record_adjudication(engine: Engine, question_id: str, chunk_id: str, relevance: int, adjudicator: str, *,
                        note: str | None = None,
                        judged_at: str | None = None) -> tuple[Adjudication | None, Adjudication]:
    """Settle the grade of one graded (question, chunk), replacing an earlier adjudication of it.

    Returns ``(before, after)``: the adjudication replaced (``None``: there was none) and the one stored, for
    :func:`undo_adjudication`.  A relevance outside 0..2, a bad adjudicator id, or a chunk no annotator graded for
    that question is a :class:`~pmrag.annotate.judgments.JudgmentError` and nothing is written."""
    adjudicator, relevance = check_annotator(adjudicator), check_relevance(relevance)
    note = (note.strip() or None) if isinstance(note, str) else None
    after = Adjudication(str(question_id), str(chunk_id), relevance, adjudicator, note,
                         judged_at or datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
    with engine.begin() as conn:
        graded = conn.execute(select(judgments.c.annotator).where(and_(
            judgments.c.question_id == after.question_id, judgments.c.chunk_id == after.chunk_id)).limit(1)).first()
        if graded is None:
            raise JudgmentError(f"chunk {after.chunk_id!r} of question {after.question_id!r} has no annotator's "
                                "grade to adjudicate")
        before = _read(conn, after.question_id, after.chunk_id)
        _write(conn, after)
    return before, after


def undo_adjudication(engine: Engine, before: Adjudication | None, after: Adjudication) -> Adjudication | None:
    """Undo one :func:`record_adjudication`: write back ``before`` (or remove the adjudication when ``None``).
    Refused (:class:`~pmrag.annotate.judgments.JudgmentError`) when the stored adjudication is no longer ``after``."""
    with engine.begin() as conn:
        if _read(conn, after.question_id, after.chunk_id) != after:
            raise JudgmentError(f"the adjudication of chunk {after.chunk_id!r} for question {after.question_id!r} "
                                "changed since; undo the later change first")
        if before is None:
            conn.execute(adjudications.delete().where(and_(adjudications.c.question_id == after.question_id,
                                                           adjudications.c.chunk_id == after.chunk_id)))
        else:
            _write(conn, before)
    return before


def adjudication_of(engine: Engine, question_id: str, chunk_id: str) -> Adjudication | None:
    """The adjudication of one (question, chunk), or ``None``."""
    with engine.connect() as conn:
        return _read(conn, str(question_id), str(chunk_id))


def read_adjudications(engine: Engine) -> pd.DataFrame:
    """Every adjudication (columns :data:`ADJUDICATION_COLUMNS`), by question then chunk."""
    with engine.connect() as conn:
        rows = conn.execute(select(*adjudications.columns)
                            .order_by(adjudications.c.question_id, adjudications.c.chunk_id)).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(ADJUDICATION_COLUMNS))


def disagreements(engine: Engine, *, pool: str | None = None) -> pd.DataFrame:
    """The rows whose annotators' grades differ: ``question_id, chunk_id``, one column per annotator (their
    grade, ``<NA>`` where they did not grade the row), then ``adjudicated``, ``adjudicator`` (``<NA>`` / ``None``:
    not settled yet); by question then chunk.  Only grades given from ``pool`` when it is named."""
    grades = store_grades(engine, pool)
    if grades.empty:
        return pd.DataFrame(columns=["question_id", "chunk_id", "adjudicated", "adjudicator"])
    wide = grade_matrix(grades)
    differ = wide[(wide.notna().sum(axis=1) >= 2) & (wide.max(axis=1) != wide.min(axis=1))]
    table = differ.astype("Int64").reset_index()
    table.columns.name = None
    settled = read_adjudications(engine)[["question_id", "chunk_id", "relevance", "adjudicator"]]
    table = table.merge(settled.rename(columns={"relevance": "adjudicated"}), on=["question_id", "chunk_id"],
                        how="left")
    return table.astype({"adjudicated": "Int64"}).reset_index(drop=True)


def adjudicated_grades(engine: Engine) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The adjudicated grades (``question_id, chunk_id, relevance``), the questions every annotator dropped
    (``question_id, reason``) and the count of unsettled disagreements: export's rule, read as it reads it."""
    return annotator_grades(engine, ADJUDICATED)
