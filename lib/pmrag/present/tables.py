"""Paper-style tables built from per-question metrics (pure DataFrame functions)."""

from __future__ import annotations

import pandas as pd

from pmrag.evaluate.bootstrap import BootstrapParams, ci_table
from pmrag.present.paper import format_ci

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


def interpretation(low: float, high: float) -> str:
    """The paper's plain-language reading of a selection-conditioned difference interval (Table 5)."""
    if low > 0:
        return "Positive conditional difference; selection uncertainty excluded"
    if high < 0:
        return "Negative conditional difference; selection uncertainty excluded"
    return "CI includes 0; inconclusive"


def paired_differences(per_question: pd.DataFrame, comparisons, metric: str = "recall@5",
                       params: BootstrapParams | None = None) -> pd.DataFrame:
    """Paired bootstrap differences (eq. 7) for ``comparisons`` = ``[(label, method_a, method_b), ...]``.

    ``per_question`` is long with columns ``retriever, question_id, <metric>``.  Columns: comparison,
    method_a, method_b, metric, delta, ci_low, ci_high, excludes_zero, interpretation.
    """
    from pmrag.evaluate.bootstrap import difference_table

    comparisons = [tuple(c) for c in comparisons]
    long = per_question.rename(columns={"retriever": "method"})
    long = long[long["method"].isin({m for _, a, b in comparisons for m in (a, b)})][["method", "question_id", metric]]
    diff = difference_table(long, [(a, b) for _, a, b in comparisons], metrics=metric, params=params)
    diff.insert(0, "comparison", [label for label, _, _ in comparisons])
    diff["excludes_zero"] = (diff["ci_low"] > 0) | (diff["ci_high"] < 0)
    diff["interpretation"] = [interpretation(lo, hi) for lo, hi in zip(diff["ci_low"], diff["ci_high"])]
    return diff


def table5(differences: pd.DataFrame) -> pd.DataFrame:
    """Table 5: comparison, ΔRecall@5, 95 % CI, interpretation (formatted as the paper's)."""
    from pmrag.present.paper import format_delta_ci

    label = "Δ" + differences["metric"].iloc[0].replace("recall", "Recall").replace("ndcg", "nDCG").replace("mrr", "MRR")
    cells = [format_delta_ci(d, lo, hi) for d, lo, hi in zip(differences["delta"], differences["ci_low"], differences["ci_high"])]
    return pd.DataFrame({"Comparison": differences["comparison"], label: [c[0] for c in cells],
                         "95% CI": [c[1] for c in cells], "Interpretation": differences["interpretation"]})


def by_type_cis(per_question: pd.DataFrame, metric: str = "recall@5", params: BootstrapParams | None = None,
                types=None) -> pd.DataFrame:
    """Mean and CI of ``metric`` per retriever, overall and within each question type.

    Within a type the bootstrap resamples that type's questions only (n = its question count), with the same
    seed.  Columns: retriever, question_type (``overall`` first, then ``types`` or first-appearance order),
    questions, mean, ci_low, ci_high.
    """
    from pmrag.evaluate.bootstrap import ci

    order = list(types) if types is not None else list(dict.fromkeys(per_question["question_type"]))
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


def table6(by_type: pd.DataFrame, retriever: str, metric_label: str = "Recall@5") -> pd.DataFrame:
    """Table 6: one retriever's metric by question type (and overall) with its 95 % CI."""
    rows = by_type[by_type["retriever"] == retriever]
    return pd.DataFrame({"Question type": rows["question_type"].to_numpy(), "Questions": rows["questions"].to_numpy(),
                         metric_label: [f"{m:.3f}" for m in rows["mean"]],
                         "95% CI": [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(rows["ci_low"], rows["ci_high"])]})
