"""Failure analysis of one ranking (paper §7): Top-K failures, rule-based labels, recoverability, overlap.

Definitions (all on primary gold, relevance 2, as the paper's):

* a question **succeeds at K** when at least one primary-gold chunk is in its Top-K, i.e. ``recall@K > 0``;
  it **fails at K** otherwise (§7.1: "its Top-5 results contained no primary-gold chunk");
* a failure at K is **recovered at K'** (K' > K) when the same ranking succeeds at K' (§7.3: "extending the
  cutoff"; a wider cut-off of the same list, not a different candidate pool);
* **rule-based labels** (§7.3), assigned to failures in this order and mutually exclusive:
  ``aggregate_failure`` (the question's type is the aggregate type), ``multiple_primary_gold_nonaggregate``
  (at least ``min_primary`` primary-gold chunks), ``other_rule_based_failure`` (the rest).  The names state
  the rule that fired, not a cause; the paper insists they are not causal analyses.

Every function takes the per-question metric rows of *one* method: columns ``question_id``,
``question_type`` and ``recall@K`` for the cut-offs used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns
from pmrag.evaluate.metric_names import RECALL5
from pmrag.evaluate.runs import PRIMARY

LABELS = ("aggregate_failure", "multiple_primary_gold_nonaggregate", "other_rule_based_failure")
OVERLAP_PATTERNS = ("BM25 only", "Vector only", "Both", "Neither")


def successes(per_question: pd.DataFrame, k: int) -> pd.Series:
    """``question_id → bool``: at least one primary-gold chunk in the Top-``k`` (``recall@k > 0``)."""
    column = str(RECALL5.at(k))
    require_columns(per_question, ["question_id", column], "per-question rows")
    return pd.Series(per_question[column].to_numpy() > 0, index=per_question["question_id"].to_numpy(),
                     name=f"success@{k}")


def recovered(per_question: pd.DataFrame, k: int, wider: int) -> pd.Series:
    """``question_id → bool``: a Top-``k`` failure that the same ranking recovers at the wider cut-off
    ``wider`` (``recall@k == 0`` and ``recall@wider > 0``, §7.3)."""
    return pd.Series(~successes(per_question, k).to_numpy() & successes(per_question, wider).to_numpy(),
                     index=per_question["question_id"].to_numpy(), name=f"recovered@{wider}")


def primary_gold_counts(qrels: pd.DataFrame) -> pd.Series:
    """``question_id → |G2(q)|``: the number of primary-gold chunks."""
    return qrels[qrels["relevance"] == PRIMARY].groupby("question_id").size().rename("n_primary")


def failure_table(per_question: pd.DataFrame, k: int = 5, types: Sequence[str] | None = None) -> pd.DataFrame:
    """Table 7: per question type and overall, the questions, the Top-``k`` failures and the failure rate
    (formatted ``17.6%`` as the paper's).

    ``types`` fixes the row order (default: order of first appearance).
    """
    require_columns(per_question, ["question_type"], "per-question rows")
    failed = ~successes(per_question, k).to_numpy()
    frame = pd.DataFrame({"type": per_question["question_type"].to_numpy(), "failed": failed})
    order = list(types) if types is not None else list(dict.fromkeys(frame["type"]))
    rows = [(t, int((frame["type"] == t).sum()), int(frame.loc[frame["type"] == t, "failed"].sum())) for t in order]
    rows.append(("Overall", len(frame), int(frame["failed"].sum())))
    table = pd.DataFrame(rows, columns=["Question type", "Questions", f"Top-{k} failures"])
    table["Failure rate"] = [f"{100 * f / n:.1f}%" if n else "–" for f, n in zip(table[f"Top-{k} failures"], table["Questions"])]
    return table


def rule_labels(per_question: pd.DataFrame, qrels: pd.DataFrame, k: int = 5, aggregate_type: str = "aggregate",
                min_primary: int = 3) -> pd.DataFrame:
    """The Top-``k`` failures with their rule-based label: ``question_id, question_type, n_primary, label``.

    Rules in the paper's order: type == ``aggregate_type`` → ``aggregate_failure``; else ``n_primary ≥
    min_primary`` → ``multiple_primary_gold_nonaggregate``; else ``other_rule_based_failure``.
    """
    require_columns(per_question, ["question_id", "question_type"], "per-question rows")
    failed = per_question.loc[~successes(per_question, k).to_numpy(), ["question_id", "question_type"]]
    failed = failed.sort_values("question_id", kind="stable").reset_index(drop=True)
    n_primary = failed["question_id"].map(primary_gold_counts(qrels)).fillna(0).astype(int)
    label = np.where(failed["question_type"] == aggregate_type, LABELS[0],
                     np.where(n_primary >= min_primary, LABELS[1], LABELS[2]))
    return failed.assign(n_primary=n_primary.to_numpy(), label=label)


def label_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Table 8: count and share of each rule-based label (every label listed, most frequent first)."""
    counts = labels["label"].value_counts().reindex(LABELS, fill_value=0)
    table = pd.DataFrame({"Failure type": counts.index, "Count": counts.to_numpy()})
    table["Percentage"] = [f"{100 * n / len(labels):.1f}%" if len(labels) else "–" for n in table["Count"]]
    return table.sort_values("Count", ascending=False, kind="stable").reset_index(drop=True)


def recovery(per_question: pd.DataFrame, k: int = 5, wider: Sequence[int] = (10, 20),
             question_type: str | None = None) -> pd.DataFrame:
    """How many Top-``k`` failures the same ranking recovers at each wider cut-off (cumulative).

    Columns ``cutoff, failures, recovered, still_failing``; restricted to ``question_type`` when given.
    """
    rows = per_question if question_type is None else per_question[per_question["question_type"] == question_type]
    failed = int((~successes(rows, k)).sum())
    out = []
    for cutoff in wider:
        found = int(recovered(rows, k, cutoff).sum())
        out.append({"cutoff": cutoff, "failures": failed, "recovered": found, "still_failing": failed - found})
    return pd.DataFrame(out, columns=["cutoff", "failures", "recovered", "still_failing"])


def gold_spread(qrels: pd.DataFrame, chunks: pd.DataFrame, question_ids: Sequence[str]) -> pd.DataFrame:
    """Per question: primary-gold chunks, and how many distinct dates and sources they come from.

    A chunk's date is the calendar date of its first message (``start_at``); the paper does not say how it
    dated a chunk, and a window rarely crosses midnight inside a 180-minute session.
    """
    gold = qrels[(qrels["relevance"] == PRIMARY) & qrels["question_id"].isin(list(question_ids))]
    meta = chunks.set_index("chunk_id").loc[gold["chunk_id"], ["source", "start_at"]]
    gold = gold.assign(source=meta["source"].to_numpy(), date=pd.to_datetime(meta["start_at"]).dt.date.to_numpy())
    spread = gold.groupby("question_id").agg(n_primary=("chunk_id", "size"), n_dates=("date", "nunique"),
                                              n_sources=("source", "nunique"))
    return spread.reindex(list(question_ids)).fillna(0).astype(int).rename_axis("question_id").reset_index()


def aggregate_summary(per_question: pd.DataFrame, qrels: pd.DataFrame, chunks: pd.DataFrame, k: int = 5,
                      wider: Sequence[int] = (10, 20), aggregate_type: str = "aggregate") -> pd.DataFrame:
    """§7.3's aggregate detail as one two-column table (``Quantity``, ``Value``).

    Mean primary-gold chunks per aggregate question, how many span several dates and several sources, the
    aggregate Top-``k`` failures and how many of them the same ranking recovers at each wider cut-off.
    """
    ids = per_question.loc[per_question["question_type"] == aggregate_type, "question_id"].tolist()
    spread = gold_spread(qrels, chunks, ids)
    rec = recovery(per_question, k, wider, aggregate_type)
    rows = [
        ("aggregate questions", len(ids)),
        ("mean primary-gold chunks per aggregate question", round(float(spread["n_primary"].mean()), 2) if ids else np.nan),
        ("aggregate questions whose primary gold spans several dates", int((spread["n_dates"] > 1).sum())),
        ("aggregate questions whose primary gold spans several sources", int((spread["n_sources"] > 1).sum())),
        (f"aggregate Top-{k} failures", int(rec["failures"].iloc[0]) if len(rec) else 0),
    ]
    rows += [(f"... of them recovered at Top-{r.cutoff}", r.recovered) for r in rec.itertuples()]
    return pd.DataFrame(rows, columns=["Quantity", "Value"], dtype=object)


def topk_sensitivity(per_question: pd.DataFrame, ks: Sequence[int] = (5, 10, 20),
                     types: Sequence[str] | None = None) -> pd.DataFrame:
    """Figure 6's data: per question type (and ``all``) and cut-off K, the success rate and mean Recall@K.

    Columns ``question_type, k, questions, success_rate, recall``.
    """
    order = list(types) if types is not None else list(dict.fromkeys(per_question["question_type"]))
    rows = []
    for question_type in [*order, "all"]:
        part = per_question if question_type == "all" else per_question[per_question["question_type"] == question_type]
        for k in ks:
            rows.append({"question_type": question_type, "k": k, "questions": len(part),
                         "success_rate": float(successes(part, k).mean()) if len(part) else np.nan,
                         "recall": float(part[str(RECALL5.at(k))].mean()) if len(part) else np.nan})
    return pd.DataFrame(rows)


def success_overlap(bm25: pd.DataFrame, vector: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Table 9: questions where only the BM25 run, only the vector run, both or neither succeed at ``k``.

    Both runs must score the same questions.
    """
    a, b = _paired_successes(bm25, vector, k)
    return pd.DataFrame({"Success pattern": OVERLAP_PATTERNS, "Questions": _pattern_counts(a, b)})


def _paired_successes(bm25: pd.DataFrame, vector: pd.DataFrame, k: int) -> tuple[pd.Series, pd.Series]:
    a, b = successes(bm25, k), successes(vector, k)
    if set(a.index) != set(b.index):
        raise ValueError("the two runs must score the same questions")
    return a, b.reindex(a.index)


def _pattern_counts(a, b) -> list[int]:
    """Questions in each of :data:`OVERLAP_PATTERNS`, from two aligned boolean success arrays."""
    return [int((a & ~b).sum()), int((~a & b).sum()), int((a & b).sum()), int((~a & ~b).sum())]


def success_overlap_by_tag(bm25: pd.DataFrame, vector: pd.DataFrame, tags: pd.DataFrame | None,
                           k: int = 5) -> pd.DataFrame:
    """Table 9 within each value of each question tag (``tags``: ``question_id, tag, value``, one row per tagged
    question and tag; :meth:`pmrag.evaluate.gold.EvaluationSet.tags`): columns ``tag, value, questions`` and one
    per success pattern, tags and values in name order.  A question without a tag is counted under the value
    ``(none)``, so each tag's rows add up to Table 9.  No tags (None or no rows): no rows."""
    a, b = _paired_successes(bm25, vector, k)
    columns = ["tag", "value", "questions", *OVERLAP_PATTERNS]
    rows = []
    if tags is None:
        tags = pd.DataFrame(columns=["question_id", "tag", "value"])
    require_columns(tags, ["question_id", "tag", "value"], "tags")
    for tag, part in tags.groupby("tag", sort=True):
        value = part.drop_duplicates("question_id").set_index("question_id")["value"].reindex(a.index).fillna("(none)")
        for name, ids in value.groupby(value, sort=True).groups.items():
            rows.append([tag, name, len(ids), *_pattern_counts(a.loc[ids].to_numpy(), b.loc[ids].to_numpy())])
    return pd.DataFrame(rows, columns=columns).astype({c: np.int64 for c in columns[2:]})
