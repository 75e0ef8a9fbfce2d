"""Evidence groups (§4.3, §9.1): overlapping windows that hold the same evidence count once.

The paper's chunk-level gold (:func:`pmrag.chunking.store.derive_qrels`) gives relevance 2 to *every* chunk that
holds a primary-evidence message of question q, so with overlapping windows one piece of evidence can be
"found" several times (§9.1).  Here those chunks are grouped.

Grouping (:func:`evidence_groups`).  For a primary-gold chunk d of q (``qrels`` relevance 2) let
E(q, d) = {m : m is a primary-evidence message of q (``question_evidence`` relevance 2) and ``chunk_messages``
puts m in d}.

* ``rule="same_set"`` (the default, the issue's wording): d and d′ are in one group iff E(q, d) = E(q, d′)
  — the *same set* of primary-evidence messages.  Two windows that each hold evidence the other lacks stay
  apart, even if they overlap in some of it.
* ``rule="share_any"`` (offered besides): the connected components of "E(q, d) ∩ E(q, d′) ≠ ∅", so a chain
  of windows sliding over a run of evidence messages is one group.  Never finer than ``same_set``.

Known limits of both rules.  ``same_set`` merges only exact duplicates: a window holding {m1, m2, m3} and one
holding {m3} stay two groups, so m3 is still counted in both.  ``share_any`` credits a whole chain when one link
is found: for evidence {m1, m2} in windows A = {m1}, B = {m1, m2}, C = {m2} (one group), retrieving A alone
scores group recall 1.0 though m2 was never retrieved.  Neither counts each piece of evidence once;
message-level recall (:mod:`pmrag.evaluate.message_recall`: the share of primary-evidence messages held by some
retrieved chunk) does, and notebook 09 reports it beside these.

Groups are numbered 0, 1, … within a question in the order of their smallest chunk id.  Groups partition
G2(q), the primary gold of :mod:`pmrag.evaluate.metrics`; a relevance-2 chunk with E(q, d) = ∅ (qrels that do
not come from this evidence) is an error.  Relevance-1 chunks (supporting evidence only) are *not* grouped:
they keep their own gain, exactly as in the chunk-level definition; only primary gold is double counted in
the issue's sense, and keeping them as they are makes the group metrics equal the chunk-level ones whenever
every group has one chunk.

Metrics of a ranking π(q) = (d_1, d_2, …) against the groups 𝒢(q) (:func:`per_question_group_metrics`):

* ``group_recall@k`` = |{g ∈ 𝒢(q) : g ∩ {d_1 … d_k} ≠ ∅}| / |𝒢(q)|.
* ``group_mrr@k`` = 1 / (the first rank i ≤ k whose chunk belongs to a group), 0 if none.  Every
  relevance-2 chunk belongs to exactly one group, so the first group hit is the first primary-gold chunk:
  group MRR@k *always* equals the chunk-level ``mrr@k`` (eq. 4), whatever the grouping.  It is reported
  for a complete row.
* ``group_ndcg@k`` = DCG@k / IDCG@k with the chunk-level gains 2^rel − 1 (eq. 5) except that a relevance-2
  chunk gains 3 only if it is the first chunk of its group in the ranking; later chunks of the same group
  gain 0.  Relevance-1 chunks gain 1 each.  IDCG@k is the DCG@k of the ideal list: one chunk per group
  (gain 3 each), then every relevance-1 chunk of q (gain 1 each).

To score many rankings, lay the qrels and groups out once with :func:`group_judgments` and pass that in place
of ``qrels`` (``groups=None``).

When every group holds one chunk, all three equal :func:`pmrag.evaluate.metrics.per_question_metrics`
exactly: the effective relevance matrix built here is then the chunk-level one, and the same kernels
(:func:`~pmrag.evaluate.metrics.reciprocal_rank`, :func:`~pmrag.evaluate.metrics.ndcg`) score it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from pmrag.core.frames import RunLike, require_columns
from pmrag.evaluate.metric_names import GROUP_METRICS, at_k
from pmrag.evaluate.metrics import PRIMARY, _validated_ks, ndcg, reciprocal_rank
from pmrag.evaluate.runs import Qrels, Run

RULES = ("same_set", "share_any")


def evidence_groups(qrels: Qrels | pd.DataFrame, question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame,
                    rule: str = "same_set") -> pd.DataFrame:
    """The evidence group of every primary-gold chunk: columns ``question_id, chunk_id, group``.

    Parameters
    ----------
    qrels : ``question_id, chunk_id, relevance`` ∈ {0, 1, 2}; its relevance-2 rows are grouped.
    question_evidence : ``question_id, message_id, relevance`` (2 = primary evidence).
    chunk_messages : ``chunk_id, position, message_id``.
    rule : ``"same_set"`` (same set of primary-evidence messages: merges exact duplicates only) or
        ``"share_any"`` (connected components of sharing at least one: a chain counts as found when one link is);
        see the module docstring, and :mod:`pmrag.evaluate.message_recall` for each message counted once.

    Returns
    -------
    One row per relevance-2 chunk, sorted by question and chunk; ``group`` numbers the groups 0, 1, …
    within the question in the order of their smallest chunk id.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    judged = Qrels.of(qrels).frame
    require_columns(question_evidence, ["question_id", "message_id", "relevance"], "question_evidence")
    require_columns(chunk_messages, ["chunk_id", "position", "message_id"], "chunk_messages")

    gold = (judged.loc[judged["relevance"] == PRIMARY, ["question_id", "chunk_id"]]
            .sort_values(["question_id", "chunk_id"], kind="stable").reset_index(drop=True))
    evidence = question_evidence.loc[question_evidence["relevance"] == PRIMARY, ["question_id", "message_id"]]
    holding = chunk_messages.loc[chunk_messages["chunk_id"].isin(gold["chunk_id"]), ["chunk_id", "message_id"]]
    links = (gold.merge(holding.drop_duplicates(), on="chunk_id")   # the gold chunks' memberships alone
             .merge(evidence.drop_duplicates(), on=["question_id", "message_id"]))
    if gold.empty:
        return gold.assign(group=np.zeros(0, dtype=np.int64))
    key = pd.MultiIndex.from_frame(gold)
    chunk = key.get_indexer(pd.MultiIndex.from_frame(links[["question_id", "chunk_id"]]))
    empty = np.bincount(chunk, minlength=len(gold)) == 0
    if empty.any():
        q, c = gold.iloc[int(np.argmax(empty))]
        raise ValueError(f"qrels gives chunk {c!r} relevance {PRIMARY} for question {q!r}, but chunk_messages puts "
                         f"none of its primary-evidence messages (question_evidence) in that chunk")

    message = pd.MultiIndex.from_frame(links[["question_id", "message_id"]]).factorize()[0]
    if rule == "same_set":
        component = _same_set(chunk, message, len(gold))
    else:
        component = _share_any(chunk, message, len(gold))
    first = pd.Series(component).groupby(gold["question_id"].to_numpy()).transform("min").to_numpy()
    return gold.assign(group=(component - first).astype(np.int64))


def _same_set(chunk: np.ndarray, message: np.ndarray, n_chunks: int) -> np.ndarray:
    """Codes equal iff the chunks hold the same message set, numbered by first appearance (chunk order)."""
    order = np.lexsort((message, chunk))
    chunk, message = chunk[order], message[order]
    starts = np.searchsorted(chunk, np.arange(n_chunks))
    sets = [tuple(s) for s in np.split(message, starts[1:])]
    return pd.factorize(pd.Series(sets, dtype=object))[0]


def _share_any(chunk: np.ndarray, message: np.ndarray, n_chunks: int) -> np.ndarray:
    """Connected components of the chunk–message graph, relabelled by first appearance (chunk order)."""
    n = n_chunks + int(message.max()) + 1 if len(message) else n_chunks
    graph = coo_matrix((np.ones(len(chunk)), (chunk, n_chunks + message)), shape=(n, n))
    labels = connected_components(graph, directed=False)[1][:n_chunks]
    return pd.factorize(labels)[0]


@dataclass(frozen=True)
class GroupJudgments:
    """The qrels and their groups laid out once for scoring many rankings (:func:`group_judgments`).

    ``question_ids``: the judged questions (sorted); ``chunk_ids``: every judged chunk id; ``keys``: sorted
    ``question_code · |chunk_ids| + chunk_code`` of each judgment, with its ``grades`` and ``group_ids`` (a number
    unique over all questions; −1 for relevance 0 and 1); ``n_groups`` and ``n_secondary`` per question.
    """

    question_ids: pd.Index
    chunk_ids: pd.Index
    keys: np.ndarray
    grades: np.ndarray
    group_ids: np.ndarray
    n_groups: np.ndarray
    n_secondary: np.ndarray


@dataclass(frozen=True)
class GroupMatrix:
    """A ranking's effective relevance against evidence groups, truncated at ``depth``.

    ``question_ids``: the scored questions (sorted); ``ranked[q, i]``: 2 where rank i + 1 holds the first chunk
    of a group, 1 for a relevance-1 chunk, 0 otherwise; ``ideal[q, i]``: |𝒢(q)| twos, then q's relevance-1
    count of ones; ``n_groups``: |𝒢(q)|.
    """

    question_ids: pd.Index
    ranked: np.ndarray
    ideal: np.ndarray
    n_groups: np.ndarray


def group_judgments(qrels: Qrels | pd.DataFrame, groups: pd.DataFrame) -> GroupJudgments:
    """Validate ``qrels`` and their :func:`evidence_groups` once; every judged question needs a group."""
    judged = Qrels.of(qrels).frame
    require_columns(groups, ["question_id", "chunk_id", "group"], "groups")
    questions = pd.Index(pd.unique(judged["question_id"]), name="question_id").sort_values()
    chunks = pd.Index(pd.unique(judged["chunk_id"]))
    keys = questions.get_indexer(judged["question_id"]) * np.int64(len(chunks)) + chunks.get_indexer(judged["chunk_id"])
    order = np.argsort(keys, kind="stable")
    keys, grades = keys[order], judged["relevance"].to_numpy()[order]

    primary = judged.loc[judged["relevance"] == PRIMARY, ["question_id", "chunk_id"]]
    grouped = pd.MultiIndex.from_frame(groups[["question_id", "chunk_id"]])
    if (len(primary) != len(groups) or not grouped.is_unique
            or (grouped.get_indexer(pd.MultiIndex.from_frame(primary)) < 0).any()):
        raise ValueError(f"groups must hold exactly the relevance-{PRIMARY} chunks of qrels (see evidence_groups)")
    group_keys = (questions.get_indexer(groups["question_id"]) * np.int64(len(chunks))
                  + chunks.get_indexer(groups["chunk_id"]))
    group_numbers = pd.MultiIndex.from_arrays([groups["question_id"], groups["group"]]).factorize()[0]
    group_ids = np.full(len(keys), -1, dtype=np.int64)
    group_ids[np.searchsorted(keys, group_keys)] = group_numbers

    distinct = groups.drop_duplicates(["question_id", "group"])["question_id"]
    n_groups = np.bincount(questions.get_indexer(distinct), minlength=len(questions))
    missing = questions[n_groups == 0]
    if len(missing):
        raise ValueError(f"{len(missing)} question(s) have no primary-gold group, e.g. {missing[0]!r}: group metrics "
                         f"are undefined (score only primary-gold questions)")
    n_secondary = np.bincount(questions.get_indexer(judged.loc[judged["relevance"] == 1, "question_id"]),
                              minlength=len(questions))
    return GroupJudgments(questions, chunks, keys, grades, group_ids, n_groups, n_secondary)


def group_matrix(run: Run | RunLike, judgments: GroupJudgments, depth: int) -> GroupMatrix:
    """The :class:`GroupMatrix` of ``run`` (as :func:`pmrag.evaluate.metrics.relevance_matrix` for chunks).

    The scored questions are the judged ones; a question the run does not rank scores 0, and a ranked question
    without judgments is a ``ValueError`` (its metrics are undefined).
    """
    if not isinstance(judgments, GroupJudgments):
        raise TypeError(f"judgments must be a GroupJudgments (group_judgments), got {type(judgments).__name__}")
    questions = judgments.question_ids
    row, slot, chunk = Run.of(run).top_positions(
        depth, questions, judgments.chunk_ids,
        "has no primary-gold group: group metrics are undefined (score only primary-gold questions)")
    wanted = row * np.int64(len(judgments.chunk_ids)) + chunk
    at = np.minimum(np.searchsorted(judgments.keys, wanted), len(judgments.keys) - 1)
    found = (chunk >= 0) & (judgments.keys[at] == wanted)
    grade = np.where(found, judgments.grades[at], 0)
    group = np.where(found, judgments.group_ids[at], -1)
    order = np.lexsort((slot, group))            # by group, then rank: the first of each group leads
    leads = np.ones(len(order), dtype=bool)
    leads[1:] = group[order][1:] != group[order][:-1]
    first = np.zeros(len(order), dtype=bool)
    first[order] = leads
    effective = np.where(grade == PRIMARY, np.where(first, PRIMARY, 0), grade)
    ranked = np.zeros((len(questions), depth), dtype=np.int8)
    ranked[row, slot] = effective

    columns = np.arange(depth)
    n_groups, n_judged = judgments.n_groups[:, None], (judgments.n_groups + judgments.n_secondary)[:, None]
    ideal = np.where(columns < n_groups, PRIMARY, np.where(columns < n_judged, 1, 0)).astype(np.int8)
    return GroupMatrix(questions, ranked, ideal, judgments.n_groups)


def per_question_group_metrics(run: RunLike, qrels: pd.DataFrame | GroupJudgments, groups: pd.DataFrame | None = None,
                               ks: Iterable[int] = (5,)) -> pd.DataFrame:
    """One row per question (index ``question_id``, sorted), columns ``group_{recall,mrr,ndcg}@k`` k by k.

    ``run`` is ``{question_id: [chunk_id, …]}`` or a ``question_id, chunk_id, rank`` frame; ``groups`` is
    :func:`evidence_groups` of the same ``qrels`` (or pass :func:`group_judgments` as ``qrels`` and no
    ``groups``, to lay them out once for many runs).  Questions are the judged ones, as in
    :func:`pmrag.evaluate.metrics.per_question_metrics` (a question the run does not rank scores 0).
    """
    ks = _validated_ks(ks)
    judgments = qrels if groups is None else group_judgments(qrels, groups)
    matrix = group_matrix(run, judgments, depth=max(ks))
    columns = {}
    for k in ks:
        recall_k, mrr_k, ndcg_k = at_k(k, GROUP_METRICS)
        columns[str(recall_k)] = (matrix.ranked[:, :k] == PRIMARY).sum(axis=1) / matrix.n_groups
        columns[str(mrr_k)] = reciprocal_rank(matrix.ranked, k)
        columns[str(ndcg_k)] = ndcg(matrix.ranked, matrix.ideal, k)
    return pd.DataFrame(columns, index=matrix.question_ids)


def per_question_group_rows(run: RunLike, name: str, qrels: pd.DataFrame | GroupJudgments,
                            groups: pd.DataFrame | None, types: pd.Series, ks: Iterable[int] = (5,)) -> pd.DataFrame:
    """:func:`per_question_group_metrics` as long rows of one method, like
    :func:`pmrag.evaluate.metrics.per_question_rows`: ``retriever`` (= ``name``), ``question_id``,
    ``question_type`` (from ``types``: question_id → type), then the group metric columns."""
    metrics = per_question_group_metrics(run, qrels, groups, ks=ks).reset_index()
    metrics.insert(0, "retriever", name)
    metrics.insert(2, "question_type", metrics["question_id"].map(types))
    return metrics
