"""Session-level expansion (§7.2: evidence spread over chunks): retrieve units of chunks — the store's sessions, or clusters of
similar chunks — and expand each to its chunks, so that evidence spread over one conversation rises together.

    score(q, d) = α · U(q, u(d)) + (1 − α) · cos(q, d),      U(q, u) = max_{d' ∈ u} cos(q, d')

``cos`` is the dense retriever's cosine of the question's vector and the chunk's vector of the named
representation (:func:`pmrag.retrieve.dense.cosine_scores`, eq. 10); ``u(d)`` is the unit holding chunk d;
α = ``expansion.session_weight``.  A unit's score is its best chunk's similarity ("retrieve the session"),
and every chunk of it inherits that score, weighted against its own similarity ("expand to its chunks"):
within a unit the chunks keep their own order, and a unit holding one strong chunk lifts its neighbours.
α = 0 is the vector retriever exactly (same scores, same ranking); α = 1 ranks whole units, their chunks
tied and ordered by the paper's tie-breaks (start time ↓, chunk ID ↓).  The ranking is
:func:`~pmrag.retrieve.retrievers.ranked_from_scores` of these scores, so ``score`` is the formula above and
``matches`` counts chunks scoring above 0.

Units (the variant):

* none — sessions (``raw_text_session``): the chunks sharing ``(source, session_index)``, i.e. one run of
  messages without a gap over ``chunking.session_gap`` in one conversation source (§3.2).
* ``cluster`` — clusters (``raw_text_session_cluster``): scikit-learn's
  ``AgglomerativeClustering(metric="cosine", linkage="average", distance_threshold=expansion.cluster_distance,
  n_clusters=None)`` over the representation's chunk vectors.  Choices the issue leaves open:

  - Clusters never cross a conversation source, and a source of n > :data:`MAX_CLUSTER_BLOCK` chunks is cut
    into ⌈n / MAX_CLUSTER_BLOCK⌉ consecutive blocks of near-equal size (in stored order: chronological), each
    clustered alone.  Average linkage keeps a condensed distance matrix (n²/2 float64, copied once by SciPy):
    at the paper's 18.5k chunks that is 2.7 GB in one piece, against 32 MB and ~0.7 s per block of 2,000 on
    the reference machine, so the cost grows linearly with the corpus (~10 s for 18.5k chunks,
    ``benchmarks/bench_distributed.py``).  A topic met again in the same source beyond its block (some 2,000
    chunks, i.e. tens of thousands of messages, later) starts a new cluster.
  - A chunk whose vector is all zeros (cosine undefined) is a cluster of its own; a block of one chunk too.
  - Deterministic: SciPy's linkage has no randomness and blocks follow the stored chunk order; unit numbers
    are the order of each unit's first chunk.

The chunks' ``source`` and ``session_index`` come from the ``chunk_table`` stage (``corpus.table``),
aligned to the corpus by ``chunk_id`` (:func:`chunk_attributes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from pmrag.core.arrays import run_bounds
from pmrag.core.names import RetrieverId, StageKey
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import (QUERY_VECTORS, Corpus, Queries, Ranked, RetrieverComponent, ranked_from_scores,
                                       vectors_of)

MAX_CLUSTER_BLOCK = 2000


def chunk_attributes(corpus: Corpus, columns: Sequence[str]) -> pd.DataFrame:
    """The chunks stage's ``columns`` for the corpus's chunks, in corpus order (aligned by ``chunk_id``)."""
    if corpus.table is None:
        raise ValueError("the corpus gives no chunk table; the chunks frame (source, session_index) is needed")
    chunks = corpus.table
    missing = [c for c in ("chunk_id", *columns) if c not in chunks.columns]
    if missing:
        raise ValueError(f"the chunks frame lacks column(s) {', '.join(missing)}")
    frame = chunks.set_index("chunk_id")[list(columns)]
    if not frame.index.is_unique:
        raise ValueError("the chunks frame repeats a chunk_id")
    positions = frame.index.get_indexer(corpus.chunk_ids)
    if (positions < 0).any():
        raise ValueError(f"{int((positions < 0).sum())} corpus chunk(s) are not in the chunks frame")
    return frame.iloc[positions].reset_index(drop=True)


def session_units(sources: Sequence, session_indices: Sequence) -> np.ndarray:
    """Unit number of each chunk: chunks sharing ``(source, session_index)`` share one; numbered in order of
    first appearance."""
    pairs = pd.MultiIndex.from_arrays([pd.Index(sources), pd.Index(session_indices)])
    return pd.factorize(pairs)[0].astype(np.int64)


def blocks(n: int, max_block: int = MAX_CLUSTER_BLOCK) -> list[np.ndarray]:
    """``range(n)`` cut into ``ceil(n / max_block)`` consecutive blocks of near-equal size."""
    if n == 0:
        return []
    return np.array_split(np.arange(n), -(-n // max_block))


def agglomerative_labels(vectors: np.ndarray, distance: float) -> np.ndarray:
    """scikit-learn's average-linkage cosine clustering cut at ``distance`` (one block; zero rows and a single
    row are singletons)."""
    from sklearn.cluster import AgglomerativeClustering

    vectors = np.asarray(vectors)
    labels = np.arange(len(vectors), dtype=np.int64)
    nonzero = np.flatnonzero(np.linalg.norm(vectors, axis=1) > 0)
    if len(nonzero) < 2:
        return labels
    model = AgglomerativeClustering(metric="cosine", linkage="average", distance_threshold=distance,
                                    n_clusters=None)
    found = model.fit_predict(vectors[nonzero])
    labels[nonzero] = len(vectors) + found        # cluster numbers apart from the singletons' row numbers
    return labels


def cluster_units(vectors: np.ndarray, sources: Sequence, distance: float,
                  max_block: int = MAX_CLUSTER_BLOCK) -> np.ndarray:
    """Unit number of each chunk: its agglomerative cluster within its source's block (module docstring),
    numbered in order of first appearance."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(vectors) != len(sources):
        raise ValueError(f"vectors must be (chunks × dimensions) for {len(sources)} chunks, got shape {vectors.shape}")
    if not 0 < distance <= 2:
        raise ValueError(f"expansion.cluster_distance must be in (0, 2], got {distance!r}")
    source_codes = pd.factorize(pd.Index(sources))[0]
    keys = np.empty((len(vectors), 3), dtype=np.int64)
    for code in np.unique(source_codes):
        rows = np.flatnonzero(source_codes == code)
        for number, block in enumerate(blocks(len(rows), max_block)):
            keys[rows[block], 0] = code
            keys[rows[block], 1] = number
            keys[rows[block], 2] = agglomerative_labels(vectors[rows[block]], distance)
    return pd.factorize(pd.MultiIndex.from_arrays(keys.T))[0].astype(np.int64)


def unit_max(scores: np.ndarray, units: np.ndarray) -> np.ndarray:
    """``U[q, d] = max_{d' in unit(d)} scores[q, d']`` for a ``(questions × chunks)`` matrix."""
    scores = np.asarray(scores)
    units = np.asarray(units)
    if scores.ndim != 2 or units.shape != (scores.shape[1],):
        raise ValueError(f"units must hold one entry per chunk ({scores.shape[-1]}), got shape {units.shape}")
    if scores.shape[1] == 0:
        return scores.copy()
    order = np.argsort(units, kind="stable")
    sorted_units = units[order]
    bounds = run_bounds(sorted_units)
    best = np.maximum.reduceat(scores[:, order], bounds[:-1], axis=1)
    slot = np.empty(len(units), dtype=np.int64)
    slot[order] = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    return best[:, slot]


def expansion_scores(similarity: np.ndarray, units: np.ndarray, session_weight: float) -> np.ndarray:
    """``α · U(q, unit(d)) + (1 − α) · cos(q, d)`` (module docstring) from the cosine matrix."""
    if not 0 <= session_weight <= 1:
        raise ValueError(f"expansion.session_weight must be in [0, 1], got {session_weight!r}")
    return session_weight * unit_max(similarity, units) + (1 - session_weight) * similarity


@RETRIEVERS.register("session")
class SessionRetriever(RetrieverComponent):
    """Session (or cluster) expansion of the dense retriever (module docstring): variant none = the store's
    sessions, ``cluster`` = agglomerative clusters of the representation's chunk vectors."""

    method = "session"
    family = "distributed"
    sections = ("expansion",)

    @classmethod
    def variants(cls) -> Iterable[str]:
        return ("", "cluster")

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        """The dense retriever it expands."""
        return (RetrieverId(rid.representation, "vector"),)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (vectors_of(rid.representation), QUERY_VECTORS)

    def units(self, corpus: Corpus, vectors: np.ndarray) -> np.ndarray:
        """The unit number of every corpus chunk (session, or cluster of ``vectors``: the variant)."""
        if self.rid.variant == "cluster":
            attributes = chunk_attributes(corpus, ("source",))
            return cluster_units(vectors, attributes["source"].to_numpy(), self.params.expansion.cluster_distance)
        attributes = chunk_attributes(corpus, ("source", "session_index"))
        return session_units(attributes["source"].to_numpy(), attributes["session_index"].to_numpy())

    @classmethod
    def reads_embedding_cut(cls, rid: RetrieverId) -> bool:
        return True

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        vectors = corpus.vectors(self.rid.representation)
        similarity = cosine_scores(vectors, queries.vectors())
        scores = expansion_scores(similarity, self.units(corpus, vectors), self.params.expansion.session_weight)
        return ranked_from_scores(scores, corpus, queries, depth)
