"""Notebook 07's displays of TOBUGraph (paper 002): the memory graph's statistics, its Table 2 against the RAG
baselines, the rank comparison with the LINE paper's retrievers, results by question type, and the subgraph a
question reaches.

Rules every function here keeps:

* **The extractor is named.**  A saved graph table carries a column ``extractor`` holding the graph's label
  (:func:`with_extractor`); with the offline backend that label says it is a stand-in, not an LLM.
* **Interest labels are chat words.**  An interest is named by its label only when the study shows chat text;
  otherwise by ``i:<n>``, its 1-based position in the graph's interest order (:func:`interest_names`).  A
  memory is named in tables by ``m:<chunk id>``, and in the subgraph picture by when it started and who spoke
  (:func:`memory_labels`), the speakers' names, being chat text, only when the study shows chat text.
* **Held-out only.**  The tables take the held-out frames of :class:`~pmrag.study.stages.GraphEvaluation`
  (``set_tables``, ``rank_tables``); nothing here reads the tuning part except the tuning grid itself.
* **Intervals as the paper prints them**: ``mean [low, high]`` (:func:`pmrag.present.paper.format_ci`).

Figures return the matplotlib Figure; saving is the caller's.  A question's chosen interests are recomputed
with the retriever's own functions (:mod:`pmrag.retrieve.graph_interest`), so the subgraph drawn is the one
that the evaluation scored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from pmrag.evaluate.graph_eval import SET_METHODS
from pmrag.evaluate.metric_names import SET_F1, SET_PRECISION, SET_RECALL, TABLE_METRICS, Metric
from pmrag.present.artifacts import EXTRACTOR
from pmrag.present.labels import short_label
from pmrag.present.paper import format_ci, format_delta_ci

SET_METRICS = {str(SET_PRECISION): "Precision", str(SET_RECALL): "Recall", str(SET_F1): "F1"}   # Table 2's rows
METRIC_NAMES = {**SET_METRICS, **{str(m): m.label for m in TABLE_METRICS}}
CJK_FONTS = ("Noto Sans CJK JP", "Noto Sans JP", "IPAexGothic", "IPAGothic", "TakaoGothic", "Hiragino Sans",
             "Yu Gothic", "MS Gothic", "Noto Serif CJK JP")


def with_extractor(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """``frame`` with a last column ``extractor`` = ``label`` (a new frame; the input is not changed)."""
    return frame.assign(**{EXTRACTOR: label})


# ------------------------------------------------------------------------------------------- names

def interest_names(graph, show_labels: bool) -> dict[str, str]:
    """Interest node id → display name: its label when ``show_labels``, else ``i:<n>`` (1-based position in the
    graph's interest order)."""
    return {node.node_id: (node.label if show_labels else f"i:{n}")
            for n, node in enumerate(graph.of_kind("interest"), start=1)}


def memory_name(chunk_id: str) -> str:
    return f"m:{chunk_id}"


SYSTEM_SENDER = "SYSTEM"   # LINE's own notices (a group made, a member added): nobody's words
MAX_SPEAKERS = 2           # speakers named in a memory's label; the others are counted


def memory_labels(chunks: pd.DataFrame, members: pd.DataFrame, messages: pd.DataFrame,
                  show_names: bool) -> dict[str, str]:
    """Chunk id → what a reader recognises a memory (a chunk) by: when it started and who spoke,
    ``2023-04-01 19:18 · はると, たくみ +1``.  Speakers (senders other than LINE's ``SYSTEM``, in order of their
    first message) are named only when ``show_names`` (a study that shows chat text: names are chat text);
    otherwise they are counted, ``2023-04-01 19:18 · 3 speakers``.

    Parameters
    ----------
    chunks : ``chunk_id, start_at`` (:meth:`pmrag.study.Study.chunks`).
    members : ``chunk_id, position, message_id`` (:meth:`pmrag.study.Study.chunk_messages`).
    messages : ``message_id, sender`` (:meth:`pmrag.study.Study.messages`).
    show_names : name the speakers (else count them).
    """
    senders = (members.sort_values(["chunk_id", "position"], kind="stable")
               .merge(messages[["message_id", "sender"]], on="message_id", how="left"))
    senders = senders[senders["sender"].notna() & (senders["sender"] != SYSTEM_SENDER)]
    speakers = {chunk: list(dict.fromkeys(group["sender"].astype(str)))
                for chunk, group in senders.groupby("chunk_id", sort=False)}
    labels = {}
    for chunk_id, start in zip(chunks["chunk_id"], pd.to_datetime(chunks["start_at"])):
        names = speakers.get(chunk_id, [])
        if show_names:
            who = ", ".join(names[:MAX_SPEAKERS]) + (f" +{len(names) - MAX_SPEAKERS}" if len(names) > MAX_SPEAKERS else "")
        else:
            who = f"{len(names)} speaker{'' if len(names) == 1 else 's'}"
        labels[chunk_id] = f"{start:%Y-%m-%d %H:%M}" + (f" · {who}" if who else "")
    return labels


# ------------------------------------------------------------------------------------------- statistics

def provenance_table(graph_provenance: Mapping, relevance_method: str) -> pd.DataFrame:
    """What made the graph and the choice of interests: one row per key of the extractor's provenance (values
    other than strings as JSON), then the relevance method.  Columns ``stage, key, value``."""
    import json

    rows = [("graph", key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True))
            for key, value in graph_provenance.items()]
    return pd.DataFrame(rows + [("interest_relevance", "method", relevance_method)], columns=["stage", "key", "value"])


def nodes_edges_table(statistics, label: str) -> pd.DataFrame:
    """Nodes by kind and sub-kind, then edges by kind, then the memories reachable by no interest (element
    ``reach``): ``element, kind, subkind, count, extractor``."""
    nodes = statistics.nodes.rename(columns={"nodes": "count"}).assign(element="node")
    edges = statistics.edges.rename(columns={"edges": "count"}).assign(element="edge", subkind="")
    reach = pd.DataFrame([("reach", "memory", "reachable by no interest", statistics.unreachable)],
                         columns=["element", "kind", "subkind", "count"])
    columns = ["element", "kind", "subkind", "count"]
    return with_extractor(pd.concat([nodes[columns], edges[columns], reach], ignore_index=True), label)


def interest_degree_table(statistics, label: str) -> pd.DataFrame:
    """The interest degree distribution: ``memories`` (memories linked to an interest), ``interests`` (how many
    interests link that many), ``extractor``."""
    return with_extractor(statistics.interest_degrees[["memories", "interests"]].reset_index(drop=True), label)


def memories_per_interest_table(statistics, graph, label: str, show_labels: bool, top: int = 20) -> pd.DataFrame:
    """The ``top`` most shared interests (the statistics' order: most memories first, then label):
    ``interest, subkind, memories, extractor``, named by :func:`interest_names`."""
    names = interest_names(graph, show_labels)
    rows = statistics.memories_per_interest.head(top)
    frame = pd.DataFrame({"interest": rows["node_id"].map(names).to_numpy(), "subkind": rows["subkind"].to_numpy(),
                          "memories": rows["memories"].to_numpy()})
    return with_extractor(frame, label)


def interest_degree_figure(statistics, label: str):
    """Histogram of the interest degree (memories per interest; log-scaled when it spans more than a decade)."""
    import seaborn as sns

    from pmrag.present.figure_style import column_figure

    degrees = statistics.interest_degrees
    fig, ax = column_figure(3.8)
    if degrees.empty or int(degrees["interests"].sum()) == 0:
        ax.text(0.5, 0.5, "no interest nodes", ha="center", va="center", transform=ax.transAxes)
    else:
        wide = degrees["memories"].max() > 10 * max(degrees["memories"].min(), 1)
        sns.histplot(data=degrees, x="memories", weights="interests", ax=ax, color="#4C72B0",
                     log_scale=(True, False) if wide else False, bins=30 if wide else "auto", discrete=not wide)
    ax.set(xlabel="memories linked to the interest", ylabel="interests",
           title=f"Interest degree distribution\n{label}")
    ax.title.set_fontsize(10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------- tuning

def split_table(split: pd.Series, questions: pd.DataFrame, label: str, types: Sequence[str] | None = None) -> pd.DataFrame:
    """Questions per type in the tuning and held-out parts (``types`` order, else by name), then ``all``:
    ``question_type, tuning, held_out, extractor``."""
    from pmrag.evaluate.graph_eval import HELD_OUT, TUNING

    part = questions.assign(part=questions["question_id"].map(split))
    counts = pd.crosstab(part["type"], part["part"]).reindex(columns=[TUNING, HELD_OUT], fill_value=0)
    counts = counts.reindex(list(types) if types is not None else sorted(counts.index), fill_value=0)
    counts.loc["all"] = counts.sum()
    frame = counts.rename_axis("question_type").rename_axis(None, axis=1).reset_index()
    return with_extractor(frame.astype({TUNING: int, HELD_OUT: int}), label)


def tuning_grid(tuning: pd.DataFrame, metric: Metric | str = SET_F1) -> pd.DataFrame:
    """The tuning grid as threshold × cap of ``metric`` (3 decimals), the chosen cell marked ``*``; the largest
    cap (the number of interests) is the column ``no cap``."""
    metric = str(metric)
    cells = tuning.assign(cell=[f"{v:.3f}" + ("*" if chosen else "") for v, chosen in zip(tuning[metric], tuning["chosen"])])
    grid = cells.pivot(index="threshold", columns="cap", values="cell")
    grid.columns = [*grid.columns[:-1], "no cap"] if len(grid.columns) > 1 else list(grid.columns)
    return grid.rename_axis(f"{metric} · threshold \\ cap").rename_axis(None, axis=1)


def tuning_reading(evaluation) -> str:
    """One line on the graph's tuned choice: its tuning scores, set size and empty sets, and the grid edge it
    lies on, if any (an optimum on an edge may lie beyond the grid)."""
    row = evaluation.tuning[evaluation.tuning["chosen"]].iloc[0]
    cap = "no cap" if row["cap"] == evaluation.tuning["cap"].max() else f"cap {int(row['cap'])}"
    edge = f"on the grid's edge ({row['edge']})" if row["edge"] else "inside the grid"
    return (f"chosen: threshold {row['threshold']:g}, {cap}, {edge}: tuning set precision "
            f"{row['set_precision']:.3f}, recall {row['set_recall']:.3f}, F1 {row['set_f1']:.3f}, "
            f"{row['mean_retrieved']:.1f} memories retrieved per question on average, {int(row['empty_sets'])} "
            f"question(s) reaching nothing")


def baseline_tuning_table(evaluation) -> pd.DataFrame:
    """The RAG baselines' k tuned like the graph's choice: one row per baseline and k, set precision / recall / F1
    (3 decimals) beside the mean set size, the chosen k marked ``*``, an edge named."""
    frame = evaluation.baseline_tuning
    return pd.DataFrame({
        "Method": frame["method"], "k": [f"{k}" + ("*" if c else "") for k, c in zip(frame["k"], frame["chosen"])],
        **{name: frame[metric].map("{:.3f}".format) for metric, name in SET_METRICS.items()},
        "Mean |R|": frame["mean_retrieved"].map("{:.1f}".format), "Edge": frame["edge"]})


def tuning_rows(evaluation) -> pd.DataFrame:
    """The graph's tuning grid and the RAG baselines' k rows in one frame (``method`` first; ``threshold, cap``
    for TOBUGraph, ``k`` for a baseline), what the tuning table saves."""
    graph = evaluation.tuning.assign(method=SET_METHODS[0])
    return pd.concat([graph, evaluation.baseline_tuning], ignore_index=True)[
        ["method", "threshold", "cap", "k", *SET_METRICS, "mean_retrieved", "empty_sets", "chosen", "edge"]]


# ------------------------------------------------------------------------------------------- Table 2 (sets)

def table2(cis: pd.DataFrame, pooled: pd.DataFrame, methods: Sequence[str] = SET_METHODS) -> pd.DataFrame:
    """002 Table 2's layout on our held-out questions: rows Precision, Recall, F1 (macro over questions,
    ``mean [low, high]``), columns ``methods``; then the pooled (micro) precision / recall / F1 (with the number of
    empty sets, which pooled precision leaves out while macro precision scores them 0) and the mean set size."""
    rows = []
    for metric, name in SET_METRICS.items():
        row = {"Metric": name}
        for method in methods:
            hit = cis[(cis["retriever"] == method) & (cis["metric"] == metric)]
            if len(hit) != 1:
                raise ValueError(f"set cis: expected one row for {method} {metric}, got {len(hit)}")
            row[method] = format_ci(*hit.iloc[0][["mean", "ci_low", "ci_high"]])
        rows.append(row)
    micro = pooled.set_index("retriever")
    rows.append({"Metric": "Pooled (micro) P / R / F1", **{
        m: " / ".join(f"{micro.loc[m, c]:.3f}" for c in ("micro_precision", "micro_recall", "micro_f1"))
        + (f" ({int(micro.loc[m, 'empty_sets'])} empty sets left out of P)" if micro.loc[m, "empty_sets"] else "")
        for m in methods}})
    rows.append({"Metric": "Mean set size |R|", **{m: f"{micro.loc[m, 'mean_retrieved']:.1f}" for m in methods}})
    return pd.DataFrame(rows, columns=["Metric", *methods])


def differences_table(differences: pd.DataFrame) -> pd.DataFrame:
    """Paired differences formatted as the paper's Table 5: Comparison, Δ<metric>, 95% CI, Interpretation."""
    if differences.empty:
        return pd.DataFrame(columns=["Comparison", "Δ", "95% CI", "Interpretation"])
    metric = differences["metric"].iloc[0]
    cells = [format_delta_ci(d, lo, hi) for d, lo, hi in zip(differences["delta"], differences["ci_low"],
                                                               differences["ci_high"])]
    return pd.DataFrame({"Comparison": differences["comparison"].to_numpy(),
                         f"Δ{METRIC_NAMES.get(metric, metric)}": [c[0] for c in cells],
                         "95% CI": [c[1] for c in cells], "Interpretation": differences["interpretation"].to_numpy()})


def set_by_type_frame(set_tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Set F1 and set recall by question type in one long frame: ``retriever, metric, question_type, questions,
    mean, ci_low, ci_high``."""
    parts = [set_tables["by_type"].assign(metric=str(SET_F1)), set_tables["recall_by_type"].assign(metric=str(SET_RECALL))]
    columns = ["retriever", "metric", "question_type", "questions", "mean", "ci_low", "ci_high"]
    return pd.concat(parts, ignore_index=True)[columns]


# ------------------------------------------------------------------------------------------- rank metrics

def method_roles(evaluation) -> dict[str, str]:
    """Method → its role in the comparison (tuned graph, hybrid, best flat, other flat or listed graph)."""
    roles = {str(evaluation.tuned): f"TOBUGraph ranking (threshold {evaluation.threshold:g}, cap {evaluation.cap}, tuned)",
             str(evaluation.hybrid): "graph + best flat (β tuned)",
             str(evaluation.best_flat): "best flat (chosen on the tuning part)"}
    from pmrag.core.names import RetrieverId, is_hybrid
    from pmrag.evaluate.beyond import is_paper_retriever

    def other(name: str) -> str:
        if not is_hybrid(name) and RetrieverId.parse(name).method == "graph":
            return "graph (the params' fixed threshold and cap)"
        if is_hybrid(name) or not is_paper_retriever(RetrieverId.parse(name)):
            return "beyond the paper (notebook 08)"
        return "LINE paper retriever"

    return {m: roles.get(m) or other(m) for m in evaluation.rank_methods()}


def rank_table(cis: pd.DataFrame, methods: Sequence[str], roles: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Recall/MRR/nDCG@5 as ``mean [low, high]``, one row per method in ``methods`` order (a ``Role`` column
    first when ``roles`` is given)."""
    from pmrag.present.tables import table3

    formatted = table3(cis).reindex(list(methods))
    if roles is not None:
        formatted.insert(0, "Role", [roles.get(m, "") for m in methods])
    return formatted


def by_type_table(by_type: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """One row per question type (``overall`` first, the frame's order), the number of questions, then one
    ``mean [low, high]`` column per method."""
    rows = by_type[by_type["retriever"].isin(methods)]
    types = list(dict.fromkeys(rows["question_type"]))
    if "overall" in types:
        types = ["overall", *(t for t in types if t != "overall")]
    cells = rows.assign(cell=[format_ci(m, lo, hi) for m, lo, hi in zip(rows["mean"], rows["ci_low"], rows["ci_high"])])
    wide = cells.pivot(index="question_type", columns="retriever", values="cell").reindex(index=types,
                                                                                          columns=list(methods))
    counts = rows.drop_duplicates("question_type").set_index("question_type")["questions"].reindex(types)
    wide.insert(0, "Questions", counts.astype(int))
    return wide.rename_axis("Question type").rename_axis(None, axis=1)


def _ci_of(frame: pd.DataFrame, retriever: str, question_type: str) -> str:
    row = frame[(frame["retriever"] == retriever) & (frame["question_type"] == question_type)]
    return format_ci(*row.iloc[0][["mean", "ci_low", "ci_high"]]) if len(row) else "–"


def type_reading(evaluation, differences: pd.DataFrame, question_type: str) -> list[str]:
    """Plain-language lines on one question type (the aggregate one), computed from the held-out frames: how the
    best flat retriever does there against overall, what the paired differences say, and the set sizes behind
    TOBUGraph's set recall.  An interval that includes 0 is read as "cannot tell", never as "equal"."""
    by_type = evaluation.rank_tables["by_type"]
    recall = evaluation.set_tables["recall_by_type"]
    held = evaluation.held_out(evaluation.set_rows)
    n = int((held.drop_duplicates("question_id")["question_type"] == question_type).sum())
    if n == 0:
        return [f"No held-out question of type {question_type!r}: nothing to read."]
    best, tuned, hybrid = str(evaluation.best_flat), str(evaluation.tuned), str(evaluation.hybrid)
    lines = [f"{question_type}: {n} held-out question(s) of {held['question_id'].nunique()}.",
             f"Best flat retriever {best}, Recall@5: {question_type} {_ci_of(by_type, best, question_type)}, "
             f"overall {_ci_of(by_type, best, 'overall')}.",
             f"Recall@5 on {question_type}: tuned graph {_ci_of(by_type, tuned, question_type)}, "
             f"graph + flat hybrid {_ci_of(by_type, hybrid, question_type)}."]
    for row in differences.itertuples(index=False):
        delta, ci = format_delta_ci(row.delta, row.ci_low, row.ci_high)
        metric = "set recall" if row.metric == str(SET_RECALL) else METRIC_NAMES.get(row.metric, row.metric)
        lines.append(f"{row.comparison} ({metric}, {question_type}): "
                     f"{delta} {ci}: {'excludes 0' if row.excludes_zero else 'includes 0, cannot tell apart'}.")
    sizes = evaluation.sets[evaluation.sets["question_id"].isin(
        held.loc[held["question_type"] == question_type, "question_id"])].groupby("retriever").size() / n
    tobu = _ci_of(recall, SET_METHODS[0], question_type)
    lines.append(f"Set recall on {question_type}: TOBUGraph {tobu} with {sizes.get(SET_METHODS[0], 0):.1f} memories "
                 f"per question; " + ", ".join(f"{m} {_ci_of(recall, m, question_type)} with {sizes.get(m, 0):.1f}"
                                                for m in SET_METHODS[1:]) + ".")
    return lines


# ------------------------------------------------------------------------------------------- figures by type

def _grouped_bars(ax, rows: pd.DataFrame, methods: Sequence[str], types: Sequence[str], palette) -> None:
    width = 0.8 / max(len(methods), 1)
    for j, method in enumerate(methods):
        part = rows[rows["retriever"] == method].set_index("question_type").reindex(types)
        x = np.arange(len(types)) - 0.4 + width * (j + 0.5)
        mean = part["mean"].to_numpy(dtype=float)
        ax.bar(x, mean, width=width, color=palette[j], label=method)
        ax.errorbar(x, mean, yerr=[mean - part["ci_low"].to_numpy(dtype=float), part["ci_high"].to_numpy(dtype=float) - mean],
                    fmt="none", ecolor="black", capsize=3, linewidth=1)
    ax.set_xticks(range(len(types)), types)
    ax.set_ylim(0, 1)


def by_type_figure(rank_by_type: pd.DataFrame, rank_methods: Sequence[str], set_recall_by_type: pd.DataFrame,
                   set_methods: Sequence[str] = SET_METHODS, label: str = ""):
    """Left: Recall@5 by question type (``overall`` first) of ``rank_methods`` (the tuned graph, the hybrid,
    the best flat retriever); right: set recall by type of TOBUGraph and the RAG baselines; 95 % intervals."""
    import seaborn as sns

    from pmrag.present.figure_style import column_figure

    fig, (left, right) = column_figure(8.4, nrows=2)
    for ax, rows, methods, ylabel, title in (
            (left, rank_by_type, list(rank_methods), "Recall@5", "Rankings: Recall@5 by question type"),
            (right, set_recall_by_type, list(set_methods), "set recall", "Sets (002 Table 2): recall by question type")):
        rows = rows[rows["retriever"].isin(methods)]
        types = list(dict.fromkeys(["overall", *rows["question_type"]])) if "overall" in set(rows["question_type"]) \
            else list(dict.fromkeys(rows["question_type"]))
        _grouped_bars(ax, rows, methods, types, sns.color_palette("deep", len(methods)))
        ax.set(ylabel=ylabel, title=title)
        handles, names = ax.get_legend_handles_labels()
        ax.legend(handles, [short_label(name) for name in names], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False)                        # outside: covers no bar
    fig.suptitle(f"Held-out questions, 95% bootstrap CIs (selection-conditioned){chr(10) + label if label else ''}",
                 fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------- one question

def chosen_interests(index, relevance, threshold: float, cap: int) -> pd.DataFrame:
    """I′(q) of one question with the retriever's own choice (:func:`pmrag.retrieve.graph_interest.choose_interests`):
    the interests of ``index`` (an :class:`~pmrag.retrieve.graph_interest.InterestIndex`) whose relevance
    r(q, i) (``relevance``: the question's row of the study's ``interest_relevance`` stage) reaches ``threshold``
    (and is > 0), at most ``cap``.

    Returns ``interest_id, position`` (1-based, the graph's interest order), ``label, relevance, memories``
    (memories linked), most relevant first (ties: the graph's order, as the retriever breaks them).
    """
    from pmrag.retrieve import graph_interest as gi

    relevance = np.asarray(relevance, dtype=np.float64).reshape(1, -1)
    chosen = np.flatnonzero(gi.choose_interests(relevance, threshold, cap)[0])
    order = chosen[np.lexsort((chosen, -relevance[0, chosen]))]
    degree = np.asarray(index.membership.sum(axis=1)).ravel()
    return pd.DataFrame({"interest_id": [index.interest_ids[i] for i in order], "position": order + 1,
                         "label": [index.labels[i] for i in order], "relevance": relevance[0, order],
                         "memories": degree[order].astype(int)})


def chosen_table(chosen: pd.DataFrame, show_labels: bool) -> pd.DataFrame:
    """The chosen interests for display: ``interest`` (label or ``i:<n>``), ``relevance`` (3 decimals),
    ``memories``."""
    names = chosen["label"] if show_labels else "i:" + chosen["position"].astype(str)
    return pd.DataFrame({"interest": names.to_numpy(), "relevance": chosen["relevance"].round(3).to_numpy(),
                         "memories": chosen["memories"].to_numpy()})


@dataclass(frozen=True)
class QuestionSubgraph:
    """What a question reaches, ready to draw.  ``interests``: the chosen ones (:func:`chosen_interests`).
    ``memories``: the drawn memories, ``chunk_id, reached, gold, top_k, rank`` in drawing order (primary gold
    first, then the tuned ranking's top k, then the other reached memories by rank).  ``edges``: (interest id,
    chunk id) among them.  ``reached``: |M′|.  ``left_out``: reached memories not drawn (the cap)."""

    question_id: str
    interests: pd.DataFrame
    memories: pd.DataFrame
    edges: tuple[tuple[str, str], ...]
    reached: int
    left_out: int


def question_subgraph(graph, chosen: pd.DataFrame, gold: Sequence[str], ranking: pd.DataFrame, question_id: str,
                      k: int = 5, max_memories: int = 30) -> QuestionSubgraph:
    """The subgraph of :class:`QuestionSubgraph` for one question.  ``gold``: its primary-gold chunk ids;
    ``ranking``: the tuned graph's ranking (``question_id, chunk_id, rank``; other questions ignored).  Gold and
    top-k memories are drawn even when no chosen interest reaches them (they then have no edge); at most
    ``max_memories`` are drawn in all."""
    if max_memories < 1:
        raise ValueError(f"max_memories must be at least 1, got {max_memories!r}")
    links = {i: graph.memories_of(i) for i in chosen["interest_id"]}
    reached = set().union(*links.values()) if links else set()
    ranks = ranking[ranking["question_id"] == question_id].set_index("chunk_id")["rank"]
    top = [c for c in ranks.sort_values(kind="stable").index[:k]]
    unranked = len(ranks) + 1
    by_rank = sorted(reached, key=lambda c: (int(ranks.get(c, unranked)), c))
    gold_sorted = sorted(gold, key=lambda c: (c not in reached, int(ranks.get(c, unranked)), c))
    order = list(dict.fromkeys([*gold_sorted, *top, *by_rank]))
    drawn = order[:max_memories]
    memories = pd.DataFrame({"chunk_id": drawn, "reached": [c in reached for c in drawn],
                             "gold": [c in set(gold) for c in drawn], "top_k": [c in set(top) for c in drawn],
                             "rank": [int(ranks[c]) if c in ranks.index else pd.NA for c in drawn]})
    shown = set(drawn)
    edges = tuple((i, c) for i in chosen["interest_id"] for c in links[i] if c in shown)
    return QuestionSubgraph(question_id, chosen.reset_index(drop=True), memories, edges, len(reached),
                            len(reached - shown))


@cache
def _cjk_font() -> str | None:
    """A font family that draws Japanese: a known one matplotlib already lists, else one found among the
    system's font files (Noto CJK, IPA, Takao, Gothic) and registered; ``None`` when there is none."""
    import re
    from pathlib import Path

    from matplotlib import font_manager

    def pick() -> str | None:
        available = {f.name for f in font_manager.fontManager.ttflist}
        return next((n for n in CJK_FONTS if n in available), None) or next(
            (n for n in sorted(available) if "CJK" in n), None)

    if pick() is None:
        for path in sorted(font_manager.findSystemFonts()):
            if re.search(r"cjk|ipa|takao|gothic", Path(path).name, re.IGNORECASE):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
    return pick()


def _needs_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character (kana, kanji, full-width forms), which matplotlib's default font
    lacks."""
    return any(ord(ch) >= 0x2E80 for ch in text)


def draw_subgraph(sub: QuestionSubgraph, show_labels: bool, title: str = "", k: int = 5,
                  memory_labels: Mapping[str, str] | None = None):
    """Chosen interests (left, squares, size by relevance) → the memories they reach (right), in a bipartite
    layout with a fixed order; primary gold orange, the tuned ranking's top k outlined in black, memories no
    chosen interest reaches light grey.  A note says how many reached memories are left out.  Interest labels
    are drawn only when ``show_labels`` and a font can draw them (:func:`_cjk_font`), else ``i:<n>``.  Memories
    are labelled by ``memory_labels`` (:func:`memory_labels`: time and speakers), else by their chunk id; a
    label the fonts cannot draw falls back to its time."""
    import networkx as nx
    from matplotlib.lines import Line2D

    from pmrag.present.figure_style import column_figure

    interests, memories = sub.interests, sub.memories
    g = nx.Graph()
    g.add_nodes_from(interests["interest_id"])
    g.add_nodes_from(memories["chunk_id"])
    g.add_edges_from(sub.edges)
    span = max(len(interests), len(memories), 1)

    def column(ids, x):
        return {node: (x, 1 - (j + 0.5) / max(len(ids), 1)) for j, node in enumerate(ids)}

    pos = {**column(list(interests["interest_id"]), 0.0), **column(list(memories["chunk_id"]), 1.0)}
    fig, ax = column_figure(2.2 + 0.32 * span)
    nx.draw_networkx_edges(g, pos, ax=ax, edge_color="#999999", width=0.8)
    if len(interests):
        nx.draw_networkx_nodes(g, pos, nodelist=list(interests["interest_id"]), node_shape="s", ax=ax,
                               node_color="#4C72B0", node_size=(120 + 280 * interests["relevance"]).tolist())
    if len(memories):
        colours = ["#DD8452" if gold else ("#55A868" if reached else "#DDDDDD")
                   for gold, reached in zip(memories["gold"], memories["reached"])]
        nx.draw_networkx_nodes(g, pos, nodelist=list(memories["chunk_id"]), ax=ax, node_color=colours, node_size=140,
                               edgecolors=["black" if t else "none" for t in memories["top_k"]],
                               linewidths=[2.0 if t else 0.0 for t in memories["top_k"]])
    font = _cjk_font() if show_labels else None
    drawable = show_labels and (font is not None or all(label.isascii() for label in interests["label"]))
    names = chosen_table(interests, drawable)["interest"] if len(interests) else []
    for node, name in zip(interests["interest_id"], names):
        x, y = pos[node]
        ax.text(x - 0.07, y, str(name), ha="right", va="center", fontsize=8, **({"family": font} if font else {}))
    cjk = _cjk_font() if memory_labels else None
    for row in memories.itertuples(index=False):
        x, y = pos[row.chunk_id]
        suffix = (f" · rank {row.rank}" if not pd.isna(row.rank) else "") + ("" if row.reached else " · not reached")
        name = memory_name(row.chunk_id) if memory_labels is None else memory_labels.get(row.chunk_id, row.chunk_id)
        if _needs_cjk(name) and cjk is None:
            name = name.split(" · ")[0]                 # the time alone: no font here draws the names
        style = {"family": cjk} if _needs_cjk(name) else ({} if memory_labels else {"family": "monospace"})
        ax.text(x + 0.04, y, name + suffix, ha="left", va="center", fontsize=8, **style)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-0.02, 1.02)
    ax.axis("off")
    handles = [Line2D([], [], marker="s", ls="", color="#4C72B0", label="chosen interest (size: relevance)"),
               Line2D([], [], marker="o", ls="", color="#DD8452", label="primary gold"),
               Line2D([], [], marker="o", ls="", color="#55A868", label="reached, not gold"),
               Line2D([], [], marker="o", ls="", color="#DDDDDD", label="not reached (shown: gold or top-k)"),
               Line2D([], [], marker="o", ls="", mfc="white", mec="black", mew=2, label=f"top-{k} of the tuned ranking")]
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
              frameon=False)                            # under the graph: covers no node
    note = (f"{len(interests)} chosen interest(s), {sub.reached} memories reached; "
            + (f"{sub.left_out} reached memories not drawn (cap {len(memories)})" if sub.left_out else "all drawn"))
    ax.set_title(f"{title}\n{note}" if title else note, fontsize=9)
    fig.tight_layout()
    return fig


def subgraph_figure(graph, evaluation, question_id: str, chosen: pd.DataFrame, qrels: pd.DataFrame, *,
                    show_labels: bool, k: int = 5, max_memories: int = 30, title: str = "",
                    memory_labels: Mapping[str, str] | None = None):
    """:func:`question_subgraph` of ``question_id`` (gold: relevance 2 in ``qrels``; ranking: the evaluation's
    tuned graph) drawn by :func:`draw_subgraph`.  Returns ``(figure, subgraph)``."""
    gold = qrels.loc[(qrels["question_id"] == question_id) & (qrels["relevance"] == 2), "chunk_id"].tolist()
    sub = question_subgraph(graph, chosen, gold, evaluation.rankings[str(evaluation.tuned)], question_id, k, max_memories)
    return draw_subgraph(sub, show_labels, title, k, memory_labels), sub


class SubgraphView:
    """The subgraph of any question of a study (duck-typed :class:`~pmrag.study.Study`): its graph stage, its
    interest relevance, its graph evaluation's tuned threshold and cap and the evaluable questions, read once."""

    def __init__(self, study, *, k: int = 5, max_memories: int = 24):
        from pmrag.retrieve.graph_interest import InterestIndex

        self.built = study.graph()
        self.evaluation = study.graph_evaluation()
        self.relevance = study.interest_relevance()
        self.show_labels = study.shows_chat_text()
        self.index = InterestIndex.from_graph(self.built.graph, study.chunks()["chunk_id"].tolist())
        evaluable = study.evaluation()
        self.questions = evaluable.questions.set_index("question_id")
        self.qrels = evaluable.qrels
        self.k, self.max_memories = k, max_memories
        self.memory_labels = memory_labels(study.chunks(), study.chunk_messages(), study.messages(), self.show_labels)

    def chosen(self, question_id: str) -> pd.DataFrame:
        """The interests the tuned choice picks for the question (:func:`chosen_interests`)."""
        return chosen_interests(self.index, self.relevance.rows([question_id])[0], self.evaluation.threshold,
                                self.evaluation.cap)

    def figure(self, question_id: str):
        """The question's subgraph figure (:func:`subgraph_figure`), titled with its type and the extractor."""
        title = f"{question_id} ({self.questions.loc[question_id, 'type']}) · {self.built.label}"
        fig, _ = subgraph_figure(self.built.graph, self.evaluation, question_id, self.chosen(question_id), self.qrels,
                                 show_labels=self.show_labels, k=self.k, max_memories=self.max_memories, title=title,
                                 memory_labels=self.memory_labels)
        return fig

    def heading(self, question_id: str) -> str:
        """``question q014 (aggregate)``, with the question's text when chat text is shown."""
        row = self.questions.loc[question_id]
        return f"question {question_id} ({row['type']})" + (f": {row['text']}" if self.show_labels else "")


def default_question(evaluation, questions: pd.DataFrame, question_type: str) -> str | None:
    """The first held-out question (ID order) of ``question_type``, else the first held-out question, else
    ``None``."""
    from pmrag.evaluate.graph_eval import HELD_OUT

    held = questions[questions["question_id"].map(evaluation.split).eq(HELD_OUT)].sort_values("question_id")
    of_type = held[held["type"] == question_type]
    pick = of_type if len(of_type) else held
    return str(pick["question_id"].iloc[0]) if len(pick) else None


def question_options(evaluation, questions: pd.DataFrame, show_text: bool) -> list[tuple[str, str]]:
    """Dropdown options ``(caption, question_id)`` for the held-out questions in ID order: ``id · type``, and
    the question's text only when ``show_text``."""
    from pmrag.evaluate.graph_eval import HELD_OUT

    held = questions[questions["question_id"].map(evaluation.split).eq(HELD_OUT)].sort_values("question_id")
    return [(f"{q} · {t}" + (f" · {text}" if show_text else ""), q)
            for q, t, text in zip(held["question_id"], held["type"], held["text"])]


PICKER_HINT = "Question picker: run this cell (and the ones above) to draw another question; widgets need a live kernel."


def question_picker(options: Sequence[tuple[str, str]], draw: Callable[[str], object], value: str | None = None):
    """An ipywidgets ``VBox``: a Dropdown of ``options`` and an Output that shows ``draw(question_id)`` (a
    figure) for the chosen question, redrawn on every change.  Built without drawing; nothing runs until the
    value changes, so a headless execution only displays it, and a notebook saved without widget state shows
    :data:`PICKER_HINT` where it was (not the widgets' repr)."""
    import ipywidgets as w

    from pmrag.present.grading.widget import hinted_box
    import matplotlib.pyplot as plt
    from IPython.display import display

    dropdown = w.Dropdown(options=list(options), value=value, description="question",
                          layout=w.Layout(width="95%"))
    output = w.Output()

    def redraw(change) -> None:
        output.clear_output(wait=True)
        with output:
            fig = draw(change["new"])
            if fig is not None:
                display(fig)
                plt.close(fig)

    dropdown.observe(redraw, names="value")
    return hinted_box(PICKER_HINT)([dropdown, output])
