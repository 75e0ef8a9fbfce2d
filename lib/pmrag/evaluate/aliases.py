"""Methods that are one method (§6.3: a family of comparisons counts each method once).

Two methods are *aliases* when they rank the same chunk ids in the same order at ranks 1 … k for every question,
with k the largest metric cut-off the study scores: every metric the study reports (Recall, MRR and nDCG at every
cut-off ≤ k) is then equal for both on every question, so they are one method under two names (in the demo,
``prefix_bm25`` and ``prefix_vector`` score one fixed description and rank by the same chunk-id tie-break).  A
family of comparisons tests such a group once, by its *representative*: its first method in the study's method
order.  Methods that merely tie on one metric on every question (``raw_text_bm25`` and ``excerpt_bm25`` have the same
Recall@5 on each demo question but order their lists differently) are not aliases: they are different methods whose
comparisons happen to rest on the same numbers (:func:`pmrag.evaluate.multiplicity.family_table` marks those rows).

Layout (:func:`alias_groups`).  Every ranked chunk id is coded once over all methods; method i's top k of question q
fills row i, columns q·k … q·k + k − 1 of an integer matrix, −1 where the list has no chunk at that rank (a list
shorter than k, a question the method does not rank).  Aliases are the methods with equal rows, found by keying a
dictionary on each row's bytes: Python compares equal-hash keys in full, so two methods are grouped only when every
cell is equal (a hash collision cannot merge different rankings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pmrag.core.frames import RunLike, require_columns
from pmrag.evaluate.runs import Run


def alias_groups(rankings: Mapping[str, RunLike], k: int, questions: Sequence[str] | None = None) -> pd.DataFrame:
    """Which methods are aliases: one row per method of ``rankings`` (in its order), columns ``method,
    representative`` (the group's first method; a method without aliases represents itself).

    Parameters
    ----------
    rankings : method name → its ranked lists (``question_id, chunk_id, rank`` or ``{question_id: [chunk_id, …]}``).
    k : the depth compared (the study's largest metric cut-off).
    questions : the questions compared (the evaluated ones); default every question any method ranks.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    methods = list(rankings)
    if not methods:
        return pd.DataFrame({"method": pd.Series(dtype=object), "representative": pd.Series(dtype=object)})
    tops = [_top(rankings[m], k) for m in methods]
    if questions is None:
        questions = sorted(set().union(*(set(top["question_id"]) for top in tops)))
    questions = pd.Index(list(questions))
    chunks = pd.Index(pd.unique(pd.concat([top["chunk_id"] for top in tops], ignore_index=True)))
    slots = np.full((len(methods), len(questions) * int(k)), -1, dtype=np.int64)
    cells = []
    for i, top in enumerate(tops):
        row = questions.get_indexer(top["question_id"])
        kept = row >= 0
        cell = row[kept] * int(k) + top["rank"].to_numpy()[kept] - 1
        slots[i, cell] = chunks.get_indexer(top["chunk_id"][kept])
        cells.append(i * slots.shape[1] + cell)
    cells = np.concatenate(cells)
    if (filled := np.bincount(cells, minlength=slots.size)).max(initial=0) > 1:
        method, cell = divmod(int(np.argmax(filled > 1)), slots.shape[1])
        raise ValueError(f"the ranking of {methods[method]!r} has rank {cell % int(k) + 1} twice for question "
                         f"{questions[cell // int(k)]!r}")
    first = {}                  # a row's bytes → the first method with that row (equal bytes: equal rows)
    representative = [methods[first.setdefault(row.tobytes(), i)] for i, row in enumerate(slots)]
    return pd.DataFrame({"method": methods, "representative": representative})


def alias_lists(aliases: pd.DataFrame) -> pd.DataFrame:
    """The groups of more than one method: ``representative, aliases`` (the others, in method order, joined by
    ``", "``), in the order of the representatives."""
    others = aliases[aliases["method"] != aliases["representative"]]
    listed = others.groupby("representative", sort=False)["method"].agg(", ".join)
    order = [m for m in aliases["method"] if m in listed.index]
    return pd.DataFrame({"representative": pd.Series(order, dtype=object),
                         "aliases": pd.Series(listed.reindex(order).to_numpy(), dtype=object)})


def _top(ranking: RunLike, k: int) -> pd.DataFrame:
    """Ranks 1 … k.  A frame (a study's rankings, validated when made) is only checked for what the layout relies
    on: integer ranks ≥ 1 here, each rank once per question in :func:`alias_groups`."""
    if not isinstance(ranking, pd.DataFrame):
        return _top(Run.of(ranking).frame, k)
    require_columns(ranking, ["question_id", "chunk_id", "rank"], "ranking")
    if not pd.api.types.is_integer_dtype(ranking["rank"]) or (len(ranking) and ranking["rank"].min() < 1):
        raise ValueError("ranking ranks must be integers ≥ 1")
    return ranking.loc[ranking["rank"] <= k, ["question_id", "chunk_id", "rank"]].reset_index(drop=True)
