"""Failure inspector (pmrag.present.inspector): the pure queries on hand-built frames, the HTML escaping/highlighting,
and the widgets driven from Python (set a control's ``.value``, read what the HTML views now hold)."""

import html
import re

import ipywidgets as widgets
import pandas as pd
import pytest

from pmrag.present.inspector import (GOLD_COLUMNS_PER_TABLE, WIDGET_HINT, FailureInspector, InspectorData, highlight,
                                     render_gold_table, retriever_label)

BM25, VEC = "raw_text_bm25", "raw_text_vector"
HYBRID = "hybrid:raw_text_bm25+raw_text_vector@0.45"

QUESTIONS = pd.DataFrame([
    ("q1", "テニス部の合宿はどこでしたか？", "single"),
    ("q2", "Tokyoで食べたラーメンは？", "aggregate"),
    ("q3", "誕生日プレゼントは何？", "single"),
    ("q4", "いつ引っ越した？", "temporal"),
], columns=["question_id", "text", "type"])

CHUNKS = pd.DataFrame([
    ("c1", "line", "2024-05-01 10:00:00", "ゆうた: テニス部の合宿は軽井沢だったよ", "さき, ゆうた"),
    ("c2", "line", "2024-05-02 11:30:00", "さき: 合宿の写真ある？", "さき"),
    ("c3", "line", "2024-06-01 09:00:00", "ゆうた: TOKYOのラーメン最高", "ゆうた"),
    ("c4", "line", "2024-06-02 20:00:00", "さき: tokyo駅のラーメン", "さき"),
    ("c5", "line", "2024-07-01 08:00:00", "誕生日プレゼントありがとう", "さき, ゆうた"),
    ("c6", "line", "2024-07-02 08:00:00", "<script>alert('x')</script> テニス", "ゆうた"),
    ("c7", "line", "2024-08-01 08:00:00", "x" * 300, "さき"),
    ("c8", "line", "2024-08-02 08:00:00", "引っ越しは8月", "さき"),
], columns=["chunk_id", "source", "start_at", "raw_text", "speakers"])

QRELS = pd.DataFrame([
    ("q1", "c1", 2), ("q1", "c2", 1), ("q1", "c7", 0),
    ("q2", "c3", 2), ("q2", "c4", 2),
    ("q3", "c5", 2),
    ("q4", "c8", 2),
], columns=["question_id", "chunk_id", "relevance"])


def ranking(lists: dict[str, dict[str, float]]) -> pd.DataFrame:
    """``{question: {chunk: score}}`` in rank order → ranking table."""
    rows = [(q, c, i + 1, s) for q, chunks in lists.items() for i, (c, s) in enumerate(chunks.items())]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


# q1: BM25 order c3 c1 c4 c5 c2, vector order c2 c5 c1 c4 c3 (same five chunks, so β = 0 / 1 reproduce them).
RANKINGS = {
    BM25: ranking({"q1": {"c3": 9.0, "c1": 7.0, "c4": 4.0, "c5": 2.0, "c2": 1.0},
                   "q2": {"c3": 5.0, "c4": 4.0}, "q3": {"c5": 3.0, "c6": 1.0}, "q4": {"c1": 2.0, "c8": 1.0}}),
    VEC: ranking({"q1": {"c2": 0.9, "c5": 0.7, "c1": 0.6, "c4": 0.5, "c3": 0.1},
                  "q2": {"c4": 0.8, "c3": 0.7}, "q3": {"c6": 0.5, "c5": 0.4}}),
    HYBRID: ranking({"q1": {"c3": 0.9, "c4": 0.8, "c5": 0.7, "c6": 0.6, "c7": 0.5, "c8": 0.4, "c1": 0.3},
                     "q2": {"c4": 1.0, "c3": 0.9}, "q3": {"c5": 1.0}, "q4": {"c2": 0.8, "c8": 0.5}}),
}

# Focus (the hybrid): q1 and q4 fail at 5 but recover at 20, q2 never recovers, q3 succeeds.
PER_QUESTION = pd.DataFrame([
    (HYBRID, "q1", "single", 0.0, 1.0), (HYBRID, "q2", "aggregate", 0.0, 0.0),
    (HYBRID, "q3", "single", 1.0, 1.0), (HYBRID, "q4", "temporal", 0.0, 0.5),
    (BM25, "q1", "single", 1.0, 1.0), (BM25, "q2", "aggregate", 0.0, 1.0),
    (BM25, "q3", "single", 1.0, 1.0), (BM25, "q4", "temporal", 1.0, 1.0),
], columns=["retriever", "question_id", "question_type", "recall@5", "recall@20"])

LABELS = pd.DataFrame([("q1", "other_rule_based_failure"), ("q2", "aggregate_failure"),
                       ("q4", "multiple_primary_gold_nonaggregate")], columns=["question_id", "label"])


def make_data(**overrides) -> InspectorData:
    kwargs = dict(questions=QUESTIONS, chunks=CHUNKS, qrels=QRELS, rankings=RANKINGS, per_question=PER_QUESTION,
                  labels=LABELS, pairings=[(BM25, VEC)], betas={(BM25, VEC): 0.45})
    kwargs.update(overrides)
    return InspectorData(**kwargs)


@pytest.fixture(scope="module")
def data() -> InspectorData:
    return make_data()


@pytest.fixture
def inspector(data) -> FailureInspector:
    return FailureInspector(data)


def chunk_order(html_text: str) -> list[str]:
    return re.findall(r'data-chunk-id="([^"]+)"', html_text)


def gold_matrix(html_text: str) -> dict[str, list[str]]:
    """``{retriever (full name): [rank cell text per gold column]}`` of the gold view's rank tables."""
    matrix: dict[str, list[str]] = {}
    for name, cells in re.findall(r'<tr class="retriever[^"]*" data-retriever="([^"]+)">(.*?)</tr>', html_text):
        ranks = re.findall(r'<td class="rank [^"]+"[^>]*>([^<]*)</td>', cells)
        matrix.setdefault(html.unescape(name), []).extend(ranks)
    return matrix


def visible_text(html_text: str) -> str:
    """What a reader sees: the markup without tags (attributes such as ``title`` included) and styles."""
    return html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"<style>.*?</style>", "", html_text)))


# -- filters -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, expected", [
    ({}, ["q1", "q2", "q3", "q4"]),
    ({"question_type": "single"}, ["q1", "q3"]),
    ({"label": "aggregate_failure"}, ["q2"]),
    ({"label": "none"}, ["q3"]),
    ({"failed_recovered": True}, ["q1", "q4"]),
    ({"question_type": "single", "failed_recovered": True}, ["q1"]),
    ({"question_type": "temporal", "label": "multiple_primary_gold_nonaggregate"}, ["q4"]),
    ({"question_type": "temporal", "label": "aggregate_failure"}, []),
    ({"question_type": "nope"}, []),
])
def test_filter_questions(data, kwargs, expected):
    assert data.filter_questions(**kwargs) == expected


def test_failed_recovered_follows_focus():
    assert make_data(focus=BM25).filter_questions(failed_recovered=True) == ["q2"]


def test_default_focus_is_first_hybrid_else_first_retriever(data):
    assert data.focus == HYBRID
    assert make_data(per_question=PER_QUESTION[PER_QUESTION["retriever"] == BM25]).focus == BM25


def test_per_question_computed_when_missing():
    data = make_data(per_question=None)
    assert set(data.per_question["retriever"]) == {BM25, VEC, HYBRID}
    assert {"recall@5", "mrr@10", "ndcg@20", "question_type"} <= set(data.per_question.columns)
    # The hybrid ranks q1's primary gold c1 at 7 and q4's c8 at 2; q2/q3 have theirs in the Top-5.
    assert data.filter_questions(failed_recovered=True) == ["q1"]


def test_vocabularies(data):
    assert data.question_types == ["aggregate", "single", "temporal"]
    assert data.label_values == ["aggregate_failure", "multiple_primary_gold_nonaggregate", "other_rule_based_failure"]
    assert data.labels_of("q3") == ("none",)
    assert data.retrievers == [BM25, VEC, HYBRID]


# -- gold ranks, top-k, fusion -----------------------------------------------------------------------
def test_gold_ranks_include_unranked_chunk(data):
    table = data.gold_ranks("q1")
    assert list(table.columns) == ["chunk_id", "relevance", BM25, VEC, HYBRID]
    assert list(table["chunk_id"]) == ["c1", "c2"]  # primary first, relevance-0 c7 left out
    assert list(table["relevance"]) == [2, 1]
    assert list(table[BM25]) == [2, 5]
    assert list(table[VEC]) == [3, 1]
    assert table.loc[0, HYBRID] == 7
    assert pd.isna(table.loc[1, HYBRID])  # c2 is not in the hybrid's list
    assert str(table[HYBRID].dtype) == "Int64"


def test_gold_ranks_question_absent_from_a_ranking(data):
    table = data.gold_ranks("q4")
    assert table[VEC].isna().all()
    assert list(table[BM25]) == [2]


def test_top_k_order_scores_and_details(data):
    top = data.top_k(BM25, "q1", k=3)
    assert list(top.columns) == ["rank", "chunk_id", "score", "relevance", "start_at", "speakers", "preview"]
    assert list(top["rank"]) == [1, 2, 3]
    assert list(top["chunk_id"]) == ["c3", "c1", "c4"]
    assert list(top["score"]) == [9.0, 7.0, 4.0]
    assert list(top["relevance"]) == [0, 2, 0]
    assert top.loc[1, "speakers"] == "さき, ゆうた"
    assert top.loc[1, "start_at"] == pd.Timestamp("2024-05-01 10:00:00")
    assert top.loc[1, "preview"] == CHUNKS.loc[0, "raw_text"]


def test_top_k_truncates_preview_and_short_lists(data):
    top = data.top_k(HYBRID, "q1", k=5)
    long = top.set_index("chunk_id").loc["c7", "preview"]
    assert long == "x" * 200 + "…"
    assert len(data.top_k(BM25, "q2", k=20)) == 2
    assert data.top_k(VEC, "q4", k=5).empty


def test_fused_top_k_extreme_betas_reproduce_components(data):
    assert list(data.fused_top_k(BM25, VEC, 0.0, "q1", k=5)["chunk_id"]) == ["c2", "c5", "c1", "c4", "c3"]
    assert list(data.fused_top_k(BM25, VEC, 1.0, "q1", k=5)["chunk_id"]) == ["c3", "c1", "c4", "c5", "c2"]


def test_fused_top_k_intermediate_beta_hand_computed(data):
    # bm25_hat = (s − 1) / 8: c3 1, c1 .75, c4 .375, c5 .125, c2 0; vec_hat = (s − .1) / .8: c2 1, c5 .75,
    # c1 .625, c4 .5, c3 0.  β = .6: c1 .7, c3 .6, c4 .425, c2 .4, c5 .375.
    fused = data.fused_top_k(BM25, VEC, 0.6, "q1", k=5)
    assert list(fused["chunk_id"]) == ["c1", "c3", "c4", "c2", "c5"]
    assert fused["score"].tolist() == pytest.approx([0.7, 0.6, 0.425, 0.4, 0.375])
    assert list(fused["rank"]) == [1, 2, 3, 4, 5]
    assert list(fused["relevance"]) == [2, 0, 0, 1, 0]


# -- highlighting ------------------------------------------------------------------------------------
def test_highlight_escapes_html_and_marks_tokens():
    out = highlight("<script>alert('x')</script> テニスと合宿", "テニス部の合宿はどこでしたか？")
    assert "<script>" not in out
    assert "&lt;script&gt;" in out
    assert "<mark>テニス</mark>と<mark>合宿</mark>" in out


def test_highlight_case_insensitive_keeps_original_case():
    assert highlight("TOKYO and tokyo", "Tokyo") == "<mark>TOKYO</mark> and <mark>tokyo</mark>"


def test_highlight_longest_token_first_and_never_inside_entities():
    assert highlight("tokyotower", "tokyo tokyotower") == "<mark>tokyotower</mark>"
    assert highlight("a & amp", "amp") == "a &amp; <mark>amp</mark>"
    assert highlight("<b>", "script") == "&lt;b&gt;"  # no tokens matched: just escaped


# -- validation --------------------------------------------------------------------------------------
def test_missing_column_is_named():
    with pytest.raises(ValueError, match="speakers"):
        make_data(chunks=CHUNKS.drop(columns="speakers"))
    with pytest.raises(ValueError, match="recall@20"):
        make_data(per_question=PER_QUESTION.drop(columns="recall@20"))


def test_unknown_retriever_is_named(data):
    with pytest.raises(ValueError, match="unknown retriever 'nope_vector'"):
        make_data(pairings=[(BM25, "nope_vector")])
    with pytest.raises(ValueError, match="unknown retriever 'nope'"):
        data.top_k("nope", "q1")
    with pytest.raises(ValueError, match="unknown focus retriever"):
        make_data(focus="nope")
    with pytest.raises(ValueError, match="unknown question"):
        data.gold_ranks("q99")


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


def test_retriever_label_is_an_escaped_abbr_of_the_short_label():
    assert retriever_label("x<y>") == '<abbr title="x&lt;y&gt;">x&lt;y&gt;</abbr>'
    assert (retriever_label("hybrid:raw_text_bm25+embedding_text_vector@0.35")
            == '<abbr title="hybrid:raw_text_bm25+embedding_text_vector@0.35">raw·bm25 + emb·vec β=.35</abbr>')


def twelve_retrievers() -> list[str]:
    singles = [f"{rep}_{method}" for rep in ("raw_text", "summary", "embedding_text") for method in ("bm25", "vector")]
    hybrids = [f"hybrid:{a}_bm25+{b}_vector@{beta}" for a, b, beta in (
        ("raw_text", "raw_text", "0.45"), ("raw_text", "embedding_text", "0.35"), ("summary", "summary", "0.50"),
        ("summary", "embedding_text", "0.60"), ("embedding_text", "embedding_text", "0.40"),
        ("embedding_text", "raw_text", "0.55"))]
    return singles + hybrids


def test_gold_view_with_twelve_retrievers_is_narrow():
    names = twelve_retrievers()
    data = make_data(rankings={name: RANKINGS[BM25] for name in names}, per_question=None, pairings=[], betas=None)
    ranks = data.gold_ranks("q1")
    gold = render_gold_table(ranks, data.chunk_details(ranks["chunk_id"]), "テニス部", k=5)
    assert list(gold_matrix(gold)) == names
    assert all(cells == ["2", "5"] for cells in gold_matrix(gold).values())
    assert len(re.findall(r"<th", re.search(r"<thead>(.*?)</thead>", gold).group(1))) == 3  # not 2 + 12 + 3
    for name in names:  # every full name on hover, the abbreviation shown
        assert f'title="{html.escape(name)}"' in gold
    shown = visible_text(gold)
    assert "hybrid:" not in shown and "raw·bm25 + emb·vec β=.35" in shown
    labels = re.findall(r'<th scope="row" class="retriever">(.*?)</th>', gold)
    assert max(len(visible_text(label)) for label in labels) <= 24
    assert visible_text(gold).count("軽井沢") == 1
    assert not re.findall(r"(?<![-\w])width\s*:", gold)  # only min-/max-widths, nothing fixed


def test_gold_view_splits_many_gold_chunks_into_narrow_tables():
    n = GOLD_COLUMNS_PER_TABLE + 1
    ranks = pd.DataFrame({"chunk_id": [f"g{i:02d}" for i in range(n)], "relevance": [2] * n,
                          BM25: pd.array(list(range(1, n + 1)), dtype="Int64")})
    details = pd.DataFrame({"chunk_id": [], "start_at": [], "speakers": [], "preview": []})
    gold = render_gold_table(ranks, details, "")
    heads = re.findall(r"<thead>(.*?)</thead>", gold)
    assert [len(re.findall(r"<th", h)) for h in heads] == [1 + GOLD_COLUMNS_PER_TABLE, 1 + 1]
    assert gold_matrix(gold) == {BM25: [str(i) for i in range(1, n + 1)]}
    assert len(chunk_order(gold)) == n


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
SUMMARY_BM25, SUMMARY_VEC = "summary_bm25", "summary_vector"
DIAGNOSTIC = "hybrid:summary_bm25+summary_vector@0.50"
BEST = pd.DataFrame([(BM25, VEC, 0.45)], columns=["bm25", "vector", "beta"])


def study_inspector(**overrides) -> FailureInspector:
    """``from_results`` the way notebook 06 calls it: single rankings, the selected β, the labels and the
    diagnostic hybrid (here summary_bm25 + summary_vector, whose rankings copy the raw ones)."""
    rankings = {BM25: RANKINGS[BM25], VEC: RANKINGS[VEC], SUMMARY_BM25: RANKINGS[BM25].copy(),
                SUMMARY_VEC: RANKINGS[VEC].copy()}
    kwargs = dict(pairings=[(BM25, VEC)], labels=LABELS, diagnostic=DIAGNOSTIC)
    kwargs.update(overrides)
    return FailureInspector.from_results(QUESTIONS, CHUNKS, QRELS, rankings, BEST, **kwargs)


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
    assert inspector.data.pairings == [(BM25, VEC), (SUMMARY_BM25, SUMMARY_VEC)]
    inspector.pairing.value = (SUMMARY_BM25, SUMMARY_VEC)
    assert inspector.beta.value == pytest.approx(0.5)
    assert chunk_order(inspector.fused.value)[:3] == ["c1", "c3", "c2"]
    inspector.retriever.value = DIAGNOSTIC  # the stored diagnostic ranking is this fusion at its β
    assert chunk_order(inspector.top.value) == chunk_order(inspector.fused.value)
    assert study_inspector(diagnostic=None).data.labelled_by is None


def test_diagnostic_of_an_unknown_retriever_is_named():
    with pytest.raises(ValueError, match="no ranking of 'embedding_text_bm25'"):
        study_inspector(diagnostic="hybrid:embedding_text_bm25+summary_vector@0.50")
    with pytest.raises(ValueError, match="unknown retriever 'nope' in labelled_by"):
        make_data(labelled_by="nope")


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


def test_gold_legend_names_amber_only_below_the_recovery_cut_off():
    data = make_data(rankings={BM25: RANKINGS[BM25]}, per_question=None, pairings=[], betas=None)
    ranks = data.gold_ranks("q1")
    details = data.chunk_details(ranks["chunk_id"])
    assert "≤ 5 green, ≤ 20 amber" in render_gold_table(ranks, details, "", k=5)
    wide = render_gold_table(ranks, details, "", k=20)
    assert "≤ 20 green, deeper grey" in wide and "amber" not in visible_text(wide)
