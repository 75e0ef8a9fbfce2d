"""Single retrievers over one representation: BM25 (§5.1) and dense vectors (§5.2), as ranked lists.

A ranking is a DataFrame ``question_id, chunk_id, rank, score`` holding the top ``depth`` chunks of every
question, in the tie-broken order of :class:`pmrag.retrieve.bm25.Ranker` (score ↓, chunk start time ↓, chunk ID ↓),
which is also the order the TREC run files keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pmrag.retrieve.bm25 import BM25Index, Ranker
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.tokenizer import tokenize_many

REPRESENTATIONS = ("raw_text", "summary", "embedding_text")
KINDS = ("bm25", "vector")


def retriever_name(representation: str, kind: str) -> str:
    """``embedding_text`` + ``bm25`` → ``embedding_text_bm25`` (the paper's names)."""
    return f"{representation}_{kind}"


def rankings_from_scores(scores: np.ndarray, question_ids: Sequence[str], chunk_ids: np.ndarray,
                         start_times: np.ndarray, depth: int) -> pd.DataFrame:
    """Top ``depth`` of each row of ``scores`` (questions × chunks) as a long ranking table."""
    chunk_ids = np.asarray(chunk_ids)
    ranker = Ranker(start_times, chunk_ids)
    frames = []
    for row, question_id in enumerate(question_ids):
        top = ranker.top(scores[row], depth)
        frames.append(pd.DataFrame({
            "question_id": question_id, "chunk_id": chunk_ids[top],
            "rank": np.arange(1, len(top) + 1), "score": scores[row, top].astype(np.float64),
        }))
    return pd.concat(frames, ignore_index=True)


def bm25_rankings(texts: Sequence[str], questions: Sequence[str], question_ids: Sequence[str], chunk_ids,
                  start_times, depth: int = 200, k1: float = 1.2, b: float = 0.75) -> pd.DataFrame:
    """BM25 with the paper's regex tokenizer on queries and documents alike."""
    index = BM25Index.fit(tokenize_many(texts), k1=k1, b=b)
    return rankings_from_scores(index.scores_many(tokenize_many(questions)), question_ids, chunk_ids, start_times, depth)


def dense_rankings(chunk_vectors: np.ndarray, query_vectors: np.ndarray, question_ids: Sequence[str], chunk_ids,
                   start_times, depth: int = 200) -> pd.DataFrame:
    """Cosine similarity over all chunks (exact scan), top ``depth`` per question."""
    return rankings_from_scores(cosine_scores(chunk_vectors, query_vectors), question_ids, chunk_ids, start_times, depth)
