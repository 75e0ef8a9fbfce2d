"""Notebook 08's displays of the methods beyond the paper (§7.2, §8, §9.1): each family's comparison table formatted as
the paper prints intervals, and one figure per family of paired differences by question type.

The frames come from :mod:`pmrag.evaluate.beyond`; a difference is printed ``Δ [low, high]`` and marked ``*`` when
its interval excludes 0 (conditional on the references' in-sample selection, as in the paper).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pmrag.evaluate.beyond import METRICS, OVERALL
from pmrag.evaluate.metric_names import RECALL5
from pmrag.present.figure_style import column_figure
from pmrag.present.labels import short_label
from pmrag.present.paper import format_delta_ci
from pmrag.present.plots import wrapped


LEGEND_IN = 0.4   # the height of the one-row legend under a difference figure


def display_table(table: pd.DataFrame, references) -> pd.DataFrame:
    """A comparison table (:func:`pmrag.evaluate.beyond.comparison_table`) for display: metrics to 3 decimals and
    one ``Δ <label>`` column per reference as ``Δ [low, high]`` (``*`` when the interval excludes 0)."""
    out = table[["question_type", "method", "questions", *METRICS]].copy()
    out[list(METRICS)] = out[list(METRICS)].round(3)
    for label in references:
        delta, low, high = (table[f"Δ {label}{s}"] for s in ("", " low", " high"))
        excludes = table[f"Δ {label} excludes 0"].astype(bool)
        out[f"Δ {label}"] = ["0 (itself)" if np.isnan(lo) else _delta(d, lo, hi, ex)
                             for d, lo, hi, ex in zip(delta, low, high, excludes)]
    return out.set_index(["question_type", "method"])


def display_differences(differences: pd.DataFrame) -> pd.DataFrame:
    """Own-reference differences (:func:`pmrag.evaluate.beyond.own_reference_differences`) for display."""
    if differences.empty:
        return pd.DataFrame(columns=["question_type", "comparison", f"Δ {RECALL5}"])
    out = differences[["question_type", "comparison"]].copy()
    out[f"Δ {RECALL5}"] = [_delta(d, lo, hi, ex) for d, lo, hi, ex in
                           zip(differences["delta"], differences["ci_low"], differences["ci_high"],
                               differences["excludes_zero"])]
    return out.set_index(["question_type", "comparison"])


def _delta(delta: float, low: float, high: float, excludes_zero: bool) -> str:
    """``+0.113 [0.048, 0.184] *`` (the star: the interval excludes 0)."""
    return " ".join(format_delta_ci(delta, low, high)) + (" *" if excludes_zero else "")


def difference_figure(table: pd.DataFrame, reference: str, title: str):
    """Paired Δ Recall@5 of each method against one reference, by question type (the aggregate type first,
    ``overall`` last), with the intervals as horizontal bars; the reference itself is left out.  With no method
    (none of the family is listed) the figure says so, so that a run always leaves the same files."""
    rows = table[table[f"Δ {reference} low"].notna()] if f"Δ {reference} low" in table.columns else table.iloc[0:0]
    if rows.empty:
        fig, ax = column_figure(1.5)
        ax.text(0.5, 0.5, "no method of this family is listed in retrieval.retrievers", ha="center", va="center")
        ax.set_axis_off()
        ax.set_title(wrapped(title))
        return fig
    methods = list(dict.fromkeys(rows["method"]))
    types = list(dict.fromkeys(rows["question_type"]))
    fig, ax = column_figure(0.12 * len(types) * max(len(methods), 1) + 0.2 * len(methods) + 2.2)
    offsets = np.linspace(-0.3, 0.3, len(types)) if len(types) > 1 else np.zeros(1)
    for offset, question_type in zip(offsets, types):
        part = rows[rows["question_type"] == question_type].set_index("method").reindex(methods)
        y = np.arange(len(methods)) + offset
        delta = part[f"Δ {reference}"].to_numpy(dtype=float)
        low, high = part[f"Δ {reference} low"].to_numpy(dtype=float), part[f"Δ {reference} high"].to_numpy(dtype=float)
        ax.errorbar(delta, y, xerr=[delta - low, high - delta], fmt="o", capsize=2,
                    label=question_type, color="black" if question_type == OVERALL else None)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(np.arange(len(methods)), [short_label(m) for m in methods])   # the labels of every figure legend
    ax.invert_yaxis()
    ax.set_xlabel(f"Δ Recall@5 against {reference} (95 % CI)")
    ax.set_title(wrapped(title))
    # under the x axis (the legend and the scale read together), outside the data: covers no interval
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=len(types), frameon=False)
    fig.tight_layout(rect=(0, LEGEND_IN / fig.get_size_inches()[1], 1, 1))
    return fig
