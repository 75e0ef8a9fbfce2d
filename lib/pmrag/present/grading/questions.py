"""Questions to grade, in JupyterLab (000 §4.2): type a question with its evidence hints, and review the
candidates a model proposed or a researcher typed.

* :class:`QuestionEntryWidget` — a question's text and type and optional evidence hints (a date or a date range,
  a speaker of the store, a phrase), checked by the typed-file reader's rules and messages
  (:func:`pmrag.annotate.candidates.typed_candidate`) and stored at once as a typed candidate, batch
  ``typed by <author>`` (:func:`~pmrag.annotate.candidates.store_candidates`).
* :class:`CandidateReviewWidget` — walk the stored candidates of a status (``proposed`` first): text, type,
  origin (model, prompt hash and message batch, or the file or author that typed it) and hints; accept, edit
  (text and type) or drop with a reason (:func:`~pmrag.annotate.candidates.accept_candidate`,
  :func:`~pmrag.annotate.candidates.edit_candidate`, :func:`~pmrag.annotate.candidates.drop_candidate`), with
  the count of candidates per status.

As in the grading widget, every action is written to the store at once and every view is read back from it;
a widget keeps only where it is (a pending question's hints before it is stored).  A saved notebook shows
:data:`ENTRY_HINT` / :data:`REVIEW_HINT` instead of the widgets.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from pmrag.annotate.candidates import (STATUSES, accept_candidate, drop_candidate, edit_candidate, read_candidates,
                                       read_hints, store_candidates, typed_candidate)
from pmrag.annotate.judgments import JudgmentError, check_annotator
from pmrag.core.errors import PmragError
from pmrag.core.params import QUESTION_TYPES
from pmrag.core.store import open_store
from pmrag.present.grading.render import render_message
from pmrag.present.grading.widget import hinted_box

ENTRY_HINT = "Question entry widget: run this cell (and the ones above) to type questions; widgets need a live kernel."
REVIEW_HINT = "Candidate review widget: run this cell (and the ones above) to review; widgets need a live kernel."
CSS_ENTRY = "pmrag-question-entry"
CSS_REVIEW = "pmrag-candidate-review"
ALL = "all"
NO_SPEAKER = ""


def _engine(store: Engine | str | Path) -> Engine:
    return store if isinstance(store, Engine) else open_store(store)


def store_types(engine: Engine) -> list[str]:
    """The paper's three question types, then the other types of the store's questions, by name."""
    with engine.connect() as conn:
        found = [t for (t,) in conn.exec_driver_sql("SELECT DISTINCT type FROM questions ORDER BY type")]
    return list(QUESTION_TYPES) + [t for t in found if t not in QUESTION_TYPES]


def store_speakers(engine: Engine) -> list[str]:
    """The distinct senders of the store's messages, by name."""
    with engine.connect() as conn:
        return [s for (s,) in conn.exec_driver_sql("SELECT DISTINCT sender FROM messages ORDER BY sender")]


def hint_entry(time_from: str, time_to: str, speaker: str, phrase: str) -> dict:
    """One hint as a typed file writes it, from the entry boxes: a time alone (``time``), a range (``time_from``
    and ``time_to``), a speaker, a phrase; empty boxes left out (``{}``: no hint given)."""
    time_from, time_to, phrase = time_from.strip(), time_to.strip(), phrase.strip()
    entry = {"time": time_from} if time_from and not time_to else {}
    if time_to:
        entry = {"time_from": time_from, "time_to": time_to} if time_from else {"time_to": time_to}
    if speaker:
        entry["speaker"] = speaker
    if phrase:
        entry["phrase"] = phrase
    return entry


def status_counts(engine: Engine) -> dict[str, int]:
    """Stored candidates per status, every status of :data:`~pmrag.annotate.candidates.STATUSES` named."""
    with engine.connect() as conn:
        found = dict(conn.exec_driver_sql("SELECT status, COUNT(*) FROM question_candidates GROUP BY status").all())
    return {status: int(found.get(status, 0)) for status in STATUSES}


# -------------------------------------------------------------------------------------------- views

def _wrap(body: str) -> str:
    return f'<div class="pmrag-grade">{body}</div>'


def render_counts(counts: dict[str, int]) -> str:
    """``proposed 3 · accepted 1 · edited 0 · dropped 2`` (escaped HTML)."""
    return _wrap('<p class="counts">' + " · ".join(f"{html.escape(s)} <b>{n}</b>" for s, n in counts.items())
                 + "</p>")


def origin_text(candidate: pd.Series) -> str:
    """Where a candidate came from: ``model gpt-4o-mini · prompts 1a2b3c4d5e6f · batch batch_…`` or
    ``typed · typed by ann`` (the file's name, or the widget's author)."""
    if candidate["origin"] == "model":
        prompt = str(candidate["prompt_sha256"] or "")[:12] or "unknown"
        return f"model {candidate['model'] or 'unknown'} · prompts {prompt} · batch {candidate['batch']}"
    return f"typed · {candidate['batch']}"


def _hint_cell(value) -> str:
    return "" if value is None or pd.isna(value) else html.escape(str(value))


def _hint_time(row) -> str:
    start, end = row["time_from"], row["time_to"]
    if start is None or pd.isna(start):
        return ""
    text = pd.Timestamp(start).strftime("%Y-%m-%d %H:%M")
    return text if end is None or pd.isna(end) else f"{text} – {pd.Timestamp(end).strftime('%Y-%m-%d %H:%M')}"


def render_review(candidate: pd.Series, hints: pd.DataFrame, number: int, total: int) -> str:
    """One candidate as the reviewer sees it: ``candidate k of n``, status, type, text (and the edited text or
    the drop reason), origin, and its hints (time or range, speaker, phrase, the batch that gave it)."""
    edited = (f'<p class="edited">edited to: {html.escape(str(candidate["edited_text"]))}</p>'
              if candidate["status"] == "edited" else "")
    reason = (f'<p class="reason">dropped: {html.escape(str(candidate["reason"]))}</p>'
              if candidate["status"] == "dropped" else "")
    rows = "".join(f'<tr><td class="time">{_hint_time(h)}</td><td class="sender">{_hint_cell(h["speaker"])}</td>'
                   f'<td class="text">{_hint_cell(h["excerpt"])}</td><td>{_hint_cell(h.get("batch"))}</td></tr>'
                   for _, h in hints.iterrows())
    table = (f'<table class="lines"><tbody><tr><td>time</td><td>speaker</td><td>phrase</td><td>from</td></tr>{rows}'
             f'</tbody></table>' if rows else '<p class="meta">no evidence hint</p>')
    return _wrap(f'<h4 class="candidate-number">candidate {number} of {total} · {html.escape(candidate["status"])}'
                 f' <small>[{html.escape(str(candidate["type"]))}] {html.escape(str(candidate["candidate_id"]))}'
                 f'</small></h4><p class="qtext">{html.escape(str(candidate["text"]))}</p>{edited}{reason}'
                 f'<p class="meta">origin: {html.escape(origin_text(candidate))}</p>{table}')


# -------------------------------------------------------------------------------------------- entry

class QuestionEntryWidget:
    """Type questions to grade, each stored at once as a typed candidate (status ``proposed``).

    Parameters
    ----------
    store : the store (a path or an open engine).
    types : the types offered (default: the paper's three, then the store's questions' other types).
    author : who types (an annotator-like id, batch ``typed by <author>``); asked for in the ``author`` box
        when ``None``.

    Controls: ``text``, ``type``, a hint's ``time_from`` (a date or time alone, or a range's start),
    ``time_to``, ``speaker`` (the store's senders), ``phrase``; ``add_hint_button`` keeps the hint in the boxes
    for this question and clears them for another, ``store_button`` checks and stores the question with its
    hints (those added and the one in the boxes).  ``hints`` lists the pending hints; ``status`` says what
    happened, errors in the typed-file reader's words.
    """

    def __init__(self, store: Engine | str | Path, *, types=None, author: str | None = None):
        import ipywidgets as w

        self.engine = _engine(store)
        self.types = list(types) if types is not None else store_types(self.engine)
        self.pending: list[dict] = []
        style = {"description_width": "initial"}
        row = w.Layout(flex_flow="row wrap", width="100%", align_items="center")
        self.author = w.Text(value=author or "", placeholder="your id", description="author", style=style)
        self.text = w.Textarea(placeholder="the question, as you would ask it", description="question",
                               style=style, layout=w.Layout(width="100%", max_width="60em"))
        self.type = w.Dropdown(options=self.types, value=self.types[0] if self.types else None,
                               description="type", style=style)
        self.time_from = w.Text(placeholder="YYYY-MM-DD [HH:MM]", description="date, or from", style=style)
        self.time_to = w.Text(placeholder="YYYY-MM-DD [HH:MM]", description="to", style=style)
        self.speaker = w.Dropdown(options=[("(any speaker)", NO_SPEAKER)] + [(s, s) for s in
                                                                            store_speakers(self.engine)],
                                  value=NO_SPEAKER, description="speaker", style=style)
        self.phrase = w.Text(placeholder="words the answer's messages hold", description="phrase", style=style)
        self.add_hint_button = w.Button(description="add another hint", layout=w.Layout(width="auto"))
        self.store_button = w.Button(description="store question", button_style="primary",
                                     layout=w.Layout(width="auto"))
        self.hints, self.status = w.HTML(), w.HTML()
        self.widget = hinted_box(ENTRY_HINT)([
            w.HBox([self.author, self.type], layout=row), self.text,
            w.HBox([self.time_from, self.time_to, self.speaker, self.phrase, self.add_hint_button], layout=row),
            self.hints, w.HBox([self.store_button], layout=row), self.status], layout=w.Layout(width="100%"))
        self.widget.add_class(CSS_ENTRY)
        self.add_hint_button.on_click(lambda _: self.add_hint())
        self.store_button.on_click(lambda _: self.store())
        self._show_hints()

    def _boxes(self) -> dict:
        return hint_entry(self.time_from.value, self.time_to.value, self.speaker.value or "", self.phrase.value)

    def _clear_hint(self) -> None:
        self.time_from.value = self.time_to.value = self.phrase.value = ""
        self.speaker.value = NO_SPEAKER

    def _show_hints(self) -> None:
        self.hints.value = _wrap(f'<p class="meta">hints for this question: {len(self.pending)}</p>')

    def _say(self, message: str) -> None:
        self.status.value = render_message(message)

    def add_hint(self) -> bool:
        """Check the hint in the boxes (the reader's rules) and keep it for this question; ``False`` on an
        error (said in ``status``) or when the boxes are empty."""
        entry = self._boxes()
        if not entry:
            self._say("The hint boxes are empty: give a date, a speaker or a phrase.")
            return False
        try:
            typed_candidate({"text": "-", "type": "-", "hints": [*self.pending, entry]}, "-")
        except ValueError as error:
            self._say(str(error))
            return False
        self.pending.append(entry)
        self._clear_hint()
        self._show_hints()
        self._say(f"Hint {len(self.pending)} kept for this question; store the question to save it.")
        return True

    def store(self) -> str | None:
        """Check and store the question with its hints; returns its candidate id (``None`` on an error, said
        in ``status``, and nothing stored).  The boxes are cleared for the next question."""
        try:
            author = check_annotator(self.author.value)
        except JudgmentError as error:
            self._say(f"author: {error}")
            return None
        hints = [*self.pending, *([self._boxes()] if self._boxes() else [])]
        batch = f"typed by {author}"
        try:
            candidate = typed_candidate({"text": self.text.value, "type": self.type.value or "", "hints": hints},
                                        batch)
        except ValueError as error:
            self._say(str(error))
            return None
        report = store_candidates(self.engine, [candidate], batch)
        if report.rejected:
            self._say(f"Not stored: candidate {candidate.candidate_id} is already stored with another type or other "
                      "hints; review it in the candidate review widget.")
            return None
        self.pending = []
        self.text.value = ""
        self._clear_hint()
        self._show_hints()
        done = "stored" if report.stored else "already stored"
        self._say(f"Question {candidate.candidate_id} {done} ({candidate.type}, {len(candidate.hints)} hint(s)).")
        return candidate.candidate_id

    def _repr_mimebundle_(self, **kwargs) -> dict:
        return self.widget._repr_mimebundle_(**kwargs)


# -------------------------------------------------------------------------------------------- review

class CandidateReviewWidget:
    """Review stored candidates one at a time: accept, edit (text, type) or drop with a reason.

    Parameters
    ----------
    store : the store (a path or an open engine).
    status : the status walked first (``proposed``; ``all`` for every candidate).
    types : the types an edit offers (default as :class:`QuestionEntryWidget`).

    Controls: ``show`` (the status filter), ``previous_button`` / ``next_button``, ``accept_button``,
    ``edit_text`` / ``edit_type`` / ``edit_button`` (filled with the candidate's question and type),
    ``drop_reason`` / ``drop_button``.  Views: ``counts`` (candidates per status), ``candidate``, ``status``.
    The candidates of the filter are read from the store for every view, by id; after an action on a
    candidate that leaves the filter, the next one is shown.
    """

    def __init__(self, store: Engine | str | Path, *, status: str = "proposed", types=None):
        import ipywidgets as w

        if status not in (*STATUSES, ALL):
            raise PmragError(f"status must be one of {', '.join((*STATUSES, ALL))}, got {status!r}")
        self.engine = _engine(store)
        self.types = list(types) if types is not None else store_types(self.engine)
        self.index = 0
        style = {"description_width": "initial"}
        row = w.Layout(flex_flow="row wrap", width="100%", align_items="center")
        self.show = w.Dropdown(options=[*STATUSES, ALL], value=status, description="show", style=style)
        self.previous_button = w.Button(description="◀ previous", layout=w.Layout(width="auto"))
        self.next_button = w.Button(description="next ▶", layout=w.Layout(width="auto"))
        self.accept_button = w.Button(description="accept", button_style="success", layout=w.Layout(width="auto"))
        self.edit_text = w.Text(description="edited question", style=style,
                                layout=w.Layout(width="100%", max_width="60em"))
        self.edit_type = w.Dropdown(options=self.types, description="type", style=style)
        self.edit_button = w.Button(description="accept as edited", layout=w.Layout(width="auto"))
        self.drop_reason = w.Text(placeholder="why drop it?", layout=w.Layout(width="auto", max_width="30em"))
        self.drop_button = w.Button(description="drop", button_style="danger", layout=w.Layout(width="auto"))
        self.counts, self.candidate, self.status = w.HTML(), w.HTML(), w.HTML()
        self.widget = hinted_box(REVIEW_HINT)([
            w.HBox([self.show, self.previous_button, self.next_button], layout=row), self.counts, self.candidate,
            w.HBox([self.accept_button, self.drop_reason, self.drop_button], layout=row),
            w.HBox([self.edit_text, self.edit_type, self.edit_button], layout=row), self.status],
            layout=w.Layout(width="100%"))
        self.widget.add_class(CSS_REVIEW)
        self.previous_button.on_click(lambda _: self.move(-1))
        self.next_button.on_click(lambda _: self.move(+1))
        self.accept_button.on_click(lambda _: self.accept())
        self.edit_button.on_click(lambda _: self.edit(self.edit_text.value, self.edit_type.value))
        self.drop_button.on_click(lambda _: self.drop(self.drop_reason.value))
        self.show.observe(lambda _: self.open(0), names="value")
        self.open(0)

    # -- what is shown ---------------------------------------------------------------------------------
    def listed(self) -> pd.DataFrame:
        """The stored candidates of the ``show`` filter, by id."""
        return read_candidates(self.engine, STATUSES if self.show.value == ALL else (self.show.value,))

    @property
    def candidate_id(self) -> str | None:
        """The candidate shown (``None``: the filter holds none)."""
        listed = self.listed()
        return None if listed.empty else str(listed["candidate_id"].iloc[min(self.index, len(listed) - 1)])

    def open(self, index: int) -> None:
        """Show the ``index``-th candidate of the filter (clamped to the list)."""
        listed = self.listed()
        self.index = min(max(int(index), 0), max(len(listed) - 1, 0))
        self.counts.value = render_counts(status_counts(self.engine))
        enabled = not listed.empty
        for control in (self.accept_button, self.edit_button, self.drop_button, self.previous_button,
                        self.next_button):
            control.disabled = not enabled
        if not enabled:
            self.candidate.value = render_message(f"No {self.show.value} candidate in the store."
                                                  if self.show.value != ALL else "No candidate in the store.")
            return
        current = listed.iloc[self.index]
        self.candidate.value = render_review(current, read_hints(self.engine, [current["candidate_id"]]),
                                             self.index + 1, len(listed))
        self.edit_text.value = str(current["question"])
        if current["type"] not in self.edit_type.options:
            self.edit_type.options = [*self.edit_type.options, current["type"]]
        self.edit_type.value = current["type"]
        self.drop_reason.value = ""

    def move(self, step: int) -> None:
        """The next (``+1``) or previous (``-1``) candidate of the filter, stopping at either end."""
        self.open(self.index + step)

    # -- actions ---------------------------------------------------------------------------------------
    def _act(self, action, done: str) -> None:
        cid = self.candidate_id
        if cid is None:
            return
        try:
            action(cid)
        except PmragError as error:
            self.status.value = render_message(str(error))
            return
        self.open(self.index)
        self.status.value = render_message(f"Candidate {cid} {done}.")

    def accept(self) -> None:
        """Accept the shown candidate as it is."""
        self._act(lambda cid: accept_candidate(self.engine, cid), "accepted")

    def edit(self, text: str, type: str | None = None) -> None:
        """Accept the shown candidate with ``text`` (and ``type``) instead of its own."""
        self._act(lambda cid: edit_candidate(self.engine, cid, text, type=type), "accepted as edited")

    def drop(self, reason: str) -> None:
        """Drop the shown candidate with ``reason``."""
        self._act(lambda cid: drop_candidate(self.engine, cid, reason), "dropped")

    def _repr_mimebundle_(self, **kwargs) -> dict:
        return self.widget._repr_mimebundle_(**kwargs)
