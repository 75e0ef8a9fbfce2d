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

from collections.abc import Iterable, Sequence

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


SAMPLE_PER_K = 8
BLOCK_VALUES = 262_144
"""Scores per block of rows in :meth:`Ranker.top_many` and :meth:`pmrag.retrieve.bm25.BM25Index.score_blocks`: 2 MiB,
in the CPU's cache from its sums to its top k (the whole matrix is not: 100 queries over 22,329 chunks are 18 MB).
Each block also costs a fixed ~40 µs of calls (its bounds, its finiteness check, its query terms), so blocks of
11 rows at the paper's size ranked 100 queries about 10% faster than blocks of 2 rows (512 KiB, one core's L2 cache
here) in ``benchmarks/bench_bm25s.py``."""


def lower_bounds_of_kth(scores: np.ndarray, k: int) -> np.ndarray:
    """For each row of ``scores`` (2-D, ``1 ≤ k ≤`` its width), a value at most its k-th largest score.

    The k-th largest of any ``k`` or more of a row's scores is at most the k-th largest of all of them; an
    evenly spaced sample of about ``SAMPLE_PER_K · k`` makes it a close bound, so that about ``n / SAMPLE_PER_K``
    scores lie above it, whatever their order (exact when the sample is the whole row)."""
    return kth_bounds(scores, k)[0]


def kth_bounds(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``scores`` (2-D, ``1 ≤ k ≤`` its width): :func:`lower_bounds_of_kth`, and a higher value
    that is *likely* below the k-th largest score.

    In the sample of ``m`` of the row's ``n`` scores, about ``k · m / n`` lie above the row's k-th largest; the
    likely bound is the sample's ``j``-th largest for ``j = 2·⌈k·m/n⌉ + 8`` (at most ``k``), so about
    ``j · n / m`` scores lie above it (≈ 520 of 22,329 for k = 200, against ≈ 2,600 above the sure bound).  It is
    only a guess: :func:`top_k_candidates` counts the scores above it and falls back to the sure bound when fewer than
    ``k`` are."""
    n = scores.shape[1]
    sample = scores[:, :: max(n // (SAMPLE_PER_K * k), 1)]
    m = sample.shape[1]
    head = np.partition(sample, m - k, axis=1)[:, m - k:]   # the sample's k largest, the k-th first
    j = min(k, 2 * -(-k * m // n) + 8)
    likely = head[:, 0] if j == k else np.partition(head, k - j, axis=1)[:, k - j]
    return head[:, 0], likely


def top_k_candidates(scores: np.ndarray, k: int, bound: float, likely: float | None = None
                     ) -> tuple[np.ndarray, float]:
    """Indices of the scores at least the k-th largest (``1 ≤ k ≤ n``), in no order, and that k-th largest, given
    a ``bound`` at most the k-th largest (:func:`lower_bounds_of_kth`) and optionally a ``likely`` one
    (:func:`kth_bounds`).  They are ``k`` unless scores tie at the k-th largest, which brings in all of the tied.

    Only the scores above a bound are partitioned.  When ``k`` or more lie above ``likely``, the k-th largest is
    above it too, with every score tied at it, so those few are partitioned; otherwise the ones above ``bound``.
    When fewer than ``k`` are above ``bound``, it is the k-th largest itself: the case of the thousands of
    documents tied at 0 for a rare query, which never reach ``np.partition`` (slow on many equal values)."""
    pool, kth = _candidates(scores, k, bound, likely)
    return ((scores >= bound).nonzero()[0], bound) if kth is None else (pool, kth)


def _candidates(scores: np.ndarray, k: int, bound: float, likely: float | None) -> tuple[np.ndarray, float | None]:
    """:func:`top_k_candidates`, except where fewer than ``k`` score above ``bound``: then ``(those above it, None)``,
    the k-th largest being ``bound`` itself and the documents tied at it not listed."""
    if likely is not None and likely > bound:
        above_likely = (scores > likely).nonzero()[0]   # a 1-D row: flatnonzero's ravel would be a call more
        if len(above_likely) >= k:
            return _at_least_kth(scores, k, above_likely)
    above_bound = (scores > bound).nonzero()[0]
    if len(above_bound) < k:
        return above_bound, None
    return _at_least_kth(scores, k, above_bound)


def _at_least_kth(scores: np.ndarray, k: int, pool_index: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`top_k_candidates` when ``pool_index`` holds ``k`` or more documents, every one scoring at least the
    k-th largest among them included."""
    pool = scores[pool_index]
    kth = np.partition(pool, len(pool) - k)[len(pool) - k]
    return pool_index[pool >= kth], kth


def split_at_kth(scores: np.ndarray, k: int, bound: float, likely: float | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the scores above the k-th largest (``1 ≤ k ≤ n``), and of those equal to it
    (:func:`top_k_candidates`, the same arguments)."""
    return _split(scores, *top_k_candidates(scores, k, bound, likely))


def _split(scores: np.ndarray, candidates: np.ndarray, kth: float) -> tuple[np.ndarray, np.ndarray]:
    """``candidates`` (indices) scoring above ``kth``, and those scoring ``kth``."""
    values = scores[candidates]
    return candidates[values > kth], candidates[values == kth]


class Ranker:
    """Ranks the documents of one corpus: score ↓, then start time ↓, chunk_id ↓, document index ↓.

    The tie-break order depends only on the corpus, so it is computed once (one ``np.lexsort``); each
    query then costs a partition of a few candidates (:func:`top_k_candidates`): documents above the k-th
    score are all kept, and when more than ``k`` reach it, only the best ``k - n_above`` of those tied at it by
    tie-break rank are selected (:meth:`first_in_tiebreak_order`) before the final small sort.  Queries with few
    terms tie thousands of documents at score 0, which a full sort of the tied group per query made the slowest
    step.
    """

    def __init__(self, start_times: np.ndarray, chunk_ids: np.ndarray):
        times = as_time_ns(start_times)
        chunk_ids = np.asarray(chunk_ids)
        if len(times) != len(chunk_ids):
            raise ValueError(f"start_times and chunk_ids differ in length: {len(times)}, {len(chunk_ids)}")
        n = len(times)
        self.best_first = np.ascontiguousarray(np.lexsort((np.arange(n), chunk_ids, times))[::-1])
        self.tiebreak_rank = np.empty(n, dtype=np.int64)
        self.tiebreak_rank[self.best_first] = np.arange(n)

    def top(self, scores: np.ndarray, k: int) -> np.ndarray:
        """Indices of the top ``min(k, n)`` documents for one score vector, best first."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1:
            raise ValueError(f"scores must be 1-D, got shape {scores.shape}")
        return self.top_many(scores[np.newaxis], k)[0]

    def top_many(self, scores: np.ndarray, k: int) -> list[np.ndarray]:
        """:meth:`top` of each row of ``scores`` (queries × documents), a block of rows at a time
        (:meth:`top_of_blocks`): small enough (:data:`BLOCK_VALUES`) that its rows are still in the CPU cache when
        each is ranked."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 2:
            raise ValueError(f"scores must be 2-D, got shape {scores.shape}")
        if scores.shape[1] != len(self.tiebreak_rank):
            raise ValueError(f"scores has {scores.shape[1]} entries, the corpus {len(self.tiebreak_rank)} documents")
        step = max(BLOCK_VALUES // max(scores.shape[1], 1), 1)
        return self.top_of_blocks((scores[start:start + step] for start in range(0, len(scores), step)), k)

    def top_of_blocks(self, blocks: Iterable[np.ndarray], k: int) -> list[np.ndarray]:
        """:meth:`top` of each row of each block (queries × documents) in turn, e.g. the blocks of
        :meth:`pmrag.retrieve.bm25.BM25Index.score_blocks`: each block is ranked before the next is asked for.
        The bounds that spare most of the partitioning (:func:`kth_bounds`) are found for a block's
        rows at once."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        k = min(int(k), len(self.tiebreak_rank))
        tops: list[np.ndarray] = []
        for block in blocks:
            block = np.asarray(block, dtype=np.float64)
            if block.ndim != 2:
                raise ValueError(f"scores must be 2-D, got shape {block.shape}")
            if block.shape[1] != len(self.tiebreak_rank):
                raise ValueError(f"scores has {block.shape[1]} entries, the corpus {len(self.tiebreak_rank)} documents")
            if not np.isfinite(block).all():
                raise ValueError("scores must be finite")
            if k == 0:   # an empty corpus
                tops.extend(np.zeros(0, dtype=np.int64) for _ in block)
            elif len(block):
                sure, likely = kth_bounds(block, k)
                tops.extend(self._top_row(row, k, bound, guess) for row, bound, guess in zip(block, sure, likely))
        return tops

    def _top_row(self, scores: np.ndarray, k: int, bound: float, likely: float) -> np.ndarray:
        """The top ``k`` of one row, best first: :func:`top_k_candidates`, with its bounds, then the first of the
        documents tied at the k-th score in tie-break order.

        When fewer than ``k`` score above ``bound``, the k-th largest is ``bound`` itself, tied by every other
        document scoring it (for a rare query: thousands at 0).  The ones needed are then read off the head of the
        tie-break order (:meth:`first_scoring`) without listing the tied group: the same documents as
        :meth:`first_in_tiebreak_order` of that group, for a fraction of the work."""
        pool, kth = _candidates(scores, k, bound, likely)
        if kth is None:
            pool = np.concatenate([pool, self.first_scoring(scores, bound, k - len(pool))])
        elif len(pool) > k:   # documents tied at the k-th score: the first of them in tie-break order
            above, tied = _split(scores, pool, kth)
            pool = np.concatenate([above, self.first_in_tiebreak_order(tied, k - len(above))])
        return pool[np.lexsort((self.tiebreak_rank[pool], -scores[pool]))]

    def first_scoring(self, scores: np.ndarray, value: float, wanted: int) -> np.ndarray:
        """The first ``wanted`` documents in tie-break order among those scoring exactly ``value`` (at least
        ``wanted`` of them must), read off a head of the tie-break order that doubles until it holds them."""
        n = len(self.best_first)
        length = 2 * wanted + 64
        while True:
            head = self.best_first[:length]
            found = head[scores[head] == value]
            if len(found) >= wanted or length >= n:
                return found[:wanted]
            length *= 2

    def first_in_tiebreak_order(self, documents: np.ndarray, wanted: int) -> np.ndarray:
        """The ``wanted`` of ``documents`` (distinct indices) that come first in tie-break order, in no order.

        A small group is partitioned by tie-break rank; a group holding much of the corpus (the documents
        scoring 0 for a rare query) is read off the head of the tie-break order, about
        ``2 · wanted · n / len(documents)`` long, instead."""
        n = len(self.best_first)
        if len(documents) <= wanted:
            return documents
        if len(documents) * 16 < n:
            return documents[np.argpartition(self.tiebreak_rank[documents], wanted - 1)[:wanted]]
        member = np.zeros(n, dtype=bool)
        member[documents] = True
        length = 2 * wanted * n // len(documents) + 64
        while True:
            head = self.best_first[:length]
            found = head[member[head]]
            if len(found) >= wanted or length >= n:
                return found[:wanted]
            length *= 2


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
    if keep is None:
        tops = ranker.top_many(scores[: len(question_ids)], depth) if len(question_ids) else []
    else:
        tops = [_top_of_kept(ranker, scores[row], np.flatnonzero(keep[row]), depth) for row in range(len(question_ids))]
    return ranking_table(question_ids, chunk_ids, tops, [scores[row, top] for row, top in enumerate(tops)])


def rankings_from_score_blocks(blocks: Iterable[np.ndarray], question_ids: Sequence[str], chunk_ids: np.ndarray,
                               start_times: np.ndarray, depth: int, *, positive_only: bool = False,
                               ) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`rankings_from_scores` of a score matrix given a block of rows at a time (e.g.
    :meth:`pmrag.retrieve.bm25.BM25Index.score_blocks`, whose blocks are one buffer: each is ranked before the next
    is asked for), and how many chunks scored above 0 for each question.  ``positive_only`` is ``keep = scores >
    0``; the blocks must hold ``len(question_ids)`` rows in all."""
    chunk_ids = np.asarray(chunk_ids)
    ranker = Ranker(start_times, chunk_ids)
    tops: list[np.ndarray] = []
    top_scores: list[np.ndarray] = []
    matches: list[np.ndarray] = []
    for block in blocks:
        positive = block > 0
        matches.append(positive.sum(axis=1))
        if positive_only:
            block_tops = [_top_of_kept(ranker, row, np.flatnonzero(kept), depth) for row, kept in zip(block, positive)]
        else:
            block_tops = ranker.top_of_blocks([block], depth)
        tops.extend(block_tops)
        top_scores.extend(row[top] for row, top in zip(block, block_tops))
    if len(tops) != len(question_ids):
        raise ValueError(f"the score blocks hold {len(tops)} rows, for {len(question_ids)} questions")
    counts = np.concatenate(matches) if matches else np.zeros(0, dtype=np.int64)
    return ranking_table(question_ids, chunk_ids, tops, top_scores), counts


def _top_of_kept(ranker: Ranker, scores: np.ndarray, kept: np.ndarray, depth: int) -> np.ndarray:
    return kept[ranker.top_of(scores, kept, depth)] if len(kept) else kept


def ranking_table(question_ids: Sequence[str], chunk_ids: np.ndarray, tops: Sequence[np.ndarray],
                  top_scores: Sequence[np.ndarray]) -> pd.DataFrame:
    """The long ranking table (:data:`RANKING_COLUMNS`) of each question's top chunk indices, best first, and
    their scores."""
    if not len(question_ids):
        return pd.DataFrame({"question_id": pd.Series(dtype=object), "chunk_id": pd.Series(dtype=object),
                             "rank": pd.Series(dtype=np.int64), "score": pd.Series(dtype=np.float64)})
    lengths = np.array([len(top) for top in tops], dtype=np.int64)
    every = np.concatenate(tops).astype(np.int64, copy=False)
    first_rank = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return pd.DataFrame({
        "question_id": np.repeat(np.asarray(list(question_ids), dtype=object), lengths),
        "chunk_id": np.asarray(chunk_ids)[every],
        "rank": np.arange(1, len(every) + 1, dtype=np.int64) - first_rank,
        "score": np.concatenate(top_scores).astype(np.float64, copy=False),
    })
