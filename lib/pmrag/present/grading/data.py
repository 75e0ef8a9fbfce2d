"""What the grading view shows, read from the store: no HTML, no widgets.

:class:`PoolReader` reads one pool of a store: its questions (text and type from ``questions``, else from an
accepted or edited ``question_candidates`` row), a question's candidates in the pool's blind ``position`` order
(the ``origins`` column, which retriever at which rank, is never read), a chunk's messages, the messages a
question's evidence hints matched (``hint_matches``, to highlight), and the messages just before and after a
chunk.  :func:`question_view` and :func:`candidate_view` turn those into the plain values that
:mod:`~pmrag.present.grading.render` draws; grades come from :mod:`pmrag.annotate.judgments`, for one annotator.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from sqlalchemy import Engine

from pmrag.annotate.judgments import Progress, question_order

NEIGHBOURS = 5
NO_QUESTION_TEXT = "(the store holds no text for this question)"


@dataclass(frozen=True)
class Line:
    """One message of a chunk (or beside it): ``matched`` when an evidence hint of the question matched it."""

    message_id: str
    occurred_at: datetime
    sender: str
    text: str
    matched: bool = False


@dataclass(frozen=True)
class QuestionView:
    """A question as the grader sees it: its place among the pool's questions, its grades by position (``None``:
    ungraded), the annotator's drop reason (``None``: not dropped) and the annotator's overall progress."""

    question_id: str
    text: str
    type: str
    number: int
    n_questions: int
    grades: tuple[int | None, ...]
    dropped_reason: str | None
    overall: Progress

    @property
    def n_graded(self) -> int:
        return sum(g is not None for g in self.grades)


@dataclass(frozen=True)
class CandidateView:
    """One candidate chunk: its blind position of ``n_candidates``, times, speakers, messages, the annotator's
    grade and note, the hint excerpts to mark, and — when asked for — the messages before and after it.  When
    adjudicating, ``grade`` and ``note`` are the adjudicator's and ``annotator_grades`` the annotators' grades."""

    position: int
    n_candidates: int
    chunk_id: str
    start_at: datetime
    end_at: datetime
    lines: tuple[Line, ...]
    grade: int | None
    note: str | None
    excerpts: tuple[str, ...] = ()
    before: tuple[Line, ...] | None = None
    after: tuple[Line, ...] | None = None
    annotator_grades: tuple[tuple[str, int | None], ...] = ()   # adjudication: every annotator's grade, named

    @property
    def speakers(self) -> tuple[str, ...]:
        """The chunk's distinct senders, in order of first message."""
        return tuple(dict.fromkeys(line.sender for line in self.lines))


def _time(text) -> datetime:
    return text if isinstance(text, datetime) else datetime.fromisoformat(str(text))


class PoolReader:
    """Read-only access to one pool of a store, for the grading view (see the module docstring)."""

    def __init__(self, engine: Engine, pool: str):
        self.engine = engine
        self.pool = str(pool)
        self._questions: pd.DataFrame | None = None
        self._seen: tuple | None = None

    def _rows(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql, parameters).all()]

    @property
    def questions(self) -> pd.DataFrame:
        """``question_id, text, type`` of every question of the pool, in :func:`question_order`.  Read once, and
        again when the pool's number of rows or of questions has changed since (one small count query per use:
        a question pooled later is seen) or after :meth:`refresh` (a question's text edited since)."""
        seen = self._rows("SELECT COUNT(*), COUNT(DISTINCT question_id) FROM pool WHERE pool = ?", (self.pool,))[0]
        if self._questions is None or seen != self._seen:
            self._questions, self._seen = self._read_questions(), seen
        return self._questions

    def refresh(self) -> None:
        """Read the questions again at their next use."""
        self._questions = None

    def _read_questions(self) -> pd.DataFrame:
        rows = self._rows(
            "SELECT p.question_id, COALESCE(q.text, c.edited_text, c.text), COALESCE(q.type, c.type) "
            "FROM (SELECT DISTINCT question_id FROM pool WHERE pool = ?) p "
            "LEFT JOIN questions q ON q.question_id = p.question_id "
            "LEFT JOIN question_candidates c ON c.candidate_id = p.question_id", (self.pool,))
        table = pd.DataFrame(rows, columns=["question_id", "text", "type"]).set_index("question_id", drop=False)
        table["text"] = table["text"].fillna(NO_QUESTION_TEXT)
        table["type"] = table["type"].fillna("")
        return table.loc[question_order(table["question_id"])] if len(table) else table

    @property
    def question_ids(self) -> list[str]:
        return list(self.questions["question_id"])

    def question(self, question_id: str) -> pd.Series:
        if question_id not in self.questions.index:
            raise ValueError(f"question {question_id!r} is not in pool {self.pool!r}")
        return self.questions.loc[question_id]

    def candidates(self, question_id: str) -> pd.DataFrame:
        """``position, chunk_id, start_at, end_at`` of the question's pooled chunks, by position."""
        rows = self._rows("SELECT p.position, p.chunk_id, c.start_at, c.end_at FROM pool p "
                          "LEFT JOIN chunks c ON c.chunk_id = p.chunk_id WHERE p.pool = ? AND p.question_id = ? "
                          "ORDER BY p.position", (self.pool, str(question_id)))
        return pd.DataFrame(rows, columns=["position", "chunk_id", "start_at", "end_at"])

    def matched_messages(self, question_id: str) -> frozenset[str]:
        """The messages an evidence hint of the question matched."""
        return frozenset(m for (m,) in self._rows("SELECT DISTINCT message_id FROM hint_matches "
                                                   "WHERE candidate_id = ?", (str(question_id),)))

    def excerpts(self, question_id: str) -> tuple[str, ...]:
        """The question's hint excerpts (non-empty), in hint order."""
        return tuple(e for (e,) in self._rows("SELECT excerpt FROM candidate_hints WHERE candidate_id = ? "
                                               "ORDER BY hint", (str(question_id),)) if e and e.strip())

    def lines(self, chunk_id: str, matched: frozenset[str] = frozenset()) -> tuple[Line, ...]:
        """The chunk's messages in chunk order."""
        rows = self._rows("SELECT m.message_id, m.occurred_at, m.sender, m.text FROM chunk_messages cm "
                          "JOIN messages m ON m.message_id = cm.message_id WHERE cm.chunk_id = ? "
                          "ORDER BY cm.position", (str(chunk_id),))
        return tuple(Line(m, _time(at), sender, text, m in matched) for m, at, sender, text in rows)

    def neighbours(self, chunk_id: str, n: int = NEIGHBOURS,
                   matched: frozenset[str] = frozenset()) -> tuple[tuple[Line, ...], tuple[Line, ...]]:
        """The ``n`` messages of the chunk's source just before its first message and just after its last, in
        the chunking order (time, then position in the source)."""
        ends = self._rows("SELECT m.source, m.occurred_at, m.source_order FROM chunk_messages cm "
                          "JOIN messages m ON m.message_id = cm.message_id WHERE cm.chunk_id = ? "
                          "ORDER BY m.occurred_at, m.source_order", (str(chunk_id),))
        if not ends:
            return (), ()
        (source, first_at, first_order), (_, last_at, last_order) = ends[0], ends[-1]
        columns = "message_id, occurred_at, sender, text"
        before = self._rows(f"SELECT {columns} FROM messages WHERE source = ? AND (occurred_at < ? OR "
                            "(occurred_at = ? AND source_order < ?)) ORDER BY occurred_at DESC, source_order DESC "
                            "LIMIT ?", (source, first_at, first_at, first_order, int(n)))
        after = self._rows(f"SELECT {columns} FROM messages WHERE source = ? AND (occurred_at > ? OR "
                           "(occurred_at = ? AND source_order > ?)) ORDER BY occurred_at, source_order LIMIT ?",
                           (source, last_at, last_at, last_order, int(n)))
        as_lines = lambda rows: tuple(Line(m, _time(at), s, t, m in matched) for m, at, s, t in rows)  # noqa: E731
        return as_lines(reversed(before)), as_lines(after)

    def grades(self, annotator: str, question_id: str) -> dict[str, tuple[int, str | None]]:
        """``{chunk_id: (relevance, note)}`` of the annotator's grades of the question's pooled chunks."""
        rows = self._rows("SELECT j.chunk_id, j.relevance, j.note FROM judgments j JOIN pool p ON "
                          "p.question_id = j.question_id AND p.chunk_id = j.chunk_id AND p.pool = ? "
                          "WHERE j.question_id = ? AND j.annotator = ?", (self.pool, str(question_id), annotator))
        return {chunk: (int(relevance), note) for chunk, relevance, note in rows}

    def dropped_reason(self, annotator: str, question_id: str) -> str | None:
        found = self._rows("SELECT reason FROM question_drops WHERE question_id = ? AND annotator = ?",
                           (str(question_id), annotator))
        return found[0][0] if found else None


def question_view(reader: PoolReader, question_id: str, candidates: pd.DataFrame,
                  grades: dict[str, tuple[int, str | None]], dropped_reason: str | None,
                  overall: Progress) -> QuestionView:
    """The :class:`QuestionView` of a question from its ``candidates`` (:meth:`PoolReader.candidates`) and the
    annotator's ``grades`` (:meth:`PoolReader.grades`)."""
    question = reader.question(question_id)
    ids = reader.question_ids
    by_position = tuple(grades.get(chunk, (None, None))[0] for chunk in candidates["chunk_id"])
    return QuestionView(question_id=str(question_id), text=str(question["text"]), type=str(question["type"]),
                        number=ids.index(question_id) + 1, n_questions=len(ids), grades=by_position,
                        dropped_reason=dropped_reason, overall=overall)


def candidate_view(reader: PoolReader, question_id: str, candidates: pd.DataFrame, index: int,
                   grades: dict[str, tuple[int, str | None]], *, with_neighbours: bool = False,
                   n_neighbours: int = NEIGHBOURS) -> CandidateView:
    """The :class:`CandidateView` of the ``index``-th candidate (0-based, in position order) of a question."""
    row = candidates.iloc[index]
    matched = reader.matched_messages(question_id)
    grade, note = grades.get(row["chunk_id"], (None, None))
    before = after = None
    if with_neighbours:
        before, after = reader.neighbours(row["chunk_id"], n_neighbours, matched)
    return CandidateView(position=int(row["position"]), n_candidates=len(candidates), chunk_id=str(row["chunk_id"]),
                         start_at=_time(row["start_at"]), end_at=_time(row["end_at"]),
                         lines=reader.lines(row["chunk_id"], matched), grade=grade, note=note,
                         excerpts=reader.excerpts(question_id), before=before, after=after)
