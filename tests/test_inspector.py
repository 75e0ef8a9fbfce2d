"""Failure inspector (pmrag.present.inspector): the pure queries on hand-built frames, the HTML escaping/highlighting,
and the widgets driven from Python (set a control's ``.value``, read what the HTML views now hold)."""

import re

import pandas as pd
import pytest

from pmrag.present.inspector import FailureInspector, InspectorData, highlight

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
    inspector.type_filter.value = "temporal"
    inspector.label_filter.value = "aggregate_failure"
    assert inspector.question_ids == []
    assert inspector.question.value is None
    assert "No question matches" in inspector.status.value
    assert "No question matches" in inspector.header.value
    assert inspector.gold.value == inspector.top.value == inspector.fused.value == ""
    inspector.label_filter.value = "All"  # recovering from the empty state works
    assert inspector.question_ids == ["q4"]
    assert chunk_order(inspector.gold.value) == ["c8"]


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
