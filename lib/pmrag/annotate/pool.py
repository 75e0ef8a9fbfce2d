"""TREC-style pooling (000 §4.3; Spärck Jones & van Rijsbergen 1975, Voorhees & Harman 2005).

The pool of question q at depth k over retrievers R is the union of their top-k chunks,

    P_k(q) = ⋃_{r ∈ R} { d : rank_r(q, d) ≤ k },

each chunk kept once with every (retriever, rank) that brought it.  Chunks recovered from evidence hints join
the pool by the annotation pipeline; this module is the retriever part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns

POOL_COLUMNS = ("question_id", "chunk_id", "retriever", "rank")


def pooled_names(rankings: Mapping[str, pd.DataFrame], depth: int,
                 retrievers: Sequence[str] | None = None) -> list[str]:
    """The retrievers a pool at ``depth`` takes (default: every one of ``rankings``, in mapping order), checked: a
    depth that is no integer ≥ 1, no retriever, or one without a ranking is a ``ValueError``."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be an integer ≥ 1, got {depth!r}")
    names = list(rankings) if retrievers is None else [str(name) for name in retrievers]
    if not names:
        raise ValueError("retrievers must name at least one retriever")
    unknown = [name for name in names if name not in rankings]
    if unknown:
        raise ValueError(f"no ranking for retriever(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(map(repr, rankings))}")
    return names


def pool_chunks(rankings: Mapping[str, pd.DataFrame], depth: int,
                retrievers: Sequence[str] | None = None) -> pd.DataFrame:
    """Every (question, chunk) in some retriever's top ``depth``, with the (retriever, rank) that put it there.

    ``rankings``: retriever name → ranking rows ``question_id, rank, chunk_id`` (ranks from 1, the store's
    ``rankings`` layout); ``retrievers``: the retrievers pooled, in order (default: every one, in mapping order).
    Returns rows ``question_id, chunk_id, retriever, rank``, one per contribution, ordered by question (first
    appearance), then the chunk's best rank, the chunk id, and retriever order — a chunk brought by two retrievers has two rows;
    ``.drop_duplicates(["question_id", "chunk_id"])`` gives P_k.
    """
    names = pooled_names(rankings, depth, retrievers)
    parts = []
    for order, name in enumerate(names):
        ranking = require_columns(rankings[name], ("question_id", "rank", "chunk_id"), f"ranking of {name!r}")
        top = ranking.loc[ranking["rank"] <= depth, ["question_id", "chunk_id", "rank"]]
        parts.append(top.assign(retriever=name, _order=order))
    rows = pd.concat(parts, ignore_index=True)
    question = pd.factorize(rows["question_id"], sort=False)[0]
    best = rows.groupby(["question_id", "chunk_id"])["rank"].transform("min").to_numpy()
    order = np.lexsort((rows["_order"].to_numpy(), rows["chunk_id"].to_numpy(dtype=str), best, question))
    return rows.iloc[order][list(POOL_COLUMNS)].reset_index(drop=True)
