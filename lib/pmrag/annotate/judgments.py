"""Grades of pooled chunks, one annotator at a time (000 §4.3): record, undo, drop a question, progress, resume.

The paper's researcher graded 910 candidate rows 0/1/2 (2: the chunk answers the question, 1: it supports an
answer, 0: not relevant) and dropped the questions left without primary gold.  Here every grade is a row of
the store's ``judgments`` table keyed by (question, chunk, annotator), with the note, the pool it was graded
from and the time; an annotator's "drop this question" is a row of ``question_drops`` with the reason.  Several
annotators share a store: every function takes the annotator's id and reads or writes only that annotator's rows.

Recording a grade is an upsert that returns a :class:`GradeChange` (the grade before and after): handing it back
to :func:`undo_grade` restores the grade before (or removes the grade when there was none), so an interface
keeps its undo history as a list of changes while the grades themselves stay in the store.

Questions are taken in :func:`question_order` (natural order of their ids: ``q2`` before ``q10``), candidates in
the pool's blind ``position``.  A question is *finished* for an annotator when every pooled chunk has their
grade or when they dropped it; :func:`resume_point` is the first ungraded position of the first unfinished one.
"""

from __future__ import annotations

import re
from numbers import Integral
from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd
from sqlalchemy import Engine, and_, select

from pmrag.core.errors import PmragError
from pmrag.core.frames import require_columns
from pmrag.core.store import judgments, question_candidates, question_drops, questions
from pmrag.core.store import pool as pool_table

RELEVANCE_GRADES = (0, 1, 2)
ANNOTATOR_MAX_CHARS = 64
PROGRESS_COLUMNS = ("question_id", "n_candidates", "n_graded", "dropped", "finished")
JUDGMENT_COLUMNS = tuple(c.name for c in judgments.columns)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DIGITS = re.compile(r"(\d+)")


class JudgmentError(PmragError):
    """A grade, drop or undo refused: one line naming the question, chunk or annotator, never chat text."""


@dataclass(frozen=True)
class Judgment:
    """One annotator's grade of one pooled chunk (a ``judgments`` row)."""

    question_id: str
    chunk_id: str
    annotator: str
    relevance: int
    note: str | None
    pool: str | None
    judged_at: str


@dataclass(frozen=True)
class GradeChange:
    """What one :func:`record_grade` did: the grade before (``None``: the chunk was ungraded) and after."""

    before: Judgment | None
    after: Judgment


@dataclass(frozen=True)
class Progress:
    """An annotator's progress over a pool: questions finished (graded through or dropped) of all, dropped ones,
    and grades given of the candidates of the questions not dropped."""

    questions: int
    finished: int
    dropped: int
    candidates: int
    graded: int

    @property
    def share_graded(self) -> float:
        """``graded / candidates`` (1.0 when nothing is left to grade)."""
        return self.graded / self.candidates if self.candidates else 1.0


# -- validation ------------------------------------------------------------------------------------------
def check_annotator(annotator) -> str:
    """``annotator`` stripped: a non-empty string of at most :data:`ANNOTATOR_MAX_CHARS` characters without
    control characters; :class:`JudgmentError` otherwise."""
    if not isinstance(annotator, str) or not annotator.strip():
        raise JudgmentError(f"annotator must be a non-empty id, got {annotator!r}")
    annotator = annotator.strip()
    if len(annotator) > ANNOTATOR_MAX_CHARS or _CONTROL.search(annotator):
        raise JudgmentError(f"annotator id must be at most {ANNOTATOR_MAX_CHARS} characters without control "
                            f"characters, got {annotator[:ANNOTATOR_MAX_CHARS]!r}")
    return annotator


def check_relevance(relevance) -> int:
    """``relevance`` as an int of :data:`RELEVANCE_GRADES` (``"2"`` and NumPy integers are accepted, ``True``,
    ``2.0`` or ``1.5`` are not)."""
    if isinstance(relevance, str) and relevance.strip().isdigit():
        relevance = int(relevance.strip())
    if isinstance(relevance, bool) or not isinstance(relevance, Integral) or relevance not in RELEVANCE_GRADES:
        raise JudgmentError(f"relevance must be 0, 1 or 2, got {relevance!r}")
    return int(relevance)


def question_order(question_ids) -> list[str]:
    """Distinct question ids in natural order: digit runs compare as numbers, so ``q2`` comes before ``q10``."""
    def key(text: str):
        return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(text) if part]
    return sorted(dict.fromkeys(map(str, question_ids)), key=lambda q: (key(q), q))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _judgment(row) -> Judgment | None:
    return None if row is None else Judgment(*row)


def _read_grade(conn, question_id: str, chunk_id: str, annotator: str) -> Judgment | None:
    query = select(*judgments.columns).where(and_(judgments.c.question_id == question_id,
                                                  judgments.c.chunk_id == chunk_id,
                                                  judgments.c.annotator == annotator))
    return _judgment(conn.execute(query).first())


def _write(conn, grade: Judgment) -> None:
    conn.exec_driver_sql(
        "INSERT INTO judgments (question_id, chunk_id, annotator, relevance, note, pool, judged_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (question_id, chunk_id, annotator) DO UPDATE SET "
        "relevance = excluded.relevance, note = excluded.note, pool = excluded.pool, judged_at = excluded.judged_at",
        (grade.question_id, grade.chunk_id, grade.annotator, grade.relevance, grade.note, grade.pool,
         grade.judged_at))


# -- grades ----------------------------------------------------------------------------------------------
def record_grade(engine: Engine, question_id: str, chunk_id: str, annotator: str, relevance: int, *,
                 pool: str, note: str | None = None, judged_at: str | None = None) -> GradeChange:
    """Grade one pooled chunk for one annotator, replacing their earlier grade of it.

    Parameters
    ----------
    engine : the store.
    question_id, chunk_id : the pooled pair; it must be a row of pool ``pool``.
    annotator : the annotator's id (:func:`check_annotator`).
    relevance : 0 (not relevant), 1 (supporting), 2 (answers the question: primary gold).
    pool : the pool the chunk was graded from (kept with the grade as its origin).
    note : free text kept with the grade (an empty or blank note is stored as ``NULL``).
    judged_at : the time (ISO 8601, UTC); default now.

    Returns
    -------
    GradeChange : the grade before (``None`` when there was none) and the one stored; :func:`undo_grade` takes it.

    A relevance outside 0..2, a bad annotator id, or a chunk not in that question's pool is a
    :class:`JudgmentError` (one line) and nothing is written.
    """
    annotator, relevance = check_annotator(annotator), check_relevance(relevance)
    note = (note.strip() or None) if isinstance(note, str) else None
    after = Judgment(str(question_id), str(chunk_id), annotator, relevance, note, str(pool),
                     judged_at or _now())
    with engine.begin() as conn:
        pooled = conn.execute(select(pool_table.c.position).where(and_(
            pool_table.c.pool == after.pool, pool_table.c.question_id == after.question_id,
            pool_table.c.chunk_id == after.chunk_id))).first()
        if pooled is None:
            raise JudgmentError(f"chunk {after.chunk_id!r} is not in the pool {after.pool!r} of question "
                                f"{after.question_id!r}; only pooled chunks are graded")
        before = _read_grade(conn, after.question_id, after.chunk_id, annotator)
        _write(conn, after)
    return GradeChange(before, after)


def record_grades(engine: Engine, grades: pd.DataFrame, annotator: str, *, pool: str,
                  judged_at: str | None = None) -> int:
    """Grade many pooled chunks for one annotator at once (a script's or a simulated annotator's grades), each
    replacing the annotator's earlier grade of it, in one transaction; returns the rows written.

    ``grades``: rows ``question_id, chunk_id, relevance`` (a ``note`` column is kept when present).  The checks
    are :func:`record_grade`'s: a bad annotator id, a relevance outside 0..2 or a row not in pool ``pool`` is a
    :class:`JudgmentError` (one line; a row outside the pool is named) and nothing is written."""
    annotator = check_annotator(annotator)
    require_columns(grades, ("question_id", "chunk_id", "relevance"), "grades")
    when, pool = judged_at or _now(), str(pool)
    notes = grades["note"] if "note" in grades.columns else [None] * len(grades)
    rows = [Judgment(str(q), str(c), annotator, check_relevance(r),
                     (n.strip() or None) if isinstance(n, str) else None, pool, when)
            for q, c, r, n in zip(grades["question_id"], grades["chunk_id"], grades["relevance"], notes)]
    with engine.begin() as conn:
        pooled = {(q, c) for q, c in conn.execute(select(pool_table.c.question_id, pool_table.c.chunk_id)
                                                  .where(pool_table.c.pool == pool))}
        outside = next((row for row in rows if (row.question_id, row.chunk_id) not in pooled), None)
        if outside is not None:
            raise JudgmentError(f"chunk {outside.chunk_id!r} is not in the pool {pool!r} of question "
                                f"{outside.question_id!r}; only pooled chunks are graded")
        for row in rows:
            _write(conn, row)
    return len(rows)


def undo_grade(engine: Engine, change: GradeChange) -> Judgment | None:
    """Undo one :func:`record_grade`: write back the grade before it, or remove the grade when there was none.

    Returns the grade now in force (``None``: ungraded).  When the grade in the store is no longer the one the
    change wrote (graded again since, or removed), nothing is written and :class:`JudgmentError` says so."""
    after = change.after
    with engine.begin() as conn:
        current = _read_grade(conn, after.question_id, after.chunk_id, after.annotator)
        if current != after:
            raise JudgmentError(f"the grade of chunk {after.chunk_id!r} for question {after.question_id!r} by "
                                f"{after.annotator!r} changed since; undo the later change first")
        if change.before is None:
            conn.execute(judgments.delete().where(and_(judgments.c.question_id == after.question_id,
                                                       judgments.c.chunk_id == after.chunk_id,
                                                       judgments.c.annotator == after.annotator)))
        else:
            _write(conn, change.before)
    return change.before


def grade_of(engine: Engine, question_id: str, chunk_id: str, annotator: str) -> Judgment | None:
    """The annotator's grade of one chunk for one question, or ``None``."""
    with engine.connect() as conn:
        return _read_grade(conn, str(question_id), str(chunk_id), check_annotator(annotator))


def annotator_grades(engine: Engine, annotator: str, *, pool: str | None = None,
                     question_id: str | None = None) -> pd.DataFrame:
    """The annotator's grades (columns :data:`JUDGMENT_COLUMNS`), only theirs, by question then chunk; only
    those graded from ``pool`` and of ``question_id`` when given."""
    query = select(*judgments.columns).where(judgments.c.annotator == check_annotator(annotator))
    if pool is not None:
        query = query.where(judgments.c.pool == pool)
    if question_id is not None:
        query = query.where(judgments.c.question_id == question_id)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(judgments.c.question_id, judgments.c.chunk_id)).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(JUDGMENT_COLUMNS))


def annotators(engine: Engine) -> list[str]:
    """Every annotator id with a grade or a dropped question in the store, sorted."""
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT annotator FROM judgments UNION SELECT annotator FROM question_drops")
        return sorted(a for (a,) in found)


# -- dropped questions -----------------------------------------------------------------------------------
def _known_question(conn, question_id: str) -> bool:
    for column in (pool_table.c.question_id, questions.c.question_id, question_candidates.c.candidate_id):
        if conn.execute(select(column).where(column == question_id).limit(1)).first() is not None:
            return True
    return False


def drop_question(engine: Engine, question_id: str, annotator: str, reason: str,
                  dropped_at: str | None = None) -> None:
    """Record the annotator's "drop this question" with its reason (replacing an earlier drop's reason).

    The question must be pooled or known to the store; the reason must be non-empty (:class:`JudgmentError`).
    The annotator's grades of the question are kept: :func:`undrop_question` takes the drop back."""
    annotator = check_annotator(annotator)
    if not isinstance(reason, str) or not reason.strip():
        raise JudgmentError(f"dropping question {question_id!r} needs a reason")
    with engine.begin() as conn:
        if not _known_question(conn, str(question_id)):
            raise JudgmentError(f"unknown question {question_id!r}: not pooled and not in the store's questions")
        conn.exec_driver_sql(
            "INSERT INTO question_drops (question_id, annotator, reason, dropped_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (question_id, annotator) DO UPDATE SET reason = excluded.reason, "
            "dropped_at = excluded.dropped_at", (str(question_id), annotator, reason.strip(), dropped_at or _now()))


def undrop_question(engine: Engine, question_id: str, annotator: str) -> bool:
    """Take back the annotator's drop of a question; ``True`` when there was one."""
    annotator = check_annotator(annotator)
    with engine.begin() as conn:
        removed = conn.execute(question_drops.delete().where(and_(question_drops.c.question_id == str(question_id),
                                                                  question_drops.c.annotator == annotator)))
    return bool(removed.rowcount)


def dropped_questions(engine: Engine, annotator: str) -> pd.DataFrame:
    """``question_id, reason, dropped_at`` of the questions the annotator dropped, by question id."""
    query = (select(question_drops.c.question_id, question_drops.c.reason, question_drops.c.dropped_at)
             .where(question_drops.c.annotator == check_annotator(annotator)).order_by(question_drops.c.question_id))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=["question_id", "reason", "dropped_at"])


# -- progress and resume ---------------------------------------------------------------------------------
def progress(engine: Engine, annotator: str, pool: str) -> pd.DataFrame:
    """Per pooled question of ``pool``, in :func:`question_order`: ``n_candidates`` (pooled chunks),
    ``n_graded`` (of those, graded by the annotator, from any pool), ``dropped`` (by the annotator) and
    ``finished`` (every candidate graded, or dropped)."""
    annotator = check_annotator(annotator)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT p.question_id, COUNT(*), COUNT(j.relevance), "
            "EXISTS (SELECT 1 FROM question_drops d WHERE d.question_id = p.question_id AND d.annotator = ?) "
            "FROM pool p LEFT JOIN judgments j ON j.question_id = p.question_id AND j.chunk_id = p.chunk_id "
            "AND j.annotator = ? WHERE p.pool = ? GROUP BY p.question_id", (annotator, annotator, pool)).all()
    table = pd.DataFrame([tuple(r) for r in rows], columns=list(PROGRESS_COLUMNS[:4]))
    table["dropped"] = table["dropped"].astype(bool)
    table["finished"] = table["dropped"] | (table["n_graded"] == table["n_candidates"])
    order = {q: i for i, q in enumerate(question_order(table["question_id"]))}
    return table.sort_values("question_id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def summarize_progress(per_question: pd.DataFrame) -> Progress:
    """The overall :class:`Progress` of a :func:`progress` table."""
    kept = per_question[~per_question["dropped"]]
    return Progress(questions=len(per_question), finished=int(per_question["finished"].sum()),
                    dropped=int(per_question["dropped"].sum()), candidates=int(kept["n_candidates"].sum()),
                    graded=int(kept["n_graded"].sum()))


def first_ungraded_position(engine: Engine, annotator: str, pool: str, question_id: str) -> int | None:
    """The smallest pool ``position`` of the question that the annotator has not graded; ``None`` if none."""
    annotator = check_annotator(annotator)
    with engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT MIN(p.position) FROM pool p WHERE p.pool = ? AND p.question_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM judgments j WHERE j.question_id = p.question_id AND j.chunk_id = p.chunk_id "
            "AND j.annotator = ?)", (pool, str(question_id), annotator)).scalar()
    return None if found is None else int(found)


def resume_point(engine: Engine, annotator: str, pool: str,
                 per_question: pd.DataFrame | None = None) -> tuple[str, int] | None:
    """Where the annotator stopped: ``(question_id, position)`` of the first ungraded candidate of the first
    unfinished question (in :func:`question_order`); ``None`` when every question is finished.
    ``per_question``: the annotator's :func:`progress` when already at hand."""
    per_question = progress(engine, annotator, pool) if per_question is None else per_question
    open_questions = per_question.loc[~per_question["finished"], "question_id"]
    if open_questions.empty:
        return None
    question_id = str(open_questions.iloc[0])
    return question_id, first_ungraded_position(engine, annotator, pool, question_id)
