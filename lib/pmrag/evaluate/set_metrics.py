"""Set metrics of TOBUGraph's Table 2 (paper 002, §3.3.1): precision, recall and F1 of a retrieved *set*.

TOBUGraph returns a set of memories M′ (no ranking), so the paper scores each request by set overlap with
the memories that were relevant.  For a retriever and a question q with retrieved set R(q) and gold set
G(q) = {d : rel(q, d) ≥ ``min_relevance``} (default ``PRIMARY`` = 2, the study's primary gold; 1 also admits
the supporting evidence), with h = |R ∩ G|:

* ``set_precision`` = h / |R|, and **0 when R is empty**;
* ``set_recall``    = h / |G|;
* ``set_f1``        = 2·P·R / (P + R) = 2h / (|R| + |G|), and 0 when P = R = 0.

The paper does not say what an empty retrieved set scores.  We score it 0 (scikit-learn's
``zero_division=0``): G is never empty here, so an empty R missed every relevant memory and is a failure
of the request; the vacuous 1 would reward a retriever for returning nothing, and NaN would remove the
question from exactly one method, which the paired bootstrap (every method on every question) cannot take.

A question with an empty gold set has no recall and is not evaluable: :func:`set_counts` raises on it
(``empty_gold="raise"``) or drops it on request (``empty_gold="drop"``, the dropped ids in
``frame.attrs["dropped_questions"]``).  A (retriever, question) pair without any retrieved row is an empty set.

Macro averages are plain means over questions of the per-question rows (:func:`per_question_set_rows`, the
shape of :func:`pmrag.evaluate.metrics.per_question_rows`), so :mod:`pmrag.evaluate.bootstrap` and
:mod:`pmrag.evaluate.reliability` give their 95 % percentile intervals and paired differences unchanged
(:func:`set_metric_cis` renames ``retriever`` to ``method`` for :func:`~pmrag.evaluate.bootstrap.ci_table`).

Table 2 is not a macro mean of per-request F1: its F1 row is the harmonic mean of its P and R rows
(2·0.9286·0.9333 / 1.8619 = 0.9309, likewise for every column), and its P and R are fractions n/14, n/13,
n/15 for 20 requests whose derivation the paper does not give.  :func:`pooled_scores` gives the micro
(pooled-count) figures, the closest reading, for comparison; the intervals are for the macro means.

Retrieved sets from rankings: :func:`top_k_set` keeps ranks 1…k (as recall@k does); :func:`pieces_to_memories`
maps the top-k pieces (RAGv1's fixed-size chunks) to their memories, a memory counting as retrieved when any
of its pieces is, so |R| ≤ k.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np
import pandas as pd

from pmrag.core.frames import no_duplicates, require_columns
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci_table
from pmrag.evaluate.metric_names import SET_METRICS
from pmrag.evaluate.runs import GRADES, PRIMARY, Qrels

SET_COLUMNS = ("retriever", "question_id", "chunk_id")
RANKING_COLUMNS = ("retriever", "question_id", "rank", "chunk_id")
MAPPING_COLUMNS = ("piece_id", "memory_id")
COUNT_COLUMNS = ("n_retrieved", "n_gold", "n_hit")


def set_scores(n_hit, n_retrieved, n_gold) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(precision, recall, f1)`` arrays from the counts h = |R ∩ G|, |R| and |G| > 0 (elementwise).

    Precision of an empty R is 0; F1 = 2h / (|R| + |G|), which is the harmonic mean of P and R and 0 when h = 0.
    """
    hit, retrieved, gold = (np.asarray(x, dtype=np.float64) for x in (n_hit, n_retrieved, n_gold))
    if (gold <= 0).any():
        raise ValueError("set metrics need a non-empty gold set for every question (|G| > 0)")
    if (hit < 0).any() or (hit > retrieved).any() or (hit > gold).any():
        raise ValueError("set counts must satisfy 0 ≤ |R ∩ G| ≤ min(|R|, |G|)")
    precision = np.divide(hit, retrieved, out=np.zeros_like(hit), where=retrieved > 0)
    return precision, hit / gold, 2.0 * hit / (retrieved + gold)


def macro_set_scores(n_hit, n_retrieved, n_gold) -> dict[str, float]:
    """Macro means over questions of :func:`set_scores` (``set_precision, set_recall, set_f1``), the mean set size
    ``mean_retrieved`` and the number of empty sets ``empty_sets``, from count arrays with one entry per question
    (the same means as :func:`per_question_set_rows`'s columns, without its frames: a tuning grid scores many
    candidate sets on the same questions)."""
    precision, recall, f1 = set_scores(n_hit, n_retrieved, n_gold)
    retrieved = np.asarray(n_retrieved)
    return {**{str(m): float(v.mean()) for m, v in zip(SET_METRICS, (precision, recall, f1))},
            "mean_retrieved": float(retrieved.mean()), "empty_sets": int((retrieved == 0).sum())}


def gold_sizes(qrels: Qrels | pd.DataFrame, questions: Iterable, *, min_relevance: int = PRIMARY) -> np.ndarray:
    """|G| of each of ``questions``, in their order: its judged chunks of relevance ≥ ``min_relevance`` (int64)."""
    judged = Qrels.of(qrels).frame
    gold = judged.loc[judged["relevance"] >= min_relevance, "question_id"]
    return gold.value_counts().reindex(pd.Index(list(questions), dtype=object), fill_value=0).to_numpy(dtype=np.int64)


def top_k_counts(ranking: pd.DataFrame, qrels: Qrels | pd.DataFrame, questions: Iterable, ks: Iterable[int], *,
                 min_relevance: int = PRIMARY) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """h = |R ∩ G| and |R| of every question of ``questions`` (in their order) for the top-k set (:func:`top_k_set`)
    of one retriever's ``ranking`` at each k of ``ks``: ``{k: (n_hit, n_retrieved)}``, int64 arrays.  A question
    with no row of ``ranking`` has an empty set; rows of other questions are ignored.  One pass over the ranking
    for all k (each item counts for every k ≥ its rank)."""
    ks = [int(k) for k in ks]
    for k in ks:
        _validated_k(k)
    frame = _validated_ranking(ranking)
    if frame["retriever"].nunique() > 1:
        raise ValueError(f"ranking has {frame['retriever'].nunique()} retrievers; top_k_counts takes one")
    judged = Qrels.of(qrels).frame
    gold = judged.loc[judged["relevance"] >= min_relevance, ["question_id", "chunk_id"]]
    index = pd.Index(list(questions), dtype=object)
    row = index.get_indexer(frame["question_id"])
    hit = pd.MultiIndex.from_frame(frame[["question_id", "chunk_id"]]).isin(pd.MultiIndex.from_frame(gold))
    rank = frame["rank"].to_numpy()
    kept = row >= 0
    counts = {}
    for k in ks:
        top = kept & (rank <= k)
        counts[k] = (np.bincount(row[top & hit], minlength=len(index)).astype(np.int64),
                     np.bincount(row[top], minlength=len(index)).astype(np.int64))
    return counts


def set_counts(
    retrieved: pd.DataFrame,
    qrels: Qrels | pd.DataFrame,
    *,
    min_relevance: int = PRIMARY,
    questions: Iterable | None = None,
    retrievers: Iterable[str] | None = None,
    empty_gold: Literal["raise", "drop"] = "raise",
) -> pd.DataFrame:
    """|R|, |G| and |R ∩ G| of every retriever × question: columns ``retriever, question_id`` + ``COUNT_COLUMNS``.

    Parameters
    ----------
    retrieved: rows ``retriever, question_id, chunk_id`` (other columns ignored), one per retrieved item.
    qrels: the study's qrels ``question_id, chunk_id, relevance`` ∈ {0, 1, 2}.
    min_relevance: 2 (primary gold, default) or 1 (every judged evidence chunk).
    questions: the questions to score; default every question of ``qrels`` or ``retrieved``.
    retrievers: the retrievers, in output order; default those of ``retrieved`` in first-appearance order
        (pass them to score a retriever that retrieved nothing at all).
    empty_gold: ``"raise"`` (default) a ``ValueError`` naming questions with empty G, or ``"drop"`` them
        (listed in ``attrs["dropped_questions"]``).

    Returns
    -------
    Rows retriever-major in ``retrievers`` order, questions sorted; counts int64.
    """
    if isinstance(min_relevance, bool) or min_relevance not in GRADES[1:]:
        raise ValueError(f"min_relevance must be 1 or {PRIMARY}, got {min_relevance!r}")
    if empty_gold not in ("raise", "drop"):
        raise ValueError(f"empty_gold must be 'raise' or 'drop', got {empty_gold!r}")
    sets = _validated_sets(retrieved)
    qrels = Qrels.of(qrels)
    judged = qrels.frame

    if questions is None:
        ids = np.concatenate([judged["question_id"].to_numpy(dtype=object), sets["question_id"].to_numpy(dtype=object)])
    else:
        ids = np.asarray(list(questions), dtype=object)
        outside = pd.Index(sets["question_id"].unique()).difference(pd.Index(ids))
        if len(outside):
            raise ValueError(f"retrieved has {len(outside)} question(s) outside questions: {_shown(outside)}")
    question_index = pd.Index(pd.unique(ids), name="question_id").sort_values()

    names = list(dict.fromkeys(sets["retriever"])) if retrievers is None else list(dict.fromkeys(retrievers))
    unknown = sorted(set(sets["retriever"]) - set(names), key=str)
    if unknown:
        raise ValueError(f"retrieved has retriever(s) not in retrievers: {', '.join(map(repr, unknown))}")
    if not names or not len(question_index):
        raise ValueError("set metrics need at least one retriever and one question")

    gold = judged.loc[judged["relevance"] >= min_relevance, ["question_id", "chunk_id"]]
    n_gold = gold_sizes(qrels, question_index, min_relevance=min_relevance)
    empty = question_index[n_gold == 0]
    if len(empty) and empty_gold == "raise":
        raise ValueError(
            f"{len(empty)} question(s) have no chunk of relevance ≥ {min_relevance}, so set recall is undefined: "
            f"{_shown(empty)}; pass only evaluable questions or empty_gold='drop'"
        )
    keep = n_gold > 0
    question_index, n_gold = question_index[keep], n_gold[keep]
    sets = sets[sets["question_id"].isin(question_index)]

    grid = pd.MultiIndex.from_product([names, question_index], names=["retriever", "question_id"])
    n_retrieved = sets.groupby(["retriever", "question_id"], sort=False).size()
    matched = sets.merge(gold, on=["question_id", "chunk_id"], how="inner")
    hits = matched.groupby(["retriever", "question_id"], sort=False).size()
    counts = pd.DataFrame({
        "n_retrieved": n_retrieved.reindex(grid, fill_value=0).to_numpy(dtype=np.int64),
        "n_gold": np.tile(n_gold, len(names)),
        "n_hit": hits.reindex(grid, fill_value=0).to_numpy(dtype=np.int64),
    }, index=grid).reset_index()
    counts.attrs["dropped_questions"] = list(empty)
    return counts


def per_question_set_rows(
    retrieved: pd.DataFrame,
    qrels: Qrels | pd.DataFrame,
    types: pd.Series,
    *,
    min_relevance: int = PRIMARY,
    questions: Iterable | None = None,
    retrievers: Iterable[str] | None = None,
    empty_gold: Literal["raise", "drop"] = "raise",
) -> pd.DataFrame:
    """Per-question set metrics as long rows: ``retriever, question_id, question_type, set_precision,
    set_recall, set_f1`` (the shape of :func:`pmrag.evaluate.metrics.per_question_rows`).

    ``types`` maps question_id → question type (a question without one is a ``ValueError``); the other
    parameters are :func:`set_counts`'s, whose ``attrs["dropped_questions"]`` the result keeps.
    """
    counts = set_counts(retrieved, qrels, min_relevance=min_relevance, questions=questions,
                        retrievers=retrievers, empty_gold=empty_gold)
    if not isinstance(types, pd.Series):
        raise TypeError(f"types must be a Series question_id -> type, got {type(types).__name__}")
    question_type = counts["question_id"].map(types)
    if question_type.isna().any():
        untyped = pd.unique(counts.loc[question_type.isna(), "question_id"])
        raise ValueError(f"types has no type for question(s) {_shown(untyped)}")
    precision, recall, f1 = set_scores(counts["n_hit"], counts["n_retrieved"], counts["n_gold"])
    rows = pd.DataFrame({"retriever": counts["retriever"], "question_id": counts["question_id"],
                         "question_type": question_type, **dict(zip(SET_METRICS, (precision, recall, f1)))})
    rows.attrs["dropped_questions"] = counts.attrs["dropped_questions"]
    return rows


def pooled_scores(counts: pd.DataFrame) -> pd.DataFrame:
    """Micro (pooled) scores per retriever from :func:`set_counts`: Σh/Σ|R| (0 if Σ|R| = 0), Σh/Σ|G| and their
    harmonic mean (= 2Σh / (Σ|R| + Σ|G|)).  Columns ``retriever, questions, micro_precision, micro_recall,
    micro_f1, mean_retrieved, empty_sets``; for comparing with Table 2's figures, not for the bootstrap (which
    resamples per-question values).  ``empty_sets`` counts the questions with |R| = 0: macro precision scores
    each 0, pooled precision leaves them out of Σ|R| (they lower only its recall), so a method that abstains
    often can have a pooled precision well above its macro one."""
    require_columns(counts, ("retriever", "question_id", *COUNT_COLUMNS), "counts")
    totals = counts.groupby("retriever", sort=False)[list(COUNT_COLUMNS)].sum()
    precision, recall, f1 = set_scores(totals["n_hit"], totals["n_retrieved"], totals["n_gold"])
    return pd.DataFrame({"retriever": totals.index.to_numpy(dtype=object),
                         "questions": counts.groupby("retriever", sort=False).size().to_numpy(),
                         "micro_precision": precision, "micro_recall": recall, "micro_f1": f1,
                         "mean_retrieved": (totals["n_retrieved"] / counts.groupby("retriever", sort=False).size()).to_numpy(),
                         "empty_sets": counts.assign(empty=counts["n_retrieved"] == 0).groupby(
                             "retriever", sort=False)["empty"].sum().to_numpy(dtype=np.int64)})


def set_metric_cis(per_question: pd.DataFrame, params: BootstrapSection | None = None) -> pd.DataFrame:
    """Macro mean and percentile-bootstrap CI (§4.4) of each set metric per retriever, from
    :func:`per_question_set_rows`: columns ``retriever, metric, mean, ci_low, ci_high`` (rows retriever-major,
    metrics in ``SET_METRICS`` order).  Paired differences: :func:`pmrag.evaluate.reliability.paired_differences`
    with ``metric="set_f1"`` (or another set metric) applies as is."""
    require_columns(per_question, ("retriever", "question_id", *SET_METRICS), "per_question")
    long = per_question.rename(columns={"retriever": "method"})[["method", "question_id", *SET_METRICS]]
    return ci_table(long, metrics=list(SET_METRICS), params=params).rename(columns={"method": "retriever"})


def top_k_set(ranking: pd.DataFrame, k: int) -> pd.DataFrame:
    """The items at ranks 1…k of each (retriever, question) of ``ranking`` (``retriever, question_id, rank,
    chunk_id``): rows ``retriever, question_id, chunk_id``, pairs in first-appearance order and by rank within
    a pair (a ranking with gaps keeps fewer than k)."""
    _validated_k(k)
    frame = _validated_ranking(ranking)
    pair, _ = pd.factorize(pd.MultiIndex.from_frame(frame[["retriever", "question_id"]]))
    keep = (frame["rank"] <= k).to_numpy()
    order = np.lexsort((frame["rank"].to_numpy()[keep], pair[keep]))
    return frame[keep].iloc[order][list(SET_COLUMNS)].reset_index(drop=True)


def pieces_to_memories(ranked_pieces: pd.DataFrame, mapping: pd.DataFrame, k: int) -> pd.DataFrame:
    """The memories retrieved by the top-k pieces: a memory counts once when any of its pieces is at rank ≤ k.

    ``ranked_pieces`` is a ranking ``retriever, question_id, rank, chunk_id`` whose chunk ids are piece ids;
    ``mapping`` has ``piece_id, memory_id`` (each piece in one memory; a ranked piece missing from it is a
    ``ValueError``).  Returns rows ``retriever, question_id, chunk_id`` holding memory ids (the unit the gold
    is judged in), each memory once, in the order of its best-ranked piece, so |R| ≤ k.
    """
    top = top_k_set(ranked_pieces, k)
    require_columns(mapping, MAPPING_COLUMNS, "mapping")
    pieces = mapping.loc[:, list(MAPPING_COLUMNS)].drop_duplicates().reset_index(drop=True)
    if pieces.isna().any().any():
        raise ValueError("mapping has missing piece or memory ids")
    no_duplicates(pieces, ["piece_id"], "mapping", "piece (in two memories)")
    memory_of = pieces.set_index("piece_id")["memory_id"]
    memories = top["chunk_id"].map(memory_of)
    if memories.isna().any():
        raise ValueError(f"mapping lacks piece(s) {_shown(pd.unique(top.loc[memories.isna(), 'chunk_id']))}")
    top = top.assign(chunk_id=memories.to_numpy(dtype=object))
    return top.drop_duplicates(list(SET_COLUMNS)).reset_index(drop=True)


def _validated_sets(retrieved: pd.DataFrame) -> pd.DataFrame:
    require_columns(retrieved, SET_COLUMNS, "retrieved")
    sets = retrieved.loc[:, list(SET_COLUMNS)].reset_index(drop=True)
    if sets.isna().any().any():
        raise ValueError("retrieved has missing retriever, question or chunk ids (an empty set is a pair without rows)")
    no_duplicates(sets, list(SET_COLUMNS), "retrieved", "item")
    return sets


def _validated_ranking(ranking: pd.DataFrame) -> pd.DataFrame:
    require_columns(ranking, RANKING_COLUMNS, "ranking")
    frame = ranking.loc[:, list(RANKING_COLUMNS)].reset_index(drop=True)
    if frame[["retriever", "question_id", "chunk_id"]].isna().any().any():
        raise ValueError("ranking has missing retriever, question or chunk ids")
    if not pd.api.types.is_integer_dtype(frame["rank"]) or (len(frame) and frame["rank"].min() < 1):
        raise ValueError("ranking ranks must be integers ≥ 1")
    no_duplicates(frame, ["retriever", "question_id", "rank"], "ranking", "rank")
    no_duplicates(frame, ["retriever", "question_id", "chunk_id"], "ranking", "chunk")
    return frame


def _validated_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _shown(ids) -> str:
    ids = list(ids)
    return ", ".join(repr(q) for q in ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
