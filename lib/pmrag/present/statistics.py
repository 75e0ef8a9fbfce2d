"""Notebook 09's displays (§8.1, §9.1): the hybrid's selection in sample, out of fold and with the selection repeated
inside the bootstrap; evidence-group metrics beside the chunk-level ones; every method against the selected hybrid
with adjusted decisions; and the power curve, each with the plain-language reading the paper would print.

The inputs are the ``statistics`` stage's results (:class:`pmrag.study.stages.SelectionStatistics`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from pmrag.evaluate.metric_names import GROUP_METRICS, MESSAGE_METRICS, PAPER_COLUMNS, RECALL5, at_k

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
