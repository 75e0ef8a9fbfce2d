"""TOBUGraph retrieval (002 §2.4: interest relevance, choice, traversal, ranking) and its evaluation against
RAGv1–v3 with choices made on a tuning part (pmrag.retrieve.graph_interest, pmrag.evaluate.graph_eval)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from pmrag.core.params import BM25Section
from pmrag.evaluate import graph_eval as ge
from pmrag.represent.extract import Interest, MemorySemantics
from pmrag.represent.graph import assemble_graph
from pmrag.retrieve import graph_interest as gi

from conftest import make_tiny_study

T0 = datetime(2024, 4, 10, 9, 0)


def semantics(memory_id: str) -> MemorySemantics:
    return MemorySemantics(memory_id, None, ("A",), T0, T0, (), ())


def small_graph():
    """Four memories; interests カフェ (m1, m2, m3, merged with 喫茶店), 映画 (m3, m4), 旅行 (m4)."""
    interests = [Interest("カフェ", "thing", ("m1", "m2", "m3"), ("カフェ", "喫茶店")),
                 Interest("映画", "thing", ("m3", "m4"), ("映画",)),
                 Interest("旅行", "activity", ("m4",), ("旅行",))]
    return assemble_graph([semantics(m) for m in ("m1", "m2", "m3", "m4")], interests)


# ------------------------------------------------------------------------------------------ relevance

def test_relevance_is_the_weighted_sum_of_max_scaled_bm25_and_a_calibrated_cosine():
    lexical = np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    cosine = np.array([[0.9, 0.7, 0.8], [0.5, 0.55, 0.6]])
    got = gi.interest_relevance(lexical, cosine, 0.25, cosine_floor=0.6)
    expected_row0 = 0.25 * np.array([1.0, 0.0, 0.5]) + 0.75 * np.array([0.75, 0.25, 0.5])
    np.testing.assert_allclose(got[0], expected_row0, atol=1e-12)
    assert (got[1] == 0).all()            # no lexical match and every cosine at or below the floor: nothing
    np.testing.assert_allclose(gi.interest_relevance(lexical, cosine, 1.0)[0], [1.0, 0.0, 0.5], atol=1e-12)
    # an absolute scale: the best interest of a question is not lifted to 1 (min-max would make row 1 [0, 0.5, 1])
    np.testing.assert_allclose(gi.interest_relevance(lexical, cosine, 0.0, cosine_floor=0.5)[1], [0.0, 0.1, 0.2],
                               atol=1e-12)
    with pytest.raises(ValueError, match="cosine_floor"):
        gi.interest_relevance(lexical, cosine, 0.5, cosine_floor=1.0)
    with pytest.raises(ValueError, match="lexical_weight"):
        gi.interest_relevance(lexical, cosine, 1.5)
    with pytest.raises(ValueError, match="shape"):
        gi.interest_relevance(lexical, cosine[:, :2], 0.5)


def test_choice_keeps_the_cap_most_relevant_above_the_threshold_ties_to_the_more_shared_interest():
    relevance = np.array([[0.9, 0.9, 0.95, 0.2], [0.0, 0.0, 0.0, 0.0], [0.5, 0.7, 0.1, 0.7]])
    chosen = gi.choose_interests(relevance, 0.6, 2)
    assert chosen[0].tolist() == [True, False, True, False]      # 0.95, then the tie 0.9/0.9 goes to index 0
    assert not chosen[1].any()                                    # r = 0 is never chosen, even at threshold 0
    assert chosen[2].tolist() == [False, True, False, True]
    assert not gi.choose_interests(relevance[1:2], 0.0, 3).any()
    with pytest.raises(ValueError, match="cap"):
        gi.choose_interests(relevance, 0.5, 0)


@pytest.mark.agreement
def test_traversal_reaches_every_memory_of_a_chosen_interest_and_weights_by_relevance():
    membership = sp.csr_matrix(np.array([[1, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 1]], dtype=float))
    relevance = np.array([[0.8, 0.5, 0.1]])
    chosen = np.array([[True, True, False]])
    assert gi.reached(chosen, membership).tolist() == [[True, True, True, True]]
    np.testing.assert_allclose(gi.graph_scores(chosen, relevance, membership), [[0.8, 0.8, 1.3, 0.5]])
    sets = gi.reached_sets(gi.reached(np.array([[False, False, True]]), membership), ["q"], ["a", "b", "c", "d"], "g")
    assert sets.to_dict("records") == [{"retriever": "g", "question_id": "q", "chunk_id": "d"}]


def test_ranking_orders_by_graph_score_then_own_similarity_then_the_papers_tie_breaks():
    weights = np.array([[0.0, 1.0, 1.0, 0.0, 0.0]])
    similarity = np.array([[0.9, 0.1, 0.2, 0.5, 0.5]])
    starts = pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]).to_numpy()
    ranking = gi.graph_rankings(weights, similarity, ["q"], np.array(["a", "b", "c", "d", "e"]), starts, depth=4)
    # reached c, b (by similarity), then the rest by similarity; d and e tie at 0.5: the later start first
    assert ranking["chunk_id"].tolist() == ["c", "b", "a", "e"]
    assert ranking["rank"].tolist() == [1, 2, 3, 4]
    assert ranking["score"].tolist() == [1.0, 1.0, 0.0, 0.0]


def test_interest_index_links_memories_by_corpus_order():
    graph = small_graph()
    index = gi.InterestIndex.from_graph(graph, ["m4", "m3", "m2", "m1"])
    assert index.labels == ("カフェ", "映画", "旅行")
    assert index.membership.toarray().tolist() == [[0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]
    with pytest.raises(ValueError, match="not in the corpus"):
        gi.InterestIndex.from_graph(graph, ["m1", "m2", "m3"])


def test_offline_relevance_matches_merged_forms_lexically_and_calibrates_cosine():
    graph = small_graph()
    vectors = np.eye(3, dtype=np.float32)
    queries = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    texts = ["喫茶店", "映画と旅行", "犬"]
    lexical_only = gi.offline_relevance(graph, vectors, texts, queries, BM25Section(), 1.0)
    assert lexical_only[0].tolist() == [1.0, 0.0, 0.0]                # an alias matches its interest
    assert lexical_only[1, 0] == 0 and (lexical_only[1, 1:] > 0).all() and lexical_only[1].max() == 1.0
    assert (lexical_only[2] == 0).all()
    cosine_only = gi.offline_relevance(graph, vectors, texts, queries, BM25Section(), 0.0, cosine_floor=0.0)
    np.testing.assert_allclose(cosine_only[0], [0.0, 0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(cosine_only[1], [2 ** -0.5, 2 ** -0.5, 0.0], atol=1e-6)
    assert (cosine_only[2] == 0).all()                                 # a zero vector: nothing
    floored = gi.offline_relevance(graph, vectors, texts, queries, BM25Section(), 0.0, cosine_floor=0.8)
    assert (floored[1] == 0).all()                                     # cosines 0.71 lie below the floor
    with pytest.raises(ValueError, match="2 interest vectors for 3 interests"):
        gi.offline_relevance(graph, np.eye(2), texts, queries, BM25Section(), 0.5)


def test_a_question_that_matches_nothing_reaches_no_memory_and_scores_as_an_empty_set():
    from pmrag.evaluate.set_metrics import per_question_set_rows, pooled_scores, set_counts

    graph = small_graph()
    vectors = np.eye(3, dtype=np.float32)
    # q1 says 喫茶店 (an alias of カフェ); q2 shares no term with any interest, its cosines (0.5, 0.5, 0.71) all
    # below the floor
    queries = np.array([[0.0, 0.0, 1.0], [0.5, 0.5, 2 ** -0.5]], dtype=np.float32)
    relevance = gi.offline_relevance(graph, vectors, ["喫茶店", "犬の散歩"], queries, BM25Section(), 0.5,
                                     cosine_floor=0.8)
    assert relevance[0, 0] > 0 and (relevance[1] == 0).all()
    index = gi.InterestIndex.from_graph(graph, ["m1", "m2", "m3", "m4"])
    for threshold in (0.0, 0.5):                                       # even the loosest threshold: nothing
        sets = ge.interest_sets(relevance, index.membership, threshold, 3, ["q1", "q2"], index.memory_ids, "g")
        assert set(sets["question_id"]) == {"q1"}
    qrels = pd.DataFrame({"question_id": ["q1", "q2"], "chunk_id": ["m1", "m4"], "relevance": [2, 2]})
    rows = per_question_set_rows(sets, qrels, pd.Series({"q1": "a", "q2": "a"}), questions=["q1", "q2"])
    empty = rows[rows["question_id"] == "q2"].iloc[0]
    assert (empty["set_precision"], empty["set_recall"], empty["set_f1"]) == (0.0, 0.0, 0.0)   # macro: 0
    pooled = pooled_scores(set_counts(sets, qrels, questions=["q1", "q2"])).iloc[0]
    assert pooled["empty_sets"] == 1 and pooled["mean_retrieved"] == 2.0   # q1 reaches m1–m4 at threshold 0.5
    assert pooled["micro_precision"] == pytest.approx(1 / 4)          # |R| = 4 from q1 alone; q2 left out
    assert rows["set_precision"].mean() == pytest.approx(1 / 8)        # macro counts q2's 0


def test_question_terms_follow_the_extractors_rules_in_both_languages():
    japanese, english = gi.question_terms(["かふぇで映画の話をしたのはいつ？", "When did we go hiking in Kyoto?"])
    assert "カフェ" in japanese and "映画" in japanese      # Sudachi's normalised form, as in the graph
    assert "hiking" in english and "Kyoto" in english and "when" not in english


# ------------------------------------------------------------------------------------------ evaluation

def test_split_is_stratified_deterministic_and_falls_back_for_one_question_per_type():
    questions = pd.DataFrame({"question_id": [f"q{i:02d}" for i in range(10)],
                              "type": ["a"] * 6 + ["b"] * 3 + ["c"]})
    split = ge.tuning_split(questions, 0.5, seed=3)
    assert split.equals(ge.tuning_split(questions, 0.5, seed=3))
    tuning = split[split == ge.TUNING].index
    assert sorted(questions.set_index("question_id").loc[tuning, "type"]) == ["a", "a", "a", "b", "b"]
    assert split["q09"] == ge.HELD_OUT                          # the only question of type c
    assert not split.equals(ge.tuning_split(questions, 0.5, seed=4))
    pair = ge.tuning_split(pd.DataFrame({"question_id": ["x", "y"], "type": ["f", "g"]}), 0.5, 0)
    assert sorted(pair.tolist()) == [ge.HELD_OUT, ge.TUNING]
    with pytest.raises(ValueError, match="cannot be split"):
        ge.tuning_split(questions.head(1), 0.5, 0)


@pytest.mark.agreement
def test_tuning_picks_the_best_set_f1_on_tuning_questions_only():
    membership = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]], dtype=float))
    relevance = np.array([[0.9, 0.6, 0.3],     # t1: gold m1, m2  -> interest 0 alone is perfect
                          [0.2, 0.9, 0.8],     # t2: gold m3      -> interest 1 alone is perfect
                          [0.1, 0.2, 0.9]])    # h: held out; interest 2 would be its best, must not matter
    qrels = pd.DataFrame({"question_id": ["t1", "t1", "t2", "h"], "chunk_id": ["m1", "m2", "m3", "m4"],
                          "relevance": [2, 2, 2, 2]})
    grid, (threshold, cap) = ge.tune_interest_choice(relevance, membership, ["t1", "t2", "h"],
                                                     ["m1", "m2", "m3", "m4"], qrels, ["t1", "t2"],
                                                     [0.5, 0.85], [1, 2])
    assert (threshold, cap) == (0.85, 1)
    best = grid[grid["chosen"]].iloc[0]
    assert best["set_f1"] == pytest.approx(1.0) and best["mean_retrieved"] == pytest.approx(1.5)
    low = grid[(grid["threshold"] == 0.5) & (grid["cap"] == 2)].iloc[0]
    # t1 chooses interests 0 and 1 (m1, m2, m3: P 2/3, R 1); t2 chooses 1 and 2 (m1–m4: P 1/4, R 1)
    assert low["set_precision"] == pytest.approx((2 / 3 + 1 / 4) / 2)
    assert grid["chosen"].sum() == 1


@pytest.mark.agreement
def test_the_tuning_grid_equals_each_cells_sets_scored_as_frames():
    """Every (threshold, cap) cell's macro set scores, mean set size and empty sets, counted on boolean matrices,
    against the cell's M' as set rows (:func:`interest_sets`) scored by :func:`per_question_set_rows`: random
    relevance and membership, tuning questions out of ID order, a gold chunk that is no memory."""
    from pmrag.evaluate.set_metrics import per_question_set_rows

    rng = np.random.default_rng(11)
    n_questions, n_interests, n_memories = 9, 6, 14
    membership = sp.csr_matrix((rng.random((n_interests, n_memories)) < 0.3).astype(float))
    relevance = rng.random((n_questions, n_interests)) * (rng.random((n_questions, n_interests)) < 0.7)
    question_ids = [f"q{i}" for i in (5, 1, 7, 0, 3, 8, 2, 6, 4)]
    memory_ids = [f"m{j}" for j in range(n_memories)]
    qrels = pd.DataFrame([(q, f"m{j}", 2) for q in question_ids for j in rng.choice(n_memories, 2, replace=False)]
                         + [("q1", "elsewhere", 2)], columns=["question_id", "chunk_id", "relevance"])
    tuning = ["q7", "q1", "q5", "q3", "q8", "q0"]
    grid, _ = ge.tune_interest_choice(relevance, membership, question_ids, memory_ids, qrels, tuning,
                                      [0.2, 0.5, 0.8], [1, 3])
    rows = [i for i, q in enumerate(question_ids) if q in tuning]
    kept = [question_ids[i] for i in rows]
    types = pd.Series("x", index=kept)
    assert len(grid) == 3 * 3
    for cell in grid.itertuples():
        sets = ge.interest_sets(relevance[rows], membership, cell.threshold, cell.cap, kept, memory_ids, "g")
        scores = per_question_set_rows(sets, qrels, types, questions=kept, retrievers=["g"])
        for metric in ("set_precision", "set_recall", "set_f1"):
            assert getattr(cell, metric) == pytest.approx(scores[metric].mean(), rel=1e-12, abs=1e-15)
        sizes = sets.groupby("question_id").size().reindex(kept, fill_value=0)
        assert cell.mean_retrieved == pytest.approx(sizes.mean()) and cell.empty_sets == int((sizes == 0).sum())
    assert grid["set_f1"].nunique() > 2 and grid["empty_sets"].max() > 0   # the cells differ; some sets are empty


def test_an_optimum_on_the_grids_edge_is_named_and_no_cap_is_always_tried():
    membership = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1]], dtype=float))
    relevance = np.array([[0.9, 0.8, 0.7]])                     # gold m1, m2: all three interests are best
    qrels = pd.DataFrame({"question_id": ["t"], "chunk_id": ["m1"], "relevance": [2]})
    grid, (threshold, cap) = ge.tune_interest_choice(relevance, membership, ["t"], ["m1", "m2"], qrels,
                                                     ["t"], [0.5, 0.95], [1, 2])
    assert sorted(set(grid["cap"])) == [1, 2, 3]                 # 3: the number of interests, no cap
    assert (threshold, cap) == (0.5, 1)                          # interest 0 alone reaches m1 only
    chosen = grid[grid["chosen"]].iloc[0]
    assert chosen["edge"] == "lowest threshold, smallest cap"
    assert grid.loc[(grid["threshold"] == 0.95), "empty_sets"].tolist() == [1, 1, 1]   # nothing reaches 0.95
    assert ge.grid_edges(0.5, 2, [0.1, 0.5, 0.9], [1, 2, 3]) == ""
    assert ge.grid_edges(0.9, 3, [0.1, 0.5, 0.9], [1, 2, 3]) == "highest threshold, no cap"


def test_baselines_k_is_tuned_on_the_tuning_questions_by_the_graphs_criterion():
    ranks = [1, 2, 3]
    rankings = pd.DataFrame({
        "retriever": ["A"] * 9 + ["B"] * 9,
        "question_id": (["t1"] * 3 + ["t2"] * 3 + ["h"] * 3) * 2,
        "rank": ranks * 6,
        #          t1: gold m1, m2         t2: gold m3            h (held out): gold m9 at rank 3
        "chunk_id": ["m1", "m2", "x", "m3", "x", "y", "x", "y", "m9",
                     "x", "m1", "m2", "y", "m3", "z", "m9", "x", "y"]})
    qrels = pd.DataFrame({"question_id": ["t1", "t1", "t2", "h"], "chunk_id": ["m1", "m2", "m3", "m9"],
                          "relevance": [2, 2, 2, 2]})
    grid, chosen = ge.tune_k(rankings, qrels, ["t1", "t2"], [1, 2, 3])
    # A: k=1 F1 (2/3 + 1)/2 = 0.833, k=2 (1 + 2/3)/2 = 0.833 (tie in F1; recall 0.75 vs 1.0: k = 2)
    # B: k=2 F1 (1/2 + 2/3)/2, k=3 (4/5 + 1/2)/2 = 0.65: k = 3, the held-out question plays no part
    assert chosen == {"A": 2, "B": 3}
    a = grid[grid["method"] == "A"].set_index("k")
    assert a.loc[1, "set_f1"] == pytest.approx(5 / 6) and a.loc[2, "set_recall"] == pytest.approx(1.0)
    assert a.loc[2, "mean_retrieved"] == 2.0 and grid["chosen"].sum() == 2
    assert grid.loc[grid["chosen"], "edge"].tolist() == ["", "largest k"]
    with pytest.raises(ValueError, match="no tuning question"):
        ge.tune_k(rankings, qrels, [], [1])


def test_ragv1_ranks_memories_by_their_best_piece_and_returns_k_of_them():
    pieces = pd.DataFrame({"piece_id": ["a#0", "a#1", "b#0", "c#0"], "memory_id": ["a", "a", "b", "c"]})
    similarity = np.array([[0.9, 0.8, 0.1, 0.5],       # a's two pieces lead: a top-2 of pieces is one memory
                           [0.2, 0.2, 0.2, 0.2]])      # all tied: the earlier piece's memory first
    ranking = ge.top_memories_by_pieces(similarity, ["q1", "q2"], pieces, 2, "RAGv1")
    assert ranking[ranking["question_id"] == "q1"]["chunk_id"].tolist() == ["a", "c"]
    assert ranking[ranking["question_id"] == "q2"]["chunk_id"].tolist() == ["a", "b"]
    assert ranking["rank"].tolist() == [1, 2, 1, 2]
    assert len(ge.top_memories_by_pieces(similarity, ["q1", "q2"], pieces, 10, "RAGv1")) == 6   # 3 memories each


def test_summary_pieces_are_fixed_windows_with_overlap_covering_each_summary():
    summaries = pd.DataFrame({"chunk_id": ["a", "b", "c"], "summary": ["x" * 10, "abcdefghijklmnopqrst", None]})
    pieces = ge.summary_pieces(summaries, 8, 2)
    assert pieces[pieces["memory_id"] == "a"]["text"].tolist() == ["xxxxxxxx", "xxxx"]
    assert pieces[pieces["memory_id"] == "b"]["text"].tolist() == ["abcdefgh", "ghijklmn", "mnopqrst"]
    assert "c" not in set(pieces["memory_id"])
    assert pieces["piece_id"].tolist()[:2] == ["a#0", "a#1"]
    short = ge.summary_pieces(pd.DataFrame({"chunk_id": ["s"], "summary": ["abc"]}), 8, 2)
    assert short["text"].tolist() == ["abc"]
    with pytest.raises(ValueError, match="less than size"):
        ge.summary_pieces(summaries, 4, 4)


def test_best_flat_is_the_highest_recall_on_the_given_questions():
    rows = pd.DataFrame({"retriever": ["r1", "r1", "r2", "r2", "g", "g"], "question_id": ["t", "h"] * 3,
                         "recall@5": [1.0, 0.0, 0.5, 1.0, 1.0, 1.0], "ndcg@5": [0.0] * 6, "mrr@5": [0.0] * 6})
    assert ge.best_flat(rows, ["r1", "r2"], ["t"]) == "r1"
    assert ge.best_flat(rows, ["r1", "r2"], ["h"]) == "r2"
    assert ge.best_flat(rows, ["r1", "r2"], ["t", "h"]) == "r2"   # 0.75 against 0.5


# ------------------------------------------------------------------------------------------ study

@pytest.fixture(scope="module")
def graph_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("graph")
    return make_tiny_study(root, "retrieval: {retrievers: [raw_text_bm25, summary_vector, raw_text_vector, "
                                 "summary_graph_interest]}\n"
                                 "hybrid: {pairings: [[raw_text_bm25, summary_vector]]}\n"
                                 "graph: {min_memories: 2, relevance_threshold: 0.0, max_chosen_interests: 2}\n"
                                 "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
                                 "diagnostic_hybrid: [raw_text_bm25, summary_vector, 0.5]}\n")


@pytest.mark.integration
def test_graph_retriever_ranks_every_memory_reached_ones_first(graph_study):
    built = graph_study.graph()
    ranked = graph_study.ranked("summary_graph_interest")
    chunks = graph_study.chunks()["chunk_id"].tolist()
    assert built.label.startswith("offline stand-in")
    for question_id, ranking in ranked.rankings.groupby("question_id"):
        assert sorted(ranking["chunk_id"]) == sorted(chunks)            # the whole corpus (depth ≥ chunks)
        reached = int(ranked.matches[question_id])
        assert (ranking["score"].iloc[:reached] > 0).all() and (ranking["score"].iloc[reached:] == 0).all()
    assert "summary_graph_interest" in set(graph_study.metrics()["retriever"])


@pytest.mark.integration
def test_graph_evaluation_reports_held_out_questions_and_rag_baselines_match_the_vector_runs(graph_study):
    evaluation = graph_study.graph_evaluation()
    held = set(evaluation.split.index[evaluation.split == ge.HELD_OUT])
    assert held and held != set(evaluation.split.index)
    assert set(evaluation.set_tables["cis"]["retriever"]) == {"TOBUGraph", "RAGv1", "RAGv2", "RAGv3"}
    assert evaluation.set_tables["pooled"]["questions"].tolist() == [len(held)] * 4
    assert set(evaluation.held_out(evaluation.rank_rows)["question_id"]) == held
    # RAGv2 / RAGv3 are the top-k of the summary / raw_text vector retrievers (same cosine, same k)
    assert set(evaluation.baseline_k) == {"RAGv1", "RAGv2", "RAGv3"}
    for name, rid in (("RAGv2", "summary_vector"), ("RAGv3", "raw_text_vector")):
        k = evaluation.baseline_k[name]                                   # tuned on the tuning part
        ranking = graph_study.ranked(rid).rankings
        for question_id, top in ranking[ranking["rank"] <= k].groupby("question_id"):
            got = evaluation.sets[(evaluation.sets["retriever"] == name) & (evaluation.sets["question_id"] == question_id)]
            assert set(got["chunk_id"]) == set(top["chunk_id"])
    assert str(evaluation.hybrid).startswith(f"hybrid:{evaluation.tuned}+{evaluation.best_flat}@")
    assert evaluation.best_flat.method != "graph"


@pytest.fixture(scope="module")
def demo():
    from pathlib import Path

    from pmrag.study import Study

    return Study.from_params(Path(__file__).resolve().parents[2] / "params" / "demo.yaml")


@pytest.mark.integration
def test_on_the_demo_the_graph_ranking_puts_first_exactly_what_networkx_traversal_reaches(demo):
    """g(I′, G′) recomputed independently: the neighbours of the chosen interest nodes in the networkx view."""
    section = demo.params.graph
    built = demo.graph()
    evaluation = demo.evaluation()
    questions = evaluation.questions
    chunk_ids = demo.chunks()["chunk_id"].tolist()
    index = gi.InterestIndex.from_graph(built.graph, chunk_ids)
    found = demo.query_vectors()
    row = {q: i for i, q in enumerate(found.question_ids)}
    vectors = found.matrix[[row[q] for q in questions["question_id"]]]
    relevance = gi.offline_relevance(built.graph, built.interest_vectors, questions["text"].tolist(), vectors,
                                     demo.params.bm25, section.lexical_weight, section.split_mode,
                                     section.cosine_floor)
    np.testing.assert_allclose(demo.interest_relevance().rows(questions["question_id"].tolist()), relevance,
                               atol=1e-12)
    chosen = gi.choose_interests(relevance, section.relevance_threshold, section.max_chosen_interests)
    nx_graph = built.graph.to_networkx()
    rankings = demo.ranked("summary_graph_interest").rankings
    reaching = 0
    for i, question_id in enumerate(questions["question_id"]):
        interests = [index.interest_ids[j] for j in np.flatnonzero(chosen[i])]
        traversed = {nx_graph.nodes[m]["label"] for node in interests for m in nx_graph.neighbors(node)
                     if nx_graph.nodes[m]["kind"] == "memory"}
        ranking = rankings[rankings["question_id"] == question_id]
        positive = set(ranking.loc[ranking["score"] > 0, "chunk_id"])
        if len(traversed) <= len(ranking):
            assert positive == traversed
        else:                                       # more reached than the ranking's depth: its whole list
            assert positive <= traversed and len(positive) == len(ranking)
        assert ranking["score"].is_monotonic_decreasing
        reaching += bool(traversed)
    assert reaching >= len(questions) // 2        # the fixed choice reaches memories for most demo questions
