"""Min–max linear hybrid (paper §5.3, eq. 11–15), the weighted RRF and CombMNZ fusions beside it, their vectorised
β sweep and best-configuration selection: hand-computed cases per clause, exact agreement of the sweep with
pmrag.metrics for every fusion, and agreement with ranx's fusion functions."""

import numpy as np
import pandas as pd
import pytest
from ranx import Run
from ranx import fuse as ranx_fuse

from pmrag.core import names, params
from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.params import HybridSection
from pmrag.evaluate.metrics import per_question_metrics
from pmrag.evaluate.sweep import (
    best_per_pairing,
    candidate_ceiling,
    hybrid_ids,
    macro_by_configuration,
    oracle_union_ceiling,
    select_best,
    select_overall,
    sweep,
    sweep_macro,
    sweep_pairings,
)
from pmrag.retrieve.fusion import FUSION_SCORES, candidates, fuse, minmax_fuse, rrf_fuse

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


@pytest.mark.parametrize("fusion", ["minmax", "rrf", "combmnz"])
@pytest.mark.parametrize("ties", [False, True])
def test_sweep_equals_per_question_metrics_of_fused_runs(ties, fusion):
    bm25, vec, qrels = random_pair(1, ties=ties)
    result = sweep(bm25, vec, qrels, BETAS, k=5, fusion=fusion, rrf_k=7)
    assert len(result) == len(BETAS) * 12
    for beta in (0.0, 0.05, 0.45, 0.5, 1.0):
        expected = per_question_metrics(fuse(bm25, vec, beta, fusion, rrf_k=7), qrels, ks=(5,))
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


@pytest.mark.agreement
@pytest.mark.parametrize("ties", [False, True])
def test_fused_scores_agree_with_ranx_wsum_of_min_max(ties):
    """Covers chunks absent from one list and a list with M == m (q00's BM25), where both give 0."""
    bm25, vec, _ = random_pair(2, n_q=6, ties=ties)
    bm25.loc[bm25["question_id"] == "q00", "score"] = 3.0
    for beta in (0.0, 0.35, 0.5, 1.0):
        ours = minmax_fuse(bm25, vec, beta)
        theirs = ranx_fuse(runs=[ranx_run(vec), ranx_run(bm25)], norm="min-max", method="wsum",
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


def fused_by(fusion, bm25, vec, beta, rrf_k=60):
    out = fuse(ranking({"q": bm25}), ranking({"q": vec}), beta, fusion, rrf_k=rrf_k)
    return dict(zip(out["chunk_id"], out["score"])), list(out["chunk_id"])


def test_fusion_registry_names_the_configurable_fusions():
    assert FUSION_SCORES.names() == names.FUSIONS == params.FUSIONS
    assert names.FUSIONS[0] == names.PAPER_FUSION == "minmax"


def test_candidates_carry_each_lists_rank_and_zero_where_absent():
    union = candidates(ranking({"q": {"a": 3.0, "b": 1.0}}), ranking({"q": {"c": 0.8, "a": 0.4}}))
    assert list(union.columns) == ["question_id", "chunk_id", "bm25", "vector", "bm25_rank", "vector_rank"]
    assert union.set_index("chunk_id")[["bm25_rank", "vector_rank"]].to_dict("index") == {
        "c": {"bm25_rank": 0, "vector_rank": 1}, "b": {"bm25_rank": 2, "vector_rank": 0},
        "a": {"bm25_rank": 1, "vector_rank": 2}}


def test_weighted_rrf_by_hand():
    scores, order = fused_by("rrf", {"a": 9.0, "b": 8.0, "c": 7.0}, {"c": 0.9, "d": 0.8, "a": 0.1}, 0.25, rrf_k=10)
    assert scores["a"] == pytest.approx(0.25 / 11 + 0.75 / 13)
    assert scores["b"] == pytest.approx(0.25 / 12)
    assert scores["c"] == pytest.approx(0.25 / 13 + 0.75 / 11)
    assert scores["d"] == pytest.approx(0.75 / 12)
    assert order == ["c", "a", "d", "b"]


def test_rrf_reads_the_rankings_own_ranks_not_its_scores():
    # tied scores: the ranking's rank column (b before a) decides, not a re-sort of the scores
    scores, order = fused_by("rrf", {"b": 5.0, "a": 5.0}, {"z": 1.0}, 1.0, rrf_k=1)
    assert scores == pytest.approx({"b": 1 / 2, "a": 1 / 3, "z": 0.0})
    assert order == ["b", "a", "z"]


def test_rrf_at_half_is_half_of_plain_rrf():
    bm25, vec, _ = random_pair(4, n_q=4)
    weighted = fuse(bm25, vec, 0.5, "rrf", rrf_k=60)
    plain = rrf_fuse(bm25, vec, k=60)
    pd.testing.assert_frame_equal(weighted.loc[:, ["question_id", "chunk_id", "rank"]],
                                  plain.loc[:, ["question_id", "chunk_id", "rank"]])
    np.testing.assert_allclose(2 * weighted["score"].to_numpy(), plain["score"].to_numpy(), rtol=1e-15, atol=0)


def test_combmnz_by_hand_counts_presence_even_at_zero_score():
    scores, order = fused_by("combmnz", {"a": 10.0, "b": 6.0, "c": 2.0}, {"b": 0.9, "c": 0.5, "d": 0.1}, 0.25)
    assert scores["a"] == pytest.approx(0.25 * 1.0)                       # BM25 only
    assert scores["b"] == pytest.approx((0.25 * 0.5 + 0.75 * 1.0) * 2)
    assert scores["c"] == pytest.approx((0.25 * 0.0 + 0.75 * 0.5) * 2)   # BM25's last chunk still counts
    assert scores["d"] == 0.0
    assert order == ["b", "c", "a", "d"]


def test_minmax_fusion_through_fuse_is_minmax_fuse():
    bm25, vec, _ = random_pair(5, n_q=3, ties=True)
    for beta in (0.0, 0.3, 1.0):
        pd.testing.assert_frame_equal(fuse(bm25, vec, beta), minmax_fuse(bm25, vec, beta), check_exact=True)


@pytest.mark.parametrize("fusion", ["rrf", "combmnz"])
def test_other_fusions_break_score_ties_by_chunk_id_descending(fusion):
    _, order = fused_by(fusion, {"b": 2.0, "d": 1.0}, {"a": 2.0, "c": 1.0}, 0.5)
    assert order == ["b", "a", "d", "c"]   # b and a tie at the top (rank 1 / ŝ = 1), d and c at the bottom
    _, order = fused_by(fusion, {"a1": 2.0, "b2": 1.0}, {"b2": 2.0, "a1": 1.0}, 0.5)
    assert order == ["b2", "a1"]


def test_unknown_fusion_and_bad_rrf_k_rejected():
    pair = ranking({"q": {"a": 1.0}}), ranking({"q": {"a": 1.0}})
    with pytest.raises(ValueError, match="fusion must be one of minmax, rrf, combmnz"):
        fuse(*pair, 0.5, "wsum")
    for k in (0, 1.5, True):
        with pytest.raises(ValueError, match="rrf_k"):
            fuse(*pair, 0.5, "rrf", rrf_k=k)
    with pytest.raises(ValueError, match="fusion"):
        sweep(*pair, qrels_of({"q": {"a": 2}}), [0.5], fusion="mnz")


def ranx_scores(run, ours):
    """ranx's fused scores in the row order of our fused ranking, after checking both hold the same chunks."""
    theirs = run.to_dict()
    assert sum(len(v) for v in theirs.values()) == len(ours)
    return np.array([theirs[q][c] for q, c in zip(ours["question_id"], ours["chunk_id"])])


@pytest.mark.agreement
@pytest.mark.filterwarnings("ignore:unsafe cast from uint64 to int64")   # inside ranx's numba rrf
def test_rrf_at_half_agrees_with_ranx_rrf():
    """Distinct scores, so ranx's rank (the position in its score-sorted list) is the ranking's rank."""
    bm25, vec, _ = random_pair(6, n_q=6)
    for k in (1, 60):
        ours = fuse(bm25, vec, 0.5, "rrf", rrf_k=k)
        theirs = fuse_ranx([vec, bm25], None, "rrf", {"k": k})
        np.testing.assert_allclose(2 * ours["score"].to_numpy(), ranx_scores(theirs, ours), rtol=1e-15, atol=0)


@pytest.mark.agreement
@pytest.mark.parametrize("ties", [False, True])
def test_combmnz_at_half_agrees_with_ranx_mnz_and_wmnz(ties):
    """min-max normalised runs; includes a list with M == m (q00's BM25: all 0, each still counted)."""
    bm25, vec, _ = random_pair(7, n_q=6, ties=ties)
    bm25.loc[bm25["question_id"] == "q00", "score"] = 3.0
    ours = fuse(bm25, vec, 0.5, "combmnz")
    mnz = fuse_ranx([vec, bm25], "min-max", "mnz", {})
    wmnz = fuse_ranx([vec, bm25], "min-max", "wmnz", {"weights": [0.5, 0.5]})
    np.testing.assert_allclose(2 * ours["score"].to_numpy(), ranx_scores(mnz, ours), rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours["score"].to_numpy(), ranx_scores(wmnz, ours), rtol=0, atol=1e-9)


@pytest.mark.agreement
def test_ranx_wmnz_weights_the_count_not_the_scores():
    """The documented difference: ranx wmnz = (Σ ŝ_r)·(Σ_{r ∋ d} w_r); ours (Σ w_r·ŝ_r)·|{r ∋ d}|."""
    bm25 = ranking({"q": {"a": 10.0, "b": 6.0, "c": 2.0}})
    vec = ranking({"q": {"b": 0.9, "c": 0.5, "d": 0.1}})
    beta = 0.25
    ours = fuse(bm25, vec, beta, "combmnz")
    theirs = dict(zip(ours["chunk_id"], ranx_scores(fuse_ranx([vec, bm25], "min-max", "wmnz",
                                                               {"weights": [1 - beta, beta]}), ours)))
    assert theirs == pytest.approx({"a": 1.0 * 0.25, "b": (1.0 + 0.5) * 1.0, "c": (0.5 + 0.0) * 1.0, "d": 0.0})
    assert dict(zip(ours["chunk_id"], ours["score"]))["b"] != pytest.approx(theirs["b"])


@pytest.mark.agreement
def test_minmax_at_half_agrees_with_ranx_comb_sum():
    bm25, vec, _ = random_pair(8, n_q=6)
    ours = minmax_fuse(bm25, vec, 0.5)
    theirs = fuse_ranx([vec, bm25], "min-max", "sum", {})
    np.testing.assert_allclose(2 * ours["score"].to_numpy(), ranx_scores(theirs, ours), rtol=0, atol=1e-12)


def fuse_ranx(frames, norm, method, fusion_params):
    return ranx_fuse(runs=[ranx_run(f) for f in frames], norm=norm, method=method, params=fusion_params)


PAIRINGS = [("x_bm25", "x_vector"), ("y_bm25", "x_vector")]


def three_rankings(seed):
    bm25, vec, qrels = random_pair(seed, n_q=8)
    other, _, _ = random_pair(seed + 100, n_q=8)
    return {"x_bm25": bm25, "x_vector": vec, "y_bm25": other}, qrels


def test_sweep_pairings_leads_with_fusion_and_keeps_the_minmax_rows():
    rankings, qrels = three_rankings(9)
    paper = sweep_pairings(rankings, qrels, PAIRINGS, BETAS)
    assert list(paper.columns) == ["fusion", "bm25", "vector", "beta", "question_id", "recall@5", "mrr@5", "ndcg@5"]
    assert set(paper["fusion"]) == {"minmax"} and len(paper) == 2 * len(BETAS) * 8
    every = sweep_pairings(rankings, qrels, PAIRINGS, BETAS, fusions=("minmax", "rrf", "combmnz"), rrf_k=5)
    assert list(dict.fromkeys(every["fusion"])) == ["minmax", "rrf", "combmnz"]
    pd.testing.assert_frame_equal(every[every["fusion"] == "minmax"].reset_index(drop=True), paper, check_exact=True)
    for fusion in ("rrf", "combmnz"):
        for first, second in PAIRINGS:
            got = every[(every["fusion"] == fusion) & (every["bm25"] == first) & (every["vector"] == second)]
            alone = sweep(rankings[first], rankings[second], qrels, BETAS, fusion=fusion, rrf_k=5)
            pd.testing.assert_frame_equal(got.drop(columns=["fusion", "bm25", "vector"]).reset_index(drop=True),
                                          alone, check_exact=True)
    assert not every[every["fusion"] == "rrf"][["recall@5", "mrr@5", "ndcg@5"]].equals(
        paper[["recall@5", "mrr@5", "ndcg@5"]])   # rrf is a different fusion, not minmax relabelled


def test_sweep_pairings_rejects_repeated_or_unknown_fusions():
    rankings, qrels = three_rankings(10)
    for fusions in (("minmax", "minmax"), (), ("minmax", "borda")):
        with pytest.raises(ValueError, match="fusion"):
            sweep_pairings(rankings, qrels, PAIRINGS, [0.5], fusions=fusions)


def test_macro_and_best_group_by_fusion_with_minmax_first():
    rankings, qrels = three_rankings(11)
    every = sweep_pairings(rankings, qrels, PAIRINGS, BETAS, fusions=("minmax", "combmnz", "rrf"))
    macro = macro_by_configuration(every)
    assert list(macro.columns[:4]) == ["fusion", "bm25", "vector", "beta"] and len(macro) == 3 * 2 * len(BETAS)
    best = best_per_pairing(macro)
    assert list(best["fusion"]) == ["minmax"] * 2 + ["combmnz"] * 2 + ["rrf"] * 2
    for fusion, group in best.groupby("fusion", sort=False):
        assert group["recall@5"].is_monotonic_decreasing
        for row in group.itertuples(index=False):
            mine = macro[(macro["fusion"] == fusion) & (macro["bm25"] == row.bm25) & (macro["vector"] == row.vector)]
            assert row.beta == select_best(mine)["beta"]
    paper_only = best_per_pairing(macro_by_configuration(every[every["fusion"] == "minmax"]))
    pd.testing.assert_frame_equal(best[best["fusion"] == "minmax"], paper_only, check_exact=True)


def test_select_overall_considers_minmax_rows_only():
    best = pd.DataFrame([
        {"fusion": "rrf", **macro_row(0.3, 0.9, bm25="x_bm25", vector="x_vector")},
        {"fusion": "minmax", **macro_row(0.4, 0.5, bm25="x_bm25", vector="x_vector")},
        {"fusion": "minmax", **macro_row(0.6, 0.6, bm25="y_bm25", vector="x_vector")},
        {"fusion": "combmnz", **macro_row(0.2, 0.8, bm25="y_bm25", vector="x_vector")},
    ])
    chosen = select_overall(best, PAIRINGS)
    assert (chosen["fusion"], chosen["bm25"], chosen["beta"]) == ("minmax", "y_bm25", 0.6)
    with pytest.raises(ValueError, match="no minmax rows"):
        select_overall(best[best["fusion"] != "minmax"], PAIRINGS)


def test_tables_without_fusion_read_as_minmax():
    best = pd.DataFrame([macro_row(0.4, 0.5, bm25="summary_bm25", vector="summary_vector")])
    assert select_overall(best, [("summary_bm25", "summary_vector")])["fusion"] == "minmax"
    assert "fusion" not in best.columns   # never mutated
    assert hybrid_ids(best) == [HybridId(RetrieverId.parse("summary_bm25"), RetrieverId.parse("summary_vector"), 0.4)]


def test_hybrid_ids_name_each_row_with_its_fusion():
    best = pd.DataFrame([{"fusion": f, **macro_row(0.35, 0.5, bm25="summary_bm25", vector="raw_text_vector")}
                         for f in ("minmax", "rrf", "combmnz")])
    assert [str(h) for h in hybrid_ids(best)] == [
        "hybrid:summary_bm25+raw_text_vector@0.35", "hybrid-rrf:summary_bm25+raw_text_vector@0.35",
        "hybrid-combmnz:summary_bm25+raw_text_vector@0.35"]


def test_top_k_is_the_stable_sorts_first_k_with_ties_and_empty_slots():
    from pmrag.evaluate.sweep import top_k

    rng = np.random.default_rng(0)
    for _ in range(50):
        scores = np.round(rng.random((3, 7, int(rng.integers(5, 30)))), 1)   # ties
        scores[rng.random(scores.shape) < 0.3] = -np.inf                      # empty slots
        np.testing.assert_array_equal(top_k(scores, 5), np.argsort(-scores, axis=-1, kind="stable")[..., :5])


def test_sweep_pairings_lays_out_from_codes_exactly_as_one_pairings_sweep():
    a, b, qrels = random_pair(3, n_q=6, ties=True)
    c, _, _ = random_pair(13, n_q=6, ties=True)
    c = c[c["question_id"] != "q03"]   # a list without one question: that question has no candidates there
    rankings = {"raw_text_bm25": a, "summary_vector": b, "summary_bm25": c}
    pairs = [("raw_text_bm25", "summary_vector"), ("summary_bm25", "summary_vector")]
    table = sweep_pairings(rankings, qrels, pairs, [0.0, 0.4, 1.0], fusions=("minmax", "rrf", "combmnz"), rrf_k=7)
    for fusion in ("minmax", "rrf", "combmnz"):
        for first, second in pairs:
            alone = sweep(rankings[first], rankings[second], qrels, [0.0, 0.4, 1.0], fusion=fusion, rrf_k=7)
            rows = table[(table["fusion"] == fusion) & (table["bm25"] == first) & (table["vector"] == second)]
            pd.testing.assert_frame_equal(rows.drop(columns=["fusion", "bm25", "vector"]).reset_index(drop=True),
                                          alone, check_exact=True)
