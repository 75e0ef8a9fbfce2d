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

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns, run_frame

RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")


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
