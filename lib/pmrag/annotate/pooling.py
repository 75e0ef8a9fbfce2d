"""The stored pool (000 §4.3): per question the chunks to grade, in a blind order, with where each came from.

The paper's annotators saw 910 candidate rows recovered from the model's evidence or added by excerpt
search; unjudged chunks outside that pool counted as relevance 0.  Here the pool of question q is

    P(q) = ⋃_{r ∈ R} top_depth(r, q)  ∪  chunks(hints(q)),

the TREC-style union of :func:`pmrag.annotate.pool.pool_chunks` (default R: the six single retrievers of §5,
depth 10) and the chunks holding a message its evidence hints matched (:func:`pmrag.annotate.recover.hint_chunks`).
Each chunk keeps its ``origins`` (JSON: ``{"retriever": r, "rank": k}`` per retriever that brought it, in
retriever order, then ``{"hint": i}`` per hint).  Grading is blind: the chunks of a question are shown in a
seeded shuffle (:func:`blind_positions`) seeded from the pool's seed and the question id alone, so adding a
question, or pooling another question, never reorders a question already pooled with the same chunks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from pmrag.annotate.pool import pool_chunks
from pmrag.core.frames import require_columns
from pmrag.core.params import DEFAULT_RETRIEVERS
from pmrag.core.store import bulk_insert, pool as pool_table

POOL_RETRIEVERS = DEFAULT_RETRIEVERS      # the six single retrievers of §5 (BM25 and vectors × three representations)
POOL_DEPTH = 10
POOL_ROWS = ("pool", "question_id", "chunk_id", "position", "origins")


def blind_positions(question_id: str, chunk_ids: Sequence[str], seed: int) -> np.ndarray:
    """0-based grading positions of ``chunk_ids`` (taken in sorted order): a permutation drawn from a generator
    seeded by SHA-256 of ``seed`` and ``question_id``; returned in the order of ``chunk_ids``."""
    digest = hashlib.sha256(f"{int(seed)}\x1f{question_id}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    order = np.argsort(np.asarray(chunk_ids, dtype=str), kind="stable")
    positions = np.empty(len(order), dtype=np.int64)
    positions[order] = rng.permutation(len(order))
    return positions


def rankings_of(rankings: Mapping[str, pd.DataFrame], question_ids: Mapping[str, str]) -> dict[str, pd.DataFrame]:
    """The rankings of the questions named in ``question_ids`` (a ranked question's id → the id it is pooled
    under, e.g. the candidate made from it), with their ids replaced: another question's rows are left out."""
    renamed = {}
    for name, ranking in rankings.items():
        kept = ranking[ranking["question_id"].astype(str).isin(list(question_ids))]
        renamed[name] = kept.assign(question_id=kept["question_id"].astype(str).map(question_ids)).reset_index(drop=True)
    return renamed


def build_pool(rankings: Mapping[str, pd.DataFrame], depth: int = POOL_DEPTH,
               retrievers: Sequence[str] | None = POOL_RETRIEVERS, recovered: pd.DataFrame | None = None, *,
               seed: int = 0, questions: Sequence[str] | None = None) -> pd.DataFrame:
    """The pool of every question: the union of the retrievers' top ``depth`` and the recovered chunks.

    Parameters
    ----------
    rankings : retriever name → rankings ``question_id, rank, chunk_id`` (may be empty when only hints pool).
    depth, retrievers : as :func:`~pmrag.annotate.pool.pool_chunks` (None: every retriever in ``rankings``).
    recovered : hint chunks ``candidate_id, hint, chunk_id`` (:func:`~pmrag.annotate.recover.hint_chunks`);
        ``candidate_id`` is the question id.
    seed : the blind order's seed (:func:`blind_positions`).
    questions : keep only these questions (default: every question ranked or recovered).

    Returns
    -------
    Rows ``question_id, chunk_id, position, origins`` by question (first appearance) then position.
    """
    parts = []
    if rankings and retrievers != ():
        ranked = pool_chunks(rankings, depth, retrievers)
        parts.append(pd.DataFrame({"question_id": ranked["question_id"].astype(str), "chunk_id": ranked["chunk_id"],
                                   "origin": [{"retriever": r, "rank": int(k)} for r, k in
                                              zip(ranked["retriever"], ranked["rank"])], "_kind": 0}))
    if recovered is not None and len(recovered):
        require_columns(recovered, ("candidate_id", "hint", "chunk_id"), "recovered chunks")
        hints = recovered.drop_duplicates(["candidate_id", "hint", "chunk_id"]).sort_values(
            ["candidate_id", "chunk_id", "hint"], kind="stable")
        parts.append(pd.DataFrame({"question_id": hints["candidate_id"].astype(str), "chunk_id": hints["chunk_id"],
                                   "origin": [{"hint": int(h)} for h in hints["hint"]], "_kind": 1}))
    if not parts:
        return pd.DataFrame(columns=["question_id", "chunk_id", "position", "origins"])
    rows = pd.concat(parts, ignore_index=True)
    if questions is not None:
        rows = rows[rows["question_id"].isin([str(q) for q in questions])]
    grouped = rows.groupby(["question_id", "chunk_id"], sort=False)["origin"].agg(list).reset_index()
    grouped["origins"] = [json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in grouped["origin"]]
    frames = []
    for question_id, chunks in grouped.groupby("question_id", sort=False):
        frames.append(chunks.assign(position=blind_positions(question_id, chunks["chunk_id"].tolist(), seed)))
    out = pd.concat(frames, ignore_index=True)
    question = pd.factorize(out["question_id"], sort=False)[0]
    out = out.iloc[np.lexsort((out["position"].to_numpy(), question))]
    return out[["question_id", "chunk_id", "position", "origins"]].reset_index(drop=True)


def write_pool(engine: Engine, name: str, pooled: pd.DataFrame) -> int:
    """Store ``pooled`` as pool ``name``, replacing what that name held (judgments are kept: they are another
    table); returns the rows written."""
    if not isinstance(name, str) or not name.strip() or any(ch.isspace() for ch in name):
        raise ValueError(f"a pool name must be a non-empty word without whitespace, got {name!r}")
    require_columns(pooled, ("question_id", "chunk_id", "position", "origins"), "pool")
    rows = [(name, str(q), str(c), int(p), o) for q, c, p, o in
            pooled[["question_id", "chunk_id", "position", "origins"]].itertuples(index=False, name=None)]
    with engine.begin() as conn:
        conn.execute(pool_table.delete().where(pool_table.c.pool == name))
        bulk_insert(conn, pool_table, rows)
    return len(rows)


def read_pool(engine: Engine, name: str) -> pd.DataFrame:
    """Pool ``name`` as stored (``question_id, chunk_id, position, origins``), by question and position."""
    query = (select(pool_table.c.question_id, pool_table.c.chunk_id, pool_table.c.position, pool_table.c.origins)
             .where(pool_table.c.pool == name).order_by(pool_table.c.question_id, pool_table.c.position))
    with engine.connect() as conn:
        return pd.read_sql(query, conn)


def pool_sizes(pooled: pd.DataFrame) -> pd.DataFrame:
    """Per question: chunks pooled, those some retriever brought, those a hint brought (a chunk can be both)."""
    origins = pooled["origins"].map(json.loads)
    frame = pd.DataFrame({"question_id": pooled["question_id"],
                          "by_retriever": origins.map(lambda o: any("retriever" in x for x in o)),
                          "by_hint": origins.map(lambda o: any("hint" in x for x in o))})
    sizes = frame.groupby("question_id", sort=False).agg(chunks=("by_retriever", "size"),
                                                         by_retriever=("by_retriever", "sum"),
                                                         by_hint=("by_hint", "sum"))
    return sizes.astype("int64").reset_index()
