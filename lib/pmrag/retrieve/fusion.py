"""Linear min–max hybrid of a BM25 and a vector retriever (paper §5.3, eq. 11–15) and its β sweep (§6.2).

For a question q, each retriever r ∈ {BM25, vec} contributes its top list P_r(q) (top 200) with scores s_r:

* P(q) = P_BM25(q) ∪ P_vec(q), at most 400 chunks                                             (eq. 11)
* m_r(q) = min_{d ∈ P_r(q)} s_r(q, d),  M_r(q) = max_{d ∈ P_r(q)} s_r(q, d)                    (eq. 12–13)
* ŝ_r(q, d) = (s_r(q, d) − m_r(q)) / (M_r(q) − m_r(q)) if d ∈ P_r(q) and M_r(q) > m_r(q), else 0 (eq. 14)
* s_hybrid(q, d) = (1 − β)·ŝ_vec(q, d) + β·ŝ_BM25(q, d)                                        (eq. 15)

P(q) is ranked by s_hybrid descending, ties broken by chunk ID in descending lexicographic order.  Because
the 200th-ranked score and an absent score both map to 0, β = 0 or 1 need not reproduce the single retriever.

:func:`minmax_fuse` builds one fused ranking; :func:`sweep` scores every β at once from dense
``(n_questions, |P|)`` arrays, with the same floating-point operations, so its metrics equal
:func:`pmrag.metrics.per_question_metrics` of :func:`minmax_fuse` exactly.  ``ranx.fuse(norm="min-max",
method="wsum")`` agrees on every fused score except where a list's score spread M − m is positive but below
1e-9 (ranx divides by max(M − m, 1e-9), eq. 14 divides by M − m); for M == m both give 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns
from pmrag.evaluate.metrics import macro, ndcg, per_question_metrics, recall, reciprocal_rank, relevance_matrix, run_frame

BETAS = np.round(np.arange(0.0, 1.0001, 0.05), 2)
RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")
SELECTION_ORDER = ("recall@5", "ndcg@5", "mrr@5", "distance to 0.5", "beta")


def minmax_normalize(ranking: pd.DataFrame) -> pd.Series:
    """ŝ = (s − m) / (M − m) per question over the list's own scores; 0 for every chunk where M == m (eq. 14)."""
    _require(ranking, "ranking")
    score = ranking["score"].to_numpy(dtype=np.float64)
    grouped = ranking.groupby("question_id", sort=False)["score"]
    low = grouped.transform("min").to_numpy(dtype=np.float64)
    spread = grouped.transform("max").to_numpy(dtype=np.float64) - low
    positive = spread > 0
    hat = np.zeros_like(score)
    hat[positive] = (score[positive] - low[positive]) / spread[positive]
    return pd.Series(hat, index=ranking.index, name="score_hat")


def candidates(bm25: pd.DataFrame, vec: pd.DataFrame) -> pd.DataFrame:
    """The union P(q) (eq. 11) with columns ``question_id, chunk_id, bm25, vector`` holding ŝ_BM25 and ŝ_vec
    (0 where the chunk is absent from that list), sorted by question, then chunk ID descending."""
    parts = []
    for ranking, own, other in ((bm25, "bm25", "vector"), (vec, "vector", "bm25")):
        run_frame(_require(ranking, own))
        parts.append(pd.DataFrame({
            "question_id": ranking["question_id"].to_numpy(dtype=object),
            "chunk_id": ranking["chunk_id"].to_numpy(dtype=object),
            own: minmax_normalize(ranking).to_numpy(), other: 0.0,
        }))
    union = pd.concat(parts, ignore_index=True).groupby(["question_id", "chunk_id"], sort=False).sum()
    return union.reset_index().sort_values(["question_id", "chunk_id"], ascending=[True, False], ignore_index=True)


def fused_scores(bm25_hat, vec_hat, beta):
    """(1 − β)·ŝ_vec + β·ŝ_BM25 (eq. 15); ``beta`` broadcasts against the normalised scores."""
    return (1.0 - beta) * vec_hat + beta * bm25_hat


def minmax_fuse(bm25: pd.DataFrame, vec: pd.DataFrame, beta: float) -> pd.DataFrame:
    """All of P(q) ranked by s_hybrid (eq. 15) descending, ties by chunk ID descending; columns
    ``question_id, chunk_id, rank, score`` with ranks 1..|P(q)| per question."""
    beta = _validated_beta(beta)
    union = candidates(bm25, vec)
    union["score"] = fused_scores(union["bm25"].to_numpy(), union["vector"].to_numpy(), beta)
    fused = union.sort_values(["question_id", "score", "chunk_id"], ascending=[True, False, False],
                              ignore_index=True, kind="stable")
    fused["rank"] = fused.groupby("question_id", sort=False).cumcount() + 1
    return fused.loc[:, list(RANKING_COLUMNS)]


def sweep(bm25: pd.DataFrame, vec: pd.DataFrame, qrels: pd.DataFrame, betas: Sequence[float] = BETAS,
          k: int = 5) -> pd.DataFrame:
    """Per-question ``recall@k, mrr@k, ndcg@k`` of :func:`minmax_fuse` for every β, vectorised.

    P(q) is laid out as dense ``(n_questions, width)`` arrays in chunk-ID-descending order, so a stable sort
    of −s_hybrid over the ``(n_betas, n_questions, width)`` scores ranks by score ↓ then chunk ID ↓.  Questions
    and metric definitions are those of :func:`pmrag.metrics.per_question_metrics` (IDCG from all judged
    chunks).  Long result: ``beta, question_id, recall@k, mrr@k, ndcg@k``, β-major, questions sorted.
    """
    betas = np.asarray([_validated_beta(b) for b in np.atleast_1d(betas)], dtype=np.float64)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    union = candidates(bm25, vec)
    slot = union.groupby("question_id", sort=False).cumcount().to_numpy()
    width = max(int(slot.max()) + 1 if len(slot) else 1, k)
    layout = union.loc[:, ["question_id", "chunk_id"]].assign(rank=slot + 1)
    matrix = relevance_matrix(layout, qrels, depth=width)
    row = matrix.question_ids.get_indexer(union["question_id"])
    n_q = len(matrix.question_ids)

    bm25_hat = np.zeros((n_q, width))
    vec_hat = np.zeros((n_q, width))
    valid = np.zeros((n_q, width), dtype=bool)
    bm25_hat[row, slot] = union["bm25"].to_numpy()
    vec_hat[row, slot] = union["vector"].to_numpy()
    valid[row, slot] = True

    scores = np.where(valid, fused_scores(bm25_hat, vec_hat, betas[:, None, None]), -np.inf)
    order = np.argsort(-scores, axis=-1, kind="stable")[..., :k]
    ranked = np.take_along_axis(np.broadcast_to(matrix.ranked, scores.shape), order, axis=-1).reshape(-1, k)
    ideal = np.tile(matrix.ideal[:, :k], (len(betas), 1))
    n_primary = np.tile(matrix.n_primary, len(betas))
    return pd.DataFrame({
        "beta": np.repeat(betas, n_q),
        "question_id": np.tile(matrix.question_ids.to_numpy(dtype=object), len(betas)),
        f"recall@{k}": recall(ranked, n_primary, k),
        f"mrr@{k}": reciprocal_rank(ranked, k),
        f"ndcg@{k}": ndcg(ranked, ideal, k),
    })


def sweep_macro(per_question: pd.DataFrame, bm25: str | None = None, vector: str | None = None) -> pd.DataFrame:
    """Macro average over questions of a :func:`sweep` result, one row per β, tagged with the pairing names."""
    means = per_question.drop(columns="question_id").groupby("beta", sort=True).mean().reset_index()
    return means.assign(bm25=bm25, vector=vector).loc[:, ["bm25", "vector", *means.columns]]


def select_best(sweep_macro: pd.DataFrame, decimals: int = 12) -> pd.Series:
    """The configuration with the highest macro ``recall@5`` (the paper's rule, §6.2).

    Ties (metrics compared after rounding to ``decimals``, so summation noise does not decide) are broken by
    higher ``ndcg@5``, then higher ``mrr@5``, then β closest to 0.5, then the smaller β, then the first row.
    """
    needed = ("bm25", "vector", "beta", "recall@5", "mrr@5", "ndcg@5")
    missing = [c for c in needed if c not in sweep_macro.columns]
    if missing:
        raise ValueError(f"sweep_macro lacks column(s) {', '.join(missing)}")
    if sweep_macro.empty:
        raise ValueError("sweep_macro has no rows")
    frame = sweep_macro.reset_index(drop=True)
    keys = pd.DataFrame({
        "recall@5": -frame["recall@5"].round(decimals), "ndcg@5": -frame["ndcg@5"].round(decimals),
        "mrr@5": -frame["mrr@5"].round(decimals), "distance to 0.5": (frame["beta"] - 0.5).abs().round(decimals),
        "beta": frame["beta"].round(decimals),
    })
    best = keys.sort_values(list(SELECTION_ORDER), kind="stable").index[0]
    return frame.loc[best]


def candidate_ceiling(ranking: pd.DataFrame, qrels: pd.DataFrame, depth: int = 200) -> float:
    """Macro Recall@depth on primary gold (relevance 2) of one retriever's list (§5.3)."""
    return float(macro(per_question_metrics(ranking, qrels, ks=(depth,), metrics=("recall",))).iloc[0])


def oracle_union_ceiling(bm25: pd.DataFrame, vec: pd.DataFrame, qrels: pd.DataFrame) -> float:
    """Macro |P(q) ∩ G2(q)| / |G2(q)|: the recall any reranking of the union P(q) (eq. 11) can reach (§5.3)."""
    union = minmax_fuse(bm25, vec, 0.5)
    depth = max(int(union["rank"].max()) if len(union) else 1, 1)
    return candidate_ceiling(union, qrels, depth=depth)


def rrf_fuse(bm25: pd.DataFrame, vec: pd.DataFrame, k: int = 60) -> pd.DataFrame:
    """Reciprocal rank fusion: score = Σ_r 1 / (k + rank_r(q, d)) over the lists holding d; ranked like
    :func:`minmax_fuse` (score ↓, chunk ID ↓)."""
    parts = [run_frame(_require(r, name)) for r, name in ((bm25, "bm25"), (vec, "vector"))]
    frame = pd.concat(parts, ignore_index=True)
    frame["score"] = 1.0 / (k + frame["rank"].to_numpy(dtype=np.float64))
    union = frame.groupby(["question_id", "chunk_id"], sort=False)["score"].sum().reset_index()
    fused = union.sort_values(["question_id", "score", "chunk_id"], ascending=[True, False, False],
                              ignore_index=True, kind="stable")
    fused["rank"] = fused.groupby("question_id", sort=False).cumcount() + 1
    return fused.loc[:, list(RANKING_COLUMNS)]


def _validated_beta(beta) -> float:
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) or not 0 <= beta <= 1:
        raise ValueError(f"beta must be a number in [0, 1], got {beta!r}")
    return float(beta)


def _require(ranking: pd.DataFrame, what: str) -> pd.DataFrame:
    require_columns(ranking, RANKING_COLUMNS, f"{what} ranking")
    if ranking["score"].isna().any():
        raise ValueError(f"{what} ranking has missing scores")
    return ranking
