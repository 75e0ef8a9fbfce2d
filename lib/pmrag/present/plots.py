"""Figures drawn with seaborn in the one notebook style (:mod:`pmrag.present.figure_style`); each function returns
the matplotlib Figure (saving is the caller's)."""

from __future__ import annotations

import textwrap

import pandas as pd
import seaborn as sns

from pmrag.core.names import PAPER_FUSION
from pmrag.evaluate.metric_names import RECALL5, Metric, parse_metric
from pmrag.present.figure_style import COLUMN_IN, column_figure
from pmrag.present.labels import short_label


def wrapped(text: str, width_in: float = COLUMN_IN, chars_per_in: float = 11) -> str:
    """A title wrapped to the figure's width (``chars_per_in``: characters of an 11 pt title per inch)."""
    return textwrap.fill(text, int(width_in * chars_per_in))


def chunk_length_figure(chunks: pd.DataFrame, limit: int):
    """raw_text length per chunk (log-scaled bins) and messages per chunk, side by side."""
    lengths = chunks["raw_text"].str.len().clip(lower=1)
    fig, (left, right) = column_figure(3.6, ncols=2)
    sns.histplot(x=lengths, log_scale=True, bins=40, ax=left, color="#4C72B0")
    left.axvline(limit, color="#C44E52", linestyle="--", label=f"summary-input limit ({limit:,})")
    left.set(xlabel="raw_text length (characters)", ylabel="chunks", title="Chunk raw_text length")
    left.legend(loc="lower center", bbox_to_anchor=(0.5, 1.1), frameon=False)
    sns.histplot(x=chunks["n_messages"], discrete=True, ax=right, color="#55A868")
    right.set(xlabel="messages per chunk", ylabel="chunks", title="Messages per chunk")
    fig.tight_layout()
    return fig


def representation_length_figure(lengths: pd.DataFrame):
    """Length distribution of raw_text, summary and embedding_text (characters, log-scaled), from
    :func:`pmrag.represent.representations.representation_lengths`."""
    long = pd.DataFrame({
        "representation": [name for name in ("raw_text", "summary", "embedding_text") for _ in range(len(lengths))],
        "characters": pd.concat([lengths[n] for n in ("raw_text", "summary", "embedding_text")],
                                ignore_index=True).clip(lower=1),
    })
    fig, ax = column_figure(3.8)
    sns.histplot(data=long, x="characters", hue="representation", log_scale=True, bins=40, element="step", ax=ax)
    ax.set(title="Length per representation", ylabel="chunks")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)   # outside: covers no step
    fig.tight_layout()
    return fig


def recall_ci_figure(cis: pd.DataFrame, metric: Metric | str = RECALL5):
    """Figure 1: one horizontal bar per retriever with its 95 % bootstrap interval (names read horizontally)."""
    metric = parse_metric(metric)
    rows = cis[cis["metric"] == str(metric)].reset_index(drop=True)
    fig, ax = column_figure(1.2 + 0.26 * len(rows))
    y = range(len(rows))
    ax.barh(list(y), rows["mean"], color="#4C72B0")
    ax.errorbar(rows["mean"], list(y), xerr=[rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]],
                fmt="none", ecolor="black", capsize=3)
    ax.set_yticks(list(y), rows["retriever"])
    ax.invert_yaxis()
    ax.set(ylabel="", xlabel=metric.label, xlim=(0, 1), title=f"Single-retriever {metric.label} with 95% bootstrap CI")
    fig.tight_layout()
    return fig


def hybrid_sweep_figure(macro: pd.DataFrame, metric: Metric | str = RECALL5, pairings=None):
    """Figures 2–3: a metric of the linear hybrid against β, one line per pairing (the paper's min-max fusion
    only, when the sweep holds other fusions too); ``pairings``: only these ``(bm25, vector)`` pairs (the ones the
    paper's selection chooses among, when a broader sweep holds dozens more than a figure can show)."""
    if "fusion" in macro.columns:
        macro = macro[macro["fusion"] == PAPER_FUSION]
    if pairings is not None:
        chosen = {(str(a), str(b)) for a, b in pairings}
        macro = macro[[pair in chosen for pair in zip(macro["bm25"], macro["vector"])]]
    data = macro.assign(pairing=[f"{short_label(a)} + {short_label(b)}" for a, b in zip(macro["bm25"], macro["vector"])])
    pairings = data["pairing"].nunique()
    fig, ax = column_figure(4.2 + 0.2 * ((pairings + 1) // 2))
    sns.lineplot(data=data, x="beta", y=str(metric), hue="pairing", marker="o", ax=ax)
    label = parse_metric(metric).label
    ax.set(xlabel="β (BM25 weight)", ylabel=label, title=f"Linear hybrid {label} vs β (selected in-sample)")
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False, title=None)   # below the axes
    fig.tight_layout()
    return fig


def difference_figure(differences: pd.DataFrame):
    """Figure 4: paired-bootstrap differences with their 95 % intervals and the zero line."""
    rows = differences.reset_index(drop=True)
    fig, ax = column_figure(1.6 + 0.6 * len(rows))
    y = range(len(rows))
    ax.errorbar(rows["delta"], y, xerr=[rows["delta"] - rows["ci_low"], rows["ci_high"] - rows["delta"]],
                fmt="o", color="#4C72B0", ecolor="black", capsize=4)
    ax.axvline(0, color="#C44E52", linestyle="--")
    ax.set_yticks(list(y), rows["comparison"])
    ax.invert_yaxis()
    ax.set(xlabel=f"Δ{parse_metric(rows['metric'].iloc[0]).label} (paired bootstrap, 95% CI)",
           title="Selection-conditioned paired differences\n(configuration-selection uncertainty not included)")
    ax.title.set_fontsize(10)
    fig.tight_layout()
    return fig


def by_type_figure(by_type: pd.DataFrame, retriever: str, metric: Metric | str = RECALL5):
    """Figure 5: one retriever's metric overall and per question type, with 95 % intervals."""
    rows = by_type[by_type["retriever"] == retriever].reset_index(drop=True)
    fig, ax = column_figure(3.8, width=7)
    sns.barplot(data=rows, x="question_type", y="mean", color="#55A868", ax=ax)
    ax.errorbar(x=range(len(rows)), y=rows["mean"], yerr=[rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]],
                fmt="none", ecolor="black", capsize=4)
    label = parse_metric(metric).label
    # the name on a line of its own: a hybrid's name has no space to wrap at (hybrid:summary_bm25+…@0.55)
    ax.set(xlabel="", ylabel=label, ylim=(0, 1),
           title=f"{label} of {retriever}\n{wrapped('by question type (selection-conditioned)', 7)}")
    ax.title.set_fontsize(10)
    fig.tight_layout()
    return fig


def topk_sensitivity_figure(sensitivity: pd.DataFrame, title: str):
    """Figure 6: share of questions with primary gold in the Top-K, per question type, for each K."""
    data = sensitivity.assign(K=sensitivity["k"].map(lambda k: f"Top-{k}"))
    fig, ax = column_figure(3.8)
    sns.barplot(data=data, x="question_type", y="success_rate", hue="K", ax=ax)
    ax.set(xlabel="", ylabel="questions with primary gold in Top-K", ylim=(0, 1), title=wrapped(title))
    ax.legend(title="K", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)   # outside: covers no bar
    fig.tight_layout()
    return fig
