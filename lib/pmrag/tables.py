"""Paper-style tables built from per-question metrics (pure DataFrame functions)."""

from __future__ import annotations

import pandas as pd

from pmrag.bootstrap import BootstrapParams, ci_table
from pmrag.paper import format_ci

METRIC_LABELS = {"recall": "Recall", "mrr": "MRR", "ndcg": "nDCG"}


def metric_cis(per_question: pd.DataFrame, k: int = 5, params: BootstrapParams | None = None) -> pd.DataFrame:
    """Mean and percentile-bootstrap CI of Recall/MRR/nDCG@k per retriever: retriever, metric, mean, ci_low, ci_high."""
    columns = [f"{m}@{k}" for m in METRIC_LABELS]
    long = per_question.rename(columns={"retriever": "method"})[["method", "question_id", *columns]]
    table = ci_table(long, metrics=columns, params=params).rename(columns={"method": "retriever"})
    order = {r: i for i, r in enumerate(dict.fromkeys(per_question["retriever"]))}
    return table.sort_values(["retriever", "metric"], key=lambda s: s.map(order) if s.name == "retriever" else s,
                             kind="stable").reset_index(drop=True)


def table3(cis: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Table 3: one row per retriever, "mean [low, high]" for Recall@k, MRR@k, nDCG@k."""
    labels = {f"{m}@{k}": f"{label}@{k}" for m, label in METRIC_LABELS.items()}
    cells = cis.assign(cell=[format_ci(m, lo, hi) for m, lo, hi in zip(cis["mean"], cis["ci_low"], cis["ci_high"])])
    wide = cells.pivot(index="retriever", columns="metric", values="cell").rename(columns=labels)
    wide = wide.reindex(index=list(dict.fromkeys(cis["retriever"])), columns=list(labels.values()))
    return wide.rename_axis("Method").rename_axis(None, axis=1)


def representation_grid(cis: pd.DataFrame, metric: str = "recall@5") -> pd.DataFrame:
    """Representation × retriever kind (BM25 / vector) for one metric: the full RQ1 factorial."""
    rows = cis[cis["metric"] == metric].copy()
    rows[["representation", "kind"]] = rows["retriever"].str.rsplit("_", n=1, expand=True)
    grid = rows.pivot(index="representation", columns="kind", values="mean")
    order = [r for r in ("raw_text", "summary", "embedding_text") if r in grid.index]
    return grid.reindex(order).rename_axis(None, axis=1)


def table4(best: pd.DataFrame, cis: pd.DataFrame, name) -> pd.DataFrame:
    """Table 4: each pairing's selected β with "mean [low, high]" for Recall/MRR/nDCG@5.

    ``cis`` holds the hybrid runs' intervals (:func:`metric_cis`), ``name(bm25, vector, beta)`` their retriever name.
    """
    formatted = table3(cis)
    rows = []
    for row in best.itertuples(index=False):
        cells = formatted.loc[name(row.bm25, row.vector, row.beta)]
        rows.append({"BM25": row.bm25, "Vector": row.vector, "β": f"{row.beta:.2f}", **cells.to_dict()})
    return pd.DataFrame(rows)
