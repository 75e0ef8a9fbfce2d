"""Ranking scores with the paper's explicit tie-breaks, for every retriever alike.

Order (§5.1: "Ties were broken by chunk start time in descending order"): descending score; ties by chunk
start time, descending; remaining ties by chunk ID, descending; fully equal keys (a repeated chunk ID) by
document index, descending, so the order is total and deterministic.

A ranking is a DataFrame ``question_id, chunk_id, rank, score`` holding the top ``depth`` chunks of every
question, which is also the order the TREC run files keep.  Chunks scoring 0 are ranked after every
positive one whenever ``depth`` exceeds the number of positive chunks, unless the caller keeps only some
chunks (``keep``: the BM25 ``zero_scores: drop`` reading).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")


def as_time_ns(start_times: np.ndarray) -> np.ndarray:
    """datetime64 (any unit) or integer nanoseconds → int64 nanoseconds; NaT is rejected."""
    times = np.asarray(start_times)
    if times.dtype.kind == "M":
        if np.isnat(times).any():
            raise ValueError("start_times contains NaT")
        return times.astype("datetime64[ns]").astype(np.int64)
    if times.dtype.kind in "iu":
        return times.astype(np.int64)
    raise TypeError(f"start_times must be datetime64 or integer nanoseconds, got dtype {times.dtype}")


class Ranker:
    """Ranks the documents of one corpus: score ↓, then start time ↓, chunk_id ↓, document index ↓.

    The tie-break order depends only on the corpus, so it is computed once (one ``np.lexsort``); each
    query then costs a partition: documents above the k-th score are all kept, and among the documents
    tied at it only the best ``k - n_above`` by tie-break rank are selected (``np.argpartition``) before
    the final small sort.  Queries with few terms tie thousands of documents at score 0, which a full sort
    of the tied group per query made the slowest step.
    """

    def __init__(self, start_times: np.ndarray, chunk_ids: np.ndarray):
        times = as_time_ns(start_times)
        chunk_ids = np.asarray(chunk_ids)
        if len(times) != len(chunk_ids):
            raise ValueError(f"start_times and chunk_ids differ in length: {len(times)}, {len(chunk_ids)}")
        n = len(times)
        best_first = np.lexsort((np.arange(n), chunk_ids, times))[::-1]
        self.tiebreak_rank = np.empty(n, dtype=np.int64)
        self.tiebreak_rank[best_first] = np.arange(n)

    def top(self, scores: np.ndarray, k: int) -> np.ndarray:
        """Indices of the top ``min(k, n)`` documents for one score vector, best first."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1:
            raise ValueError(f"scores must be 1-D, got shape {scores.shape}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if not np.isfinite(scores).all():
            raise ValueError("scores must be finite")
        if len(scores) != len(self.tiebreak_rank):
            raise ValueError(f"scores has {len(scores)} entries, the corpus {len(self.tiebreak_rank)} documents")
        k = min(int(k), len(scores))
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
        above = np.flatnonzero(scores > threshold)
        tied = np.flatnonzero(scores == threshold)
        wanted = k - len(above)
        if len(tied) > wanted:
            tied = tied[np.argpartition(self.tiebreak_rank[tied], wanted - 1)[:wanted]]
        pool = np.concatenate([above, tied])
        return pool[np.lexsort((self.tiebreak_rank[pool], -scores[pool]))]


    def top_of(self, scores: np.ndarray, subset: np.ndarray, k: int) -> np.ndarray:
        """Positions within ``subset`` (document indices) of its top ``min(k, len(subset))``, best first."""
        scores = np.asarray(scores, dtype=np.float64)[subset]
        if not np.isfinite(scores).all():
            raise ValueError("scores must be finite")
        order = np.lexsort((self.tiebreak_rank[subset], -scores))
        return order[:k]


def rank(scores: np.ndarray, start_times: np.ndarray, chunk_ids: np.ndarray, k: int) -> np.ndarray:
    """The top ``min(k, n)`` document indices: score ↓, then start time ↓, chunk_id ↓, document index ↓.

    One-off form of :class:`Ranker` (build a ``Ranker`` once to rank many queries over the same corpus).
    """
    scores = np.asarray(scores)
    if len(scores) != len(np.asarray(chunk_ids)) or len(scores) != len(np.asarray(start_times)):
        raise ValueError(
            f"scores, start_times and chunk_ids differ in length: {len(scores)}, {len(np.asarray(start_times))}, "
            f"{len(np.asarray(chunk_ids))}"
        )
    return Ranker(start_times, chunk_ids).top(scores, k)


def rankings_from_scores(scores: np.ndarray, question_ids: Sequence[str], chunk_ids: np.ndarray,
                         start_times: np.ndarray, depth: int, keep: np.ndarray | None = None) -> pd.DataFrame:
    """Top ``depth`` of each row of ``scores`` (questions × chunks) as a long ranking table.

    ``keep`` (questions × chunks, bool) leaves the chunks it marks False out of a question's list, which may
    then be shorter than ``depth`` (or empty).
    """
    chunk_ids = np.asarray(chunk_ids)
    ranker = Ranker(start_times, chunk_ids)
    frames = []
    for row, question_id in enumerate(question_ids):
        if keep is None:
            top = ranker.top(scores[row], depth)
        else:
            kept = np.flatnonzero(keep[row])
            top = kept[ranker.top_of(scores[row], kept, depth)] if len(kept) else kept
        frames.append(pd.DataFrame({
            "question_id": question_id, "chunk_id": chunk_ids[top],
            "rank": np.arange(1, len(top) + 1), "score": scores[row, top].astype(np.float64),
        }))
    if not frames:
        return pd.DataFrame({"question_id": pd.Series(dtype=object), "chunk_id": pd.Series(dtype=object),
                             "rank": pd.Series(dtype=np.int64), "score": pd.Series(dtype=np.float64)})
    return pd.concat(frames, ignore_index=True)
