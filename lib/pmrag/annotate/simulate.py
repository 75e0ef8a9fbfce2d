"""Simulated annotators: grades taken from a dataset's own gold, for the walkthrough and tests (000 §4.3).

No person grades here.  The first simulated annotator gives every pooled chunk the grade the dataset's chunk
gold gives it (0 where the gold has none): on the embedded demo, whose gold is complete by construction, that is
the grade a careful annotator would give.  The second is the first with a seeded share of grades moved by one
step (0 → 1, 2 → 1, 1 → 0 or 2 with equal odds), so that agreement (:mod:`pmrag.annotate.agreement`) has
disagreements to measure.  What these numbers say is how the pipeline behaves, never how people agree.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns

GRADE_COLUMNS = ("question_id", "chunk_id", "relevance")


def gold_grades(pooled: pd.DataFrame, qrels: pd.DataFrame, question_of: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Every pooled chunk graded by the gold: rows ``question_id, chunk_id, relevance`` in the pool's order.

    ``pooled``: the pool (``question_id, chunk_id``, :func:`pmrag.annotate.pooling.build_pool`); ``qrels``: chunk
    gold ``question_id, chunk_id, relevance``; ``question_of``: pooled question id → the gold's question id (a
    candidate's id → the dataset question it was made from; default: the same ids)."""
    require_columns(pooled, ("question_id", "chunk_id"), "pool")
    require_columns(qrels, GRADE_COLUMNS, "qrels")
    grade = {(str(q), str(c)): int(r) for q, c, r in qrels[list(GRADE_COLUMNS)].itertuples(index=False)}
    asked = pooled["question_id"].astype(str)
    gold_ids = asked.map(question_of) if question_of is not None else asked
    relevance = [grade.get((q, str(c)), 0) if isinstance(q, str) else 0
                 for q, c in zip(gold_ids, pooled["chunk_id"])]
    return pd.DataFrame({"question_id": asked.to_numpy(), "chunk_id": pooled["chunk_id"].astype(str).to_numpy(),
                         "relevance": np.asarray(relevance, dtype=np.int64)})


def perturbed_grades(grades: pd.DataFrame, share: float, seed: int) -> pd.DataFrame:
    """``grades`` with ``round(share × rows)`` of them, drawn by a generator seeded with ``seed``, moved one step
    (0 → 1, 2 → 1, 1 → 0 or 2 with equal odds); the other rows as they were.  A new frame."""
    if not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"share must be between 0 and 1, got {share!r}")
    require_columns(grades, GRADE_COLUMNS, "grades")
    rng = np.random.default_rng(int(seed))
    relevance = grades["relevance"].to_numpy(dtype=np.int64).copy()
    moved = rng.choice(len(relevance), size=int(round(float(share) * len(relevance))), replace=False)
    step = np.where(rng.random(len(moved)) < 0.5, -1, 1)
    relevance[moved] = np.where(relevance[moved] == 0, 1, np.where(relevance[moved] == 2, 1, relevance[moved] + step))
    return grades.assign(relevance=relevance)
