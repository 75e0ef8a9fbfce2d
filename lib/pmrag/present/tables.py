"""Paper-style tables for display: the formatted forms of :mod:`pmrag.evaluate.reliability`'s frames."""

from __future__ import annotations

import pandas as pd

from pmrag.core.names import RetrieverId, format_beta, is_hybrid
from pmrag.evaluate.metric_names import RECALL5, Metric, at_k
from pmrag.evaluate.sweep import hybrid_ids
from pmrag.present.paper import format_ci


def table3(cis: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Table 3: one row per retriever, "mean [low, high]" for Recall@k, MRR@k, nDCG@k."""
    labels = {str(m): m.label for m in at_k(k)}
    cells = cis.assign(cell=[format_ci(m, lo, hi) for m, lo, hi in zip(cis["mean"], cis["ci_low"], cis["ci_high"])])
    wide = cells.pivot(index="retriever", columns="metric", values="cell").rename(columns=labels)
    wide = wide.reindex(index=list(dict.fromkeys(cis["retriever"])), columns=list(labels.values()))
    return wide.rename_axis("Method").rename_axis(None, axis=1)


def representation_grid(cis: pd.DataFrame, metric: Metric | str = RECALL5) -> pd.DataFrame:
    """Representation × retriever kind (BM25 / vector) for one metric: the full RQ1 factorial (hybrid rows, if
    any, are left out)."""
    rows = cis[(cis["metric"] == str(metric)) & ~cis["retriever"].map(is_hybrid)].copy()
    ids = [RetrieverId.parse(name) for name in rows["retriever"]]
    rows["representation"] = [rid.representation for rid in ids]
    rows["kind"] = ["_".join(p for p in (rid.method, rid.variant) if p) for rid in ids]
    grid = rows.pivot(index="representation", columns="kind", values="mean")
    order = [r for r in ("raw_text", "summary", "embedding_text") if r in grid.index]
    return grid.reindex(order).rename_axis(None, axis=1)


def table4(best: pd.DataFrame, cis: pd.DataFrame) -> pd.DataFrame:
    """Table 4: each pairing's selected β with "mean [low, high]" for Recall/MRR/nDCG@5.

    ``best`` has one row per pairing (``bm25, vector, beta``); ``cis`` the fused runs' intervals
    (:func:`pmrag.evaluate.reliability.metric_cis`), named by :class:`~pmrag.core.names.HybridId`.
    """
    formatted = table3(cis)
    rows = []
    for row, name in zip(best.itertuples(index=False), hybrid_ids(best)):
        cells = formatted.loc[str(name)]
        rows.append({"BM25": row.bm25, "Vector": row.vector, "β": format_beta(row.beta), **cells.to_dict()})
    return pd.DataFrame(rows)


def table5(differences: pd.DataFrame) -> pd.DataFrame:
    """Table 5: comparison, ΔRecall@5, 95 % CI, interpretation (formatted as the paper's)."""
    from pmrag.present.paper import format_delta_ci

    label = "Δ" + differences["metric"].iloc[0].replace("recall", "Recall").replace("ndcg", "nDCG").replace("mrr", "MRR")
    cells = [format_delta_ci(d, lo, hi) for d, lo, hi in zip(differences["delta"], differences["ci_low"], differences["ci_high"])]
    return pd.DataFrame({"Comparison": differences["comparison"], label: [c[0] for c in cells],
                         "95% CI": [c[1] for c in cells], "Interpretation": differences["interpretation"]})


def table6(by_type: pd.DataFrame, retriever: str, metric_label: str = "Recall@5") -> pd.DataFrame:
    """Table 6: one retriever's metric by question type (and overall) with its 95 % CI."""
    rows = by_type[by_type["retriever"] == retriever]
    return pd.DataFrame({"Question type": rows["question_type"].to_numpy(), "Questions": rows["questions"].to_numpy(),
                         metric_label: [f"{m:.3f}" for m in rows["mean"]],
                         "95% CI": [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(rows["ci_low"], rows["ci_high"])]})
