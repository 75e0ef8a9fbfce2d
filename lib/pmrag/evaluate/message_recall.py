"""Message-level Recall@k (§4.3, §9.1): each piece of primary evidence counted once, whichever chunk holds it.

The paper's gold is chunk-level: every chunk holding a primary-evidence message of q is primary gold
(:func:`pmrag.chunking.store.derive_qrels`), so with overlapping windows one message can be "found" several times
and the Recall denominator counts windows, not evidence (§4.3, §9.1).  Evidence groups
(:mod:`pmrag.evaluate.groups`) merge gold chunks, but ``same_set`` merges only windows holding exactly the same
evidence and ``share_any`` credits a whole chain of windows when one is found.  Here the unit is the evidence
itself, the message (the paper's gold is recovered from messages, §4.2).

For a question q let M(q) = {m : ``question_evidence`` gives m relevance 2 for q} (its primary-evidence messages,
each once), C(m) = {d : ``chunk_messages`` puts m in d} and R_k(q) = {d_1, …, d_k} the top k of its ranking:

    message_recall@k(q) = |{m ∈ M(q) : C(m) ∩ R_k(q) ≠ ∅}| / |M(q)|

macro-averaged over questions like eq. 3.  A message is found once whatever number of retrieved chunks hold it,
and a chunk holding several evidence messages finds each of them.  Supporting evidence (relevance 1) is not
counted, as Recall@k counts primary gold only.

**Evidence in no chunk is unreachable.**  A message that ``chunk_messages`` puts in no chunk (C(m) = ∅) stays in
M(q) and is never found: the retriever cannot return it, and the measure says so.  The paper's chunking can leave
such messages (§3.2: ``chunking.trim_policy: fixed`` advances by the stride after trimming a window's end, so a
window trimmed by more than the overlap leaves messages in no chunk; ``resume`` leaves none), and then chunk-level
gold has no chunk for them, so chunk-level and group-level recall cannot show the loss
(:mod:`pmrag.evaluate.coverage`).  A question none of whose primary evidence lies in a chunk has no primary-gold
chunk and is not evaluated (§4.2; the coverage table's reason ``chunking``); scored here it would get 0.
:attr:`EvidenceJudgments.n_in_no_chunk` counts these messages per question.

Relation to the other two levels: when every primary-evidence message lies in exactly one chunk and every
primary-gold chunk holds exactly one of them, M(q) and G2(q) are in one-to-one correspondence and every evidence
group is one chunk, so ``message_recall@k`` = ``recall@k`` = ``group_recall@k`` (either rule).

Computation, as :func:`pmrag.evaluate.metrics.relevance_matrix` for chunks: :func:`evidence_matrix` builds
``found[q, i]``, the number of q's evidence messages held by the chunk at rank i + 1 and by none ranked before it;
the kernel :func:`message_recall` is then one slice and sum per cut-off, vectorised over questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.frames import RunLike, require_columns
from pmrag.evaluate.metric_names import MESSAGE_METRICS, Metric
from pmrag.evaluate.metrics import _validated_ks
from pmrag.evaluate.runs import GRADES, PRIMARY, Run

MESSAGE_RECALL = MESSAGE_METRICS[0]


@dataclass(frozen=True)
class EvidenceJudgments:
    """Primary evidence laid out once for scoring many rankings (:func:`evidence_judgments`).

    ``question_ids``: the scored questions (sorted); ``chunk_ids``: every chunk holding a primary-evidence message of
    one of them; ``keys``: sorted ``question_code · |chunk_ids| + chunk_code``, one per (question, chunk, evidence
    message) link, with ``evidence_ids`` (a message number unique over all questions); ``n_evidence``: |M(q)|;
    ``n_in_no_chunk``: how many of them lie in no chunk (unreachable).
    """

    question_ids: pd.Index
    chunk_ids: pd.Index
    keys: np.ndarray
    evidence_ids: np.ndarray
    n_evidence: np.ndarray
    n_in_no_chunk: np.ndarray


@dataclass(frozen=True)
class EvidenceMatrix:
    """A ranking against primary evidence, truncated at ``depth``: ``found[q, i]`` evidence messages first found at
    rank i + 1, ``n_evidence`` |M(q)|, for the ``question_ids`` (sorted)."""

    question_ids: pd.Index
    found: np.ndarray
    n_evidence: np.ndarray


def message_recall(found: np.ndarray, n_evidence: np.ndarray, k: int) -> np.ndarray:
    """``|{m ∈ M(q) : C(m) ∩ R_k(q) ≠ ∅}| / |M(q)|`` per row of ``found`` (see the module docstring)."""
    return found[:, :k].sum(axis=1) / n_evidence


def evidence_judgments(question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame,
                       questions: Iterable | None = None) -> EvidenceJudgments:
    """Validate the evidence and chunk membership once and lay them out for :func:`evidence_matrix`.

    Parameters
    ----------
    question_evidence : ``question_id, message_id, relevance`` ∈ {0, 1, 2}; the relevance-2 rows are M(q).
    chunk_messages : ``chunk_id, message_id`` (the paper's line_chunk_messages; other columns are ignored).
    questions : the questions to score (the study's evaluated ones); by default every question with primary
        evidence.  Each needs at least one primary-evidence message (else message recall is undefined).

    Returns
    -------
    :class:`EvidenceJudgments`.
    """
    require_columns(question_evidence, ["question_id", "message_id", "relevance"], "question_evidence")
    require_columns(chunk_messages, ["chunk_id", "message_id"], "chunk_messages")
    if question_evidence[["question_id", "message_id"]].isna().any().any():
        raise ValueError("question_evidence has missing question or message ids")
    if chunk_messages[["chunk_id", "message_id"]].isna().any().any():
        raise ValueError("chunk_messages has missing chunk or message ids")
    grades = question_evidence["relevance"]
    if not pd.api.types.is_integer_dtype(grades) or not grades.isin(GRADES).all():
        raise ValueError(f"question_evidence relevance must be one of {GRADES} (integers); found "
                         f"{pd.unique(grades[~grades.isin(GRADES)])[:5].tolist() or grades.dtype}")

    evidence = (question_evidence.loc[grades == PRIMARY, ["question_id", "message_id"]]
                .drop_duplicates().reset_index(drop=True))
    if questions is None:
        scored = pd.Index(pd.unique(evidence["question_id"]), name="question_id").sort_values()
    else:
        scored = pd.Index(pd.unique(pd.Series(list(questions), dtype=object)), name="question_id").sort_values()
        evidence = evidence[evidence["question_id"].isin(scored)].reset_index(drop=True)
    n_evidence = np.bincount(scored.get_indexer(evidence["question_id"]), minlength=len(scored))
    missing = scored[n_evidence == 0]
    if len(missing):
        raise ValueError(f"{len(missing)} question(s) have no primary-evidence message (question_evidence relevance "
                         f"{PRIMARY}), e.g. {missing[0]!r}: message recall is undefined for them")

    holding = chunk_messages.loc[chunk_messages["message_id"].isin(evidence["message_id"]), ["chunk_id", "message_id"]]
    links = evidence.merge(holding.drop_duplicates(), on="message_id", how="left")   # the evidence's rows first: at
    # 10× the paper's scale de-duplicating all 4.1 million memberships took 14 s
    reachable = links["chunk_id"].notna().to_numpy()
    held = pd.MultiIndex.from_frame(evidence).get_indexer(
        pd.MultiIndex.from_frame(links.loc[reachable, ["question_id", "message_id"]]))
    in_a_chunk = np.zeros(len(evidence), dtype=bool)
    in_a_chunk[held] = True
    n_in_no_chunk = np.bincount(scored.get_indexer(evidence.loc[~in_a_chunk, "question_id"]), minlength=len(scored))

    links = links[reachable]
    chunks = pd.Index(pd.unique(links["chunk_id"]))
    keys = scored.get_indexer(links["question_id"]) * np.int64(len(chunks)) + chunks.get_indexer(links["chunk_id"])
    order = np.argsort(keys, kind="stable")
    return EvidenceJudgments(scored, chunks, keys[order], held[order].astype(np.int64), n_evidence, n_in_no_chunk)


def evidence_matrix(run: Run | RunLike, judgments: EvidenceJudgments, depth: int) -> EvidenceMatrix:
    """The :class:`EvidenceMatrix` of ``run``; a question the run does not rank scores 0, and a ranked question that
    is not scored (no primary evidence, or not among ``questions``) is a ``ValueError``."""
    if not isinstance(judgments, EvidenceJudgments):
        raise TypeError(f"judgments must be an EvidenceJudgments (evidence_judgments), got {type(judgments).__name__}")
    questions = judgments.question_ids
    row, slot, chunk = Run.of(run).top_positions(
        depth, questions, judgments.chunk_ids,
        "is not scored (no primary-evidence message): message recall is undefined for it")
    wanted = row * np.int64(len(judgments.chunk_ids)) + chunk
    first = np.searchsorted(judgments.keys, wanted, side="left")
    count = np.where(chunk >= 0, np.searchsorted(judgments.keys, wanted, side="right") - first, 0)
    # one entry per (ranked chunk, evidence message it holds)
    starts = np.repeat(first - np.cumsum(count) + count, count)
    link = starts + np.arange(int(count.sum()))
    message, link_row, link_slot = judgments.evidence_ids[link], np.repeat(row, count), np.repeat(slot, count)
    order = np.lexsort((link_slot, message))        # by message, then rank: the first chunk holding it leads
    leads = np.ones(len(order), dtype=bool)
    leads[1:] = message[order][1:] != message[order][:-1]
    found = np.zeros((len(questions), depth), dtype=np.int64)
    np.add.at(found, (link_row[order][leads], link_slot[order][leads]), 1)
    return EvidenceMatrix(questions, found, judgments.n_evidence)


def per_question_message_recall(run: Run | RunLike, question_evidence: pd.DataFrame | EvidenceJudgments,
                                chunk_messages: pd.DataFrame | None = None, ks: Iterable[int] = (5,)) -> pd.DataFrame:
    """One row per scored question (index ``question_id``, sorted), one column ``message_recall@k`` per k.

    ``run`` is ``{question_id: [chunk_id, …]}`` or a ``question_id, chunk_id, rank`` frame; pass the frames
    ``question_evidence`` and ``chunk_messages`` (every question with primary evidence is scored), or
    :func:`evidence_judgments` as ``question_evidence`` and no ``chunk_messages`` to lay them out once for many runs.
    """
    ks = _validated_ks(ks)
    if isinstance(question_evidence, EvidenceJudgments):
        if chunk_messages is not None:
            raise ValueError("pass chunk_messages only with a question_evidence frame, not with EvidenceJudgments")
        judgments = question_evidence
    elif chunk_messages is None:
        raise ValueError("chunk_messages is needed with a question_evidence frame (or pass evidence_judgments)")
    else:
        judgments = evidence_judgments(question_evidence, chunk_messages)
    matrix = evidence_matrix(run, judgments, depth=max(ks))
    columns = {str(Metric(MESSAGE_RECALL, k)): message_recall(matrix.found, matrix.n_evidence, k) for k in ks}
    return pd.DataFrame(columns, index=matrix.question_ids)


def per_question_message_rows(run: Run | RunLike, name: str, judgments: EvidenceJudgments, types: pd.Series,
                              ks: Iterable[int] = (5,)) -> pd.DataFrame:
    """:func:`per_question_message_recall` as long rows of one method, like
    :func:`pmrag.evaluate.metrics.per_question_rows`: ``retriever`` (= ``name``), ``question_id``,
    ``question_type`` (from ``types``: question_id → type), then the ``message_recall@k`` columns."""
    metrics = per_question_message_recall(run, judgments, ks=ks).reset_index()
    metrics.insert(0, "retriever", name)
    metrics.insert(2, "question_type", metrics["question_id"].map(types))
    return metrics


def evidence_counts(judgments: EvidenceJudgments) -> pd.DataFrame:
    """Per scored question: ``question_id``, ``evidence_messages`` (|M(q)|) and ``in_no_chunk`` (unreachable)."""
    return pd.DataFrame({"question_id": judgments.question_ids, "evidence_messages": judgments.n_evidence,
                         "in_no_chunk": judgments.n_in_no_chunk})
