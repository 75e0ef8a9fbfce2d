"""RM3 pseudo-relevance feedback over BM25 (§8.2: query expansion, over §9.1's tokenizers): ids
``<representation>_rm3[_<tokenizer>]``.

The variant names the tokenizer exactly as for ``bm25`` (none: the paper's regex; ``sudachi``, ``char2``,
``char3``, ``word``: :mod:`pmrag.retrieve.lexical`); params are the ``bm25`` section's, with m = ``prf_docs``,
k = ``prf_terms``, λ = ``prf_weight``.  For each question q, with ``c(t, q)`` its token counts over the
index's vocabulary and ``|q| = Σ_t c(t, q)``:

1. First pass: ``s(d) = BM25(q, d)`` (:mod:`pmrag.retrieve.bm25`).  The feedback set ``R`` is the top m
   documents in ranking order (score ↓, start time ↓, chunk ID ↓, :class:`~pmrag.retrieve.ranking.Ranker`),
   less those scoring 0 (they share no token with the question: no evidence).
2. Document weights, the first-pass score share: ``w(d) = s(d) / Σ_{d' ∈ R} s(d')`` — the raw-score weighting
   of Anserini's and Pyserini's RM3, not ``exp(s)``: BM25 scores are not log-likelihoods, and an exponential
   would hand almost all the mass to the top document.
3. Relevance model: ``P(t|R) = Σ_{d ∈ R} P(t|d) · w(d)`` with the unsmoothed ``P(t|d) = f(t, d) / |d|``
   (tokens after tokenization, as in BM25).  The k most probable terms are kept (ties: lower vocabulary index
   first) and renormalised to sum to 1; query terms compete like any other.  No stopword list beyond the
   tokenizer's own.
4. Expanded query: ``q'(t) = |q| · (λ · c(t, q)/|q| + (1 − λ) · P(t|R)) = λ · c(t, q) + (1 − λ) · |q| · P(t|R)``,
   i.e. RM3's interpolation ``λ·P(t|q) + (1 − λ)·P(t|R)`` scaled by ``|q|`` (a per-question constant: the
   ranking is unchanged) so that λ = 1 gives BM25's own scores bit for bit.
5. Second pass: ``score(d) = Σ_t q'(t) · W[t, d]`` with the same BM25 weight matrix (a weighted query row
   instead of counts), ranked with the paper's tie-breaks; ``bm25.zero_scores`` applies as for BM25.

A question with no token in the vocabulary, or whose top documents all score 0, keeps its first-pass
scores (all 0).  Everything is one sparse product per step over all questions; only picking each
question's top m documents and top k terms loops over questions.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pmrag.core.names import RetrieverId
from pmrag.core.params import BM25Section
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.ranking import Ranker
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import BM25Retriever, Corpus, Queries, Ranked, ranked_from_score_blocks


def feedback_weights(scores: np.ndarray, ranker: Ranker, n_docs: int) -> sp.csr_matrix:
    """``w(d)`` (questions × documents): each row's top ``n_docs`` documents scoring above 0, weighted by
    their share of those documents' total score; a row with none is empty."""
    rows, cols, data = [], [], []
    for row, row_scores in enumerate(scores):
        top = ranker.top(row_scores, n_docs)
        top = top[row_scores[top] > 0]
        if len(top):
            rows.append(np.full(len(top), row))
            cols.append(top)
            data.append(row_scores[top] / row_scores[top].sum())
    if not rows:
        return sp.csr_matrix(scores.shape, dtype=np.float64)
    return sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=scores.shape)


def term_given_doc(counts: sp.csr_matrix, doc_lengths: np.ndarray) -> sp.csr_matrix:
    """``P(t|d) = f(t, d) / |d|`` (terms × documents); an empty document's column is empty."""
    inverse = np.divide(1.0, doc_lengths, out=np.zeros(len(doc_lengths)), where=doc_lengths > 0)
    return sp.csr_matrix(counts @ sp.diags(inverse))


def top_terms(model: sp.csr_matrix, n_terms: int) -> sp.csr_matrix:
    """Each row's ``n_terms`` largest entries (ties: lower column first), renormalised to sum to 1."""
    model = sp.csr_matrix(model)
    model.eliminate_zeros()
    rows, cols, data = [], [], []
    for row in range(model.shape[0]):
        start, end = model.indptr[row], model.indptr[row + 1]
        terms, values = model.indices[start:end], model.data[start:end]
        keep = np.lexsort((terms, -values))[:n_terms]
        if len(keep):
            rows.append(np.full(len(keep), row))
            cols.append(terms[keep])
            data.append(values[keep] / values[keep].sum())
    if not rows:
        return sp.csr_matrix(model.shape, dtype=np.float64)
    return sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=model.shape)


def rm3_queries(index: BM25Index, query_counts: sp.csr_matrix, first_pass: np.ndarray, ranker: Ranker,
                params: BM25Section) -> sp.csr_matrix:
    """The expanded query rows ``λ·c(t, q) + (1 − λ)·|q|·P(t|R)`` (questions × terms; module docstring).

    Parameters
    ----------
    index : the BM25 index (its ``counts`` give ``f(t, d)``)
    query_counts : questions × terms token counts over the index's vocabulary
    first_pass : their BM25 scores, questions × documents
    ranker : the corpus's tie-break order
    params : ``prf_docs`` (m), ``prf_terms`` (k), ``prf_weight`` (λ)
    """
    if index.counts is None:
        raise ValueError("rm3 needs the index's term counts (fit it with BM25Index.fit or fit_counts)")
    query_counts = sp.csr_matrix(query_counts, dtype=np.float64)
    weights = feedback_weights(first_pass, ranker, params.prf_docs)
    relevance = weights @ term_given_doc(index.counts, index.doc_lengths).T
    expansion = top_terms(relevance, params.prf_terms)
    lengths = np.asarray(query_counts.sum(axis=1)).ravel()
    lam = float(params.prf_weight)
    expanded = sp.csr_matrix(lam * query_counts + (1.0 - lam) * (sp.diags(lengths) @ expansion))
    expanded.sum_duplicates()
    return expanded


@RETRIEVERS.register("rm3")
class RM3Retriever(BM25Retriever):
    """BM25 with RM3 pseudo-relevance feedback over one representation; the variant names the tokenizer."""

    method = "rm3"
    family = "lexical"

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        """The paper's regex BM25 of the same representation (whatever the variant's tokenizer: notebook 08
        compares every lexical method with the paper's tokenizer)."""
        return (RetrieverId(rid.representation, "bm25"),)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        section = self.params.bm25
        index, query_counts = self.index(corpus, queries)
        first_pass = index.scores_matrix(query_counts)
        ranker = Ranker(corpus.start_times, corpus.chunk_ids)
        expanded = rm3_queries(index, query_counts, first_pass, ranker, section)
        del first_pass
        return ranked_from_score_blocks(index.score_blocks(expanded), corpus, queries, depth,
                                        positive_only=section.zero_scores == "drop")

