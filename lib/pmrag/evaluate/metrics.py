"""Per-question retrieval metrics of the paper (§4.1, §4.4, eq. 3–6), macro-averaged over questions.

For a question q with ranked list π_k(q) = (d_1, …, d_k) and graded qrels rel(q, d) ∈ {0, 1, 2} (a chunk
that was never judged counts as 0):

* G2(q) = {d : rel(q, d) = 2}, the primary gold; every scored question must have |G2(q)| > 0.
* ``recall@k``  = |R_k(q) ∩ G2(q)| / |G2(q)|, with R_k(q) = {d_1, …, d_k}                       (eq. 3)
* ``mrr@k``     = 1 / r_q with r_q = min{i ≤ k : d_i ∈ G2(q)}, and 0 when there is no such i    (eq. 4)
* ``ndcg@k``    = DCG@k / IDCG@k, DCG@k = Σ_{i=1..k} (2^rel(q, d_i) − 1) / log2(i + 1)            (eq. 5–6)
  where IDCG@k is the DCG@k of *all judged* chunks of q sorted by relevance, descending, whether the
  run retrieved them or not.

The macro average (:func:`macro`) is the plain mean over questions.

Everything is computed from two small matrices (:func:`relevance_matrix`): ``ranked[q, i]`` is the relevance
of the chunk the run puts at rank i + 1 (0 where unjudged or where the run has no chunk), and
``ideal[q, i]`` the (i + 1)-th largest judged relevance of q.  The kernels :func:`recall`,
:func:`reciprocal_rank` and :func:`ndcg` are vectorised over questions, so any cutoff k (5, 10, 20, 200) costs
one slice.  The numbers agree with ranx's ``recall@k-l2``, ``mrr@k-l2`` and ``ndcg_burges@k``
(``tests/test_metrics.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.frames import RunLike
from pmrag.evaluate.metric_names import RANK_METRICS, Metric
from pmrag.evaluate.runs import PRIMARY, Qrels, Run

METRICS = RANK_METRICS


@dataclass(frozen=True)
class RelevanceMatrix:
    """Relevance of each question's ranked list and of its ideal ordering, truncated at ``depth``.

    ``question_ids``: the scored questions (sorted); ``ranked`` and ``ideal``: ``(n_questions, depth)`` int8;
    ``n_primary``: ``|G2(q)|`` per question.
    """

    question_ids: pd.Index
    ranked: np.ndarray
    ideal: np.ndarray
    n_primary: np.ndarray

    @property
    def depth(self) -> int:
        return self.ranked.shape[1]


def recall(ranked: np.ndarray, n_primary: np.ndarray, k: int) -> np.ndarray:
    """``|R_k(q) ∩ G2(q)| / |G2(q)|`` per row of ``ranked`` (eq. 3)."""
    return (ranked[:, :k] == PRIMARY).sum(axis=1) / n_primary


def reciprocal_rank(ranked: np.ndarray, k: int) -> np.ndarray:
    """``1 / r_q`` for the first rank r_q ≤ k holding a relevance-2 chunk, else 0 (eq. 4)."""
    hits = ranked[:, :k] == PRIMARY
    first = hits.argmax(axis=1)
    return np.where(hits.any(axis=1), 1.0 / (first + 1), 0.0)


def dcg(relevance: np.ndarray, k: int) -> np.ndarray:
    """``Σ_{i=1..k} (2^rel_i − 1) / log2(i + 1)`` per row (eq. 5)."""
    top = relevance[:, :k].astype(np.float64)
    return ((np.exp2(top) - 1.0) / np.log2(np.arange(2, top.shape[1] + 2))).sum(axis=1)


def ndcg(ranked: np.ndarray, ideal: np.ndarray, k: int) -> np.ndarray:
    """``DCG@k / IDCG@k`` per row (eq. 6); ``ideal`` holds the judged relevances sorted descending."""
    return dcg(ranked, k) / dcg(ideal, k)


KERNELS = {                 # a metric's name → its values at k from a RelevanceMatrix (ranx's metric_switch)
    "recall": lambda matrix, k: recall(matrix.ranked, matrix.n_primary, k),
    "mrr": lambda matrix, k: reciprocal_rank(matrix.ranked, k),
    "ndcg": lambda matrix, k: ndcg(matrix.ranked, matrix.ideal, k),
}


def per_question_metrics(
    run: Run | RunLike, qrels: Qrels | pd.DataFrame, ks: Iterable[int] = (5,), metrics: Iterable[str] = METRICS
) -> pd.DataFrame:
    """One row per question (index ``question_id``, sorted) and one column per ``{metric}@{k}``.

    ``run`` is a :class:`~pmrag.evaluate.runs.Run`, ``{question_id: [chunk_id, …]}`` in rank order, or a
    DataFrame with columns ``question_id``, ``chunk_id``, ``rank`` (1-based; other columns are ignored).
    ``qrels`` is a :class:`~pmrag.evaluate.runs.Qrels` or a frame ``question_id, chunk_id, relevance`` ∈ {0, 1, 2}.
    The scored questions are those of the qrels and of the run; a question the run does not rank scores 0, and a
    question without a relevance-2 chunk is a ``ValueError``.
    Columns are ordered k by k, then as ``metrics``.
    """
    ks = _validated_ks(ks)
    metrics = _validated_metrics(metrics)
    matrix = relevance_matrix(run, qrels, depth=max(ks))
    columns = {str(Metric(metric, k)): KERNELS[metric](matrix, k) for k in ks for metric in metrics}
    return pd.DataFrame(columns, index=matrix.question_ids)


def per_question_rows(run: Run | RunLike, name: str, qrels: Qrels | pd.DataFrame, types: pd.Series,
                      ks: Iterable[int]) -> pd.DataFrame:
    """:func:`per_question_metrics` as long rows of one method: ``retriever`` (= ``name``), ``question_id``,
    ``question_type`` (from ``types``: question_id → type), then the metric columns."""
    metrics = per_question_metrics(run, qrels, ks=ks).reset_index()
    metrics.insert(0, "retriever", name)
    metrics.insert(2, "question_type", metrics["question_id"].map(types))
    return metrics


def per_question_table(runs: Mapping[str, Run | RunLike], qrels: Qrels | pd.DataFrame, types: pd.Series,
                       ks: Iterable[int]) -> pd.DataFrame:
    """:func:`per_question_rows` of every method of ``runs`` (``{name: run}``), stacked in ``runs``' order;
    without a run, the empty frame with the same columns.  The qrels are validated once for all runs."""
    ks = _validated_ks(ks)
    qrels = Qrels.of(qrels)
    frames = [per_question_rows(run, name, qrels, types, ks) for name, run in runs.items()]
    if not frames:
        return pd.DataFrame(columns=["retriever", "question_id", "question_type",
                                     *(str(Metric(metric, k)) for k in ks for metric in METRICS)])
    return pd.concat(frames, ignore_index=True)


def macro(per_question: pd.DataFrame) -> pd.Series:
    """Macro average: the mean of each metric column over questions (``question_id`` is not averaged)."""
    values = per_question.drop(columns=["question_id"], errors="ignore")
    non_numeric = [c for c in values.columns if not pd.api.types.is_numeric_dtype(values[c])]
    if non_numeric:
        raise ValueError(f"macro averages metric columns only; not numeric: {', '.join(map(str, non_numeric))}")
    return values.mean(axis=0).rename("macro")


def relevance_matrix(run: Run | RunLike, qrels: Qrels | pd.DataFrame, depth: int) -> RelevanceMatrix:
    """The ranked and ideal relevance matrices of ``run`` against ``qrels``, truncated at ``depth`` ranks."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    judged = Qrels.of(qrels).frame
    ranking = Run.of(run).frame
    ids = np.concatenate([judged["question_id"].to_numpy(dtype=object), ranking["question_id"].to_numpy(dtype=object)])
    questions = pd.Index(pd.unique(ids), name="question_id").sort_values()

    primary = judged.loc[judged["relevance"] == PRIMARY, "question_id"]
    n_primary = primary.value_counts().reindex(questions, fill_value=0).to_numpy()
    missing = questions[n_primary == 0]
    if len(missing):
        shown = ", ".join(repr(q) for q in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ValueError(
            f"{len(missing)} question(s) have no relevance-{PRIMARY} (primary-gold) chunk, so Recall and MRR are "
            f"undefined (paper §4.4 requires |G2(q)| > 0): {shown}; score only primary-gold questions "
            "(pmrag.chunking.stats.primary_gold_questions)"
        )

    ranked = np.zeros((len(questions), depth), dtype=np.int8)
    top = ranking[ranking["rank"] <= depth]
    judged_keys = pd.MultiIndex.from_frame(judged[["question_id", "chunk_id"]])
    position = judged_keys.get_indexer(pd.MultiIndex.from_frame(top[["question_id", "chunk_id"]]))
    grades = np.where(position >= 0, judged["relevance"].to_numpy()[position], 0)
    ranked[questions.get_indexer(top["question_id"]), top["rank"].to_numpy() - 1] = grades

    ideal = np.zeros((len(questions), depth), dtype=np.int8)
    row = questions.get_indexer(judged["question_id"])
    grade = judged["relevance"].to_numpy()
    order = np.lexsort((-grade, row))
    row, grade = row[order], grade[order]
    slot = np.arange(len(row)) - np.searchsorted(row, row, side="left")
    keep = slot < depth
    ideal[row[keep], slot[keep]] = grade[keep]
    return RelevanceMatrix(questions, ranked, ideal, n_primary)


def _validated_ks(ks: Iterable[int]) -> list[int]:
    ks = [ks] if isinstance(ks, (int, np.integer)) else list(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty list of positive integers, got {ks!r}")
    if len(set(ks)) != len(ks):
        raise ValueError(f"ks has duplicates: {ks!r}")
    return [int(k) for k in ks]


def _validated_metrics(metrics: Iterable[str]) -> list[str]:
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    unknown = [m for m in metrics if m not in METRICS]
    if not metrics or unknown or len(set(metrics)) != len(metrics):
        raise ValueError(f"metrics must be distinct names from {METRICS}, got {metrics!r}")
    return metrics
