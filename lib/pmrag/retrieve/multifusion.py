"""Fusion of k ≥ 2 retrievers' lists: §5.3's min-max linear hybrid (eq. 11–15) with one weight per retriever, and
weighted reciprocal rank fusion over many lists.

For a question q, each retriever r = 1..k contributes its top list P_r(q) with scores s_r and ranks r_r(q, d):

* P(q) = ∪_r P_r(q)                                                                  (eq. 11, k lists)
* ŝ_r(q, d) = (s_r(q, d) − m_r(q)) / (M_r(q) − m_r(q)) if d ∈ P_r(q) and M_r > m_r, else 0   (eq. 12–14, per r)

With weights w on the simplex (w_r ≥ 0, Σ_r w_r = 1), each fusion (:data:`MULTI_FUSIONS`, name → kernel) scores
every d ∈ P(q):

* ``minmax``:  s(q, d) = Σ_r w_r · ŝ_r(q, d)   — eq. 15 with k weights (k = 2, w = (β, 1 − β): eq. 15 itself);
  ranx ``wsum`` with ``norm="min-max"``, equal weights ranking as ranx ``sum`` (CombSUM).
* ``rrf``:     s(q, d) = Σ_r w_r / (c + r_r(q, d)) over the lists holding d (Cormack et al. 2009, weighted), c is
  ``hybrid.rrf_k``; equal weights rank as ranx ``rrf`` (which sums 1 / (c + rank) unweighted).

P(q) is ranked by s descending, ties broken by chunk ID descending (the paper's rule for eq. 15).
:func:`layout` lays P(q) out once as dense ``(k, n_questions, width)`` arrays so that a kernel scores any number of
weight vectors at once (:func:`scores`, ``(G, n_questions, width)``); :func:`fuse_many` builds one fused ranking
from the same arrays, so a sweep over weights and the fused run agree exactly.  :func:`simplex_grid` is the weights'
grid: every w with each w_r a multiple of ``step``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from pmrag.core.registry import Registry
from pmrag.retrieve.fusion import RANKING_COLUMNS, _require, _validated_rrf_k, minmax_normalize, reciprocal_ranks

MULTI_FUSIONS: Registry = Registry("multi-retriever fusion")   # name → kernel(lists, weights (G, k), rrf_k)


class Lists(NamedTuple):
    """P(q) of k lists laid out dense: ``hat`` ŝ_r and ``rank`` r_r ``(k, n_questions, width)`` (0 where d is not in
    P_r(q)); ``valid`` ``(n_questions, width)`` marks the slots holding a chunk; ``question_ids`` (sorted) and
    ``chunk_ids`` ``(n_questions, width)`` object (None in empty slots), chunk IDs descending along each row."""

    hat: np.ndarray
    rank: np.ndarray
    valid: np.ndarray
    question_ids: pd.Index
    chunk_ids: np.ndarray


def layout(rankings: Sequence[pd.DataFrame]) -> Lists:
    """The union P(q) of ``rankings`` (each ``question_id, chunk_id, rank, score``), one slot per chunk."""
    if len(rankings) < 2:
        raise ValueError(f"fusion needs at least two rankings, got {len(rankings)}")
    parts = []
    for r, ranking in enumerate(rankings):
        _require(ranking, f"ranking {r + 1}")
        parts.append(pd.DataFrame({"list": r, "question_id": ranking["question_id"].to_numpy(dtype=object),
                                   "chunk_id": ranking["chunk_id"].to_numpy(dtype=object),
                                   "hat": minmax_normalize(ranking).to_numpy(),
                                   "rank": ranking["rank"].to_numpy(dtype=np.int64)}))
    rows = pd.concat(parts, ignore_index=True)
    union = rows[["question_id", "chunk_id"]].drop_duplicates().sort_values(
        ["question_id", "chunk_id"], ascending=[True, False], ignore_index=True)
    questions = pd.Index(pd.unique(union["question_id"]), name="question_id")
    slot = union.groupby("question_id", sort=False).cumcount().to_numpy()
    row = questions.get_indexer(union["question_id"])
    width = int(slot.max()) + 1 if len(slot) else 1
    where = pd.MultiIndex.from_frame(union[["question_id", "chunk_id"]]).get_indexer(
        pd.MultiIndex.from_frame(rows[["question_id", "chunk_id"]]))
    shape = (len(rankings), len(questions), width)
    hat, rank = np.zeros(shape), np.zeros(shape, dtype=np.int64)
    lists = rows["list"].to_numpy()
    hat[lists, row[where], slot[where]] = rows["hat"].to_numpy()
    rank[lists, row[where], slot[where]] = rows["rank"].to_numpy()
    valid = np.zeros(shape[1:], dtype=bool)
    valid[row, slot] = True
    chunk_ids = np.full(shape[1:], None, dtype=object)
    chunk_ids[row, slot] = union["chunk_id"].to_numpy(dtype=object)
    return Lists(hat, rank, valid, questions, chunk_ids)


@MULTI_FUSIONS.register("minmax")
def minmax_kernel(lists: Lists, weights: np.ndarray, rrf_k: int = 60) -> np.ndarray:
    """Σ_r w_r ŝ_r for each row of ``weights`` ``(G, k)``: ``(G, n_questions, width)``; ``rrf_k`` is not used."""
    return np.tensordot(weights, lists.hat, axes=(1, 0))


@MULTI_FUSIONS.register("rrf")
def rrf_kernel(lists: Lists, weights: np.ndarray, rrf_k: int = 60) -> np.ndarray:
    """Σ_r w_r / (c + r_r) over the lists holding the chunk, for each row of ``weights`` ``(G, k)``."""
    return np.tensordot(weights, reciprocal_ranks(lists.rank, rrf_k), axes=(1, 0))


def scores(lists: Lists, weights, fusion: str = "minmax", rrf_k: int = 60) -> np.ndarray:
    """``(G, n_questions, width)`` fused scores of every row of ``weights`` (``(G, k)`` or one ``(k,)``), −inf in
    empty slots, so that a stable sort of −score along the last axis ranks by score ↓, chunk ID ↓."""
    weights = validated_weights(weights, lists.hat.shape[0])
    fused = _kernel(fusion)(lists, weights, _validated_rrf_k(rrf_k))
    return np.where(lists.valid, fused, -np.inf)


def fuse_many(rankings: Sequence[pd.DataFrame], weights, fusion: str = "minmax", rrf_k: int = 60) -> pd.DataFrame:
    """All of P(q) ranked by the ``fusion``'s score with ``weights`` (one per ranking, on the simplex), ties by
    chunk ID descending; columns ``question_id, chunk_id, rank, score`` with ranks 1..|P(q)| per question."""
    lists = layout(rankings)
    fused = scores(lists, np.atleast_2d(np.asarray(weights, dtype=np.float64)), fusion, rrf_k)[0]
    order = np.argsort(-fused, axis=1, kind="stable")
    ranked = np.take_along_axis(fused, order, axis=1)
    keep = np.isfinite(ranked)
    n_q, width = fused.shape
    return pd.DataFrame({
        "question_id": np.repeat(lists.question_ids.to_numpy(dtype=object), width)[keep.ravel()],
        "chunk_id": np.take_along_axis(lists.chunk_ids, order, axis=1)[keep],
        "rank": np.tile(np.arange(1, width + 1), n_q)[keep.ravel()],
        "score": ranked[keep],
    }).loc[:, list(RANKING_COLUMNS)]


def simplex_grid(k: int, step: float) -> np.ndarray:
    """Every weight vector of k retrievers whose weights are multiples of ``step`` and sum to 1: ``(G, k)`` with
    G = C(n + k − 1, k − 1), n = 1/step, ordered lexicographically from the first weight's largest value."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer ≥ 2, got {k!r}")
    n = round(1 / step) if step and step > 0 else 0
    if n < 1 or not math.isclose(n * step, 1.0, rel_tol=0, abs_tol=1e-9):
        raise ValueError(f"1/step must be a whole number, got step {step!r}")
    compositions = [(i,) for i in range(n, -1, -1)]
    for _ in range(k - 2):
        compositions = [(*c, i) for c in compositions for i in range(n - sum(c), -1, -1)]
    counts = np.array([(*c, n - sum(c)) for c in compositions], dtype=np.float64)
    return np.round(counts / n, 10)


def validated_weights(weights, k: int) -> np.ndarray:
    """``weights`` as ``(G, k)`` float64 rows on the simplex (non-negative, summing to 1 within 1e-9)."""
    array = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if array.ndim != 2 or array.shape[1] != k:
        raise ValueError(f"weights must give one weight per ranking ({k}), got shape {np.shape(weights)}")
    if not np.isfinite(array).all() or (array < 0).any() or not np.allclose(array.sum(axis=1), 1.0, rtol=0, atol=1e-9):
        raise ValueError("weights must be non-negative and sum to 1")
    return array


def _kernel(fusion):
    if not isinstance(fusion, str) or fusion not in MULTI_FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(MULTI_FUSIONS.names())}, got {fusion!r}")
    return MULTI_FUSIONS.get(fusion)
