"""The statistics (§6.3–6.4) and failure analysis (§7) of a study, from typed inputs.

Both take the per-question metric rows of every method (single retrievers and fused configurations,
``retriever, question_id, question_type, <metric>@k``) and a :class:`Selection` saying which of them the
analysis is about.  The study's stages call them; so can anyone holding such rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.params import AnalysisSection, BootstrapSection
from pmrag.evaluate import failures, reliability
from pmrag.evaluate.metric_names import RECALL5


@dataclass(frozen=True)
class Selection:
    """What the analysis compares: the selected best hybrid, the reference single retriever (Table 5) and the
    diagnostic (summary) hybrid of Tables 5 and 8 and Figure 6."""

    best: HybridId
    reference: RetrieverId
    diagnostic: HybridId


@dataclass(frozen=True)
class Reliability:
    """Bootstrap results: ``cis`` (every method × Recall/MRR/nDCG@5), ``differences`` (Table 5's comparisons)
    and ``by_type`` (Recall@5 of every method, overall and per question type)."""

    cis: pd.DataFrame
    differences: pd.DataFrame
    by_type: pd.DataFrame


@dataclass(frozen=True)
class FailureAnalysis:
    """§7: ``table7`` (Top-K failures of the best hybrid by type), ``labels`` (rule-based labels of the
    diagnostic hybrid's failures), ``table8``, ``aggregate`` (§7.3 detail), ``sensitivity`` (Figure 6's data),
    ``table9`` (success overlap of the best hybrid's two components) and ``table9_by_tag`` (Table 9 within each
    value of each question tag)."""

    table7: pd.DataFrame
    labels: pd.DataFrame
    table8: pd.DataFrame
    aggregate: pd.DataFrame
    sensitivity: pd.DataFrame
    table9: pd.DataFrame
    table9_by_tag: pd.DataFrame


def question_types(questions: pd.DataFrame) -> list[str]:
    """Question types present: the paper's three first (when present), then the rest in name order."""
    present = list(dict.fromkeys(questions["type"].astype(str)))
    paper = [t for t in ("named_entity", "contextual", "aggregate") if t in present]
    return paper + sorted(t for t in present if t not in paper)


def _rows_of(per_question: pd.DataFrame, method) -> pd.DataFrame:
    rows = per_question[per_question["retriever"] == str(method)]
    if rows.empty:
        raise ValueError(f"{method} has no per-question rows (methods: {', '.join(pd.unique(per_question['retriever']))})")
    return rows


def reliability_tables(per_question: pd.DataFrame, selection: Selection, bootstrap: BootstrapSection,
                       types: Sequence[str]) -> Reliability:
    """Intervals of every method, Table 5's paired differences and Recall@5 by question type.

    Parameters
    ----------
    per_question : rows of every method (single retrievers and fused configurations)
    selection : the best hybrid, the reference retriever and the diagnostic hybrid
    bootstrap : B, seed and confidence
    types : question types in display order
    """
    for method in (selection.best, selection.reference, selection.diagnostic):
        _rows_of(per_question, method)
    comparisons = [
        (f"Best − {selection.reference}", str(selection.best), str(selection.reference)),
        (f"Best − diagnostic hybrid ({str(selection.diagnostic).removeprefix('hybrid:')})", str(selection.best),
         str(selection.diagnostic)),
    ]
    return Reliability(
        cis=reliability.metric_cis(per_question, k=5, params=bootstrap),
        differences=reliability.paired_differences(per_question, comparisons, RECALL5, bootstrap),
        by_type=reliability.by_type_cis(per_question, RECALL5, bootstrap, types),
    )


def failure_tables(per_question: pd.DataFrame, selection: Selection, qrels: pd.DataFrame, chunks: pd.DataFrame,
                   settings: AnalysisSection, types: Sequence[str], tags: pd.DataFrame | None = None) -> FailureAnalysis:
    """§7's tables (see :class:`FailureAnalysis`).

    Parameters
    ----------
    per_question : rows of every method, with every cut-off of ``settings`` scored
    selection : the best hybrid (Tables 7 and 9) and the diagnostic hybrid (Table 8, aggregate detail, Figure 6)
    qrels : the evaluable questions' qrels
    chunks : the chunks (``chunk_id, source, start_at``) for the aggregate detail
    settings : failure and recovery cut-offs, the aggregate type, the multiple-gold threshold
    types : question types in display order
    tags : the questions' tags (``question_id, tag, value``) for Table 9 by tag; None: no tags
    """
    k, wider, aggregate_type = settings.failure_k, list(settings.recovery_ks), settings.aggregate_type
    diagnostic = _rows_of(per_question, selection.diagnostic)
    labels = failures.rule_labels(diagnostic, qrels, k, aggregate_type, settings.min_primary_gold)
    bm25, vector = _rows_of(per_question, selection.best.first), _rows_of(per_question, selection.best.second)
    return FailureAnalysis(
        table7=failures.failure_table(_rows_of(per_question, selection.best), k, types),
        labels=labels,
        table8=failures.label_table(labels),
        aggregate=failures.aggregate_summary(diagnostic, qrels, chunks, k, wider, aggregate_type),
        sensitivity=failures.topk_sensitivity(diagnostic, [k, *wider], types),
        table9=failures.success_overlap(bm25, vector, k),
        table9_by_tag=failures.success_overlap_by_tag(bm25, vector, tags, k),
    )
