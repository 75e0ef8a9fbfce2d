"""Query decomposition: a question becomes several concrete sub-queries whose rankings are fused (retriever ``decomp``).

The paper suggests, beyond its retrievers, query expansion and decomposition (Query2doc; splitting a question
into concrete sub-queries).  This module is that suggestion, not the paper's method.  For a question q with
sub-queries s₁ … s_m (m ≤ ``decomposition.max_subqueries``):

* **Lists**: L₀ = the base retriever's top-``depth`` list for q itself, Lⱼ = its top-``depth`` list for sⱼ, each
  exactly as the base would rank that text alone (:mod:`pmrag.retrieve.ranking`: score ↓, chunk start time ↓,
  chunk id ↓; ``retrieval.depth`` long; for ``bm25`` the ``bm25.zero_scores`` rule: ``drop`` lists only
  chunks sharing a token with the text, ``pad`` fills the list with 0-scoring chunks in tie-break order).
  Bases (the variant): ``vector``, cosine of the text's query vector and each chunk's vector of the
  representation (§5.2, ``embedding_text_decomp_vector``); ``bm25``, Okapi BM25 with ``params.bm25`` and the
  paper's regex tokenizer, scored by the ``bm25`` component itself (§5.1, ``raw_text_decomp_bm25``).
* **Fusion** (reciprocal rank fusion, Cormack et al. 2009): s(q, d) = Σ_{j=0..m, d ∈ Lⱼ} 1 / (k + rankⱼ(d)),
  k = ``decomposition.rrf_k``; the question's own list L₀ counts like any other.  A chunk in no list scores 0.
  Each chunk's terms are added in rank order (all rank-1 terms first), so two chunks holding the same ranks
  in different lists get bit-identical sums and meet the tie-breaks instead of rounding noise.
* **Ranking**: s ↓, then the paper's chunk start time ↓, chunk id ↓ (:func:`~pmrag.retrieve.ranking.
  rankings_from_scores`), top ``depth``: the scores are non-increasing down each list.  Chunks scoring 0
  follow in tie-break order (``bm25`` under ``zero_scores: drop``: left out, as the base leaves them).  A
  question without sub-queries is ranked by L₀ alone, in the base's order.  ``matches``: chunks with a
  positive base score for q or any sⱼ.

Sub-queries come from the ``decomposition`` stage (:mod:`pmrag.retrieve.subqueries`: the offline stand-in or
the LLM, each sub-query embedded as a query), one :class:`~pmrag.retrieve.subqueries.SubQueries` that both
variants read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from pmrag.core.names import RetrieverId, StageKey
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.ranking import Ranker, rankings_from_scores
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import SUB_QUERIES, Corpus, Queries, Ranked, WrappingRetriever
from pmrag.retrieve.subqueries import SubQueries

BASES = ("vector", "bm25")     # the variants: the base retriever methods, each with its own default variant


# --------------------------------------------------------------------------------------------- fusion

def rrf_scores(scores: np.ndarray, owner: np.ndarray, n_questions: int, ranker: Ranker, depth: int, k: int,
               keep: np.ndarray | None = None) -> np.ndarray:
    """s(q, d) = Σ_j 1 / (k + rank_j(d)) over the lists of question q (module docstring), ``(n_questions × n)``.

    ``scores`` (lists × chunks) holds one base score row per list, ``owner[j]`` the question (row of the
    result) list j belongs to; list j is ``ranker``'s top ``depth`` of row j (among the chunks ``keep[j]`` marks,
    when given).  Terms are added rank by rank, so equal rank multisets give bit-identical sums."""
    scores = np.asarray(scores)
    owner = np.asarray(owner, dtype=np.int64)
    if scores.ndim != 2 or len(owner) != len(scores):
        raise ValueError(f"scores must be lists × chunks with one owner per list, got {scores.shape} and "
                         f"{len(owner)} owners")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"rrf k must be a positive integer, got {k!r}")
    if len(owner) and (owner.min() < 0 or owner.max() >= n_questions):
        raise ValueError(f"owner must index the {n_questions} questions")
    width = min(int(depth), scores.shape[1])
    tops = np.full((len(scores), width), -1, dtype=np.int64)
    for row in range(len(scores)):
        if keep is None:
            top = ranker.top(scores[row], width) if width else np.zeros(0, dtype=np.int64)
        else:
            kept = np.flatnonzero(keep[row])
            top = kept[ranker.top_of(scores[row], kept, width)] if len(kept) else kept
        tops[row, :len(top)] = top
    fused = np.zeros((n_questions, scores.shape[1]), dtype=np.float64)
    for position in range(width):
        listed = tops[:, position] >= 0
        np.add.at(fused, (owner[listed], tops[listed, position]), 1.0 / (k + position + 1))
    return fused


def positive_union(scores: np.ndarray, owner: np.ndarray, n_questions: int) -> np.ndarray:
    """For each question, how many chunks score above 0 in at least one of its lists."""
    hits = np.zeros((n_questions, scores.shape[1]), dtype=bool)
    for row in range(len(scores)):
        hits[owner[row]] |= scores[row] > 0
    return hits.sum(axis=1)


@RETRIEVERS.register("decomp")
class DecompRetriever(WrappingRetriever):
    """The question's and its sub-queries' base rankings fused by RRF (module docstring); the variant names the
    base (``vector``: ``embedding_text_decomp_vector``; ``bm25``: ``raw_text_decomp_bm25``, scored by the
    paper's ``bm25`` component itself, the regex tokenizer)."""

    method = "decomp"
    family = "distributed"
    base_methods = BASES
    sections = ("decomposition.rrf_k", "bm25")

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (SUB_QUERIES, *super().needs(rid))

    def base_scores(self, corpus: Corpus, question_ids: Sequence[str], texts: Sequence[str],
                    vectors: Callable[[], np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """``(scores, keep)``: the base's score of every chunk for each text (texts × chunks), and for ``bm25``
        under ``zero_scores: drop`` the chunks its lists may hold (``None``: any)."""
        base = self.base_id(self.rid)
        if base.method == "vector":
            return cosine_scores(corpus.vectors(base.representation), vectors()), None
        index, counts = self.base().index(corpus, Queries(list(question_ids), list(texts), vectors))
        scores = index.scores_matrix(counts)
        return scores, (scores > 0 if self.params.bm25.zero_scores == "drop" else None)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        found: SubQueries = corpus.upstream(SUB_QUERIES)
        texts, owner, rows = found.rows_for(queries.question_ids)
        n = len(queries.question_ids)
        owner = np.concatenate([np.arange(n, dtype=np.int64), owner])

        def vectors() -> np.ndarray:
            questions = queries.vectors()
            return np.vstack([questions, found.matrix[rows]]) if len(rows) else questions

        list_ids = [*queries.question_ids, *(f"{queries.question_ids[o]}/{i}" for i, o in enumerate(owner[n:]))]
        scores, keep = self.base_scores(corpus, list_ids, [*queries.texts, *texts], vectors)
        ranker = Ranker(corpus.start_times, corpus.chunk_ids)
        fused = rrf_scores(scores, owner, n, ranker, depth, self.params.decomposition.rrf_k, keep)
        rankings = rankings_from_scores(fused, queries.question_ids, corpus.chunk_ids, corpus.start_times, depth,
                                        fused > 0 if keep is not None else None)
        matches = pd.Series(positive_union(scores, owner, n), index=pd.Index(queries.question_ids, name="question_id"),
                            name="matches")
        return Ranked(rankings, matches)
