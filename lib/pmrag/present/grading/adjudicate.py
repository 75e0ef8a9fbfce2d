"""The disagreement view: the grading widget walking only the chunks annotators graded differently, and writing
the adjudicator's grade to the store's ``adjudications`` (:mod:`pmrag.annotate.adjudicate`), never to
``judgments``.

Same keys, buttons and views as :class:`~pmrag.present.grading.widget.GradingWidget`; what differs: a question's
candidates are its disagreements (numbered among themselves, in the pool's blind order), each shows every
annotator's grade with the annotator named (adjudication is not blind between annotators; retrievers and ranks
stay unseen), the grade and note are the adjudicator's, progress counts settled disagreements, and there is no
"drop question" (a drop is an annotator's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from pmrag.annotate.adjudicate import (Adjudication, disagreements, read_adjudications, record_adjudication,
                                       undo_adjudication)
from pmrag.annotate.judgments import Progress, question_order
from pmrag.present.grading.data import NEIGHBOURS, CandidateView
from pmrag.present.grading.widget import GradingWidget

KEY = ["question_id", "chunk_id"]


@dataclass(frozen=True)
class AdjudicationChange:
    """What one adjudication did (the adjudication before, ``None`` if none, and after): the widget's undo."""

    before: Adjudication | None
    after: Adjudication


def settled_progress(table: pd.DataFrame, settled: set[tuple[str, str]]) -> Progress:
    """Progress over disagreements (``question_id, chunk_id`` rows): a question is finished when each of its
    disagreements is settled (a ``(question, chunk)`` of ``settled``)."""
    done = pd.Series([key in settled for key in zip(table["question_id"], table["chunk_id"])], index=table.index,
                     dtype=bool)
    per_question = done.groupby(table["question_id"]).all()
    return Progress(questions=len(per_question), finished=int(per_question.sum()), dropped=0,
                    candidates=len(table), graded=int(done.sum()))


class AdjudicationWidget(GradingWidget):
    """Settle one pool's disagreements, as ``adjudicator`` (asked for first when ``None``); see the module
    docstring.  The disagreements are read once, when the widget is built."""

    NOTHING = "disagreement to adjudicate"

    def __init__(self, store: Engine | str | Path, pool: str, adjudicator: str | None = None, *,
                 n_neighbours: int = NEIGHBOURS):
        super().__init__(store, pool, adjudicator, n_neighbours=n_neighbours)
        for control in (self.drop_reason, self.drop_button, self.undrop_button):
            control.layout.display = "none"

    @cached_property
    def table(self) -> pd.DataFrame:
        """The pool's disagreements (:func:`pmrag.annotate.adjudicate.disagreements`)."""
        return disagreements(self.engine, pool=self.reader.pool)

    @property
    def annotator_names(self) -> list[str]:
        return [c for c in self.table.columns if c not in (*KEY, "adjudicated", "adjudicator")]

    def _question_ids(self) -> list[str]:
        return question_order(self.table["question_id"]) if len(self.table) else []

    def _candidates_of(self, question_id: str):
        chunks = set(self.table.loc[self.table["question_id"] == question_id, "chunk_id"])
        found = self.reader.candidates(question_id)
        found = found[found["chunk_id"].isin(chunks)].reset_index(drop=True)
        return found.assign(position=range(len(found)))

    def _stored_grades(self, question_id: str) -> dict[str, tuple[int, str | None]]:
        settled = read_adjudications(self.engine)
        mine = settled[settled["question_id"] == question_id]
        return {c: (int(r), n) for c, r, n in zip(mine["chunk_id"], mine["relevance"], mine["note"])}

    def _record(self, chunk: str, relevance: int, note: str | None) -> AdjudicationChange:
        return AdjudicationChange(*record_adjudication(self.engine, self.question_id, chunk, relevance,
                                                       self.annotator_id, note=note))

    def _undo_change(self, change: AdjudicationChange):
        return undo_adjudication(self.engine, change.before, change.after)

    def _settled(self) -> set[tuple[str, str]]:
        settled = read_adjudications(self.engine)
        return set(zip(settled["question_id"], settled["chunk_id"]))

    def _resume(self) -> tuple[str, int] | None:
        settled = self._settled()
        for question_id in self._question_ids():
            chunks = list(self._candidates_of(question_id)["chunk_id"])
            open_ = [i for i, c in enumerate(chunks) if (question_id, c) not in settled]
            if open_:
                return question_id, open_[0]
        return None

    def _overall(self) -> Progress:
        return settled_progress(self.table, self._settled())

    def _dropped_reason(self, question_id: str) -> str | None:
        return None

    def _candidate_view(self, grades) -> CandidateView:
        view = super()._candidate_view(grades)
        row = self.table[(self.table["question_id"] == self.question_id) & (self.table["chunk_id"] == view.chunk_id)]
        named = tuple((name, int(row[name].iloc[0])) for name in self.annotator_names
                      if len(row) and not pd.isna(row[name].iloc[0]))
        return replace(view, annotator_grades=named)
