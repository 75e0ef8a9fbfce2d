"""A failure inspector for JupyterLab: pick a question and see why retrieval missed its gold chunks (§7).

Three layers, so everything but the wiring is testable without a browser or ipywidgets:

* :mod:`~pmrag.present.inspector.data` — what a view shows: :class:`InspectorData` (validated plain
  DataFrames of questions, chunks, qrels, rankings, per-question metrics and failure labels, built by
  :meth:`InspectorData.from_frames` or :meth:`InspectorData.from_results`) and the pure functions it answers
  with: a question's gold chunks with their rank under every retriever, a ranking's Top-k with scores, times,
  speakers and previews, the query's terms, the live min–max re-ranking of a pairing at a β, and the question
  filters (:class:`QuestionFilter`).  Per-question metrics come from :mod:`pmrag.evaluate.metrics`.
* :mod:`~pmrag.present.inspector.render` — those results as escaped HTML strings (:func:`render_header`,
  :func:`render_gold_table`, :func:`render_ranking_table`, :func:`highlight`, …) and the controls' texts.
* :mod:`~pmrag.present.inspector.widget` — :class:`FailureInspector`, ipywidgets controls and ``HTML`` views
  wired with ``observe``; every widget is an attribute, so a test sets ``inspector.question.value = "q2"`` and
  reads ``inspector.gold.value``.  Display ``inspector.widget`` (or the inspector itself) in a notebook.

A question *failed at K* for a retriever when its ``recall@K`` is 0 (no primary gold chunk in the Top-K);
the "failed at 5, recovered at 20" filter keeps the questions where the *focus* retriever has
``recall@5 == 0`` and ``recall@20 > 0`` (:func:`pmrag.evaluate.failures.recovered`).  The fused view re-ranks
one question live with :func:`pmrag.retrieve.fusion.minmax_fuse` at the β of the slider.  Failure labels
describe one retriever's failures (``labelled_by``, the study's diagnostic hybrid): the header names it and
shows its recall next to the label, and the retriever list offers it.

Layout rule: the inspector reads at a 1,280 px screen without sideways scrolling.  No widget gets a fixed
width (percentages and max widths only), control rows wrap, and the gold view is a matrix with one row per
retriever (names shortened by :func:`pmrag.present.labels.short_label`, the full name in the ``title``) and
one narrow column per gold chunk (at most :data:`GOLD_COLUMNS_PER_TABLE` per table), each chunk's text shown
once below it.

Stable hooks for browser tests (CSS classes; keep them):

* ``pmrag-inspector`` — the root ``VBox`` (:attr:`FailureInspector.widget`);
* ``pmrag-inspector-header`` — the question header (ID, type, text, labels and who labelled them);
* ``pmrag-inspector-gold`` — the gold-chunk view; ``pmrag-inspector-topk`` — the Top-k view;
  ``pmrag-inspector-fused`` — the fused (β) view;
* ``pmrag-inspector-message`` — the status line (match count, or the one "No question matches" message);
* the controls' ``description`` strings: "type", "label", "failed at 5, recovered at 20", "question",
  "retriever", "k", "pairing", "β".

Opened without a live kernel, a saved output shows :data:`WIDGET_HINT` (the root box's ``text/plain``).
"""

from pmrag.present.inspector.data import (DEFAULT_BETA, FAILED_AT, METRIC_KS, NO_LABEL, PREVIEW_CHARS, RECOVERED_AT,
                                          TOP_K_COLUMNS, InspectorData, QuestionFilter, chunk_details,
                                          default_focus, describe_ranking, evaluable_per_question, gold_of,
                                          gold_ranks, preview, query_terms, recovered_questions, retriever_notes)
from pmrag.present.inspector.render import (GOLD_COLUMNS_PER_TABLE, GOLD_MARKERS, highlight, render_gold_table,
                                            render_header, render_message, render_ranking_table, retriever_label,
                                            token_pattern)
from pmrag.present.inspector.widget import (ALL, CSS_FUSED, CSS_GOLD, CSS_HEADER, CSS_MESSAGE, CSS_ROOT, CSS_TOPK,
                                            MAX_K, WIDGET_HINT, FailureInspector)

__all__ = [
    "ALL", "CSS_FUSED", "CSS_GOLD", "CSS_HEADER", "CSS_MESSAGE", "CSS_ROOT", "CSS_TOPK", "DEFAULT_BETA", "FAILED_AT",
    "GOLD_COLUMNS_PER_TABLE", "GOLD_MARKERS", "MAX_K", "METRIC_KS", "NO_LABEL", "PREVIEW_CHARS", "RECOVERED_AT",
    "TOP_K_COLUMNS", "WIDGET_HINT", "FailureInspector", "InspectorData", "QuestionFilter", "chunk_details",
    "default_focus", "describe_ranking", "evaluable_per_question", "gold_of", "gold_ranks", "highlight", "preview",
    "query_terms", "recovered_questions", "render_gold_table", "render_header", "render_message",
    "render_ranking_table", "retriever_label", "retriever_notes", "token_pattern",
]
