"""Min–max linear hybrid (paper §5.3, eq. 11–15), its vectorised β sweep and best-configuration selection:
hand-computed cases per clause, exact agreement of the sweep with pmrag.metrics, and agreement with ranx."""

import numpy as np
import pandas as pd
import pytest
from ranx import Run, fuse

from pmrag.core.params import HybridSection
from pmrag.evaluate.metrics import per_question_metrics
from pmrag.evaluate.sweep import candidate_ceiling, oracle_union_ceiling, select_best, sweep, sweep_macro
from pmrag.retrieve.fusion import minmax_fuse, rrf_fuse

BETAS = HybridSection().betas()  # the paper's grid: 0, 0.05, …, 1


def ranking(lists: dict[str, dict[str, float]]) -> pd.DataFrame:
    """``{question: {chunk: score}}`` in rank order → ranking table."""
    rows = [(q, c, i + 1, s) for q, chunks in lists.items() for i, (c, s) in enumerate(chunks.items())]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


def qrels_of(judgments: dict[str, dict[str, int]]) -> pd.DataFrame:
    rows = [(q, c, r) for q, chunks in judgments.items() for c, r in chunks.items()]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"])


def fused(bm25, vec, beta, q="q"):
    out = minmax_fuse(ranking({q: bm25}), ranking({q: vec}), beta)
    return dict(zip(out["chunk_id"], out["score"])), list(out["chunk_id"])


def test_normalised_weighted_sum_by_hand():
    scores, order = fused({"a": 10.0, "b": 6.0, "c": 2.0}, {"b": 0.9, "c": 0.5, "a": 0.1}, 0.25)
    assert scores["a"] == pytest.approx(0.75 * 0.0 + 0.25 * 1.0)
    assert scores["b"] == pytest.approx(0.75 * 1.0 + 0.25 * 0.5)
    assert scores["c"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.0)
    assert order == ["b", "c", "a"]


def test_absent_chunk_gets_zero_from_that_retriever():
    scores, _ = fused({"a": 3.0, "b": 1.0}, {"c": 0.8, "a": 0.4}, 0.5)
    assert scores["b"] == pytest.approx(0.5 * 0.0 + 0.5 * 0.0)
    assert scores["c"] == pytest.approx(0.5 * 1.0)
    assert scores["a"] == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)


def test_equal_scores_within_a_list_normalise_to_zero():
    scores, _ = fused({"a": 4.0, "b": 4.0, "c": 4.0}, {"a": 0.2, "b": 0.6}, 0.7)
    assert scores == pytest.approx({"a": 0.3 * 0.0, "b": 0.3 * 1.0, "c": 0.0})
    scores, _ = fused({"a": 4.0, "b": 4.0}, {"a": 0.5, "b": 0.5}, 0.5)
    assert scores == {"a": 0.0, "b": 0.0}


def test_ties_broken_by_chunk_id_descending():
    _, order = fused({"b": 1.0, "d": 1.0}, {"a": 1.0, "c": 1.0}, 0.5)
    assert order == ["d", "c", "b", "a"]
    _, order = fused({"a1": 2.0, "b2": 1.0}, {"b2": 2.0, "a1": 1.0}, 0.5)
    assert order == ["b2", "a1"]


def test_beta_one_need_not_reproduce_bm25_ranking():
    bm25 = {"b": 9.0, "a": 5.0}
    _, order = fused(bm25, {"z": 0.9, "b": 0.1}, 1.0)
    assert order == ["b", "z", "a"]
    assert [c for c in order if c in bm25] == list(bm25)
    assert order[:2] != list(bm25)


def test_beta_zero_need_not_reproduce_vector_ranking():
    vec = {"m": 0.9, "c": 0.3}
    _, order = fused({"x": 2.0, "y": 1.0}, vec, 0.0)
    assert order == ["m", "y", "x", "c"]


def test_ranks_cover_the_whole_union_per_question():
    out = minmax_fuse(ranking({"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 1.0}}),
                      ranking({"q1": {"b": 1.0, "c": 0.0}, "q2": {"d": 3.0}}), 0.5)
    assert out.groupby("question_id")["rank"].apply(list).to_dict() == {"q1": [1, 2, 3], "q2": [1, 2]}
    assert list(out.columns) == ["question_id", "chunk_id", "rank", "score"]


def random_pair(seed, n_q=12, depth=200, n_chunks=600, ties=False):
    rng = np.random.default_rng(seed)
    chunk_ids = np.array([f"{i:040x}" for i in rng.choice(16**6, n_chunks, replace=False)])
    frames, judgments = [], {}
    for scale in (20.0, 1.0):
        rows = []
        for q in range(n_q):
            chunks = rng.choice(chunk_ids, depth, replace=False)
            score = np.sort(rng.random(depth) * scale)[::-1]
            if ties:
                score = np.round(score, 1)
            rows.append(pd.DataFrame({"question_id": f"q{q:02d}", "chunk_id": chunks,
                                      "rank": np.arange(1, depth + 1), "score": score}))
        frames.append(pd.concat(rows, ignore_index=True))
    for q in range(n_q):
        judged = rng.choice(chunk_ids, 8, replace=False)
        judgments[f"q{q:02d}"] = dict(zip(judged, [2, 2, 1, 1, 0, 2, 1, 0]))
    return frames[0], frames[1], qrels_of(judgments)


def test_union_has_at_most_400_candidates():
    bm25, vec, _ = random_pair(0, n_q=5, n_chunks=450)
    sizes = minmax_fuse(bm25, vec, 0.3).groupby("question_id").size()
    assert (sizes <= 400).all() and (sizes >= 200).all()


@pytest.mark.parametrize("ties", [False, True])
def test_sweep_equals_per_question_metrics_of_fused_runs(ties):
    bm25, vec, qrels = random_pair(1, ties=ties)
    result = sweep(bm25, vec, qrels, BETAS, k=5)
    assert len(result) == len(BETAS) * 12
    for beta in (0.0, 0.05, 0.45, 0.5, 1.0):
        expected = per_question_metrics(minmax_fuse(bm25, vec, beta), qrels, ks=(5,))
        got = result[result["beta"] == beta].set_index("question_id")[expected.columns]
        np.testing.assert_array_equal(got.index, expected.index)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=0, atol=1e-12)


def test_sweep_scores_questions_without_candidates_zero():
    bm25 = ranking({"q1": {"a": 2.0, "b": 1.0}})
    vec = ranking({"q1": {"b": 1.0, "c": 0.5, "e": 0.0}})
    qrels = qrels_of({"q1": {"c": 2}, "q2": {"x": 2}})
    result = sweep(bm25, vec, qrels, betas=[0.0, 1.0], k=5).set_index(["beta", "question_id"])
    assert result.loc[(0.0, "q2")].tolist() == [0.0, 0.0, 0.0]
    assert result.loc[(0.0, "q1"), "mrr@5"] == 0.5
    assert result.loc[(1.0, "q1"), "mrr@5"] == pytest.approx(1 / 3)


def ranx_run(frame):
    lists: dict[str, dict[str, float]] = {}
    for q, c, s in zip(frame["question_id"], frame["chunk_id"], frame["score"]):
        lists.setdefault(str(q), {})[str(c)] = float(s)
    return Run(lists)


@pytest.mark.parametrize("ties", [False, True])
def test_fused_scores_agree_with_ranx_wsum_of_min_max(ties):
    """Covers chunks absent from one list and a list with M == m (q00's BM25), where both give 0."""
    bm25, vec, _ = random_pair(2, n_q=6, ties=ties)
    bm25.loc[bm25["question_id"] == "q00", "score"] = 3.0
    for beta in (0.0, 0.35, 0.5, 1.0):
        ours = minmax_fuse(bm25, vec, beta)
        theirs = fuse(runs=[ranx_run(vec), ranx_run(bm25)], norm="min-max", method="wsum",
                      params={"weights": [1 - beta, beta]}).to_dict()
        assert sum(len(v) for v in theirs.values()) == len(ours)
        expected = np.array([theirs[q][c] for q, c in zip(ours["question_id"], ours["chunk_id"])])
        np.testing.assert_allclose(ours["score"].to_numpy(), expected, rtol=0, atol=1e-9)


def macro_row(beta, recall, ndcg=0.5, mrr=0.5, bm25="b", vector="v"):
    return {"bm25": bm25, "vector": vector, "beta": beta, "recall@5": recall, "mrr@5": mrr, "ndcg@5": ndcg}


def test_select_best_maximises_recall():
    frame = pd.DataFrame([macro_row(0.1, 0.6, ndcg=0.9), macro_row(0.4, 0.7), macro_row(0.5, 0.65, mrr=0.9)])
    assert select_best(frame)["beta"] == 0.4


def test_select_best_recall_tie_goes_to_higher_ndcg():
    frame = pd.DataFrame([macro_row(0.5, 0.7, ndcg=0.4, mrr=0.9), macro_row(0.2, 0.7, ndcg=0.6, mrr=0.1)])
    assert select_best(frame)["beta"] == 0.2


def test_select_best_then_higher_mrr():
    frame = pd.DataFrame([macro_row(0.5, 0.7, mrr=0.4), macro_row(0.9, 0.7, mrr=0.6)])
    assert select_best(frame)["beta"] == 0.9


def test_select_best_then_beta_closest_to_half():
    frame = pd.DataFrame([macro_row(0.2, 0.7), macro_row(0.6, 0.7), macro_row(0.35, 0.7)])
    assert select_best(frame)["beta"] == 0.6


def test_select_best_then_smaller_beta_despite_float_noise():
    frame = pd.DataFrame([macro_row(0.55, 0.7), macro_row(0.45, 0.7)])
    assert abs(0.45 - 0.5) != abs(0.55 - 0.5)
    assert select_best(frame)["beta"] == 0.45


def test_select_best_treats_summation_noise_as_a_tie():
    frame = pd.DataFrame([macro_row(0.3, 0.1 + 0.2, ndcg=0.1), macro_row(0.6, 0.3, ndcg=0.2)])
    assert select_best(frame)["beta"] == 0.6


def test_sweep_macro_feeds_select_best():
    bm25, vec, qrels = random_pair(3)
    table = sweep_macro(sweep(bm25, vec, qrels, BETAS), bm25="e_bm25", vector="e_vec")
    assert list(table.columns) == ["bm25", "vector", "beta", "recall@5", "mrr@5", "ndcg@5"]
    assert len(table) == 21
    best = select_best(table)
    assert best["recall@5"] == table["recall@5"].max()


def test_candidate_and_oracle_union_ceilings():
    bm25 = ranking({"q1": {"a": 2.0, "b": 1.0}, "q2": {"x": 1.0}})
    vec = ranking({"q1": {"c": 1.0}, "q2": {"y": 1.0}})
    qrels = qrels_of({"q1": {"a": 2, "c": 2, "d": 2, "b": 1}, "q2": {"y": 2}})
    assert candidate_ceiling(bm25, qrels) == pytest.approx((1 / 3 + 0) / 2)
    assert candidate_ceiling(vec, qrels) == pytest.approx((1 / 3 + 1) / 2)
    assert candidate_ceiling(bm25, qrels, depth=1) == pytest.approx((1 / 3 + 0) / 2)
    assert oracle_union_ceiling(bm25, vec, qrels) == pytest.approx((2 / 3 + 1) / 2)


def test_rrf_fuse_by_hand():
    out = rrf_fuse(ranking({"q": {"a": 9.0, "b": 8.0}}), ranking({"q": {"b": 0.9, "c": 0.8}}), k=60)
    scores = dict(zip(out["chunk_id"], out["score"]))
    assert scores == pytest.approx({"b": 1 / 62 + 1 / 61, "a": 1 / 61, "c": 1 / 62})
    assert list(out["chunk_id"]) == ["b", "a", "c"]


def test_invalid_beta_rejected():
    with pytest.raises(ValueError):
        minmax_fuse(ranking({"q": {"a": 1.0}}), ranking({"q": {"a": 1.0}}), 1.5)
