"""Failure inspector, widget (pmrag.present.inspector.widget): the controls driven from Python (set a control's
``.value``, read what the HTML views now hold), its display in a notebook, its widths and CSS hooks."""

import re

import ipywidgets as widgets
import pytest
from inspector_case import (BEST, BM25, CHUNKS, DIAGNOSTIC, HYBRID, QRELS, QUESTIONS, STUDY_RANKINGS, SUMMARY_BM25,
                            SUMMARY_VEC, VEC, chunk_order, gold_matrix, make_data, study_kwargs, visible_text)

from pmrag.present.inspector import WIDGET_HINT, FailureInspector


@pytest.fixture
def inspector() -> FailureInspector:
    return FailureInspector(make_data())


# -- widgets -----------------------------------------------------------------------------------------
def test_initial_state(inspector):
    assert inspector.type_filter.options == ("All", "aggregate", "single", "temporal")
    assert inspector.label_filter.options[0] == "All"
    assert "aggregate_failure" in inspector.label_filter.options
    assert inspector.question_ids == ["q1", "q2", "q3", "q4"]
    assert inspector.question.value == "q1"
    assert inspector.retriever.value == HYBRID
    assert inspector.beta.value == pytest.approx(0.45)
    assert (inspector.k.min, inspector.k.max, inspector.beta.step) == (1, 20, 0.05)
    assert 'data-chunk-id="c1"' in inspector.gold.value


def test_type_filter_changes_question_options(inspector):
    inspector.type_filter.value = "single"
    assert inspector.question_ids == ["q1", "q3"]
    inspector.recovered_filter.value = True
    assert inspector.question_ids == ["q1"]
    inspector.type_filter.value = "temporal"
    assert inspector.question_ids == ["q4"]
    assert inspector.question.value == "q4"
    assert "q4" in inspector.header.value


def test_status_line_counts_the_matching_questions(inspector):
    assert "4 of 4 questions match." in inspector.status.value
    inspector.type_filter.value = "single"
    assert "2 of 4 questions match." in inspector.status.value
    assert [label for label, _ in inspector.question.options] == ["q1 · single · テニス部の合宿はどこでしたか？",
                                                                  "q3 · single · 誕生日プレゼントは何？"]


def test_choosing_question_updates_header_and_gold(inspector):
    inspector.question.value = "q2"
    assert "q2" in inspector.header.value
    assert "aggregate_failure" in inspector.header.value
    assert "<mark>ラーメン</mark>" in inspector.gold.value
    assert chunk_order(inspector.gold.value) == ["c3", "c4"]
    inspector.question.value = "q3"
    assert "誕生日" in inspector.header.value and "none" in inspector.header.value
    assert chunk_order(inspector.gold.value) == ["c5"]


def test_gold_table_shows_not_ranked(inspector):
    assert "not ranked" in inspector.gold.value  # c2 under the hybrid
    assert re.search(rf'data-retriever="{re.escape(HYBRID)}">.*?<td class="rank top20">7</td>'
                     r'<td class="rank unranked" title="not ranked">–</td></tr>', inspector.gold.value)


def test_gold_view_one_row_per_retriever_and_each_text_once(inspector):
    gold = inspector.gold.value
    assert gold_matrix(gold) == {BM25: ["2", "5"], VEC: ["3", "1"], HYBRID: ["7", "–"]}
    assert gold.count("<tr class=\"retriever") == 3
    header = re.search(r"<thead>(.*?)</thead>", gold).group(1)
    assert len(re.findall(r"<th", header)) == 1 + 2  # the retriever column and one per gold chunk
    assert 'title="c1 · ★ primary"' in header and 'title="c2 · ☆ supporting"' in header
    assert visible_text(gold).count("軽井沢") == 1  # c1's preview, once
    assert visible_text(gold).count("合宿の写真") == 1  # c2's
    assert chunk_order(gold) == ["c1", "c2"]
    assert "2024-05-01 10:00" in gold and "さき, ゆうた" in gold
    assert re.search(r"<tr[^>]*data-retriever=\"" + re.escape(HYBRID) + r"\">.*?<small>focus</small>", gold)


def test_retriever_and_k_change_top_table(inspector):
    assert chunk_order(inspector.top.value) == ["c3", "c4", "c5", "c6", "c7"]
    inspector.k.value = 7
    assert chunk_order(inspector.top.value) == ["c3", "c4", "c5", "c6", "c7", "c8", "c1"]
    assert "★ primary" in inspector.top.value
    inspector.retriever.value = VEC
    assert chunk_order(inspector.top.value) == ["c2", "c5", "c1", "c4", "c3"]
    inspector.k.value = 2
    assert chunk_order(inspector.top.value) == ["c2", "c5"]
    assert len(chunk_order(inspector.fused.value)) == 2


def test_beta_slider_reorders_fused_table(inspector):
    inspector.beta.value = 0.0
    assert chunk_order(inspector.fused.value) == ["c2", "c5", "c1", "c4", "c3"]
    inspector.beta.value = 1.0
    assert chunk_order(inspector.fused.value) == ["c3", "c1", "c4", "c5", "c2"]
    inspector.beta.value = 0.6
    assert chunk_order(inspector.fused.value) == ["c1", "c3", "c4", "c2", "c5"]
    assert "β = 0.60" in inspector.fused.value


def test_top_table_escapes_chat_text(inspector):
    inspector.question.value = "q3"
    inspector.retriever.value = BM25
    assert "c6" in chunk_order(inspector.top.value)
    assert "<script>" not in inspector.top.value
    assert "&lt;script&gt;" in inspector.top.value


def test_filter_leaving_nothing_shows_message(inspector):
    needs_question = (inspector.question, inspector.retriever, inspector.k, inspector.pairing, inspector.beta)
    assert not any(control.disabled for control in needs_question)
    inspector.type_filter.value = "temporal"
    inspector.label_filter.value = "aggregate_failure"
    assert inspector.question_ids == []
    assert inspector.question.value is None
    views = (inspector.status, inspector.header, inspector.gold, inspector.top, inspector.fused)
    assert sum(view.value.count("No question matches") for view in views) == 1
    assert "No question matches" in inspector.status.value
    assert inspector.header.value == inspector.gold.value == inspector.top.value == inspector.fused.value == ""
    assert all(control.disabled for control in needs_question)
    assert not inspector.type_filter.disabled and not inspector.label_filter.disabled
    inspector.label_filter.value = "All"  # recovering from the empty state works
    assert inspector.question_ids == ["q4"]
    assert chunk_order(inspector.gold.value) == ["c8"]
    assert not any(control.disabled for control in needs_question)
    assert "No question matches" not in "".join(view.value for view in views)


def test_without_pairings_recovery_keeps_fusion_controls_disabled():
    inspector = FailureInspector(make_data(pairings=[], betas=None))
    inspector.type_filter.value = "temporal"
    inspector.label_filter.value = "aggregate_failure"
    assert inspector.retriever.disabled and inspector.k.disabled
    inspector.label_filter.value = "All"
    assert not inspector.retriever.disabled and not inspector.k.disabled
    assert inspector.pairing.disabled and inspector.beta.disabled


def test_without_pairings_fused_view_explains():
    inspector = FailureInspector(make_data(pairings=[], betas=None))
    assert inspector.pairing.disabled
    assert "No (BM25, vector) pairing" in inspector.fused.value
    assert chunk_order(inspector.top.value)


def test_pairing_change_resets_beta_to_its_default():
    data = make_data(pairings={(BM25, VEC): 0.45, (BM25, HYBRID): 0.8})
    inspector = FailureInspector(data)
    inspector.beta.value = 0.0
    inspector.pairing.value = (BM25, HYBRID)
    assert inspector.beta.value == pytest.approx(0.8)
    assert "β = 0.80" in inspector.fused.value
    inspector.pairing.value = (BM25, VEC)
    assert inspector.beta.value == pytest.approx(0.45)
    assert f"{BM25} + {VEC}" in inspector.fused.value


# -- the labels' retriever ---------------------------------------------------------------------------
def study_inspector(**overrides) -> FailureInspector:
    """``from_results`` the way notebook 06 calls it: single rankings, the selected β, the labels and the
    diagnostic hybrid (here summary_bm25 + summary_vector, whose rankings copy the raw ones)."""
    return FailureInspector.from_results(QUESTIONS, CHUNKS, QRELS, STUDY_RANKINGS, BEST, **study_kwargs(**overrides))


def test_diagnostic_hybrid_is_a_retriever_and_names_the_labels():
    inspector = study_inspector()
    data = inspector.data
    assert data.labelled_by == DIAGNOSTIC
    assert data.retrievers == [BM25, VEC, SUMMARY_BM25, SUMMARY_VEC, "hybrid:raw_text_bm25+raw_text_vector@0.45",
                               DIAGNOSTIC]
    assert DIAGNOSTIC in [value for _, value in inspector.retriever.options]
    assert (f"{DIAGNOSTIC} · labels", DIAGNOSTIC) in inspector.retriever.options
    # q1 at β = .5 (hand-computed as in test_fused_top_k_intermediate_beta_hand_computed): c1 .6875, then c3 and
    # c2 tie at .5 (chunk ID descending: c3 first), so the gold c1 ranks 1 and c2 ranks 3.
    assert gold_matrix(inspector.gold.value)[DIAGNOSTIC] == ["1", "3"]
    assert f"label (by {DIAGNOSTIC}; recall@5=1.00, recall@20=1.00): other_rule_based_failure" in visible_text(
        inspector.header.value)
    inspector.retriever.value = DIAGNOSTIC
    live = list(data.fused_top_k(SUMMARY_BM25, SUMMARY_VEC, 0.5, "q1", k=5)["chunk_id"])
    assert chunk_order(inspector.top.value)[:3] == ["c1", "c3", "c2"]  # c4, c5 tie at .4375 up to rounding
    assert chunk_order(inspector.top.value) == live
    assert set(data.per_question["retriever"]) >= {DIAGNOSTIC}


def test_diagnostic_pairing_joins_the_beta_slider_at_its_beta():
    inspector = study_inspector()
    assert inspector.data.pairings == ((BM25, VEC), (SUMMARY_BM25, SUMMARY_VEC))
    inspector.pairing.value = (SUMMARY_BM25, SUMMARY_VEC)
    assert inspector.beta.value == pytest.approx(0.5)
    assert chunk_order(inspector.fused.value)[:3] == ["c1", "c3", "c2"]
    inspector.retriever.value = DIAGNOSTIC  # the stored diagnostic ranking is this fusion at its β
    assert chunk_order(inspector.top.value) == chunk_order(inspector.fused.value)
    assert study_inspector(diagnostic=None).data.labelled_by is None


def test_header_without_labelled_by_keeps_plain_label(inspector):
    assert "label: other_rule_based_failure" in visible_text(inspector.header.value)
    labelled = FailureInspector(make_data(labelled_by=BM25))
    assert (f"label (by {BM25}; recall@5=1.00, recall@20=1.00): other_rule_based_failure"
            in visible_text(labelled.header.value))
    assert f"focus {HYBRID}: recall@5=0.00, recall@20=1.00" in visible_text(labelled.header.value)


# -- notebook display, widths, CSS hooks -------------------------------------------------------------
def test_text_plain_is_a_hint_and_the_widget_view_stays(inspector):
    for shown in (inspector.widget, inspector):
        bundle = shown._repr_mimebundle_()
        assert bundle["text/plain"] == WIDGET_HINT
        assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == inspector.widget.model_id
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(inspector.widget)  # the path a notebook's cell output takes
    assert data["text/plain"] == WIDGET_HINT
    assert "VBox(" not in str(data)


def all_widgets(root) -> list:
    found = [root]
    for child in getattr(root, "children", ()):
        found.extend(all_widgets(child))
    return found


def test_no_widget_has_a_fixed_width(inspector):
    for widget in all_widgets(inspector.widget):
        layout = widget.layout
        for value in (layout.width, layout.min_width):
            assert value in (None, "auto") or str(value).endswith("%"), (widget.description
                                                                          if hasattr(widget, "description") else widget)
    for box in all_widgets(inspector.widget):
        if isinstance(box, widgets.HBox):
            assert box.layout.flex_flow == "row wrap"
    for view in (inspector.header, inspector.gold, inspector.top, inspector.fused, inspector.status):
        assert not re.findall(r"(?<![-\w])width\s*:", view.value)


def test_css_hooks_and_control_descriptions(inspector):
    tree = all_widgets(inspector.widget)
    expected = {"pmrag-inspector": inspector.widget, "pmrag-inspector-header": inspector.header,
                "pmrag-inspector-gold": inspector.gold, "pmrag-inspector-topk": inspector.top,
                "pmrag-inspector-fused": inspector.fused, "pmrag-inspector-message": inspector.status}
    for css, widget in expected.items():
        assert [w for w in tree if css in w._dom_classes] == [widget]
    descriptions = [w.description for w in (inspector.type_filter, inspector.label_filter, inspector.recovered_filter,
                                            inspector.question, inspector.retriever, inspector.k, inspector.pairing,
                                            inspector.beta)]
    assert descriptions == ["type", "label", "failed at 5, recovered at 20", "question", "retriever", "k", "pairing",
                            "β"]
    import pmrag.present.inspector as module

    assert all(css in module.__doc__ for css in expected)


def test_the_inspector_opens_on_a_failed_question_with_its_controls_above_the_folded_gold_list():
    from inspector_case import LABELS

    opened = FailureInspector(make_data(labels=LABELS[LABELS["question_id"] != "q1"]))   # q1 no longer failed
    assert opened.question.value == "q2" and opened.first_failed(["q3"]) == "q3" and opened.first_failed([]) is None
    children = list(opened.widget.children)
    assert children.index(opened.gold) == len(children) - 1 and children.index(opened.fused) < children.index(opened.gold)
    assert opened.gold.value.startswith("<details open><summary><b>Gold chunks: rank under every retriever</b>")
