"""The grading widget: ipywidgets controls and a key pad wired to :mod:`pmrag.annotate.judgments` (every grade,
note and drop is written to the store at once) and to :mod:`~pmrag.present.grading.render` views.

What the widget keeps is where the annotator is (question, candidate, whether neighbours are shown) and the
undo history of this session (the :class:`~pmrag.annotate.judgments.GradeChange` of each grade); grades are read
back from the store for every view.  ipywidgets and anywidget are imported when a widget is built.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from sqlalchemy import Engine

from pmrag.annotate.judgments import (GradeChange, JudgmentError, Progress, annotators, check_annotator,
                                      drop_question, progress, record_grade, resume_point, summarize_progress,
                                      undo_grade, undrop_question)
from pmrag.core.errors import PmragError
from pmrag.core.store import open_store
from pmrag.present.grading.data import NEIGHBOURS, CandidateView, PoolReader, candidate_view, question_view
from pmrag.present.grading.keys import keypad_class
from pmrag.present.grading.render import KEYS_HELP, render_candidate, render_message, render_question

GRADE_KEYS = ("0", "1", "2")
MOVE_KEYS = ("n", "p", "u")
WIDGET_HINT = "Grading widget: run this cell (and the ones above) to grade; widgets need a live kernel."
CSS_ROOT = "pmrag-grading"
CSS_QUESTION = "pmrag-grading-question"
CSS_CANDIDATE = "pmrag-grading-candidate"
CSS_STATUS = "pmrag-grading-status"
KEYPAD_LABEL = f"⌨ click here, then grade with the keyboard — {KEYS_HELP}"


class GradingWidget:
    """Grade one pool of a store, one question and one candidate chunk at a time, as one annotator.

    Parameters
    ----------
    store : the store (a path or an open engine).
    pool : the pool's name (the ``pool`` table's ``pool`` column).
    annotator : the annotator's id; when ``None`` the widget asks for it first (``annotator`` box, ``start``).
    n_neighbours : how many messages before and after a chunk the "neighbouring messages" toggle shows.

    Keys (on the focused key pad ``keys``): ``0`` ``1`` ``2`` grade the candidate and move on; ``n`` / ``p`` next /
    previous candidate; ``u`` undo this session's last grade.  The buttons do the same.  Views (``ipywidgets.HTML``):
    ``header`` (question, progress, one cell per candidate), ``candidate``, ``status``.  ``widget`` is the root box.
    """

    def __init__(self, store: Engine | str | Path, pool: str, annotator: str | None = None, *,
                 n_neighbours: int = NEIGHBOURS):
        import ipywidgets as w

        self.engine = store if isinstance(store, Engine) else open_store(store)
        self.reader = PoolReader(self.engine, pool)
        self.n_neighbours = int(n_neighbours)
        self.annotator_id: str | None = None
        self.question_id: str | None = None
        self.index = 0
        self.history: list[GradeChange] = []
        self._candidates = None
        self._quiet = False

        style = {"description_width": "initial"}
        row = w.Layout(flex_flow="row wrap", width="100%", align_items="center")
        self.annotator = w.Combobox(options=annotators(self.engine), placeholder="your annotator id",
                                    description="annotator", ensure_option=False, style=style)
        self.start_button = w.Button(description="start grading", button_style="primary")
        self.question = w.Dropdown(options=[(f"{n}. {q}", q) for n, q in enumerate(self._question_ids(), 1)],
                                   value=None, description="question", style=style,
                                   layout=w.Layout(width="auto", max_width="30em"))
        self.keys = keypad_class()(GRADE_KEYS + MOVE_KEYS, self.handle_key, label=KEYPAD_LABEL)
        self.grade_buttons = [w.Button(description=text, tooltip=f"key {g}", layout=w.Layout(width="auto"))
                              for g, text in ((0, "0 not relevant"), (1, "1 supporting"), (2, "2 relevant"))]
        self.previous_button = w.Button(description="◀ previous (p)", layout=w.Layout(width="auto"))
        self.next_button = w.Button(description="next (n) ▶", layout=w.Layout(width="auto"))
        self.undo_button = w.Button(description="undo (u)", layout=w.Layout(width="auto"))
        self.neighbours = w.ToggleButton(value=False, description="neighbouring messages",
                                         tooltip=f"show the {self.n_neighbours} messages before and after the chunk",
                                         layout=w.Layout(width="auto"))
        self.note = w.Textarea(placeholder="note on this candidate (saved with its grade)", continuous_update=False,
                               layout=w.Layout(width="100%", max_width="60em", height="3.2em"))
        self.drop_reason = w.Text(placeholder="why drop this question?", layout=w.Layout(width="auto",
                                                                                         max_width="30em"))
        self.drop_button = w.Button(description="drop question", button_style="danger", layout=w.Layout(width="auto"))
        self.undrop_button = w.Button(description="undo drop", layout=w.Layout(width="auto"))
        self.header, self.candidate, self.status = w.HTML(), w.HTML(), w.HTML()

        self.grading = w.VBox([
            w.HBox([self.question, self.drop_reason, self.drop_button, self.undrop_button], layout=row),
            self.header, self.keys,
            w.HBox([*self.grade_buttons, self.previous_button, self.next_button, self.undo_button, self.neighbours],
                   layout=row),
            self.note, self.status, self.candidate], layout=w.Layout(width="100%"))
        self.widget = _grading_box()([w.HBox([self.annotator, self.start_button], layout=row), self.grading],
                                     layout=w.Layout(width="100%", max_width="100%"))
        for view, css in ((self.widget, CSS_ROOT), (self.header, CSS_QUESTION), (self.candidate, CSS_CANDIDATE),
                          (self.status, CSS_STATUS)):
            view.add_class(css)

        self.start_button.on_click(lambda _: self.start(self.annotator.value))
        for grade, button in enumerate(self.grade_buttons):
            button.on_click(lambda _, grade=grade: self.grade(grade))
        self.previous_button.on_click(lambda _: self.move(-1))
        self.next_button.on_click(lambda _: self.move(+1))
        self.undo_button.on_click(lambda _: self.undo())
        self.drop_button.on_click(lambda _: self.drop(self.drop_reason.value))
        self.undrop_button.on_click(lambda _: self.undrop())
        self.neighbours.observe(lambda _: self.render(), names="value")
        self.note.observe(self._on_note, names="value")
        self.question.observe(self._on_question, names="value")

        self._set_enabled(False)
        self.status.value = render_message("Choose your annotator id and press “start grading”.")
        if annotator is not None:
            self.annotator.value = str(annotator)
            self.start(annotator)

    # -- session ---------------------------------------------------------------------------------------
    def start(self, annotator: str) -> None:
        """Grade as ``annotator`` from where they stopped (:func:`~pmrag.annotate.judgments.resume_point`)."""
        try:
            self.annotator_id = check_annotator(annotator)
        except JudgmentError as error:
            self.status.value = render_message(str(error))
            return
        self.history = []
        self.annotator.disabled = self.start_button.disabled = True
        self._set_enabled(True)
        if not self._question_ids():
            self.status.value = render_message(f"Pool {self.reader.pool!r} holds no {self.NOTHING}.")
            self._set_enabled(False)
            return
        self.keys.focus()
        where = self._resume()
        if where is None:
            self.open(self._question_ids()[0], 0)
            self._say("Every question of this pool is graded or dropped; you can still revise any grade.")
        else:
            self.open(*where)
            self._say(f"Grading as {self.annotator_id}: resumed at question {where[0]}, "
                      f"candidate {where[1] + 1}.")

    def open(self, question_id: str, position: int | None = None) -> None:
        """Show ``question_id`` at the candidate in ``position`` (default: its first ungraded one, else the first)."""
        self.question_id = str(question_id)
        self._sync_questions()
        self._candidates = self._candidates_of(self.question_id)
        positions = list(self._candidates["position"])
        if position is None:
            grades = self._stored_grades(self.question_id)
            ungraded = [i for i, c in enumerate(self._candidates["chunk_id"]) if c not in grades]
            self.index = ungraded[0] if ungraded else 0
        else:
            self.index = positions.index(position) if position in positions else 0
        self._quiet = True
        try:
            self.question.value = self.question_id
        finally:
            self._quiet = False
        self.drop_reason.value = ""
        self.render()

    # -- actions ---------------------------------------------------------------------------------------
    def handle_key(self, key: str) -> None:
        """One key of the pad: ``0``/``1``/``2`` grade, ``n``/``p`` move, ``u`` undo."""
        if self.annotator_id is None:
            self._say("Choose your annotator id and press “start grading” first.")
        elif key in GRADE_KEYS:
            self.grade(int(key))
        elif key in ("n", "p"):
            self.move(+1 if key == "n" else -1)
        elif key == "u":
            self.undo()

    def grade(self, relevance: int) -> None:
        """Grade the current candidate (with the note box's text) and move on: to the question's next ungraded
        candidate (after this one, wrapping round), else to where the annotator's grading resumes (the next
        unfinished question), else to the next candidate."""
        chunk = self._chunk()
        if chunk is None:
            return
        try:
            change = self._record(chunk, relevance, self.note.value)
        except PmragError as error:
            self._say(str(error))
            return
        self.history.append(change)
        number = self._position_of(chunk) + 1
        self._advance()
        self._say(f"Candidate {number} graded {relevance}. Press u to undo.")

    def move(self, step: int) -> None:
        """The next (``+1``) or previous (``-1``) candidate of this question, stopping at either end."""
        if self._candidates is None or self._candidates.empty:
            return
        self.index = min(max(self.index + step, 0), len(self._candidates) - 1)
        self.render()

    def undo(self) -> None:
        """Undo this session's last grade (or note) and show that candidate."""
        if not self.history:
            self._say("Nothing to undo in this session.")
            return
        change = self.history[-1]
        try:
            restored = self._undo_change(change)
        except PmragError as error:
            self._say(str(error))
            return
        self.history.pop()
        after = change.after
        self.open(after.question_id, self._position_in(after.question_id, after.chunk_id))
        was = "ungraded" if restored is None else f"graded {restored.relevance}"
        self._say(f"Undone: candidate {self.index + 1} is {was} again.")

    def drop(self, reason: str) -> None:
        """Drop the current question, with ``reason``, and go to where grading resumes."""
        try:
            drop_question(self.engine, self.question_id, self.annotator_id, reason)
        except PmragError as error:
            self._say(str(error))
            return
        dropped = self.question_id
        where = self._resume()
        if where is None:
            self.render()
        else:
            self.open(*where)
        self._say(f"Question {dropped} dropped. “undo drop” on it takes it back.")

    def undrop(self) -> None:
        """Take back the annotator's drop of the current question."""
        if undrop_question(self.engine, self.question_id, self.annotator_id):
            self.render()
            self._say(f"Question {self.question_id} is no longer dropped.")
        else:
            self._say(f"Question {self.question_id} was not dropped.")

    def refresh(self) -> None:
        """Read the pool's questions again (a question pooled, or a question's text edited, since the widget was
        built) and re-render; a pool that held no question when grading started is started now."""
        self.reader.refresh()
        if self.annotator_id is not None and self.question_id is None and self._question_ids():
            self.start(self.annotator_id)
            return
        self._sync_questions()
        self.render()

    # -- views -----------------------------------------------------------------------------------------
    def _sync_questions(self) -> None:
        """The question menu lists the pool's questions as the store holds them now."""
        options = [(f"{n}. {q}", q) for n, q in enumerate(self._question_ids(), 1)]
        if list(self.question.options) == options:
            return
        self._quiet = True
        try:
            self.question.options = options
            self.question.value = self.question_id if self.question_id in dict(options).values() else None
        finally:
            self._quiet = False

    def render(self) -> None:
        """Re-render the question header and the current candidate from the store."""
        if self.question_id is None or self.annotator_id is None:
            return
        self._sync_questions()
        grades = self._stored_grades(self.question_id)
        view = question_view(self.reader, self.question_id, self._candidates, grades,
                             self._dropped_reason(self.question_id), self._overall())
        self.header.value = render_question(view, self.index if len(self._candidates) else None)
        if self._candidates.empty:
            self.candidate.value = render_message("This question has no pooled candidate.")
            return
        current = self._candidate_view(grades)
        self.candidate.value = render_candidate(current)
        self._quiet = True
        try:
            self.note.value = current.note or ""
        finally:
            self._quiet = False

    # -- what is graded, and where it is kept (an adjudication widget keeps them elsewhere) --------------
    NOTHING = "question to grade"

    def _question_ids(self) -> list[str]:
        return self.reader.question_ids

    def _candidates_of(self, question_id: str):
        return self.reader.candidates(question_id)

    def _stored_grades(self, question_id: str) -> dict[str, tuple[int, str | None]]:
        return self.reader.grades(self.annotator_id, question_id)

    def _record(self, chunk: str, relevance: int, note: str | None) -> GradeChange:
        return record_grade(self.engine, self.question_id, chunk, self.annotator_id, relevance,
                            pool=self.reader.pool, note=note)

    def _undo_change(self, change: GradeChange):
        return undo_grade(self.engine, change)

    def _resume(self) -> tuple[str, int] | None:
        return resume_point(self.engine, self.annotator_id, self.reader.pool)

    def _overall(self) -> Progress:
        return summarize_progress(progress(self.engine, self.annotator_id, self.reader.pool))

    def _dropped_reason(self, question_id: str) -> str | None:
        return self.reader.dropped_reason(self.annotator_id, question_id)

    def _candidate_view(self, grades) -> CandidateView:
        return candidate_view(self.reader, self.question_id, self._candidates, self.index, grades,
                              with_neighbours=self.neighbours.value, n_neighbours=self.n_neighbours)

    # -- helpers ---------------------------------------------------------------------------------------
    def _say(self, message: str) -> None:
        self.status.value = render_message(message)

    def _set_enabled(self, enabled: bool) -> None:
        for control in (self.question, *self.grade_buttons, self.previous_button, self.next_button, self.undo_button,
                        self.neighbours, self.note, self.drop_reason, self.drop_button, self.undrop_button):
            control.disabled = not enabled

    def _chunk(self) -> str | None:
        if self._candidates is None or self._candidates.empty:
            return None
        return str(self._candidates["chunk_id"].iloc[self.index])

    def _position_of(self, chunk: str) -> int:
        return int(self._candidates.loc[self._candidates["chunk_id"] == chunk, "position"].iloc[0])

    def _position_in(self, question_id: str, chunk: str) -> int | None:
        found = self._candidates_of(question_id)
        rows = found.loc[found["chunk_id"] == chunk, "position"]
        return int(rows.iloc[0]) if len(rows) else None

    def _advance(self) -> None:
        grades = self._stored_grades(self.question_id)
        n = len(self._candidates)
        chunks = list(self._candidates["chunk_id"])
        following = [(self.index + step) % n for step in range(1, n + 1)]
        ungraded = [i for i in following if chunks[i] not in grades]
        if ungraded:
            self.index = ungraded[0]
            self.render()
            return
        where = self._resume()
        if where is None:
            self.index = min(self.index + 1, n - 1)
            self.render()
        else:
            self.open(*where)

    def _on_note(self, change) -> None:
        if self._quiet or self.annotator_id is None:
            return
        chunk = self._chunk()
        grade = self._stored_grades(self.question_id).get(chunk) if chunk else None
        if grade is None:
            self._say("The note is saved with the grade: press 0, 1 or 2.")
            return
        try:
            self.history.append(self._record(chunk, grade[0], change["new"]))
        except PmragError as error:
            self._say(str(error))
            return
        self._say(f"Note saved with the grade of candidate {self.index + 1}.")
        self.render()

    def _on_question(self, change) -> None:
        if not self._quiet and change["new"] is not None and self.annotator_id is not None:
            self.open(change["new"])

    # -- display ---------------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The root box's bundle: the widget for a live kernel, :data:`WIDGET_HINT` as ``text/plain``."""
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (f"GradingWidget(pool={self.reader.pool!r}, annotator={self.annotator_id!r}, "
                f"question={self.question_id!r}, candidate={self.index + 1})")


def _grading_box() -> type:
    """The root ``VBox`` class whose ``text/plain`` is :data:`WIDGET_HINT`."""
    return hinted_box(WIDGET_HINT)


@cache
def hinted_box(hint: str) -> type:
    """A ``VBox`` class whose ``text/plain`` is ``hint`` (built on first use): what a saved notebook shows
    where the widget was, instead of the widgets' reprs."""
    import ipywidgets as w

    class HintedBox(w.VBox):
        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            return {**bundle, "text/plain": hint}

    return HintedBox
