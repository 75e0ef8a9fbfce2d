"""Notebook 09's displays (§8.1, §9.1): the hybrid's selection in sample, out of fold and with the selection repeated
inside the bootstrap; evidence-group metrics beside the chunk-level ones; the declared comparisons and every other
method against the selected hybrid, with decisions adjusted within each family and methods ranking alike tested once;
and the power curve, each with the plain-language reading the paper would print.

The inputs are the ``statistics`` stage's results (:class:`pmrag.study.stages.SelectionStatistics`).  The two
figure functions import matplotlib and the figure style when called: the run README (:mod:`pmrag.present.report`)
prints the readings at the end of every ``pmrag study``, and importing seaborn (with scipy.stats) for them cost it
1.9 s.
"""

from __future__ import annotations

import textwrap

import pandas as pd

from pmrag.evaluate.metric_names import GROUP_METRICS, MESSAGE_METRICS, PAPER_COLUMNS, RECALL5, at_k
from pmrag.present.labels import short_label

METRICS = PAPER_COLUMNS   # recall@5, mrr@5, ndcg@5
PAPER_PROCEDURE = "pairing and β (the paper's selection)"
BETA_PROCEDURE = "β of the pairing chosen on all questions (conditional on that pairing)"
BOOTSTRAP_KIND = {"oob": "out-of-bag percentiles: a conservative bound",
                  ".632": ".632 percentiles: too narrow (understates sampling uncertainty)"}


def broader_procedure(pairings: int, configurations: int, papers: int) -> str:
    """The label of a broader sweep's own selection beside the paper's (counts of pairings and configurations)."""
    return (f"pairing and β among all {pairings} swept pairings ({configurations} configurations; the paper's "
            f"selection above chose among {papers})")


def selection_table(statistics) -> pd.DataFrame:
    """One row per (procedure, metric): the in-sample best with the paper's conditional interval (the configuration
    held fixed), the bias-corrected estimate and interval (the in-sample best and its interval less the bootstrap
    optimism: the selection-aware headline), the out-of-fold score of the selection procedure (mean over the
    partition seeds, with their min, max and sd) and the gap (winner's curse), and the selection bootstrap's
    estimate and interval of ``statistics.selection_bootstrap`` (``bootstrap_kind`` names it: the out-of-bag one is
    a conservative bound).  Procedures: the paper's (every pairing × β), β alone with the pairing chosen on all
    questions (its numbers are conditional on that pairing), the selection within each other fusion of
    ``hybrid.fusions`` and, after a sweep broader than the paper's pairings (``hybrid.pairings: auto``), the same
    selection among every swept pairing, out of fold (:func:`broader_procedure` names both counts of
    configurations: the more there are, the larger the winner's curse; :func:`broader_reading` says so)."""
    rows = []
    procedures = [(PAPER_PROCEDURE, statistics.held_out, statistics.bootstrap),
                  (BETA_PROCEDURE, statistics.held_out_beta, statistics.bootstrap_beta)]
    procedures += [(f"pairing and β, {fusion} fusion", held_out, statistics.bootstrap_fusions.get(fusion))
                   for fusion, held_out in statistics.held_out_fusions.items()]
    if getattr(statistics, "held_out_broader", None) is not None:   # a broader sweep: its selection beside
        papers, configurations = statistics.configurations
        procedures.append((broader_procedure(statistics.broader_pairings, configurations, papers),
                           statistics.held_out_broader, None))
    for label, held_out, boot in procedures:
        if held_out is None:   # fewer than two questions: nothing is held out
            continue
        folds = held_out.summary.set_index("metric")
        resampled = boot.summary.set_index("metric") if boot is not None else None
        for metric in METRICS:
            row = {"procedure": label, "metric": metric, "in_sample": folds.at[metric, "in_sample"]}
            if resampled is not None:
                row.update({"conditional_low": resampled.at[metric, "conditional_low"],
                            "conditional_high": resampled.at[metric, "conditional_high"],
                            "optimism": resampled.at[metric, "optimism"],
                            "bias_corrected": resampled.at[metric, "corrected"],
                            "bias_corrected_low": resampled.at[metric, "corrected_low"],
                            "bias_corrected_high": resampled.at[metric, "corrected_high"]})
            row.update({"out_of_fold": folds.at[metric, "out_of_fold"],
                        "out_of_fold_min": folds.at[metric, "out_of_fold_min"],
                        "out_of_fold_max": folds.at[metric, "out_of_fold_max"],
                        "out_of_fold_sd": folds.at[metric, "out_of_fold_sd"],
                        "winners_curse": folds.at[metric, "gap"]})
            if resampled is not None:
                row.update({"bootstrap_kind": BOOTSTRAP_KIND[boot.kind],
                            "bootstrap_estimate": resampled.at[metric, "estimate"],
                            "bootstrap_low": resampled.at[metric, "ci_low"],
                            "bootstrap_high": resampled.at[metric, "ci_high"]})
            rows.append(row)
    return pd.DataFrame(rows)


def selection_reading(table: pd.DataFrame, kind: str, n_splits: int, n_repeats: int,
                      coverage: pd.DataFrame | None = None, n_seeds: int | None = None) -> str:
    """The headline sentences of the paper's selection in Recall@5, each saying what its interval conditions on:
    the conditional interval (the configuration fixed), the bias-corrected one (the selection's optimism removed;
    with ``coverage``, the table of :func:`~pmrag.evaluate.selection_coverage.selection_coverage`, how often such
    intervals covered in this dataset's own simulation), the out-of-fold score (with the range over partition seeds
    when they differ; ``n_seeds`` counts them), the selection bootstrap of ``kind`` (the out-of-bag interval: a
    conservative bound) and the β of the pairing chosen on all questions (conditional on that pairing)."""
    recall = table[table["metric"] == str(RECALL5)].set_index("procedure")
    row = recall.loc[PAPER_PROCEDURE]
    cells, datasets = _coverage_cells(coverage)

    def covered(interval: str, template: str) -> str:
        return template.format(cells[interval]) if interval in cells else ""

    sentences = [
        f"The selected hybrid's Recall@5 is {row['in_sample']:.3f} [{row['conditional_low']:.3f}, "
        f"{row['conditional_high']:.3f}] in sample, an interval that holds the configuration fixed as if it had not "
        f"been chosen on these questions (the paper's reading{covered('conditional', '; coverage {}')}).",
        f"With the selection's optimism removed (bootstrap optimism {row['optimism']:+.3f}, Efron 1983) it is "
        f"{row['bias_corrected']:.3f} [{row['bias_corrected_low']:.3f}, {row['bias_corrected_high']:.3f}], the "
        f"selection-aware estimate of the chosen configuration's true Recall@5"
        + covered("bias_corrected", f": in {datasets} studies drawn from these questions such intervals covered it "
                                    "{} of the time")
        + covered("fixed configuration", " (a configuration fixed in advance: {})") + ".",
        f"Chosen on {n_splits - 1} of {n_splits} folds and scored on the other ({n_repeats} repeats"
        + (f", mean of {f'{n_seeds} ' if n_seeds else ''}partition seeds, {row['out_of_fold_min']:.3f}–"
           f"{row['out_of_fold_max']:.3f}" if row["out_of_fold_min"] < row["out_of_fold_max"] else "")
        + f") the procedure reaches {row['out_of_fold']:.3f} (winner's curse {row['winners_curse']:+.3f}).",
    ]
    bootstrap = f"{row['bootstrap_estimate']:.3f} [{row['bootstrap_low']:.3f}, {row['bootstrap_high']:.3f}]"
    if kind == "oob":
        sentences.append(f"Scored out of bag with the selection repeated in every resample it is {bootstrap}: a "
                         f"conservative bound{covered(kind, ' (coverage {})')}, wide because each of its values rests "
                         "on about 37% of the questions.")
    else:
        sentences.append(f"The .632 bootstrap with the selection repeated in every resample gives {bootstrap}; its "
                         f"interval is too narrow{covered(kind, ' (coverage {})')}: the in-bag and out-of-bag parts "
                         "of a resample are anti-correlated.")
    if BETA_PROCEDURE in recall.index:
        beta = recall.loc[BETA_PROCEDURE]
        sentences.append(f"With the pairing chosen on all questions and only β chosen on the folds it is "
                         f"{beta['out_of_fold']:.3f} out of fold: conditional on that pairing, so it still leaks the "
                         "pairing's choice on these questions.")
    return " ".join(sentences)


def broader_reading(table: pd.DataFrame, configurations: tuple[int, int]) -> str:
    """The broader sweep's selection beside the paper's, in Recall@5 (a :func:`selection_table`): both in sample
    and out of fold, with the configurations each chose from (``configurations``: the paper's, the broader
    sweep's, as ``SelectionStatistics.configurations``) and whose winner's curse is the larger; "" without a
    broader sweep."""
    recall = table[table["metric"] == str(RECALL5)].set_index("procedure")
    wider = [label for label in recall.index if label.startswith("pairing and β among all ")]
    if not wider:
        return ""
    paper, broader = recall.loc[PAPER_PROCEDURE], recall.loc[wider[0]]
    papers, swept = configurations
    more = broader["winners_curse"] - paper["winners_curse"]
    size = f"{swept / papers:.0f}×" if papers else "more"
    if more > 0:
        curse = (f"its winner's curse {broader['winners_curse']:+.3f} is {more:.3f} larger than the paper's "
                 f"{paper['winners_curse']:+.3f}, as {size} the configurations lead one to expect: the more a "
                 "selection chooses from, the more its in-sample winner tends to flatter itself")
    else:
        curse = (f"its winner's curse {broader['winners_curse']:+.3f} is {-more:.3f} "
                 f"{'smaller than' if more < 0 else 'the same as'} the paper's {paper['winners_curse']:+.3f} "
                 f"although it chose among {size} the configurations (the curse tends to grow with them; on these "
                 "questions it did not)")
    gain = broader["out_of_fold"] - paper["out_of_fold"]
    return (f"Choosing among every swept pairing ({swept} configurations, the paper's selection {papers}) gives "
            f"{broader['in_sample']:.3f} in sample and {broader['out_of_fold']:.3f} out of fold, {gain:+.3f} beside "
            f"the paper's selection out of fold ({paper['out_of_fold']:.3f}); {curse}.")


def coverage_reading(coverage) -> str:
    """What :func:`~pmrag.evaluate.selection_coverage.selection_coverage` measured (a
    :class:`~pmrag.evaluate.selection_coverage.SelectionCoverage`), in one sentence."""
    return (f"{coverage.n_datasets} studies of {coverage.n_questions} questions drawn with replacement from this "
            f"study's {coverage.population}, each running the paper's selection and its intervals "
            f"({coverage.n_resamples} resamples, {coverage.confidence:.0%}): how often each interval covered the "
            "selected configuration's true value (its mean over this study's questions), ± its Monte Carlo standard "
            "error, its mean width, and its point estimate's mean error.")


def _coverage_cells(coverage: pd.DataFrame | None) -> tuple[dict[str, str], int]:
    """Recall@5 coverage of each interval kind as ``93.5% ± 1.2%``, and the number of simulated studies."""
    if coverage is None:
        return {}, 0
    rows = coverage[coverage["metric"] == str(RECALL5)]
    cells = {r.interval: f"{r.coverage:.1%} ± {r.mc_se:.1%}" for r in rows.itertuples(index=False)
             if r.datasets > 0}
    return cells, int(rows["datasets"].max()) if len(rows) else 0


def group_table(chunk_rows: pd.DataFrame, group_rows: pd.DataFrame, groups: pd.DataFrame, message_rows: pd.DataFrame,
                evidence_messages: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per method, in the chunk rows' method order, Recall@k at three levels (macro over questions):

    * ``recall@k`` (and ``ndcg@k``), the paper's chunk level: the share of primary-gold chunks found, so evidence in
      overlapping windows counts once per window (§4.3);
    * ``group_recall@k`` (and ``group_ndcg@k``): the share of evidence groups found (``statistics.evidence_groups``:
      ``same_set`` merges only windows holding exactly the same evidence, ``share_any`` credits a whole chain of
      windows when one is found; :mod:`pmrag.evaluate.groups`); ``Δ recall@k`` is group − chunk;
    * ``message_recall@k``: the share of primary-evidence messages held by some retrieved chunk, each message once,
      those in no chunk never found (:mod:`pmrag.evaluate.message_recall`); ``Δ message_recall@k`` is message −
      chunk;

    then what each level counts over all questions (the same for every method): ``gold chunks``, ``groups``,
    ``evidence messages`` and of them ``in no chunk``."""
    recall, _, ndcg = map(str, at_k(k))
    group_recall, _, group_ndcg = map(str, at_k(k, GROUP_METRICS))
    (message_recall,) = map(str, at_k(k, MESSAGE_METRICS))
    chunk = chunk_rows.groupby("retriever", sort=False)[[recall, ndcg]].mean()
    group = group_rows.groupby("retriever", sort=False)[[group_recall, group_ndcg]].mean()
    table = chunk.join(group, how="inner").reset_index()
    table[f"Δ {recall}"] = table[group_recall] - table[recall]
    table["gold chunks"] = len(groups)
    table["groups"] = groups[["question_id", "group"]].drop_duplicates().shape[0]
    message = message_rows.groupby("retriever", sort=False)[message_recall].mean()
    table = table.join(message, on="retriever", how="inner")
    table[f"Δ {message_recall}"] = table[message_recall] - table[recall]
    table["evidence messages"] = int(evidence_messages["evidence_messages"].sum())
    table["in no chunk"] = int(evidence_messages["in_no_chunk"].sum())
    return table.reset_index(drop=True)


def evidence_reading(table: pd.DataFrame, method: str, k: int = 5) -> str:
    """The plain reading of :func:`group_table` (or the table it saved): ``method``'s Recall@k at each level with
    what the level counts, then how far message-level and group-level recall move from chunk-level over all
    methods."""
    recall, group_recall, message_recall = (str(metric) for metric in
                                            (at_k(k)[0], at_k(k, GROUP_METRICS)[0], at_k(k, MESSAGE_METRICS)[0]))
    rows = table.set_index("retriever")
    if method not in rows.index:
        raise ValueError(f"the evidence table has no row for method {method!r}")
    row = rows.loc[method]
    unreachable = int(row["in no chunk"])
    lost = (f"{unreachable} of them lie in no chunk and count as never found" if unreachable
            else "every one lies in some chunk")
    by_message, by_group = rows[message_recall] - rows[recall], rows[group_recall] - rows[recall]
    return (f"{method}: Recall@{k} is {row[recall]:.3f} by chunk (the paper's: primary-gold chunks found, "
            f"{int(row['gold chunks'])} in all; evidence in two overlapping windows counts twice, several evidence "
            f"messages in one window once), {row[group_recall]:.3f} by evidence group (groups of those chunks found, "
            f"{int(row['groups'])} in all, merged by the statistics.evidence_groups rule) and "
            f"{row[message_recall]:.3f} by message (primary-evidence messages held by a retrieved chunk, each once, "
            f"{int(row['evidence messages'])} in all; {lost}). Over the {len(rows)} methods, message − chunk ranges "
            f"from {by_message.min():+.3f} to {by_message.max():+.3f}, group − chunk from {by_group.min():+.3f} to "
            f"{by_group.max():+.3f}.")


def selection_figure(table: pd.DataFrame):
    """Recall@5 of each selection procedure: in sample (with the conditional interval), bias-corrected (with its
    interval: the selection-aware headline), out of fold (the range over partition seeds) and the selection
    bootstrap (with its interval: for the out-of-bag kind a conservative bound)."""
    from pmrag.present.figure_style import column_figure

    rows = table[table["metric"] == str(RECALL5)].reset_index(drop=True)
    fig, ax = column_figure(1.1 * len(rows) + 2.2)
    y = range(len(rows))
    oob = "bootstrap_kind" in rows and str(rows["bootstrap_kind"].iloc[0]) == BOOTSTRAP_KIND["oob"]
    for offset, column, low, high, label in ((-0.3, "in_sample", "conditional_low", "conditional_high",
                                              "in sample (conditional: configuration fixed)"),
                                             (-0.1, "bias_corrected", "bias_corrected_low", "bias_corrected_high",
                                              "bias-corrected (optimism removed)"),
                                             (0.1, "out_of_fold", "out_of_fold_min", "out_of_fold_max",
                                              "out of fold (range over partition seeds)"),
                                             (0.3, "bootstrap_estimate", "bootstrap_low", "bootstrap_high",
                                              "out of bag (a conservative bound)" if oob else
                                              ".632 bootstrap (too narrow)")):
        if column not in rows:
            continue
        values = rows[column]
        err = None
        if low in rows:
            err = [values - rows[low], rows[high] - values]
        ax.errorbar(values, [i + offset for i in y], xerr=err, fmt="o", capsize=3, label=label)
    ax.set_yticks(list(y), [textwrap.fill(label, 30) for label in rows["procedure"]])
    ax.invert_yaxis()
    ax.set_xlabel("Recall@5")
    ax.set_title("The selected hybrid: conditional, bias-corrected, out of fold, out of bag")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.tight_layout()
    return fig


def power_figure(curve: pd.DataFrame, pilot: tuple[str, str], power: float, alpha: float, observed: float):
    """The smallest paired difference in Recall@5 detected with ``power`` at ``alpha``, against the number of
    questions, with the pilot's observed difference as a line."""
    from matplotlib.ticker import NullFormatter

    from pmrag.present.figure_style import column_figure
    from pmrag.present.plots import wrapped

    fig, ax = column_figure(4, width=7)
    ax.plot(curve["n_questions"], curve["detectable_difference"], marker="o")
    ax.axhline(abs(observed), color="grey", linestyle="--", label=f"observed |Δ| = {abs(observed):.3f}")
    ax.set_xscale("log")
    ax.set_xticks(curve["n_questions"], [str(n) for n in curve["n_questions"]])
    ax.xaxis.set_minor_formatter(NullFormatter())     # the log axis's own minor labels (3×10¹ …) would collide
    ax.set_xlabel("questions in the study")
    ax.set_ylabel(f"detectable Δ Recall@5 ({power:.0%} power, α = {alpha:g})")
    ax.set_title(wrapped(f"How many questions: {short_label(pilot[0])} vs {short_label(pilot[1])} as the pilot", 7))
    ax.legend(loc="upper right")
    fig.tight_layout()
    return fig


def aliases_table(aliases: pd.DataFrame, depth: int) -> pd.DataFrame:
    """The alias groups of :func:`pmrag.evaluate.aliases.alias_groups` (``statistics.aliases``): ``representative``
    (the method tested), ``aliases`` (the methods ranking exactly like it, not tested) and ``depth`` (the ranks
    compared: the study's largest metric cut-off)."""
    from pmrag.evaluate.aliases import alias_lists

    return alias_lists(aliases).assign(depth=int(depth))


def comparisons_reading(table: pd.DataFrame) -> str:
    """What the comparisons table (:func:`pmrag.evaluate.multiplicity.family_table`) says, family by family, in the
    words the statistics allow: the adjusted decisions, rows that repeat an earlier row's numbers, which rows are
    selection-conditioned, and the range of detectable differences."""
    from pmrag.evaluate.metric_names import parse_metric

    metric = parse_metric(table["metric"].iloc[0]).label
    merged = {name for cell in table["aliases"].fillna("") for name in str(cell).split(", ") if name}
    parts = [f"{_count(len(table), 'comparison')} in {metric}"
             + (f", after merging {len(merged)} alias{'' if len(merged) == 1 else 'es'} (a method ranking exactly like "
                "an earlier one is tested once)" if merged else "") + "."]
    for family, what in (("declared", "named in statistics.declared_comparisons"),
                         ("exploratory", "every other method against the selected hybrid")):
        rows = table[table["family"] == family]
        if rows.empty:
            parts.append(f"No {family} comparisons.")
            continue
        repeated = rows["same_differences_as"].fillna("").astype(bool)
        rejected = int(rows["reject_holm"].sum())
        sentence = (f"{family.capitalize()} family ({len(rows)}, {what}): {int(rows['ci_excludes_zero'].sum())} of "
                    f"{len(rows)} unadjusted intervals exclude 0; Holm rejects {rejected}, "
                    f"BH {int(rows['reject_bh'].sum())}")
        if repeated.any():
            fresh = int((rows["reject_holm"] & ~repeated).sum())
            sentence += (f"; {_count(int(repeated.sum()), 'row')} repeat{'s' if repeated.sum() == 1 else ''} an "
                         f"earlier row's per-question differences exactly (rankings that differ, the same {metric} on "
                         f"every question), so {fresh} of the {rejected} Holm rejections rest on numbers no earlier row "
                         "tested")
        parts.append(sentence + ".")
    parts.append(f"{int(table['selected_in_sample'].sum())} of {len(table)} involve a method chosen on these questions "
                 "(the selected hybrid or a pairing's selected β): selection-conditioned, so exploratory evidence "
                 "whatever their family, not confirmatory.")
    detectable = table["detectable_difference"].dropna()
    if len(detectable):
        parts.append(f"The true difference detected with {table['power'].iloc[0] * 100:g} % power at α = "
                     f"{table['alpha'].iloc[0]:g} ranges {detectable.min():.3f}–{detectable.max():.3f} over the pairs: "
                     "each pair's own spread decides it, there is no one noise floor.")
    return " ".join(parts)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
