"""The failure inspector's ipywidgets: controls wired with ``observe`` to
:mod:`~pmrag.present.inspector.data` queries and :mod:`~pmrag.present.inspector.render` views, nothing else.

ipywidgets is imported when an inspector is built, so importing :mod:`pmrag.present.inspector` does not load it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from functools import cache

import pandas as pd

from pmrag.core.names import HybridId
from pmrag.present.inspector.data import DEFAULT_BETA, NO_LABEL, InspectorData, QuestionFilter
from pmrag.present.inspector.render import (fused_caption, match_message, no_match_message, pairing_option,
                                            question_option, render_gold_table, render_header, render_message,
                                            render_ranking_table, retriever_option, top_caption)

ALL = "All"
MAX_K = 20
# the gold view under the controls: open, and folded by a click on its summary line (a long list for some questions)
GOLD_FOLD = ("<details open><summary><b>Gold chunks: rank under every retriever</b> ({chunks})</summary>"
             "{table}</details>")
WIDGET_HINT = "Failure inspector: run this cell (and the ones above) to use it; widgets need a live kernel."
CSS_ROOT = "pmrag-inspector"
CSS_HEADER = "pmrag-inspector-header"
CSS_GOLD = "pmrag-inspector-gold"
CSS_TOPK = "pmrag-inspector-topk"
CSS_FUSED = "pmrag-inspector-fused"
CSS_MESSAGE = "pmrag-inspector-message"


class FailureInspector:
    """Interactive failure inspector over an :class:`~pmrag.present.inspector.data.InspectorData`.

    Controls (attributes): ``type_filter``, ``label_filter`` (Dropdowns with ``"All"``),
    ``recovered_filter`` (Checkbox "failed at 5, recovered at 20" of ``data.focus``), ``question``,
    ``retriever``, ``k`` (IntSlider 1..20), ``pairing`` (values ``(bm25, vector)``) and ``beta``
    (FloatSlider 0..1, step 0.05, reset to the pairing's default β when the pairing changes).
    Views (``ipywidgets.HTML``): ``status`` (match count or why nothing matches), ``header``, ``gold``,
    ``top``, ``fused``.  ``widget`` is the top-level ``VBox`` (its ``text/plain`` is :data:`WIDGET_HINT`).
    When no question matches, ``status`` alone says so and ``retriever``, ``k``, ``pairing`` and ``beta`` are
    disabled until one matches again.  The CSS hooks of :mod:`pmrag.present.inspector` are on these widgets.
    """

    def __init__(self, data: InspectorData, k: int = 5):
        import ipywidgets as w

        self.data = data
        wide = w.Layout(width="auto", max_width="100%")
        row = w.Layout(flex_flow="row wrap", width="100%")
        style = {"description_width": "initial"}
        label_options = [ALL, *data.label_values]
        if any(data.labels_of(q) == (NO_LABEL,) for q in data.question_ids):
            label_options.append(NO_LABEL)
        self.type_filter = w.Dropdown(options=[ALL, *data.question_types], value=ALL, description="type",
                                      style=style)
        self.label_filter = w.Dropdown(options=label_options, value=ALL, description="label", style=style)
        self.recovered_filter = w.Checkbox(value=False, description="failed at 5, recovered at 20",
                                           tooltip=f"focus retriever: {data.focus}", indent=False)
        self.question = w.Dropdown(options=[], description="question", style=style,
                                   layout=w.Layout(width="100%", max_width="60em"))
        retrievers, notes = data.retrievers, data.notes
        self.retriever = w.Dropdown(options=[(retriever_option(r, notes.get(r)), r) for r in retrievers],
                                    value=data.focus if data.focus in retrievers else retrievers[0],
                                    description="retriever", style=style, layout=wide)
        self.k = w.IntSlider(value=min(max(int(k), 1), MAX_K), min=1, max=MAX_K, step=1, description="k",
                             continuous_update=False)
        pairing_options = [(pairing_option(b, v), (b, v)) for b, v in data.pairings]
        self.pairing = w.Dropdown(options=pairing_options, description="pairing", style=style, layout=wide,
                                  disabled=not pairing_options)
        first = data.pairings[0] if data.pairings else None
        self.beta = w.FloatSlider(value=data.betas.get(first, DEFAULT_BETA), min=0.0, max=1.0, step=0.05,
                                  description="β", readout_format=".2f", continuous_update=False,
                                  disabled=not pairing_options)
        self.status = w.HTML()
        self.header = w.HTML()
        self.gold = w.HTML()
        self.top = w.HTML()
        self.fused = w.HTML()
        self.widget = _inspector_box()([
            w.HBox([self.type_filter, self.label_filter, self.recovered_filter], layout=row),
            self.status, self.question, self.header,
            w.HBox([self.retriever, self.k], layout=row), self.top,
            w.HBox([self.pairing, self.beta], layout=row), self.fused,
            self.gold,                                   # long: below the controls, folded by its summary line
        ], layout=w.Layout(width="100%", max_width="100%"))
        for view, css in ((self.widget, CSS_ROOT), (self.header, CSS_HEADER), (self.gold, CSS_GOLD),
                          (self.top, CSS_TOPK), (self.fused, CSS_FUSED), (self.status, CSS_MESSAGE)):
            view.add_class(css)

        self._refreshing = False
        for control in (self.type_filter, self.label_filter, self.recovered_filter):
            control.observe(self._on_filter, names="value")
        self.question.observe(self._on_question, names="value")
        self.retriever.observe(self._on_top, names="value")
        self.k.observe(self._on_k, names="value")
        self.pairing.observe(self._on_pairing, names="value")
        self.beta.observe(self._on_fused, names="value")
        self.refresh_questions()

    @classmethod
    def from_results(cls, questions: pd.DataFrame, chunks: pd.DataFrame, qrels: pd.DataFrame,
                     rankings: Mapping[str, pd.DataFrame], best: pd.DataFrame,
                     pairings: Sequence[tuple[str, str]] = (), labels: pd.DataFrame | None = None,
                     focus: str | None = None, k: int = 5,
                     diagnostic: HybridId | str | None = None) -> FailureInspector:
        """An inspector over a study's results (:meth:`InspectorData.from_results
        <pmrag.present.inspector.data.InspectorData.from_results>` for the parameters), at Top-``k``."""
        return cls(InspectorData.from_results(questions, chunks, qrels, rankings, best, pairings=pairings,
                                              labels=labels, focus=focus, diagnostic=diagnostic), k=k)

    # -- state ----------------------------------------------------------------------------------
    @property
    def question_ids(self) -> list[str]:
        """The question IDs the question dropdown currently offers."""
        return [value for _, value in self.question.options]

    def filters(self) -> QuestionFilter:
        """The filter controls' current values."""
        return QuestionFilter(question_type=None if self.type_filter.value == ALL else self.type_filter.value,
                              label=None if self.label_filter.value == ALL else self.label_filter.value,
                              failed_recovered=bool(self.recovered_filter.value))

    # -- views ----------------------------------------------------------------------------------
    def first_failed(self, ids: list[str]) -> str | None:
        """The first of ``ids`` with a failure label (a question the focus fails), else the first; None when empty:
        the question the inspector opens on, and moves to when a filter drops the current one."""
        failed = [q for q in ids if self.data.labels_of(q) != (NO_LABEL,)]
        return (failed or ids or [None])[0]

    def refresh_questions(self) -> None:
        """Re-filter the question dropdown (keeping the current question when it still matches) and
        re-render every view; an explanatory message replaces the views when nothing matches."""
        filters = self.filters()
        ids = self.data.filter_questions(**asdict(filters))
        current = self.question.value
        options = [(question_option(self.data.question(q)), q) for q in ids]
        self._refreshing = True
        try:
            self.question.options = options
            self.question.value = current if current in ids else self.first_failed(ids)
        finally:
            self._refreshing = False
        self.question.disabled = not ids
        self.retriever.disabled = self.k.disabled = not ids
        self.pairing.disabled = self.beta.disabled = not ids or not self.data.pairings
        if ids:
            self.status.value = render_message(match_message(len(ids), len(self.data.question_ids)))
        else:
            self.status.value = render_message(no_match_message(filters, self.data.focus))
        self.render()

    def render(self) -> None:
        """Re-render the header, gold table, Top-k and fused views for the current question."""
        self.render_question()
        self.render_top()
        self.render_fused()

    def render_question(self) -> None:
        qid, data = self.question.value, self.data
        if qid is None:  # the status line alone says why
            self.header.value = self.gold.value = ""
            return
        question = data.question(qid)
        self.header.value = render_header(
            question, data.labels_of(qid), data.focus, data.metrics(data.focus, qid) if data.focus else None,
            labelled_by=data.labelled_by,
            label_metrics=data.metrics(data.labelled_by, qid) if data.labelled_by else None)
        ranks = data.gold_ranks(qid)
        table = render_gold_table(ranks, data.chunk_details(ranks["chunk_id"]), question["text"], k=self.k.value,
                                  notes=data.notes)
        self.gold.value = GOLD_FOLD.format(chunks=len(ranks), table=table)

    def render_top(self) -> None:
        qid = self.question.value
        if qid is None:
            self.top.value = ""
            return
        top = self.data.top_k(self.retriever.value, qid, k=self.k.value)
        self.top.value = render_ranking_table(top, self.data.question(qid)["text"],
                                              top_caption(self.retriever.value, self.k.value))

    def render_fused(self) -> None:
        qid = self.question.value
        if qid is None:
            self.fused.value = ""
            return
        if self.pairing.value is None:
            self.fused.value = render_message("No (BM25, vector) pairing to fuse.")
            return
        bm25, vector = self.pairing.value
        top = self.data.fused_top_k(bm25, vector, self.beta.value, qid, k=self.k.value)
        self.fused.value = render_ranking_table(top, self.data.question(qid)["text"],
                                                fused_caption(bm25, vector, self.beta.value, self.k.value))

    # -- observers -------------------------------------------------------------------------------
    def _on_filter(self, change) -> None:
        self.refresh_questions()

    def _on_question(self, change) -> None:
        if not self._refreshing:
            self.render()

    def _on_top(self, change) -> None:
        self.render_top()

    def _on_k(self, change) -> None:
        self.render()

    def _on_pairing(self, change) -> None:
        default = self.data.betas.get(change["new"], DEFAULT_BETA)
        if abs(self.beta.value - default) > 1e-12:
            self.beta.value = default  # re-renders through _on_fused
        else:
            self.render_fused()

    def _on_fused(self, change) -> None:
        self.render_fused()

    # -- display ---------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The root box's bundle: the widget view for a live kernel, :data:`WIDGET_HINT` as ``text/plain``."""
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (f"FailureInspector({len(self.data.question_ids)} questions, {len(self.data.retrievers)} retrievers, "
                f"question={self.question.value!r})")


@cache
def _inspector_box() -> type:
    """The root ``VBox`` class whose ``text/plain`` is :data:`WIDGET_HINT` (built on first use, so importing
    this module does not import ipywidgets)."""
    import ipywidgets as w

    class InspectorBox(w.VBox):
        """A ``VBox`` that a notebook saved without its widget state shows as a one-line hint, not as
        ``VBox(children=(HBox(...`` (ipywidgets puts ``repr(widget)`` in ``text/plain``)."""

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            return {**bundle, "text/plain": WIDGET_HINT}

    return InspectorBox
