"""Fusion of a BM25 and a vector retriever's lists: the paper's min-max linear hybrid (§5.3, eq. 11–15) and
the fusions compared beside it (weighted RRF, min-max CombMNZ), one definition each for fused runs and sweeps.

For a question q, each retriever r ∈ {BM25, vec} contributes its top list P_r(q) (top 200) with scores s_r
and ranks r_r(q, d) (the ranking's own ``rank`` column, so its tie-breaks carry over):

* P(q) = P_BM25(q) ∪ P_vec(q), at most 400 chunks                                             (eq. 11)
* m_r(q) = min_{d ∈ P_r(q)} s_r(q, d),  M_r(q) = max_{d ∈ P_r(q)} s_r(q, d)                    (eq. 12–13)
* ŝ_r(q, d) = (s_r(q, d) − m_r(q)) / (M_r(q) − m_r(q)) if d ∈ P_r(q) and M_r(q) > m_r(q), else 0 (eq. 14)

Each fusion scores every d ∈ P(q) (:data:`FUSION_SCORES`, name → kernel), β weighting BM25 (the pairing's
first retriever) in all three, so one β grid and one β axis serve them all:

* ``minmax`` (the paper's, eq. 15):  s(q, d) = (1 − β)·ŝ_vec(q, d) + β·ŝ_BM25(q, d).  This is CombSUM of
  min-max scores with weights (β, 1 − β), ranx ``wsum`` with ``norm="min-max"``; β = 0.5 ranks as
  unweighted CombSUM (ranx ``sum``).
* ``rrf`` (weighted reciprocal rank fusion, Cormack et al. 2009):
  s(q, d) = (1 − β)·ρ_vec(q, d) + β·ρ_BM25(q, d) with ρ_r(q, d) = 1 / (k + r_r(q, d)) if d ∈ P_r(q), else 0.
  β = 0.5 gives half of ranx ``rrf`` with the same k (same ranking); k is ``hybrid.rrf_k`` (60 as Cormack).
* ``combmnz`` (CombMNZ of min-max scores, Fox & Shaw 1993, weighted):
  s(q, d) = ((1 − β)·ŝ_vec(q, d) + β·ŝ_BM25(q, d)) · |{r : d ∈ P_r(q)}|, membership counted by presence in
  the list (a list's last chunk, ŝ = 0, still counts), as ranx ``mnz`` does; β = 0.5 gives half of ranx
  ``mnz`` of min-max runs.  ranx's ``wmnz`` (Wu & Crestani 2002) is another weighting: (Σ_r ŝ_r) ·
  (Σ_{r ∋ d} w_r), the weights multiplying the count instead of the scores; it equals ours at β = 0.5 only.
  We weight the scores so that β means for CombMNZ what it means in eq. 15, and combmnz at β differs from
  minmax at β exactly by the factor 2 on chunks both lists hold.

P(q) is ranked by the fused score descending, ties broken by chunk ID in descending lexicographic order (the
paper's rule for eq. 15, kept for all).  Because the 200th-ranked score and an absent score both map to 0,
β = 0 or 1 need not reproduce the single retriever (for rrf, the other list's chunks all tie at 0 there).

:func:`fuse` builds one fused ranking (:func:`minmax_fuse` the paper's); :func:`pmrag.evaluate.sweep.sweep`
scores every β at once from dense ``(n_questions, |P|)`` arrays with the same kernel, so its metrics equal
:func:`pmrag.metrics.per_question_metrics` of :func:`fuse` exactly.  ``ranx.fuse(norm="min-max",
method="wsum")`` agrees on every minmax score except where a list's score spread M − m is positive but below
1e-9 (ranx divides by max(M − m, 1e-9), eq. 14 divides by M − m); for M == m both give 0.
:func:`rrf_fuse` is plain unweighted RRF of two lists (Σ_r 1 / (k + r_r)), kept for callers fusing without β.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns, run_frame
from pmrag.core.registry import Registry

RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")
FUSION_SCORES: Registry = Registry("fusion")   # name → kernel(lists, beta, rrf_k) -> fused scores


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
    """The union P(q) (eq. 11) with columns ``question_id, chunk_id, bm25, vector, bm25_rank, vector_rank``:
    ŝ_BM25 and ŝ_vec (0 where the chunk is absent from that list) and each list's own rank (0 where absent),
    sorted by question, then chunk ID descending."""
    parts = []
    for ranking, own, other in ((bm25, "bm25", "vector"), (vec, "vector", "bm25")):
        run_frame(_require(ranking, own))
        parts.append(pd.DataFrame({
            "question_id": ranking["question_id"].to_numpy(dtype=object),
            "chunk_id": ranking["chunk_id"].to_numpy(dtype=object),
            own: minmax_normalize(ranking).to_numpy(), other: 0.0,
            f"{own}_rank": ranking["rank"].to_numpy(dtype=np.int64), f"{other}_rank": 0,
        }))
    union = pd.concat(parts, ignore_index=True).groupby(["question_id", "chunk_id"], sort=False).sum()
    union = union.reset_index().loc[:, ["question_id", "chunk_id", "bm25", "vector", "bm25_rank", "vector_rank"]]
    return union.sort_values(["question_id", "chunk_id"], ascending=[True, False], ignore_index=True)


class CandidateLists(NamedTuple):
    """What each list says about the candidates, as arrays of one shape (a :func:`candidates` column each,
    or the sweep's dense ``(n_questions, width)`` layout): min-max scores ŝ (0 where absent) and ranks (0
    where absent)."""

    bm25: np.ndarray
    vector: np.ndarray
    bm25_rank: np.ndarray
    vector_rank: np.ndarray

    @classmethod
    def of(cls, union: pd.DataFrame) -> CandidateLists:
        """The columns of a :func:`candidates` frame."""
        return cls(*(union[c].to_numpy() for c in cls._fields))


def fused_scores(bm25_hat, vec_hat, beta):
    """(1 − β)·ŝ_vec + β·ŝ_BM25 (eq. 15); ``beta`` broadcasts against the normalised scores."""
    return (1.0 - beta) * vec_hat + beta * bm25_hat


def reciprocal_ranks(rank: np.ndarray, k: int) -> np.ndarray:
    """ρ = 1 / (k + rank) where rank ≥ 1, 0 where the rank is 0 (the chunk is absent from that list)."""
    rank = np.asarray(rank, dtype=np.float64)
    return np.divide(1.0, k + rank, out=np.zeros_like(rank), where=rank > 0)


@FUSION_SCORES.register("minmax")
def minmax_scores(lists: CandidateLists, beta, rrf_k: int = 60) -> np.ndarray:
    """The paper's eq. 15 (CombSUM of min-max scores weighted β, 1 − β); ``rrf_k`` is not used."""
    return fused_scores(lists.bm25, lists.vector, beta)


@FUSION_SCORES.register("rrf")
def rrf_scores(lists: CandidateLists, beta, rrf_k: int = 60) -> np.ndarray:
    """Weighted RRF: (1 − β)·ρ_vec + β·ρ_BM25 with ρ = 1 / (k + rank), 0 where absent."""
    return fused_scores(reciprocal_ranks(lists.bm25_rank, rrf_k), reciprocal_ranks(lists.vector_rank, rrf_k), beta)


@FUSION_SCORES.register("combmnz")
def combmnz_scores(lists: CandidateLists, beta, rrf_k: int = 60) -> np.ndarray:
    """Weighted CombMNZ of min-max scores: eq. 15 times the number of lists holding the chunk; ``rrf_k`` is
    not used."""
    holders = (np.asarray(lists.bm25_rank) > 0).astype(np.float64) + (np.asarray(lists.vector_rank) > 0)
    return fused_scores(lists.bm25, lists.vector, beta) * holders


def fuse(bm25: pd.DataFrame, vec: pd.DataFrame, beta: float, fusion: str = "minmax", rrf_k: int = 60) -> pd.DataFrame:
    """All of P(q) ranked by one fusion's score (:data:`FUSION_SCORES`) descending, ties by chunk ID descending.

    Parameters: ``bm25`` and ``vec`` are rankings (``question_id, chunk_id, rank, score``), β weights ``bm25``
    (the pairing's first retriever), ``fusion`` is ``minmax``, ``rrf`` or ``combmnz``, ``rrf_k`` the RRF offset.
    Returns: columns ``question_id, chunk_id, rank, score`` with ranks 1..|P(q)| per question.
    """
    beta = _validated_beta(beta)
    kernel = _kernel(fusion)
    rrf_k = _validated_rrf_k(rrf_k)
    union = candidates(bm25, vec)
    union["score"] = kernel(CandidateLists.of(union), beta, rrf_k)
    fused = union.sort_values(["question_id", "score", "chunk_id"], ascending=[True, False, False],
                              ignore_index=True, kind="stable")
    fused["rank"] = fused.groupby("question_id", sort=False).cumcount() + 1
    return fused.loc[:, list(RANKING_COLUMNS)]


def minmax_fuse(bm25: pd.DataFrame, vec: pd.DataFrame, beta: float) -> pd.DataFrame:
    """All of P(q) ranked by s_hybrid (eq. 15) descending, ties by chunk ID descending; columns
    ``question_id, chunk_id, rank, score`` with ranks 1..|P(q)| per question (:func:`fuse` with ``minmax``)."""
    return fuse(bm25, vec, beta, "minmax")


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


def _kernel(fusion):
    if not isinstance(fusion, str) or fusion not in FUSION_SCORES:
        raise ValueError(f"fusion must be one of {', '.join(FUSION_SCORES.names())}, got {fusion!r}")
    return FUSION_SCORES.get(fusion)


def _validated_rrf_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"rrf_k must be a positive integer, got {k!r}")
    return int(k)


def _require(ranking: pd.DataFrame, what: str) -> pd.DataFrame:
    require_columns(ranking, RANKING_COLUMNS, f"{what} ranking")
    if ranking["score"].isna().any():
        raise ValueError(f"{what} ranking has missing scores")
    return ranking
