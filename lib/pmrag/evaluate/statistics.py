"""What a careful statistician adds to the paper's evaluation (§8.1, §9.1), for one study: the hybrid's selection
scored out of sample and repeated inside the bootstrap (:mod:`pmrag.evaluate.selection`), evidence groups counted
once (:mod:`pmrag.evaluate.groups`), every method against the selected hybrid with permutation tests and Holm /
Benjamini–Hochberg decisions within a declared and an exploratory family, methods with identical rankings tested
once (:mod:`pmrag.evaluate.multiplicity`, :mod:`pmrag.evaluate.aliases`), and the power of a study of n questions
(:mod:`pmrag.evaluate.power`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.names import PAPER_FUSION, HybridId, RetrieverId, parse_method
from pmrag.core.params import BootstrapSection, StatisticsSection

SIMULATE = "simulate"   # selection_statistics(coverage=...): simulate the coverage check there


@dataclass(frozen=True)
class SelectionStatistics:
    """The hybrid's selection evaluated out of sample (``held_out``: repeated stratified k-fold over every pairing,
    None with fewer than two questions, averaged over ``statistics.n_seeds`` partition seeds; ``held_out_beta``: the
    β of the selected pairing alone, that pairing chosen on all questions (so conditional on it);
    ``held_out_fusions``: each other fusion's sweep), the bootstrap that repeats the selection (``bootstrap``,
    ``bootstrap_beta``, ``bootstrap_fusions``), evidence-group metrics of every method beside the chunk-level ones
    (``groups``, ``group_rows``; message-level Recall@k in ``message_rows``, ``evidence_messages``), the declared
    comparisons and every other method against the selected hybrid with permutation tests, Holm / BH decisions within
    each family and each row's detectable difference and significance threshold (``comparisons``:
    :func:`pmrag.evaluate.multiplicity.family_table`; ``aliases``: ``method, representative`` of every method,
    identical rankings at the deepest metric cut-off being one method), the power curve of the paper's Table 5
    comparison (``power``, ``pilot``: its two methods, ``needed``: the questions that detect the observed difference,
    ``detectable`` and ``threshold``: the true difference detected with the set power and the smallest significant
    observed difference at the study's n, ``sentence``: the plain reading), and ``coverage``: how often the paper's
    selection's intervals (conditional, bias-corrected, out-of-bag, .632) cover the selected configuration's true
    value on datasets drawn from these questions (:class:`~pmrag.evaluate.selection_coverage.SelectionCoverage`;
    None when ``statistics.coverage_datasets`` is 0).  A sweep broader than the pairings the paper's selection
    chooses among (``hybrid.pairings: auto`` or ``all``) adds ``held_out_broader``, the same held-out selection
    among every swept pairing, so that both selection-aware numbers stand side by side; ``configurations``
    counts the (pairing, β) configurations each chose from (the second 0 without a broader sweep) and
    ``broader_pairings`` the swept pairings."""

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
    sentence: str          # "a true difference of … is detected with 80 % power; |Δ| > … is significant"
    bootstrap_fusions: dict  # the selection bootstrap within each other fusion of hybrid.fusions
    message_rows: pd.DataFrame       # message-level Recall@k of every method (pmrag.evaluate.message_recall)
    evidence_messages: pd.DataFrame  # per question: its primary-evidence messages and how many lie in no chunk
    coverage: object         # the paper's selection's intervals checked on datasets drawn from these questions
    aliases: pd.DataFrame | None = None   # method, representative: identical rankings are one method
    detectable: float = float("nan")      # the pilot's minimum detectable (true) difference at the study's n
    threshold: float = float("nan")       # the pilot's smallest significant observed |Δ| at the study's n
    held_out_broader: object = None   # a broader sweep (hybrid.pairings: auto, all): selection among every pairing
    configurations: tuple[int, int] = (0, 0)   # (pairing, β) configurations of held_out and of held_out_broader
    broader_pairings: int = 0                  # the broader sweep's pairings (0 without one)


def broader_pairings(pairings: Sequence[tuple[str, str]], swept: Sequence[tuple[str, str]] | None):
    """The swept pairings when they hold more than the ``pairings`` the paper's selection chooses among (a broader
    sweep, whose own selection is reported beside the paper's), else None."""
    swept = [tuple(map(str, pair)) for pair in swept or ()]
    return swept if set(map(tuple, pairings)) < set(swept) else None


def configuration_count(swept: pd.DataFrame, pairings: Sequence[tuple[str, str]], fusion: str = PAPER_FUSION) -> int:
    """How many (pairing, β) configurations of ``fusion`` a selection among ``pairings`` chooses from."""
    rows = swept[swept["fusion"] == fusion] if "fusion" in swept else swept
    wanted = {tuple(map(str, pair)) for pair in pairings}
    chosen = [pair in wanted for pair in zip(rows["bm25"], rows["vector"])]
    return int(rows.loc[chosen, ["bm25", "vector", "beta"]].drop_duplicates().shape[0])


def selection_statistics(swept: pd.DataFrame, per_question: pd.DataFrame, rankings: Mapping[RetrieverId, pd.DataFrame],
                         hybrids: Sequence[HybridId], selected: HybridId, reference: str, qrels: pd.DataFrame,
                         types: pd.Series, question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame, *,
                         pairings: Sequence[tuple[RetrieverId, RetrieverId]], fusions: Sequence[str],
                         section: StatisticsSection, bootstrap: BootstrapSection, ks: Sequence[int],
                         diagnostic: HybridId | None = None,
                         broader: Sequence[tuple[RetrieverId, RetrieverId]] | None = None,
                         coverage=SIMULATE, hybrid_rankings: Mapping[str, pd.DataFrame] | None = None
                         ) -> SelectionStatistics:
    """Every statistic of :class:`SelectionStatistics` for one study.

    ``swept``: the β sweep of every pairing and fusion; ``per_question``: metric rows of every single retriever and
    selected hybrid; ``rankings``: every single retriever's; ``hybrids``: each pairing's selected configuration,
    ``selected`` the overall one; ``reference``: the paper's Table 5 reference retriever (the power pilot's second
    method); ``qrels`` and ``types`` of the evaluable questions; ``question_evidence`` and ``chunk_messages`` give
    the evidence groups and message-level recall; ``diagnostic``: ``analysis.diagnostic_hybrid`` (the role
    ``diagnostic`` of ``statistics.declared_comparisons``; its β is fixed by the params, not chosen on these
    questions); ``broader``: every swept pairing, when more than ``pairings`` (the paper's selection's) were swept;
    ``coverage``: the :func:`coverage_check` of ``swept`` and ``pairings`` already made (or None: not simulated),
    else (:data:`SIMULATE`) made here; ``hybrid_rankings``: hybrids' min-max fused rankings already made, by name
    (:attr:`pmrag.evaluate.sweep.Hybrids.rankings`); a hybrid not among them is fused here from ``rankings``.
    """
    from pmrag.evaluate import groups as eg
    from pmrag.evaluate import message_recall as em
    from pmrag.evaluate import power as ep
    from pmrag.evaluate.metric_names import RECALL5
    from pmrag.evaluate.selection import held_out_selection, selection_bootstrap
    from pmrag.retrieve.fusion import minmax_fuse

    names = [(str(a), str(b)) for a, b in pairings]
    wider = broader_pairings(names, broader)
    fixed = (str(selected.first), str(selected.second))
    # a study with fewer questions than folds gets one fold per question; with one question there is no held-out part
    n_splits = min(section.n_splits, int(types.size))
    folds = dict(n_splits=n_splits, n_repeats=section.n_repeats, seed=section.seed, n_seeds=section.n_seeds)
    resamples = dict(n_resamples=bootstrap.n_resamples, seed=bootstrap.seed, confidence=bootstrap.confidence,
                     kind=section.selection_bootstrap)

    def held_out_of(pairs, fusion=PAPER_FUSION):
        return held_out_selection(swept, types, pairings=pairs, fusion=fusion, **folds) if n_splits >= 2 else None

    others = [fusion for fusion in fusions if fusion != PAPER_FUSION]

    # evidence groups: every retriever's ranking and each selected hybrid's fused ranking
    groups = eg.evidence_groups(qrels, question_evidence, chunk_messages, rule=section.evidence_groups)
    judgments = eg.group_judgments(qrels, groups)
    made = hybrid_rankings or {}

    def fuse(hybrid: HybridId) -> pd.DataFrame:
        ranking = made.get(str(hybrid))
        return minmax_fuse(rankings[hybrid.first], rankings[hybrid.second], hybrid.beta) if ranking is None else ranking

    fused = {str(rid): ranking for rid, ranking in rankings.items()}
    for hybrid in hybrids:
        fused[str(hybrid)] = fuse(hybrid)
    group_rows = pd.concat([eg.per_question_group_rows(ranking, name, judgments, None, types, ks)
                            for name, ranking in fused.items()], ignore_index=True)
    # message-level recall of the same rankings: each primary-evidence message once, whichever chunk holds it
    evidence = em.evidence_judgments(question_evidence, chunk_messages, questions=types.index)
    message_rows = pd.concat([em.per_question_message_rows(ranking, name, evidence, types, ks)
                              for name, ranking in fused.items()], ignore_index=True)

    per_question = per_question.drop_duplicates(["retriever", "question_id"])
    comparisons, aliases = _comparisons(per_question, fused, fuse, selected, reference, diagnostic, hybrids,
                                        section=section, bootstrap=bootstrap, ks=ks)
    pilot = (str(selected), reference)
    differences = ep.pilot_differences(per_question, *pilot)
    observed = float(np.mean(differences))
    differences = differences if observed >= 0 else -differences    # a true difference in the observed direction
    detectable, threshold = float("nan"), ep.significance_threshold(differences, section.alpha)
    resampling = dict(power=section.power, alpha=section.alpha, n_resamples=bootstrap.n_resamples, seed=bootstrap.seed)
    if np.ptp(differences) > 0:
        power = ep.power_curve(differences, section.study_sizes, **resampling)
        needed = ep.questions_needed(differences, abs(observed), **resampling) if observed else None
        n = len(differences)
        detectable = ep.detectable_difference(differences, n, **resampling)
        sentence = ep.power_sentence(n, detectable, threshold, pilot, power=section.power, alpha=section.alpha)
    else:   # every question differs by the same amount: nothing to resample
        power, needed = pd.DataFrame(columns=["n_questions", "detectable_difference"]), None
        sentence = f"The pilot's paired differences are all {observed:+.3f}: no spread to simulate studies from."
    if isinstance(coverage, str) and coverage == SIMULATE:
        coverage = coverage_check(swept, pairings, section, bootstrap)
    return SelectionStatistics(
        held_out_of(names), held_out_of(fixed), {fusion: held_out_of(names, fusion) for fusion in others},
        selection_bootstrap(swept, pairings=names, **resamples), selection_bootstrap(swept, pairings=fixed, **resamples),
        groups, group_rows, comparisons, power, pilot, observed, needed, sentence,
        {fusion: selection_bootstrap(swept, pairings=names, fusion=fusion, **resamples) for fusion in others},
        message_rows=message_rows, evidence_messages=em.evidence_counts(evidence),
        coverage=coverage,
        aliases=aliases, detectable=detectable, threshold=threshold,
        held_out_broader=held_out_of(wider) if wider is not None else None,
        configurations=(configuration_count(swept, names), configuration_count(swept, wider or ())),
        broader_pairings=len(wider or ()))


def coverage_check(swept: pd.DataFrame, pairings: Sequence[tuple[RetrieverId, RetrieverId]],
                   section: StatisticsSection, bootstrap: BootstrapSection):
    """The coverage check of the selected hybrid's intervals among ``pairings``
    (:func:`~pmrag.evaluate.selection_coverage.selection_coverage` with ``statistics.coverage_datasets`` studies of
    ``statistics.coverage_resamples`` resamples, ``bootstrap.seed`` and ``confidence``), or None when
    ``coverage_datasets`` is 0.  Reads no other key of either section (the study's ``selection_coverage`` stage is
    keyed on these)."""
    from pmrag.evaluate.selection_coverage import selection_coverage

    if not section.coverage_datasets:
        return None
    return selection_coverage(swept, section.coverage_datasets, section.coverage_resamples, bootstrap.seed,
                              bootstrap.confidence, pairings=[(str(a), str(b)) for a, b in pairings])


def _comparisons(per_question: pd.DataFrame, fused: dict, fuse: Callable[[HybridId], pd.DataFrame],
                 selected: HybridId, reference: str,
                 diagnostic: HybridId | None, hybrids: Sequence[HybridId], *, section: StatisticsSection,
                 bootstrap: BootstrapSection, ks: Sequence[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(comparisons, aliases)``: the methods with identical top-max(ks) rankings (the selected hybrid represents its
    own group, every other group its first method), then :func:`pmrag.evaluate.multiplicity.family_table` with the
    declared pairs of the params and every pairing's selected β (the selected hybrid included) as chosen in sample;
    ``fuse`` makes a hybrid's min-max fused ranking."""
    from pmrag.evaluate.aliases import alias_groups
    from pmrag.evaluate.metric_names import RECALL5
    from pmrag.evaluate.multiplicity import family_table

    methods = list(dict.fromkeys(per_question["retriever"]))
    ranked = dict(fused)
    for name in (m for m in methods if m not in ranked):   # the diagnostic hybrid, when no pairing selected it
        hybrid = parse_method(name)
        if isinstance(hybrid, HybridId) and hybrid.fusion == PAPER_FUSION:
            ranked[name] = fuse(hybrid)
    order = [str(selected)] + [m for m in methods if m != str(selected) and m in ranked]
    aliases = alias_groups({m: ranked[m] for m in order}, max(ks), sorted(per_question["question_id"].unique()))
    roles = {"selected": str(selected), "reference": reference, "diagnostic": str(diagnostic)}
    in_sample = ({str(h) for h in hybrids} - {str(diagnostic)}) | {str(selected)}
    table = family_table(per_question, str(selected), section.declared(roles, methods), aliases, in_sample, RECALL5,
                         B=bootstrap.n_resamples, seed=bootstrap.seed, alpha=section.alpha, power=section.power)
    return table, aliases
