"""Notebook 09's displays (§8.1, §9.1): the hybrid's selection in sample, out of fold and with the selection repeated
inside the bootstrap; evidence-group metrics beside the chunk-level ones; the declared comparisons and every other
method against the selected hybrid, with decisions adjusted within each family and methods ranking alike tested once;
and the power curve, each with the plain-language reading the paper would print.

The inputs are the ``statistics`` stage's results (:class:`pmrag.study.stages.SelectionStatistics`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from pmrag.evaluate.metric_names import GROUP_METRICS, PAPER_COLUMNS, RECALL5, at_k

METRICS = PAPER_COLUMNS   # recall@5, mrr@5, ndcg@5


def selection_table(statistics) -> pd.DataFrame:
    """One row per (procedure, metric): the in-sample best (the paper's conditional number and interval), the
    out-of-fold score of the selection procedure and the gap (winner's curse), and the selection bootstrap's
    estimate and interval.  Procedures: the paper's (every pairing × β), β of the selected pairing alone, and the
    selection within each other fusion of ``hybrid.fusions``."""
    rows = []
    procedures = [("pairing and β (the paper's selection)", statistics.held_out, statistics.bootstrap),
                  ("β of the selected pairing", statistics.held_out_beta, statistics.bootstrap_beta)]
    procedures += [(f"pairing and β, {fusion} fusion", held_out, statistics.bootstrap_fusions.get(fusion))
                   for fusion, held_out in statistics.held_out_fusions.items()]
    for label, held_out, boot in procedures:
        if held_out is None:   # fewer than two questions: nothing is held out
            continue
        folds = held_out.summary.set_index("metric")
        resampled = boot.summary.set_index("metric") if boot is not None else None
        for metric in METRICS:
            row = {"procedure": label, "metric": metric, "in_sample": folds.at[metric, "in_sample"],
                   "out_of_fold": folds.at[metric, "out_of_fold"], "winners_curse": folds.at[metric, "gap"]}
            if resampled is not None:
                row.update({"conditional_low": resampled.at[metric, "conditional_low"],
                            "conditional_high": resampled.at[metric, "conditional_high"],
                            "selection_aware": resampled.at[metric, "estimate"],
                            "selection_aware_low": resampled.at[metric, "ci_low"],
                            "selection_aware_high": resampled.at[metric, "ci_high"]})
            rows.append(row)
    return pd.DataFrame(rows)


def selection_reading(table: pd.DataFrame, kind: str, n_splits: int, n_repeats: int) -> str:
    """The headline sentence of the paper's selection, conditional and selection-aware, in Recall@5."""
    row = table[(table["procedure"].str.startswith("pairing and β (the paper")) & (table["metric"] == str(RECALL5))].iloc[0]
    return (f"The selected hybrid's Recall@5 is {row['in_sample']:.3f} [{row['conditional_low']:.3f}, "
            f"{row['conditional_high']:.3f}] conditional on selecting it on these questions (the paper's reading); "
            f"chosen on {n_splits - 1} of {n_splits} folds and scored on the other ({n_repeats} repeats) the procedure "
            f"reaches {row['out_of_fold']:.3f} (winner's curse {row['winners_curse']:+.3f}); with the selection "
            f"repeated in every bootstrap resample ({kind}) it is {row['selection_aware']:.3f} "
            f"[{row['selection_aware_low']:.3f}, {row['selection_aware_high']:.3f}], selection uncertainty included.")


def group_table(chunk_rows: pd.DataFrame, group_rows: pd.DataFrame, groups: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per method: chunk-level and group-level Recall@k and nDCG@k (macro), in the chunk rows' method order, and
    how many primary-gold chunks and evidence groups the questions have (the same for every method)."""
    recall, _, ndcg = map(str, at_k(k))
    group_recall, _, group_ndcg = map(str, at_k(k, GROUP_METRICS))
    chunk = chunk_rows.groupby("retriever", sort=False)[[recall, ndcg]].mean()
    group = group_rows.groupby("retriever", sort=False)[[group_recall, group_ndcg]].mean()
    table = chunk.join(group, how="inner").reset_index()
    table[f"Δ {recall}"] = table[group_recall] - table[recall]
    table["gold chunks"] = len(groups)
    table["groups"] = groups[["question_id", "group"]].drop_duplicates().shape[0]
    return table


def selection_figure(table: pd.DataFrame):
    """Recall@5 of each selection procedure: in sample (with the conditional interval), out of fold, and the
    selection-aware bootstrap estimate (with its interval)."""
    rows = table[table["metric"] == str(RECALL5)].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 0.8 * len(rows) + 1.5))
    y = range(len(rows))
    for offset, column, low, high, label in ((-0.2, "in_sample", "conditional_low", "conditional_high",
                                              "in sample (conditional CI)"),
                                             (0.0, "out_of_fold", None, None, "out of fold"),
                                             (0.2, "selection_aware", "selection_aware_low", "selection_aware_high",
                                              "selection-aware bootstrap")):
        if column not in rows:
            continue
        values = rows[column]
        err = None
        if low and low in rows:
            err = [values - rows[low], rows[high] - values]
        ax.errorbar(values, [i + offset for i in y], xerr=err, fmt="o", capsize=3, label=label)
    ax.set_yticks(list(y), rows["procedure"])
    ax.invert_yaxis()
    ax.set_xlabel("Recall@5")
    ax.set_title("The selected hybrid: conditional, out-of-fold and selection-aware")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def power_figure(curve: pd.DataFrame, pilot: tuple[str, str], power: float, alpha: float, observed: float):
    """The smallest paired difference in Recall@5 detected with ``power`` at ``alpha``, against the number of
    questions, with the pilot's observed difference as a line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(curve["n_questions"], curve["detectable_difference"], marker="o")
    ax.axhline(abs(observed), color="grey", linestyle="--", label=f"observed |Δ| = {abs(observed):.3f}")
    ax.set_xscale("log")
    ax.set_xticks(curve["n_questions"], [str(n) for n in curve["n_questions"]])
    ax.set_xlabel("questions in the study")
    ax.set_ylabel(f"detectable Δ Recall@5 ({power:.0%} power, α = {alpha:g})")
    ax.set_title(f"How many questions: {pilot[0]} vs {pilot[1]} as the pilot", fontsize="small")
    ax.legend()
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
