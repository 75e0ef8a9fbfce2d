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
    """``(n_queries, n_chunks)`` cosine similarities (float32), eq. 10.

    Chunks with the same vector get the same score, bit for bit: a BLAS matrix product may sum a row differently
    by where it lies in its tiles (OpenBLAS's Haswell kernels gave 1,209 equal prefix vectors two distinct
    scores), which would turn a tie into an order that depends on the CPU.  Each distinct vector is scored once
    (a matrix without repeats is scored as it stands)."""
    queries = np.atleast_2d(query_vectors)
    chunk_vectors = np.asarray(chunk_vectors, dtype=np.float32)
    if queries.shape[1] != chunk_vectors.shape[1]:
        raise ValueError(f"query dimension {queries.shape[1]} does not match chunk dimension {chunk_vectors.shape[1]}")
    first, inverse = distinct_rows(chunk_vectors)
    if len(first) == len(chunk_vectors):
        return l2_normalise(queries) @ l2_normalise(chunk_vectors).T
    return (l2_normalise(queries) @ l2_normalise(chunk_vectors[first]).T)[:, inverse]


def distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: the index of each distinct row's first occurrence, in order of appearance, and for
    every row the position of its distinct row in ``first`` (rows equal byte for byte)."""
    rows = np.ascontiguousarray(matrix).reshape(len(matrix), -1)
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")          # the distinct rows in order of appearance
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    return first[order], position[inverse.ravel()]
