"""Dense retrieval (paper §5.2): cosine similarity by inner product of L2-normalised vectors.

s_vec(q, d) = e_q·e_d / (‖e_q‖ ‖e_d‖)   (eq. 10)

Every row of the chunk matrix and every query vector is L2-normalised, all chunks are scored by one
matrix product, and candidates are extracted with ``argpartition`` followed by a descending sort, as the
paper does.  Unlike the paper, equal scores get an explicit tie-break (the caller's ``rank`` function:
chunk start time descending, then chunk ID descending), so results never depend on NumPy's internal order.
"""

from __future__ import annotations

import numpy as np


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), in float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def cosine_scores(chunk_vectors: np.ndarray, query_vectors: np.ndarray) -> np.ndarray:
    """``(n_queries, n_chunks)`` cosine similarities (float32), eq. 10."""
    queries = np.atleast_2d(query_vectors)
    if queries.shape[1] != chunk_vectors.shape[1]:
        raise ValueError(f"query dimension {queries.shape[1]} does not match chunk dimension {chunk_vectors.shape[1]}")
    return l2_normalise(queries) @ l2_normalise(chunk_vectors).T
