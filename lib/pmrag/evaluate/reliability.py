"""Bootstrap tables of a study (§4.4, §6.3–6.4): intervals of every method, paired differences with the
paper's reading, and intervals by question type.  Pure functions of per-question metric rows
(``retriever, question_id, question_type, <metric>@k``); formatting for display is :mod:`pmrag.present.tables`'s.
"""

from __future__ import annotations

import pandas as pd

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci, ci_table, difference_table
from pmrag.evaluate.metric_names import RECALL5, Metric, at_k


def metric_cis(per_question: pd.DataFrame, k: int = 5, params: BootstrapSection | None = None) -> pd.DataFrame:
    """Mean and percentile-bootstrap CI of Recall/MRR/nDCG@k per retriever: retriever, metric, mean, ci_low, ci_high."""
    columns = [str(m) for m in at_k(k)]
    long = per_question.rename(columns={"retriever": "method"})[["method", "question_id", *columns]]
    table = ci_table(long, metrics=columns, params=params).rename(columns={"method": "retriever"})
    order = {r: i for i, r in enumerate(dict.fromkeys(per_question["retriever"]))}
    return table.sort_values(["retriever", "metric"], key=lambda s: s.map(order) if s.name == "retriever" else s,
                             kind="stable").reset_index(drop=True)


def interpretation(low: float, high: float) -> str:
    """The paper's plain-language reading of a selection-conditioned difference interval (Table 5)."""
    if low > 0:
        return "Positive conditional difference; selection uncertainty excluded"
    if high < 0:
        return "Negative conditional difference; selection uncertainty excluded"
    return "CI includes 0; inconclusive"


def paired_differences(per_question: pd.DataFrame, comparisons, metric: Metric | str = RECALL5,
                       params: BootstrapSection | None = None) -> pd.DataFrame:
    """Paired bootstrap differences (eq. 7) for ``comparisons`` = ``[(label, method_a, method_b), ...]``.

    ``per_question`` is long with columns ``retriever, question_id, <metric>``.  Columns: comparison,
    method_a, method_b, metric, delta, ci_low, ci_high, excludes_zero, interpretation.
    """
    comparisons = [tuple(c) for c in comparisons]
    metric = str(metric)
    long = per_question.rename(columns={"retriever": "method"})
    long = long[long["method"].isin({m for _, a, b in comparisons for m in (a, b)})][["method", "question_id", metric]]
    diff = difference_table(long, [(a, b) for _, a, b in comparisons], metrics=metric, params=params)
    diff.insert(0, "comparison", [label for label, _, _ in comparisons])
    diff["excludes_zero"] = (diff["ci_low"] > 0) | (diff["ci_high"] < 0)
    diff["interpretation"] = [interpretation(lo, hi) for lo, hi in zip(diff["ci_low"], diff["ci_high"])]
    return diff


def by_type_cis(per_question: pd.DataFrame, metric: Metric | str = RECALL5, params: BootstrapSection | None = None,
                types=None) -> pd.DataFrame:
    """Mean and CI of ``metric`` per retriever, overall and within each question type.

    Within a type the bootstrap resamples that type's questions only (n = its question count), with the same
    seed.  Columns: retriever, question_type (``overall`` first, then ``types`` or first-appearance order),
    questions, mean, ci_low, ci_high.
    """
    order = list(types) if types is not None else list(dict.fromkeys(per_question["question_type"]))
    metric = str(metric)
    rows = []
    for retriever, frame in per_question.groupby("retriever", sort=False):
        frame = frame.sort_values("question_id", kind="stable")
        for question_type in ["overall", *order]:
            part = frame if question_type == "overall" else frame[frame["question_type"] == question_type]
            if len(part) == 0:
                continue
            mean, low, high = ci(part[metric].to_numpy(), params)
            rows.append({"retriever": retriever, "question_type": question_type, "questions": len(part),
                         "mean": mean, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)
