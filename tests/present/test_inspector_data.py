"""Failure inspector, data layer (pmrag.present.inspector.data): the pure functions and InspectorData's queries on
the hand-made case of tests/inspector_case.py, with expectations worked out by hand."""

import pandas as pd
import pytest
from inspector_case import (BEST, BM25, CHUNKS, DIAGNOSTIC, HYBRID, PER_QUESTION, QRELS, QUESTIONS, RANKINGS,
                            STUDY_RANKINGS, SUMMARY_BM25, SUMMARY_VEC, VEC, make_data, ranking, study_kwargs)

from pmrag.evaluate.metrics import per_question_table
from pmrag.present.inspector import (InspectorData, QuestionFilter, chunk_details, default_focus, describe_ranking,
                                     evaluable_per_question, gold_of, gold_ranks, preview, query_terms,
                                     recovered_questions, retriever_notes)


@pytest.fixture(scope="module")
def data() -> InspectorData:
    return make_data()


# -- pure functions ----------------------------------------------------------------------------------
def test_query_terms_are_distinct_tokens_longest_first():
    assert query_terms("テニス部の合宿はどこでしたか？") == ("テニス", "合宿")  # hiragana and single kanji dropped
    assert query_terms("tokyo Tokyotower TOKYO") == ("tokyotower", "tokyo")  # lower-cased, repeats once
    assert query_terms("b a ab") == ("ab", "a", "b")  # same length: code-point order
    assert query_terms("") == query_terms(None) == ()


def test_preview_cuts_with_an_ellipsis_and_blanks_missing_text():
    assert preview("abcdef", 3) == "abc…"
    assert preview("abc", 3) == "abc"
    assert preview(None) == preview(float("nan")) == preview(pd.NA) == ""
    assert preview(12345, 2) == "12…"


def test_gold_of_keeps_relevance_one_and_up_primary_first():
    qrels = pd.DataFrame({"question_id": ["q", "q", "q", "q", "r"], "chunk_id": ["d", "b", "a", "c", "a"],
                          "relevance": [1, 2, 0, 2, 2]})
    gold = gold_of(qrels, "q")
    assert gold.to_dict("list") == {"chunk_id": ["b", "c", "d"], "relevance": [2, 2, 1]}
    assert gold_of(qrels, "nobody").empty


def test_gold_ranks_is_one_int64_column_per_retriever_in_order():
    gold = pd.DataFrame({"chunk_id": ["a", "b"], "relevance": [2, 1]})
    lists = {"second": pd.DataFrame({"chunk_id": ["b", "x"], "rank": [1, 2]}),
             "first": pd.DataFrame({"chunk_id": ["x", "y", "a"], "rank": [1, 2, 3]})}
    table = gold_ranks(gold, lists)
    assert list(table.columns) == ["chunk_id", "relevance", "second", "first"]
    assert table["second"].tolist() == [pd.NA, 1] and table["first"].tolist() == [3, pd.NA]
    assert all(str(table[name].dtype) == "Int64" for name in ("second", "first"))
    assert list(gold.columns) == ["chunk_id", "relevance"]  # the input is not changed


def test_chunk_details_in_the_given_order_and_blank_for_unknown_chunks():
    chunks = CHUNKS.set_index("chunk_id").assign(start_at=lambda c: pd.to_datetime(c["start_at"]))
    details = chunk_details(chunks, ["c7", "nope", "c2"], preview_chars=4)
    assert details["chunk_id"].tolist() == ["c7", "nope", "c2"]
    assert details["speakers"].tolist() == ["さき", "", "さき"]
    assert details["preview"].tolist() == ["xxxx…", "", "さき: …"]
    assert details.loc[2, "start_at"] == pd.Timestamp("2024-05-02 11:30:00") and pd.isna(details.loc[1, "start_at"])


def test_describe_ranking_sorts_by_rank_cuts_at_k_and_judges():
    chunks = CHUNKS.set_index("chunk_id")
    shuffled = pd.DataFrame({"question_id": "q", "chunk_id": ["c3", "c1", "c2"], "rank": [3, 1, 2],
                             "score": [0.1, 0.9, 0.5]})
    top = describe_ranking(shuffled, pd.Series({"c1": 1, "c3": 2}), chunks, k=2)
    assert list(top.columns) == ["rank", "chunk_id", "score", "relevance", "start_at", "speakers", "preview"]
    assert top[["rank", "chunk_id", "score", "relevance"]].to_dict("list") == {
        "rank": [1, 2], "chunk_id": ["c1", "c2"], "score": [0.9, 0.5], "relevance": [1, 0]}
    for bad in (0, -1, 2.0, True, "5"):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            describe_ranking(shuffled, pd.Series(dtype=int), chunks, k=bad)


def test_recovered_questions_of_one_retriever():
    assert recovered_questions(PER_QUESTION, HYBRID) == {"q1", "q4"}
    assert recovered_questions(PER_QUESTION, BM25) == {"q2"}
    assert recovered_questions(PER_QUESTION, VEC) == set()  # no rows
    assert recovered_questions(PER_QUESTION, None) == set()


def test_default_focus_and_retriever_notes():
    assert default_focus(PER_QUESTION) == HYBRID
    assert default_focus(PER_QUESTION[PER_QUESTION["retriever"] == BM25]) == BM25
    assert default_focus(PER_QUESTION.iloc[0:0]) is None
    assert retriever_notes(HYBRID, BM25) == {HYBRID: "focus", BM25: "labels"}
    assert retriever_notes(HYBRID, HYBRID) == {HYBRID: "focus, labels"}
    assert retriever_notes(None, None) == {}


def test_evaluable_per_question_is_the_study_metric_on_primary_gold_questions():
    qrels = pd.concat([QRELS, pd.DataFrame([("q5", "c1", 1)], columns=QRELS.columns)], ignore_index=True)
    rankings = {BM25: pd.concat([RANKINGS[BM25], ranking({"q5": {"c1": 1.0}})], ignore_index=True)}
    types = QUESTIONS.set_index("question_id")["type"]
    rows = evaluable_per_question(rankings, qrels, types)
    assert rows["question_id"].tolist() == ["q1", "q2", "q3", "q4"]  # q5 has supporting gold only: no row
    expected = per_question_table({BM25: RANKINGS[BM25]}, QRELS, types, (5, 10, 20))
    pd.testing.assert_frame_equal(rows, expected)
    # q1's primary c1 at BM25 rank 2, q2's c3 and c4 at 1 and 2, q3's c5 at 1, q4's c8 at 2
    assert rows["recall@5"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert rows["mrr@5"].tolist() == [0.5, 1.0, 1.0, 0.5]
    assert rows["question_type"].tolist() == ["single", "aggregate", "single", "temporal"]


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


def test_question_filter_is_a_frozen_value():
    assert QuestionFilter() == QuestionFilter(None, None, False)
    with pytest.raises(AttributeError):
        QuestionFilter().label = "x"


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
    assert data.notes == {HYBRID: "focus"}


def test_inspector_data_is_frozen_and_its_repr_holds_no_text(data):
    with pytest.raises(AttributeError):
        data.focus = BM25
    assert repr(data) == f"InspectorData(4 questions, 3 retrievers, 1 pairings, focus='{HYBRID}')"


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


def test_a_questions_ranking_is_its_rows_of_the_sorted_ranking(data):
    """ranking() of every retriever and question is that question's rows of the ranking as given, in rank order
    (a question the ranking lacks: no rows, the ranking's columns), whatever order the rows were given in."""
    shuffled = {name: frame.sample(frac=1.0, random_state=3) for name, frame in RANKINGS.items()}
    for case in (data, make_data(rankings=shuffled)):
        for name in case.retrievers:
            frame = RANKINGS[name]
            for question_id in case.questions.index:
                expected = frame[frame["question_id"] == question_id].sort_values("rank")
                got = case.ranking(name, question_id)
                assert list(got.columns) == ["question_id", "chunk_id", "rank", "score"]
                assert got[["chunk_id", "rank", "score"]].values.tolist() == \
                    expected[["chunk_id", "rank", "score"]].values.tolist(), (name, question_id)
                assert set(got["question_id"]) <= {question_id}


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


def test_fuse_rounds_a_slider_beta(data):
    pd.testing.assert_frame_equal(data.fuse(BM25, VEC, 0.1 + 0.2, "q1"), data.fuse(BM25, VEC, 0.3, "q1"))


# -- a study's results -------------------------------------------------------------------------------
def test_from_results_adds_the_selected_and_diagnostic_hybrids():
    data = InspectorData.from_results(QUESTIONS, CHUNKS, QRELS, STUDY_RANKINGS, BEST, **study_kwargs())
    assert data.retrievers == [BM25, VEC, SUMMARY_BM25, SUMMARY_VEC, HYBRID, DIAGNOSTIC]
    assert data.labelled_by == DIAGNOSTIC and data.focus == HYBRID
    assert data.pairings == ((BM25, VEC), (SUMMARY_BM25, SUMMARY_VEC))
    assert data.betas == {(BM25, VEC): 0.45, (SUMMARY_BM25, SUMMARY_VEC): 0.5}
    # q1 at β = .5: c1 .6875, then c3 and c2 tie at .5 (chunk ID descending: c3 first): gold c1 → 1, c2 → 3
    assert data.gold_ranks("q1")[DIAGNOSTIC].tolist() == [1, 3]
    assert set(data.per_question["retriever"]) == set(data.retrievers)
    without = InspectorData.from_results(QUESTIONS, CHUNKS, QRELS, STUDY_RANKINGS, BEST,
                                         **study_kwargs(diagnostic=None))
    assert without.labelled_by is None and without.pairings == ((BM25, VEC),)


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


def test_duplicate_question_and_empty_rankings_are_refused():
    with pytest.raises(ValueError, match="duplicate question_id"):
        make_data(questions=pd.concat([QUESTIONS, QUESTIONS.iloc[:1]]))
    with pytest.raises(ValueError, match="non-empty mapping"):
        make_data(rankings={})


def test_diagnostic_of_an_unknown_retriever_is_named():
    with pytest.raises(ValueError, match="no ranking of 'embedding_text_bm25'"):
        InspectorData.from_results(QUESTIONS, CHUNKS, QRELS, STUDY_RANKINGS, BEST,
                                   **study_kwargs(diagnostic="hybrid:embedding_text_bm25+summary_vector@0.50"))
    with pytest.raises(ValueError, match="unknown retriever 'nope' in labelled_by"):
        make_data(labelled_by="nope")
