"""A run and the graded judgments it is scored against, as values validated once (ranx's ``Run`` and ``Qrels``).

* :class:`Qrels` — ``question_id, chunk_id, relevance`` with relevance ∈ {0, 1, 2} (§4.4: 2 the primary gold,
  1 supporting, 0 judged irrelevant), integers, no question or chunk id missing, each (question, chunk) judged
  once; held as int8.
* :class:`Run` — one ranked list per question, ``question_id, chunk_id, rank`` (the rules of
  :func:`pmrag.core.frames.run_frame`: ranks unique positive integers, no chunk twice in one list), from a
  ``{question_id: [chunk_id, …]}`` mapping or a frame with those columns (others are dropped).

Both check their input when they are made and never again: a function that scores many runs against one set
of judgments (:func:`pmrag.evaluate.metrics.per_question_table`, the hybrid sweep) converts the qrels once, and
every scoring function accepts either the value or what it is made from (``Qrels.of``, ``Run.of`` return a value
as it is).  Neither changes its caller's frame: each holds its own copy of the columns it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.frames import RunLike, no_duplicates, require_columns, run_frame

GRADES = (0, 1, 2)
PRIMARY = 2
QRELS_COLUMNS = ("question_id", "chunk_id", "relevance")


@dataclass(frozen=True, eq=False)
class Qrels:
    """Graded judgments, validated on construction; ``frame`` holds ``question_id, chunk_id, relevance``
    (int8), in the given order with a fresh 0…n−1 index."""

    frame: pd.DataFrame

    def __post_init__(self):
        object.__setattr__(self, "frame", _validated_qrels(self.frame))

    @classmethod
    def of(cls, qrels: Qrels | pd.DataFrame) -> Qrels:
        """``qrels`` itself when it is a :class:`Qrels`, else the validated value of a frame."""
        return qrels if isinstance(qrels, Qrels) else cls(qrels)

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True, eq=False)
class Run:
    """Ranked lists, validated on construction from a ``{question_id: [chunk_id, …]}`` mapping or a frame with
    ``question_id, chunk_id, rank``; ``frame`` then holds those three columns (rank int64)."""

    frame: pd.DataFrame

    def __post_init__(self):
        object.__setattr__(self, "frame", run_frame(self.frame))

    @classmethod
    def of(cls, run: Run | RunLike) -> Run:
        """``run`` itself when it is a :class:`Run`, else the validated value of a mapping or frame."""
        return run if isinstance(run, Run) else cls(run)

    def __len__(self) -> int:
        return len(self.frame)

    def top_positions(self, depth: int, question_ids: pd.Index, chunk_ids: pd.Index,
                      unscored: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The run's entries at ranks 1…``depth`` as positions: ``(row, slot, chunk)`` — the question's index in
        ``question_ids``, rank − 1, and the chunk's index in ``chunk_ids`` (−1: a chunk not among them).  A ranked
        question missing from ``question_ids`` is a ``ValueError``: "the run ranks question 'q', which " +
        ``unscored``."""
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        top = self.frame[self.frame["rank"] <= depth]
        row = question_ids.get_indexer(top["question_id"])
        if (row < 0).any():
            raise ValueError(f"the run ranks question {top['question_id'].iloc[int(np.argmax(row < 0))]!r}, which "
                             f"{unscored}")
        return row, top["rank"].to_numpy() - 1, chunk_ids.get_indexer(top["chunk_id"])


def _validated_qrels(qrels: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(qrels, pd.DataFrame):
        raise TypeError(f"qrels must be a DataFrame, got {type(qrels).__name__}")
    require_columns(qrels, QRELS_COLUMNS, "qrels")
    judged = qrels.loc[:, list(QRELS_COLUMNS)].reset_index(drop=True)
    if judged[["question_id", "chunk_id"]].isna().any().any():
        raise ValueError("qrels has missing question or chunk ids")
    if not pd.api.types.is_integer_dtype(judged["relevance"]) or not judged["relevance"].isin(GRADES).all():
        bad = judged.loc[~judged["relevance"].isin(GRADES), "relevance"].unique()[:5]
        raise ValueError(f"qrels relevance must be one of {GRADES} (integers); found {bad.tolist()}")
    no_duplicates(judged, ["question_id", "chunk_id"], "qrels", "judgment")
    return judged.astype({"relevance": np.int8})
