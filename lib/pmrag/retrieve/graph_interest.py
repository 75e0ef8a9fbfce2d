"""TOBUGraph retrieval (paper 002 §2.4): choose the interests relevant to a question, f(q, I) → I′, then
traverse to every memory they connect, g(I′, G′) → M′.

The paper asks an LLM to pick the relevant interests from their list (``graph.relevance: openai``,
:mod:`pmrag.retrieve.graph_relevance_llm`, which turns the model's ordered choice into r(q, i)).  The offline
reading (:func:`offline_relevance`, the default) scores every interest i against a question q:

* lexical part ℓ(q, i): Okapi BM25 (the study's ``bm25.k1``, ``bm25.b``) of the question's terms over the
  interest's document (its label and merged forms, one token each).  The question's terms are found by the
  offline extractor's own rules (SudachiPy nouns under their normalised form for a Japanese line, the English
  word rules otherwise), so a question says カフェ where a memory said かふぇ exactly as the graph does.
* embedding part e(q, i): cosine of the question's vector and the interest label's vector.
* relevance r(q, i) = w · ℓ(q, i) / max_j ℓ(q, j) + (1 − w) · clip((e(q, i) − f) / (1 − f), 0, 1),
  w = ``graph.lexical_weight``, f = ``graph.cosine_floor``; a lexical part whose maximum is 0 for the question
  contributes 0.  The embedding part is on an absolute scale (a calibrated cosine, not scaled per question), so
  a question that shares no term with any interest and whose cosines all sit at or below f scores 0 everywhere
  and reaches nothing: the graph can abstain (002's "no memory" rather than a wrong one).
* I′(q): the interests with r ≥ ``threshold`` and r > 0, the ``cap`` most relevant of them (ties: the more
  shared interest first, the graph's interest order).

M′(q) is every memory linked to an interest of I′(q): a set, the paper's view (:func:`reached_sets`).  For the
rank metrics and the hybrid machinery the same choice is also a ranking of every memory
(:func:`graph_rankings`), in lexicographic order of

1. the graph score W(q, m) = Σ_{i ∈ I′(q), i ~ m} r(q, i) (how many chosen interests the memory touches,
   weighted by their relevance), descending;
2. the memory's own similarity to the question (the cosine of the retriever's representation), descending;
3. the paper's tie-breaks (:class:`pmrag.retrieve.ranking.Ranker`: start time, chunk id, both descending).

A ranking's ``score`` is W: memories the graph does not reach score 0 and follow in similarity order, so the
min-max fusion sees the graph's evidence alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pmrag.core.params import BM25Section
from pmrag.represent.graph import MemoryGraph
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.ranking import Ranker


@dataclass(frozen=True)
class InterestIndex:
    """The interests of a graph against a corpus: node ids and labels in the graph's order and the membership
    matrix (interests × memories, 1 where an interest is linked to a memory, memories in ``memory_ids`` order)."""

    interest_ids: tuple[str, ...]
    labels: tuple[str, ...]
    memory_ids: tuple[str, ...]
    membership: sp.csr_matrix

    @classmethod
    def from_graph(cls, graph: MemoryGraph, memory_ids: Sequence[str]) -> InterestIndex:
        """A memory of the graph missing from ``memory_ids`` is a ``ValueError`` (the ranking would silently
        lose it)."""
        interests = graph.of_kind("interest")
        column = {memory_id: j for j, memory_id in enumerate(memory_ids)}
        rows, cols = [], []
        for i, interest in enumerate(interests):
            for memory_id in graph.memories_of(interest.node_id):
                if memory_id not in column:
                    raise ValueError(f"interest {interest.label!r} links memory {memory_id!r}, which is not in the corpus")
                rows.append(i)
                cols.append(column[memory_id])
        membership = sp.csr_matrix((np.ones(len(rows), dtype=np.float64), (rows, cols)),
                                   shape=(len(interests), len(memory_ids)))
        return cls(tuple(n.node_id for n in interests), tuple(n.label for n in interests), tuple(memory_ids),
                   membership)


@dataclass(frozen=True)
class InterestRelevance:
    """The study's f(q, I): r(q, i) for every evaluable question (``question_ids``, rows) × interest (the
    graph's order), from ``method`` (``offline`` scoring or an LLM's choice, ``openai``)."""

    question_ids: tuple[str, ...]
    matrix: np.ndarray
    method: str

    def rows(self, question_ids: Sequence[str]) -> np.ndarray:
        """The rows of ``question_ids``, in that order (a question without one is a ``KeyError``)."""
        position = {q: i for i, q in enumerate(self.question_ids)}
        return self.matrix[[position[q] for q in question_ids]]


def relevance_of(question_ids: Sequence[str], texts: Sequence[str], built, query_vectors: np.ndarray,
                       section, bm25: BM25Section | None, *, llm=None, prompts: str = "ja", engine=None,
                       allow_remote: bool = False, proxy: str | None = None, progress: bool = False) -> InterestRelevance:
    """f(q, I) of every question × interest of the study's graph (``built``: a
    :class:`~pmrag.represent.graph.BuiltGraph`) by ``section.relevance``: offline scoring
    (:func:`offline_relevance`, with ``query_vectors`` in ``question_ids`` order) or the model's choice
    (:func:`pmrag.retrieve.graph_relevance_llm.llm_interest_relevance`, its report line on stderr; ``llm`` is the
    summarizer section, ``engine`` the study store)."""
    if section.relevance == "openai":
        import sys

        from pmrag.retrieve.graph_relevance_llm import llm_interest_relevance

        labels = [node.label for node in built.graph.of_kind("interest")]
        result = llm_interest_relevance(list(question_ids), list(texts), labels, llm=llm, prompts=prompts,
                                        engine=engine, allow_remote=allow_remote, proxy=proxy, progress=progress)
        print(result.reports.line(), file=sys.stderr)
        matrix = result.matrix
    else:
        matrix = offline_relevance(built.graph, built.interest_vectors, texts, query_vectors, bm25,
                                   section.lexical_weight, section.split_mode, section.cosine_floor)
    return InterestRelevance(tuple(question_ids), matrix, section.relevance)


def offline_relevance(graph: MemoryGraph, interest_vectors: np.ndarray, question_texts: Sequence[str],
                      query_vectors: np.ndarray, bm25: BM25Section | None, lexical_weight: float,
                      split_mode: str = "C", cosine_floor: float = 0.8) -> np.ndarray:
    """r(q, i) of every question × interest of ``graph`` (module docstring), the offline f(q, I)."""
    interests = graph.of_kind("interest")
    if len(interest_vectors) != len(interests):
        raise ValueError(f"{len(interest_vectors)} interest vectors for {len(interests)} interests")
    if not interests:
        return np.zeros((len(question_texts), 0))
    documents = [list(dict.fromkeys((n.label, *n.aliases))) for n in interests]
    lexical = BM25Index.fit(documents, bm25).scores_many(question_terms(question_texts, split_mode))
    cosine = cosine_scores(np.asarray(interest_vectors, dtype=np.float32), query_vectors)
    return interest_relevance(lexical, cosine, lexical_weight, cosine_floor)


def question_terms(texts: Sequence[str], split_mode: str = "C") -> list[list[str]]:
    """Each question's term labels by the offline extractor's rules (module docstring), in order of
    appearance, each once."""
    from pmrag.represent.extract import JapaneseTerms, english_terms, is_japanese

    japanese = None
    out = []
    for text in texts:
        if is_japanese(text):
            japanese = japanese or JapaneseTerms(split_mode)
            found = japanese(text)
        else:
            found = english_terms(text)
        out.append(list(dict.fromkeys(label for _, label in found)))
    return out


def _scaled_by_max(scores: np.ndarray) -> np.ndarray:
    top = scores.max(axis=1, keepdims=True) if scores.shape[1] else np.zeros((len(scores), 1))
    return np.divide(scores, top, out=np.zeros_like(scores, dtype=np.float64), where=top > 0)


def calibrated_cosine(cosine: np.ndarray, floor: float) -> np.ndarray:
    """clip((e − floor) / (1 − floor), 0, 1): a cosine on an absolute scale, 0 at or below ``floor``."""
    if not 0 <= floor < 1:
        raise ValueError(f"cosine_floor must be in [0, 1), got {floor!r}")
    return np.clip((np.asarray(cosine, dtype=np.float64) - floor) / (1 - floor), 0.0, 1.0)


def interest_relevance(lexical: np.ndarray, cosine: np.ndarray, lexical_weight: float,
                       cosine_floor: float = 0.8) -> np.ndarray:
    """r(q, i) = w·ℓ/max ℓ + (1 − w)·calibrated cosine (module docstring); questions × interests in [0, 1]."""
    lexical = np.asarray(lexical, dtype=np.float64)
    cosine = np.asarray(cosine, dtype=np.float64)
    if lexical.shape != cosine.shape:
        raise ValueError(f"lexical and cosine scores differ in shape: {lexical.shape}, {cosine.shape}")
    if not 0 <= lexical_weight <= 1:
        raise ValueError(f"lexical_weight must be in [0, 1], got {lexical_weight!r}")
    return lexical_weight * _scaled_by_max(lexical) + (1 - lexical_weight) * calibrated_cosine(cosine, cosine_floor)


def choose_interests(relevance: np.ndarray, threshold: float, cap: int) -> np.ndarray:
    """I′ as a boolean questions × interests matrix: r ≥ ``threshold`` and r > 0, at most ``cap`` per question,
    the most relevant first (ties: the earlier interest in the graph's order, i.e. the more shared)."""
    relevance = np.asarray(relevance, dtype=np.float64)
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ValueError(f"cap must be a positive integer, got {cap!r}")
    eligible = (relevance >= threshold) & (relevance > 0)
    chosen = np.zeros_like(eligible)
    for row in np.flatnonzero(eligible.any(axis=1)):
        candidates = np.flatnonzero(eligible[row])
        order = np.lexsort((candidates, -relevance[row, candidates]))[:cap]
        chosen[row, candidates[order]] = True
    return chosen


def graph_scores(chosen: np.ndarray, relevance: np.ndarray, membership: sp.csr_matrix) -> np.ndarray:
    """W(q, m) = Σ_{i ∈ I′(q), i ~ m} r(q, i): questions × memories."""
    weights = np.where(chosen, np.asarray(relevance, dtype=np.float64), 0.0)
    return np.asarray(membership.T @ weights.T).T


def reached(chosen: np.ndarray, membership: sp.csr_matrix) -> np.ndarray:
    """M′ as a boolean questions × memories matrix: linked to at least one chosen interest."""
    return np.asarray(membership.T @ np.asarray(chosen, dtype=np.float64).T).T > 0


def reached_sets(reach: np.ndarray, question_ids: Sequence[str], memory_ids: Sequence[str],
                 retriever: str) -> pd.DataFrame:
    """M′ as set rows ``retriever, question_id, chunk_id`` (memories in corpus order; a question reaching
    nothing has no row, an empty set)."""
    rows, cols = np.nonzero(reach)
    memory_ids = np.asarray(memory_ids, dtype=object)
    return pd.DataFrame({"retriever": retriever, "question_id": np.asarray(question_ids, dtype=object)[rows],
                         "chunk_id": memory_ids[cols]})


def graph_rankings(weights: np.ndarray, similarity: np.ndarray, question_ids: Sequence[str],
                   chunk_ids: np.ndarray, start_times: np.ndarray, depth: int) -> pd.DataFrame:
    """Rankings ``question_id, chunk_id, rank, score`` in the lexicographic order of the module docstring:
    W ↓, own similarity ↓, then the paper's tie-breaks; ``score`` is W."""
    if weights.shape != similarity.shape:
        raise ValueError(f"graph scores and similarities differ in shape: {weights.shape}, {similarity.shape}")
    chunk_ids = np.asarray(chunk_ids)
    tiebreak = Ranker(start_times, chunk_ids).tiebreak_rank
    frames = []
    for row, question_id in enumerate(question_ids):
        top = np.lexsort((tiebreak, -similarity[row], -weights[row]))[:depth]
        frames.append(pd.DataFrame({"question_id": question_id, "chunk_id": chunk_ids[top],
                                    "rank": np.arange(1, len(top) + 1), "score": weights[row, top]}))
    if not frames:
        return pd.DataFrame({"question_id": pd.Series(dtype=object), "chunk_id": pd.Series(dtype=object),
                             "rank": pd.Series(dtype=np.int64), "score": pd.Series(dtype=np.float64)})
    return pd.concat(frames, ignore_index=True)
