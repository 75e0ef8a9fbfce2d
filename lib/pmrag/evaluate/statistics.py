"""What a careful statistician adds to the paper's evaluation (§8.1, §9.1), for one study: the hybrid's selection
scored out of sample and repeated inside the bootstrap (:mod:`pmrag.evaluate.selection`), evidence groups counted
once (:mod:`pmrag.evaluate.groups`), every method against the selected hybrid with permutation tests and Holm /
Benjamini–Hochberg decisions (:mod:`pmrag.evaluate.multiplicity`), and the power of a study of n questions
(:mod:`pmrag.evaluate.power`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.names import PAPER_FUSION, HybridId, RetrieverId
from pmrag.core.params import BootstrapSection, StatisticsSection


@dataclass(frozen=True)
class SelectionStatistics:
    """The hybrid's selection evaluated out of sample (``held_out``: repeated stratified k-fold over every pairing,
    None with fewer than two questions, averaged over ``statistics.n_seeds`` partition seeds; ``held_out_beta``: the
    β of the selected pairing alone, that pairing chosen on all questions (so conditional on it);
    ``held_out_fusions``: each other fusion's sweep), the bootstrap that repeats the selection (``bootstrap``,
    ``bootstrap_beta``, ``bootstrap_fusions``), evidence-group metrics of every method beside the chunk-level ones
    (``groups``, ``group_rows``), every method against the selected hybrid with permutation tests and Holm / BH
    decisions (``comparisons``), and the power curve of the paper's Table 5 comparison (``power``, ``pilot``: its two
    methods, ``needed``: the questions that detect the observed difference, ``sentence``: the plain reading), and
    ``coverage``: how often the paper's selection's intervals (conditional, bias-corrected, out-of-bag, .632) cover
    the selected configuration's true value on datasets drawn from these questions
    (:class:`~pmrag.evaluate.selection_coverage.SelectionCoverage`; None when ``statistics.coverage_datasets`` is 0)."""

    held_out: object
    held_out_beta: object
    held_out_fusions: dict
    bootstrap: object
    bootstrap_beta: object
    groups: pd.DataFrame
    group_rows: pd.DataFrame
    comparisons: pd.DataFrame
    power: pd.DataFrame
    pilot: tuple[str, str]
    observed_delta: float
    needed: int | None
    sentence: str          # "with your n questions, differences below … are noise"
    bootstrap_fusions: dict  # the selection bootstrap within each other fusion of hybrid.fusions
    message_rows: pd.DataFrame       # message-level Recall@k of every method (pmrag.evaluate.message_recall)
    evidence_messages: pd.DataFrame  # per question: its primary-evidence messages and how many lie in no chunk
    coverage: object         # the paper's selection's intervals checked on datasets drawn from these questions


def selection_statistics(swept: pd.DataFrame, per_question: pd.DataFrame, rankings: Mapping[RetrieverId, pd.DataFrame],
                         hybrids: Sequence[HybridId], selected: HybridId, reference: str, qrels: pd.DataFrame,
                         types: pd.Series, question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame, *,
                         pairings: Sequence[tuple[RetrieverId, RetrieverId]], fusions: Sequence[str],
                         section: StatisticsSection, bootstrap: BootstrapSection, ks: Sequence[int]) -> SelectionStatistics:
    """Every statistic of :class:`SelectionStatistics` for one study.

    ``swept``: the β sweep of every pairing and fusion; ``per_question``: metric rows of every single retriever and
    selected hybrid; ``rankings``: every single retriever's; ``hybrids``: each pairing's selected configuration,
    ``selected`` the overall one; ``reference``: the paper's Table 5 reference retriever (the power pilot's second
    method); ``qrels`` and ``types`` of the evaluable questions; ``question_evidence`` and ``chunk_messages`` give
    the evidence groups and message-level recall.
    """
    from pmrag.evaluate import groups as eg
    from pmrag.evaluate import message_recall as em
    from pmrag.evaluate import power as ep
    from pmrag.evaluate.metric_names import RECALL5
    from pmrag.evaluate.multiplicity import comparisons_table
    from pmrag.evaluate.selection import held_out_selection, selection_bootstrap
    from pmrag.evaluate.selection_coverage import selection_coverage
    from pmrag.retrieve.fusion import minmax_fuse

    names = [(str(a), str(b)) for a, b in pairings]
    fixed = (str(selected.first), str(selected.second))
    # a study with fewer questions than folds gets one fold per question; with one question there is no held-out part
    n_splits = min(section.n_splits, int(types.size))
    folds = dict(n_splits=n_splits, n_repeats=section.n_repeats, seed=section.seed, n_seeds=section.n_seeds)
    resamples = dict(n_resamples=bootstrap.n_resamples, seed=bootstrap.seed, confidence=bootstrap.confidence,
                     kind=section.selection_bootstrap)

    def held_out_of(pairs, fusion=PAPER_FUSION):
        return held_out_selection(swept, types, pairings=pairs, fusion=fusion, **folds) if n_splits >= 2 else None

    others = [fusion for fusion in fusions if fusion != PAPER_FUSION]

    # evidence groups: every retriever's ranking and each selected hybrid, fused again from the runs
    groups = eg.evidence_groups(qrels, question_evidence, chunk_messages, rule=section.evidence_groups)
    judgments = eg.group_judgments(qrels, groups)
    fused = {str(rid): ranking for rid, ranking in rankings.items()}
    for hybrid in hybrids:
        fused[str(hybrid)] = minmax_fuse(rankings[hybrid.first], rankings[hybrid.second], hybrid.beta)
    group_rows = pd.concat([eg.per_question_group_rows(ranking, name, judgments, None, types, ks)
                            for name, ranking in fused.items()], ignore_index=True)
    # message-level recall of the same rankings: each primary-evidence message once, whichever chunk holds it
    evidence = em.evidence_judgments(question_evidence, chunk_messages, questions=types.index)
    message_rows = pd.concat([em.per_question_message_rows(ranking, name, evidence, types, ks)
                              for name, ranking in fused.items()], ignore_index=True)

    per_question = per_question.drop_duplicates(["retriever", "question_id"])
    comparisons = comparisons_table(per_question, str(selected), RECALL5, B=bootstrap.n_resamples,
                                    seed=bootstrap.seed, alpha=section.alpha)
    pilot = (str(selected), reference)
    differences = ep.pilot_differences(per_question, *pilot)
    observed = float(np.mean(differences))
    resampling = dict(power=section.power, alpha=section.alpha, n_resamples=bootstrap.n_resamples, seed=bootstrap.seed)
    if np.ptp(differences) > 0:
        power = ep.power_curve(differences, section.study_sizes, **resampling)
        needed = ep.questions_needed(differences, abs(observed), **resampling) if observed else None
        n = len(differences)
        sentence = ep.noise_sentence(n, ep.detectable_difference(differences, n, **resampling), power=section.power,
                                     alpha=section.alpha)
    else:   # every question differs by the same amount: nothing to resample
        power, needed = pd.DataFrame(columns=["n_questions", "detectable_difference"]), None
        sentence = f"The pilot's paired differences are all {observed:+.3f}: no spread to simulate studies from."
    return SelectionStatistics(
        held_out_of(names), held_out_of(fixed), {fusion: held_out_of(names, fusion) for fusion in others},
        selection_bootstrap(swept, pairings=names, **resamples), selection_bootstrap(swept, pairings=fixed, **resamples),
        groups, group_rows, comparisons, power, pilot, observed, needed, sentence,
        {fusion: selection_bootstrap(swept, pairings=names, fusion=fusion, **resamples) for fusion in others},
        message_rows=message_rows, evidence_messages=em.evidence_counts(evidence),
        coverage=selection_coverage(swept, section.coverage_datasets, section.coverage_resamples, bootstrap.seed,
                                    bootstrap.confidence, pairings=names) if section.coverage_datasets else None)
