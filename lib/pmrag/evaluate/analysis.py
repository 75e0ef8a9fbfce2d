"""The statistics (§6.3–6.4) and failure analysis (§7) of a study, as tables computed from its stages.

Notebooks 05 and 06 display these; :mod:`pmrag.public` exports their aggregate parts.  Everything is
computed from the study's stored rankings and qrels, so each notebook runs on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from pmrag.evaluate import failures
from pmrag.present import tables


@dataclass(frozen=True)
class Selection:
    """The configurations the analysis is about: the selected best hybrid, its components, the reference
    single retriever and the diagnostic (summary) hybrid, by their run names."""

    best: str
    best_bm25: str
    best_vector: str
    best_beta: float
    reference: str
    diagnostic: str
    diagnostic_beta: float


def selection(study) -> Selection:
    best = study.selected_hybrid()
    bm25, vector, beta = study.diagnostic_hybrid()
    return Selection(
        best=study.hybrid_name(best["bm25"], best["vector"], best["beta"]), best_bm25=best["bm25"],
        best_vector=best["vector"], best_beta=float(best["beta"]),
        reference=study.params.data["analysis"]["reference_retriever"],
        diagnostic=study.hybrid_name(bm25, vector, beta), diagnostic_beta=beta,
    )


def reliability(study, per_question: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Bootstrap results: ``cis`` (every method × Recall/MRR/nDCG@5), ``differences`` (Table 5's
    comparisons), ``by_type`` (Recall@5 of every method per question type) and the formatted ``table5``,
    ``table6`` (the selected best hybrid by type)."""
    per_question = study.analysis_metrics() if per_question is None else per_question
    chosen = selection(study)
    if chosen.reference not in set(per_question["retriever"]):
        raise ValueError(f"analysis.reference_retriever {chosen.reference!r} is not a retriever of this study")
    params = study.bootstrap_params()
    comparisons = [
        (f"Best − {chosen.reference}", chosen.best, chosen.reference),
        (f"Best − diagnostic hybrid ({chosen.diagnostic.removeprefix('hybrid:')})", chosen.best, chosen.diagnostic),
    ]
    differences = tables.paired_differences(per_question, comparisons, "recall@5", params)
    by_type = tables.by_type_cis(per_question, "recall@5", params, study.question_types())
    return {
        "cis": tables.metric_cis(per_question, k=5, params=params),
        "differences": differences,
        "table5": tables.table5(differences),
        "by_type": by_type,
        "table6": tables.table6(by_type, chosen.best),
    }


def failure_analysis(study, per_question: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """§7: ``table7`` (Top-K failures of the best hybrid by type), ``labels`` (rule-based labels of the
    diagnostic hybrid's failures, one row per failed question), ``table8``, ``aggregate`` (§7.3 detail),
    ``sensitivity`` (Figure 6's data) and ``table9`` (success overlap of the best hybrid's components)."""
    per_question = study.analysis_metrics() if per_question is None else per_question
    chosen = selection(study)
    settings = study.params.data["analysis"]
    k, wider, aggregate_type = settings["failure_k"], settings["recovery_ks"], settings["aggregate_type"]
    types = study.question_types()
    rows = {name: frame for name, frame in per_question.groupby("retriever", sort=False)}
    qrels = study.qrels()
    diagnostic = rows[chosen.diagnostic]
    labels = failures.rule_labels(diagnostic, qrels, k, aggregate_type, settings["min_primary_gold"])
    return {
        "table7": failures.failure_table(rows[chosen.best], k, types),
        "labels": labels,
        "table8": failures.label_table(labels),
        "aggregate": failures.aggregate_summary(diagnostic, qrels, study.chunks(), k, wider, aggregate_type),
        "sensitivity": failures.topk_sensitivity(diagnostic, [k, *wider], types),
        "table9": failures.success_overlap(rows[chosen.best_bm25], rows[chosen.best_vector], k),
    }


def public_export(study, per_question: pd.DataFrame, reliability_tables: dict, failure_tables: dict) -> list[str]:
    """Write ``outputs/<run>/public/`` (:mod:`pmrag.public`): per-question metrics and the aggregate tables."""
    from pmrag.present import public

    tables_out = {
        "bootstrap_cis": reliability_tables["cis"],
        "table5_differences": reliability_tables["differences"],
        "recall_by_type_cis": reliability_tables["by_type"],
        "table6_best_hybrid_by_type": reliability_tables["table6"],
        "table7_top5_failures": failure_tables["table7"],
        "failure_labels": failure_tables["labels"],
        "table8_failure_labels": failure_tables["table8"],
        "aggregate_detail": failure_tables["aggregate"],
        "topk_sensitivity": failure_tables["sensitivity"],
        "table9_success_overlap": failure_tables["table9"],
    }
    differences = reliability_tables["differences"]
    vocabulary = {
        "overall", "Overall", "all", *failures.LABELS, *failures.OVERLAP_PATTERNS,
        *differences["comparison"], *differences["interpretation"], *differences["metric"],
        *reliability_tables["cis"]["metric"], *failure_tables["aggregate"]["Quantity"],
    }
    return public.export_tables(study, per_question, tables_out, vocabulary)
