"""Multi-vector dense retrieval over a chunk's sub-windows (§9.1: what one embedding of a long text hides; beyond the paper).

Each chunk ``d`` of a representation has windows ``w_1 … w_m`` (:mod:`pmrag.represent.subwindows`: ``m ≥ 1``
line windows, one vector each).  With ``s_i = cos(q, w_i)`` (eq. 10 of §5.2 applied to a window):

* variant ``max`` (``raw_text_multivec_max``):   ``score(q, d) = max_i s_i``
* variant ``softmax`` (``raw_text_multivec_softmax``):
  ``score(q, d) = Σ_i softmax(s / τ)_i · s_i = Σ_i exp(s_i/τ) s_i / Σ_i exp(s_i/τ)``, ``τ =
  multivector.temperature``: the similarities' mean weighted towards the best windows.  It lies between the
  mean and the max of the ``s_i``, tends to the max as ``τ → 0`` and to the plain mean as ``τ → ∞``.  It is
  computed stably as ``Σ e_i s_i / Σ e_i`` with ``e_i = exp((s_i - max_j s_j)/τ)``.

A chunk with one window scores ``s_1`` under both variants, exactly (the same float): so when every text
has at most ``window_lines`` lines, ``multivec_*`` ranks exactly as ``vector`` on that representation.

Vectorised: one ``(questions × windows)`` cosine product (the windows' rows are kept at unit length by
:class:`~pmrag.represent.subwindows.SubVectors`, so only the questions are normalised per call), then
a per-chunk segment reduction over the window columns, which are grouped by chunk in chunk order
(``np.maximum.reduceat`` / ``np.add.reduceat`` at each chunk's first column).  Ranking and tie-breaks are
the shared ones (:func:`pmrag.retrieve.retrievers.ranked_from_scores`: score ↓, start time ↓, chunk ID ↓);
``matches`` counts chunks scoring above 0, as for ``vector``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pmrag.core.names import RetrieverId, StageKey
from pmrag.retrieve.dense import cosine_scores, l2_normalise
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import (QUERY_VECTORS, Corpus, Queries, Ranked, RetrieverComponent, ranked_from_scores,
                                       subvectors_of)

VARIANTS = ("max", "softmax")


def _check_segments(n_columns: int, starts: np.ndarray) -> np.ndarray:
    starts = np.asarray(starts, dtype=np.int64)
    if starts.ndim != 1 or not len(starts) or starts[0] != 0 or (np.diff(starts) < 1).any() or starts[-1] >= n_columns:
        raise ValueError(f"segment starts must begin at 0 and increase strictly below {n_columns} (no empty segment)")
    return starts


def segment_max(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``(rows × segments)``: each row's maximum over the columns ``starts[k] … starts[k+1] - 1``."""
    scores = np.atleast_2d(scores)
    return np.maximum.reduceat(scores, _check_segments(scores.shape[1], starts), axis=1)


def segment_softmax_mean(scores: np.ndarray, starts: np.ndarray, temperature: float) -> np.ndarray:
    """``(rows × segments)``: ``Σ softmax(s/τ)_i · s_i`` over each segment's columns (module docstring)."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"multivector.temperature must be a number > 0, got {temperature!r}")
    scores = np.atleast_2d(scores)
    starts = _check_segments(scores.shape[1], starts)
    best = np.maximum.reduceat(scores, starts, axis=1)
    counts = np.diff(np.append(starts, scores.shape[1]))
    weights = np.repeat(best, counts, axis=1)        # one (rows × windows) buffer, updated in place
    np.subtract(scores, weights, out=weights)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        np.divide(weights, temperature, out=weights)
        np.exp(weights, out=weights)
    return np.add.reduceat(weights * scores, starts, axis=1) / np.add.reduceat(weights, starts, axis=1)


def chunk_scores(similarity: np.ndarray, starts: np.ndarray, variant: str, temperature: float) -> np.ndarray:
    """``(questions × chunks)`` scores of one variant from the ``(questions × windows)`` similarities (columns
    grouped by chunk, chunk ``k``'s first column at ``starts[k]``)."""
    if variant not in VARIANTS:
        raise ValueError(f"multivec variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if variant == "max":
        return segment_max(similarity, starts)
    return segment_softmax_mean(similarity, starts, temperature)


def multivector_scores(window_vectors: np.ndarray, starts: np.ndarray, query_vectors: np.ndarray, variant: str,
                       temperature: float) -> np.ndarray:
    """``(questions × chunks)`` scores of one variant from the windows' vectors (any length; rows grouped by
    chunk, chunk ``k``'s first row at ``starts[k]``) and the questions' vectors: the functional form."""
    return chunk_scores(cosine_scores(window_vectors, query_vectors), starts, variant, temperature)


@RETRIEVERS.register("multivec")
class MultiVectorRetriever(RetrieverComponent):
    """The best (``max``) or softmax-weighted (``softmax``) similarity of the question and a chunk's line
    sub-windows in one representation (module docstring)."""

    method = "multivec"
    family = "dense"
    sections = ("multivector",)

    @classmethod
    def variants(cls) -> Iterable[str]:
        return VARIANTS

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        """The single-vector retriever of the same representation."""
        return (RetrieverId(rid.representation, "vector"),)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (subvectors_of(rid.representation), QUERY_VECTORS)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        representation = self.rid.representation
        sub = corpus.upstream(subvectors_of(representation))
        if sub.representation != representation or not np.array_equal(sub.chunk_ids, corpus.chunk_ids):
            raise RuntimeError(f"sub-window vectors of {representation} are not in chunk order; recompute the "
                               f"subvectors:{representation} stage")
        questions = l2_normalise(np.atleast_2d(queries.vectors()))
        if questions.shape[1] != sub.matrix.shape[1]:
            raise ValueError(f"query dimension {questions.shape[1]} does not match the sub-window vectors' "
                             f"{sub.matrix.shape[1]}")
        similarity = questions @ sub.matrix.T          # cosine: SubVectors keeps unit rows
        scores = chunk_scores(similarity, sub.starts, self.rid.variant, self.params.multivector.temperature)
        return ranked_from_scores(scores, corpus, queries, depth)
