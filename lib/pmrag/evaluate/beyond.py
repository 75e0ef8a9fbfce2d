"""The comparisons of notebook 08 (§7.2, §8.2, §9.1): the methods beyond the paper's, each family against the
paper's best flat retriever and its best hybrid, within every question type (the aggregate type first), with
paired bootstrap differences.

Families (:data:`FAMILIES`) are what the retrievers' registered components declare
(:meth:`~pmrag.retrieve.retrievers.RetrieverComponent.family_of`), so a newly registered method joins the table of
the family it names, and is compared with what it builds on
(:meth:`~pmrag.retrieve.retrievers.RetrieverComponent.bases`):

* ``lexical``: bm25 with another tokenizer than the paper's regex (``raw_text_bm25_sudachi``), and rm3;
* ``dense``: multi-vector (multivec) beside the single-vector retriever of the same representation;
* ``distributed``: mmr, session and decomp, the remedies for evidence spread over chunks;
* ``ablation``: a family of representations, not of methods: the paper's methods (the ``paper`` family: the
  regex bm25 and vector) over the five parts of embedding_text (:data:`ABLATION_ORDER`), compared with
  embedding_text under the same method.

The references: the paper's best flat retriever is the best of the paper's six (three representations × the
regex bm25 and vector) by macro Recall@5, then nDCG@5, then MRR@5, then list order; the best hybrid is the study's
selected min-max hybrid.  Both are chosen on the questions they are evaluated on, as in the paper (§4.4, §9.1): a
difference is conditional on that selection.  Within a type the bootstrap resamples that type's questions only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.names import ABLATION_REPRESENTATIONS, PAPER_REPRESENTATIONS, RetrieverId, parse_method
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.metric_names import PAPER_COLUMNS, RECALL5, Metric, metric_columns
from pmrag.evaluate.reliability import paired_differences
from pmrag.evaluate.select import listed, select
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import FAMILIES as COMPONENT_FAMILIES, PAPER

METRICS = PAPER_COLUMNS   # the tables' columns: recall@5, mrr@5, ndcg@5
OVERALL = "overall"
# embedding_text's parts (ABLATION_REPRESENTATIONS) with summary and embedding_text itself, in the tables' order
ABLATION_ORDER = ("prefix", "summary", "excerpt", "summary_excerpt", "embedding_text")
ABLATION = "ablation"
FAMILIES = (*(f for f in COMPONENT_FAMILIES if f != PAPER), ABLATION)
"""Notebook 08's tables: the components' families beyond the paper's, then the ablation."""


def component_family(rid: RetrieverId) -> str | None:
    """The family the retriever's registered component declares for it (None: an unregistered method)."""
    return RETRIEVERS.get(rid.method).family_of(rid) if rid.method in RETRIEVERS else None


def is_paper_retriever(rid: RetrieverId) -> bool:
    """One of the paper's six flat retrievers: a paper representation under a method of the ``paper`` family
    (the regex bm25 or vector)."""
    return rid.representation in PAPER_REPRESENTATIONS and component_family(rid) == PAPER


def is_ablation_part(rid: RetrieverId) -> bool:
    """A part of embedding_text alone (prefix, excerpt, summary_excerpt) under a method of the ``paper`` family."""
    return rid.representation in ABLATION_REPRESENTATIONS and component_family(rid) == PAPER


def family_members(retrievers: Sequence[RetrieverId | str], family: str) -> list[str]:
    """The listed retrievers of one family, in list order (the ablation's in :data:`ABLATION_ORDER`, bm25 first,
    with the paper's summary and embedding_text retrievers of the same methods)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    rids = [RetrieverId.parse(str(r)) for r in retrievers]
    if family != ABLATION:
        return [str(r) for r in rids if component_family(r) == family]
    parts = [r for r in rids if is_ablation_part(r)]
    methods = list(dict.fromkeys(r.method for r in parts))
    listed = set(rids)
    return [str(RetrieverId(rep, method)) for method in methods for rep in ABLATION_ORDER
            if RetrieverId(rep, method) in listed]


def paper_best_flat(per_question: pd.DataFrame, retrievers: Sequence[RetrieverId | str]) -> str:
    """The best of the listed paper retrievers by macro Recall@5, then nDCG@5, then MRR@5 (rounded to 12
    decimals), then list order (:mod:`pmrag.evaluate.select`)."""
    paper = [str(r) for r in retrievers if is_paper_retriever(RetrieverId.parse(str(r)))]
    if not paper:
        raise ValueError("no paper retriever (raw_text/summary/embedding_text × bm25/vector) is listed")
    means = per_question[per_question["retriever"].isin(paper)].groupby("retriever")[list(METRICS)].mean()
    order = {name: i for i, name in enumerate(paper)}
    return means.index[select(means, listed([order[name] for name in means.index]))]


def type_order(per_question: pd.DataFrame, aggregate_type: str, types: Sequence[str] | None = None) -> list[str]:
    """The aggregate type first, the other types (``types`` order, else first appearance), then ``overall``."""
    present = list(types) if types is not None else list(dict.fromkeys(per_question["question_type"]))
    return [t for t in [aggregate_type] if t in present] + [t for t in present if t != aggregate_type] + [OVERALL]


def comparison_table(per_question: pd.DataFrame, methods: Sequence[str], references: dict[str, str],
                     bootstrap: BootstrapSection, aggregate_type: str, types: Sequence[str] | None = None,
                     metric: Metric | str = RECALL5) -> pd.DataFrame:
    """One row per (question type, method): questions, macro Recall/MRR/nDCG@5, and for each reference
    (``{label: method}``) the paired difference in ``metric`` (method − reference) with its interval.

    Types run the aggregate type first and ``overall`` last (:func:`type_order`).  A method compared with itself
    gets Δ = 0 and no interval.  Columns: question_type, method, questions, recall@5, mrr@5, ndcg@5, then per
    reference ``Δ <label>``, ``Δ <label> low``, ``Δ <label> high``, ``Δ <label> excludes 0``.
    """
    wanted = list(dict.fromkeys([*methods, *references.values()]))
    missing = [m for m in wanted if m not in set(per_question["retriever"])]
    if missing:
        raise ValueError(f"no per-question rows for {', '.join(missing)}")
    rows = per_question[per_question["retriever"].isin(wanted)]
    frames = []
    for question_type in type_order(rows, aggregate_type, types):
        part = rows if question_type == OVERALL else rows[rows["question_type"] == question_type]
        if part.empty:
            continue
        means = part.groupby("retriever", sort=False)[list(METRICS)].mean()
        table = pd.DataFrame({"question_type": question_type, "method": list(methods),
                              "questions": part["question_id"].nunique()})
        for column in METRICS:
            table[column] = [float(means.at[m, column]) for m in methods]
        for label, reference in references.items():
            comparisons = [(f"{m} − {reference}", m, reference) for m in methods if m != reference]
            diff = paired_differences(part, comparisons, metric, bootstrap).set_index("method_a") if comparisons else None
            values = {m: ((0.0, np.nan, np.nan, False) if m == reference else
                          tuple(diff.loc[m, ["delta", "ci_low", "ci_high", "excludes_zero"]])) for m in methods}
            for index, suffix in enumerate(("", " low", " high", " excludes 0")):
                table[f"Δ {label}{suffix}"] = [values[m][index] for m in methods]
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class FamilyReport:
    """One family's tables: ``members`` (the listed methods), ``table`` (:func:`comparison_table` against the
    references) and ``own`` (:func:`own_reference_differences` against what each method builds on)."""

    members: list[str]
    table: pd.DataFrame
    own: pd.DataFrame


def family_report(per_question: pd.DataFrame, members: Sequence[str], references: dict[str, str],
                  bootstrap: BootstrapSection, aggregate_type: str, types: Sequence[str] | None = None,
                  reference_of: Callable[[RetrieverId], RetrieverId | None] | None = None) -> FamilyReport:
    """:func:`comparison_table` and :func:`own_reference_differences` of one family (empty frames when no member
    is listed); ``reference_of`` defaults to :func:`base_retriever`."""
    members = list(members)
    if not members:
        return FamilyReport([], pd.DataFrame(), own_reference_differences(per_question, [], bootstrap, aggregate_type))
    table = comparison_table(per_question, members, references, bootstrap, aggregate_type, types)
    own = own_reference_differences(per_question, same_method_references(members, reference_of or base_retriever),
                                    bootstrap, aggregate_type, types)
    return FamilyReport(members, table, own)


def same_method_references(methods: Sequence[str], reference_of: Callable[[RetrieverId], RetrieverId | None]
                           ) -> list[tuple[str, str, str]]:
    """``(label, method, reference)`` comparisons of each method with its own reference (e.g. multivec with the
    vector retriever of the same representation), skipping methods without one and fused configurations."""
    out = []
    for name in methods:
        method = parse_method(name)
        if not isinstance(method, RetrieverId):   # a fused configuration builds on two retrievers
            continue
        reference = reference_of(method)
        if reference is not None and str(reference) != name:
            out.append((f"{name} − {reference}", name, str(reference)))
    return out


def own_reference_differences(per_question: pd.DataFrame, comparisons: Sequence[tuple[str, str, str]],
                              bootstrap: BootstrapSection, aggregate_type: str, types: Sequence[str] | None = None,
                              metric: Metric | str = RECALL5) -> pd.DataFrame:
    """Paired differences of :func:`same_method_references` comparisons within every type (aggregate first,
    ``overall`` last); comparisons whose reference has no rows are dropped."""
    present = set(per_question["retriever"])
    comparisons = [c for c in comparisons if c[1] in present and c[2] in present]
    if not comparisons:
        return pd.DataFrame(columns=["question_type", "comparison", "method_a", "method_b", "metric", "delta",
                                     "ci_low", "ci_high", "excludes_zero", "interpretation"])
    frames = []
    for question_type in type_order(per_question, aggregate_type, types):
        part = per_question if question_type == OVERALL else per_question[per_question["question_type"] == question_type]
        if part.empty:
            continue
        diff = paired_differences(part, comparisons, metric, bootstrap)
        frames.append(diff.assign(question_type=question_type))
    table = pd.concat(frames, ignore_index=True)
    return table[["question_type", *[c for c in table.columns if c != "question_type"]]]


def base_retriever(rid: RetrieverId) -> RetrieverId | None:
    """The retriever a beyond-paper method builds on or replaces, for its own paired comparison: the first of its
    component's :meth:`~pmrag.retrieve.retrievers.RetrieverComponent.bases` (a tokenizer variant or rm3 → the
    regex bm25 of the same representation; multivec, session → vector; mmr, decomp → the base their variant
    names); a method with none, or unregistered → None."""
    bases = RETRIEVERS.get(rid.method).bases(rid) if rid.method in RETRIEVERS else ()
    return bases[0] if bases else None


def ablation_reference(rid: RetrieverId) -> RetrieverId | None:
    """embedding_text under the same method of the ``paper`` family (the ablation's reference)."""
    return RetrieverId("embedding_text", rid.method) if component_family(rid) == PAPER else None


def matches_table(matches: dict[str, pd.Series]) -> pd.DataFrame:
    """Per retriever, how many chunks score above 0 per question (for BM25: chunks sharing a query token):
    median, 10th and 90th percentile, and the questions where none does."""
    rows = []
    for name, series in matches.items():
        values = series.to_numpy(dtype=np.float64)
        rows.append({"retriever": name, "median": float(np.median(values)), "p10": float(np.percentile(values, 10)),
                     "p90": float(np.percentile(values, 90)), "questions with none": int((values == 0).sum())})
    return pd.DataFrame(rows)


def fusion_best(sweep_table: pd.DataFrame) -> pd.DataFrame:
    """Each fusion's selected configuration per pairing by the paper's rule (:func:`pmrag.evaluate.sweep.select_best`),
    with macro Recall/MRR/nDCG@5: columns fusion, bm25, vector, beta and the metrics, fusions and pairings in table
    order."""
    from pmrag.evaluate.sweep import macro_by_configuration, select_best

    macro = macro_by_configuration(sweep_table)
    rows = [select_best(group) for _, group in macro.groupby(["fusion", "bm25", "vector"], sort=False)]
    return pd.DataFrame(rows).reset_index(drop=True)


def fusion_overall(best: pd.DataFrame, pairing_order: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Each fusion's best configuration over its pairings (the rows of :func:`fusion_best`), chosen by the paper's
    overall rule within that fusion (:func:`pmrag.evaluate.sweep.select_overall`); one row per fusion in table
    order, with its hybrid name in ``method``."""
    from pmrag.evaluate.sweep import hybrid_ids, select_overall

    chosen = pd.DataFrame([select_overall(best, pairing_order, fusion)
                           for fusion in dict.fromkeys(best["fusion"])]).reset_index(drop=True)
    chosen.insert(0, "method", [str(h) for h in hybrid_ids(chosen)])
    return chosen


def fusion_per_question(sweep_table: pd.DataFrame, chosen: pd.DataFrame, names: Sequence[str],
                        question_types: pd.Series) -> pd.DataFrame:
    """Per-question rows (``retriever, question_id, question_type`` and the metrics) of chosen sweep
    configurations (rows of ``chosen`` with fusion, bm25, vector, beta), named ``names``."""
    frames = []
    for name, row in zip(names, chosen.itertuples(index=False)):
        part = sweep_table[(sweep_table["fusion"] == row.fusion) & (sweep_table["bm25"] == row.bm25)
                           & (sweep_table["vector"] == row.vector) & np.isclose(sweep_table["beta"], row.beta,
                                                                                rtol=0, atol=1e-12)]
        frames.append(part.drop(columns=["fusion", "bm25", "vector", "beta"]).assign(retriever=name))
    table = pd.concat(frames, ignore_index=True)
    table["question_type"] = table["question_id"].map(question_types)
    return table[["retriever", "question_id", "question_type", *metric_columns(table.columns)]]

