"""A grading interface for JupyterLab: grade a pool's candidate chunks 0/1/2 with the keyboard (000 §4.3).

Three layers, as in the failure inspector, so everything but the wiring is tested without a browser:

* :mod:`~pmrag.present.grading.data` — :class:`PoolReader` reads one pool of a store (questions, candidates in
  the pool's blind order, a chunk's messages, the messages evidence hints matched, a chunk's neighbours) and
  :func:`question_view` / :func:`candidate_view` make the plain values a view shows;
* :mod:`~pmrag.present.grading.render` — those values as escaped HTML (:func:`render_question`,
  :func:`render_candidate`, :func:`render_strip`, …): pure functions;
* :mod:`~pmrag.present.grading.widget` — :class:`GradingWidget`: ipywidgets controls, and the key pad of
  :mod:`~pmrag.present.grading.keys` (an anywidget: why, in its docstring), wired to
  :mod:`pmrag.annotate.judgments`, which writes every grade, note and drop to the store at once;
* :mod:`~pmrag.present.grading.adjudicate` — :class:`AdjudicationWidget`: the same widget walking only the
  chunks annotators graded differently, each annotator's grade shown, the adjudicator's grade written to
  ``adjudications`` (:mod:`pmrag.annotate.adjudicate`);
* :mod:`~pmrag.present.grading.questions` — the questions before grading: :class:`QuestionEntryWidget` (type a
  question and its evidence hints, stored as a typed candidate) and :class:`CandidateReviewWidget` (accept, edit
  or drop the proposed candidates), through :mod:`pmrag.annotate.candidates`.

Blind by construction: a candidate is known by its position in the pool's seeded order; the pool's
``origins`` (which retriever at which rank) are never read here.

Stable hooks for browser tests (CSS classes; keep them): ``pmrag-grading`` (the root box),
``pmrag-grading-question`` (question header, progress and the strip of cells), ``pmrag-grading-candidate``
(the current candidate: ``h4.candidate-number`` reads ``candidate k of n``), ``pmrag-grading-status`` (the
last action or error), ``pmrag-grading-keys`` (the key pad), and the controls' descriptions ("annotator",
"start grading", "question", "neighbouring messages").
"""

from pmrag.present.grading.adjudicate import AdjudicationWidget
from pmrag.present.grading.data import (NEIGHBOURS, CandidateView, Line, PoolReader, QuestionView, candidate_view,
                                        question_view)
from pmrag.present.grading.keys import CSS_KEYPAD, keypad_class
from pmrag.present.grading.questions import CandidateReviewWidget, QuestionEntryWidget
from pmrag.present.grading.render import (GRADE_LABELS, KEYS_HELP, grade_text, mark_excerpts, render_annotator_grades,
                                          render_candidate, render_message, render_progress, render_question,
                                          render_strip)
from pmrag.present.grading.widget import (CSS_CANDIDATE, CSS_QUESTION, CSS_ROOT, CSS_STATUS, WIDGET_HINT,
                                          GradingWidget)

__all__ = [
    "AdjudicationWidget", "CandidateReviewWidget", "QuestionEntryWidget",
    "CSS_CANDIDATE", "CSS_KEYPAD", "CSS_QUESTION", "CSS_ROOT", "CSS_STATUS", "GRADE_LABELS", "KEYS_HELP",
    "NEIGHBOURS", "WIDGET_HINT", "CandidateView", "GradingWidget", "Line", "PoolReader", "QuestionView",
    "candidate_view", "grade_text", "keypad_class", "mark_excerpts", "question_view", "render_candidate",
    "render_annotator_grades", "render_message", "render_progress", "render_question", "render_strip",
]
