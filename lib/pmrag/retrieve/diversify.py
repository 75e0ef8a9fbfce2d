"""Maximal marginal relevance (§7.2: evidence spread over chunks; Carbonell & Goldstein 1998) over a base retriever: the top of the
ranking spread across conversation sources and dates, for questions whose evidence is distributed.

The retriever ``<representation>_mmr_<base>`` (``raw_text_mmr_vector``, ``summary_mmr_bm25``) ranks with the
registered base component ``<representation>_<base>`` (its own scoring and tie-breaks, reused as is: the
paper's regex tokenizer for bm25) to depth ``max(depth, pool)``, then re-orders the base's top ``pool``
chunks P greedily, S being the chunks picked so far:

    next = argmax_{d ∈ P \\ S}  λ · rel(d) − (1 − λ) · max_{s ∈ S} red(d, s)        (max over ∅ = 0)
    rel(d)    = (b(d) − min_P b) / (max_P b − min_P b)    (b: the base score; all equal → rel = 1)
    red(d, s) = (1 − w_t) · max(cos(e_d, e_s), 0) + w_t · [src(d) = src(s)] · exp(−|t_d − t_s| / τ)

λ = ``diversify.relevance_weight``, w_t = ``diversify.time_weight``, τ = ``diversify.time_scale_hours`` (hours),
pool = ``diversify.pool``; e the chunks' vectors of the same representation (``vectors:<representation>``,
whatever the base), t the chunk start time, src its conversation source (the ``chunks`` stage).  Choices the
issue leaves open:

* Sources: closeness in time counts only within one source.  Two chunks of the same hour in two
  conversations are two pieces of evidence (other people, other context); two of one conversation are mostly
  one (§3.2's windows even overlap).  So redundancy pushes a near chunk of the same conversation down and
  leaves another conversation of the same day, or another day, free: "across sources and dates" with no
  further parameter.  Content redundancy (the cosine) applies across sources alike.
* Ties of the MMR gain go to the chunk earlier in the base ranking (the paper's tie-breaks: score ↓, start
  time ↓, chunk ID ↓), so λ = 1 reproduces the base ranking exactly.
* The re-ordered pool comes first, then the rest of the base ranking in its order, cut to ``depth``.
* ``score``: the base ranking's scores stay by position — the chunk at rank r gets the r-th best base
  score.  The column is non-increasing in rank with the base's scale and spread, so a min-max hybrid over
  this retriever weights rank r as the base weights rank r; only which chunk holds that rank changes (with
  λ = 1 the rankings are the base's, scores included).  Chunks the base scores equally at two ranks stay
  tied in the column, so a fusion may order them by its own tie-breaks.
* ``matches`` is the base's (how many chunks it scored above 0).

Cost: one base ranking, then per question an O(pool²) redundancy matrix and pool greedy steps in NumPy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from pmrag.core.arrays import run_bounds
from pmrag.core.names import RetrieverId, StageKey
from pmrag.retrieve import expansion
from pmrag.retrieve.dense import l2_normalise
from pmrag.retrieve.ranking import as_time_ns
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import Corpus, Queries, Ranked, WrappingRetriever, vectors_of

BASE_METHODS = ("bm25", "vector", "session")
NS_PER_HOUR = 3_600_000_000_000


def pool_relevance(scores: np.ndarray) -> np.ndarray:
    """The base scores min-max scaled over the pool; all equal (or one) → 1."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) == 0:
        return scores
    low, high = scores.min(), scores.max()
    if high == low:
        return np.ones_like(scores)
    return (scores - low) / (high - low)


def redundancy_matrix(unit_vectors: np.ndarray, times_ns: np.ndarray, sources: np.ndarray, time_weight: float,
                      time_scale_hours: float) -> np.ndarray:
    """``red[i, j] = (1 − w_t)·max(cos, 0) + w_t·[same source]·exp(−|Δt| / τ)`` for the pool's chunks
    (``unit_vectors`` L2-normalised rows; ``times_ns`` int64 nanoseconds; ``sources`` comparable codes)."""
    vectors = np.asarray(unit_vectors, dtype=np.float64)
    content = np.maximum(vectors @ vectors.T, 0.0)
    times = np.asarray(times_ns, dtype=np.int64)
    hours = np.abs(times[:, None] - times[None, :]).astype(np.float64) / NS_PER_HOUR
    sources = np.asarray(sources)
    closeness = np.exp(-hours / time_scale_hours) * (sources[:, None] == sources[None, :])
    return (1 - time_weight) * content + time_weight * closeness


def mmr_order(relevance: np.ndarray, redundancy: np.ndarray, relevance_weight: float) -> np.ndarray:
    """Greedy MMR: positions of the pool in pick order (module docstring; ties to the lower position)."""
    relevance = np.asarray(relevance, dtype=np.float64)
    n = len(relevance)
    if np.shape(redundancy) != (n, n):
        raise ValueError(f"redundancy must be {n} × {n}, got shape {np.shape(redundancy)}")
    weighted = relevance_weight * relevance
    penalty = 1 - relevance_weight
    most_redundant = np.zeros(n)
    free = np.ones(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    for step in range(n):
        gain = np.where(free, weighted - penalty * most_redundant, -np.inf)
        pick = int(np.argmax(gain))
        order[step] = pick
        free[pick] = False
        np.maximum(most_redundant, redundancy[:, pick], out=most_redundant)
    return order


def diversify_rankings(base: pd.DataFrame, positions: np.ndarray, unit_vectors: np.ndarray, times_ns: np.ndarray,
                       sources: np.ndarray, section, depth: int) -> pd.DataFrame:
    """The base rankings with each question's top ``section.pool`` re-ordered by MMR, cut to ``depth``.

    Parameters
    ----------
    base : the base component's rankings (``question_id, chunk_id, rank, score``), one question's rows
        contiguous and in rank order.
    positions : the corpus row of each ranking row's chunk (indexes ``unit_vectors``, ``times_ns``, ``sources``).
    section : the ``diversify`` params section.

    Returns
    -------
    A ranking frame: the same questions, scores by position, chunks re-ordered (module docstring).
    """
    chunk_ids = base["chunk_id"].to_numpy(copy=True)
    positions = np.asarray(positions)
    bounds = run_bounds(base["question_id"].to_numpy())
    starts, ends = bounds[:-1], bounds[1:]
    scores = base["score"].to_numpy(dtype=np.float64)
    # one BLAS thread: OpenBLAS wakes its threads even for a pool × pool product, which cost 30× the product
    # itself on the 2-core reference machine (threadpoolctl: a dependency of scikit-learn)
    with threadpool_limits(limits=1, user_api="blas"):
        for start, end in zip(starts, ends):
            rows = np.arange(start, min(end, start + section.pool))
            if len(rows) < 2:
                continue
            pool = positions[rows]
            redundancy = redundancy_matrix(unit_vectors[pool], times_ns[pool], sources[pool], section.time_weight,
                                           section.time_scale_hours)
            order = mmr_order(pool_relevance(scores[rows]), redundancy, section.relevance_weight)
            chunk_ids[rows] = chunk_ids[rows[order]]
    out = base.assign(chunk_id=chunk_ids)
    return out[out["rank"].to_numpy() <= depth].reset_index(drop=True)


@RETRIEVERS.register("mmr")
class MMRRetriever(WrappingRetriever):
    """MMR re-ranking (module docstring) of the base retriever the variant names: ``raw_text_mmr_vector``."""

    method = "mmr"
    family = "distributed"
    base_methods = BASE_METHODS
    # every base's sections (bm25, vector, session), so a base's params change re-ranks (the stage reads
    # ``sections`` per class, not per retriever)
    sections = ("diversify", "bm25", "expansion")

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return tuple(dict.fromkeys((*super().needs(rid), vectors_of(rid.representation))))

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        section = self.params.diversify
        base = self.base().rank(corpus, queries, max(depth, section.pool))
        index = pd.Index(corpus.chunk_ids)
        if not index.is_unique:
            raise ValueError("mmr: the corpus repeats a chunk_id")
        positions = index.get_indexer(base.rankings["chunk_id"])
        sources = pd.factorize(expansion.chunk_attributes(corpus, ("source",))["source"])[0]
        rankings = diversify_rankings(base.rankings, positions, l2_normalise(corpus.vectors(self.rid.representation)),
                                      as_time_ns(corpus.start_times), sources, section, depth)
        return Ranked(rankings, base.matches)
