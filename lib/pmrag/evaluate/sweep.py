"""The β sweep of a fused pairing (§6.2), the paper's selection rule, and candidate ceilings (§5.3).

:func:`sweep` scores every β at once from dense ``(n_questions, |P|)`` arrays laid out from
:func:`pmrag.retrieve.fusion.candidates`, with the fusion's own kernel (:data:`pmrag.retrieve.fusion.FUSION_SCORES`)
and so the same floating-point operations as :func:`pmrag.retrieve.fusion.fuse`, so its metrics equal
:func:`pmrag.evaluate.metrics.per_question_metrics` of the fused ranking exactly (``tests/test_fusion.py``), for
the paper's ``minmax`` and for ``rrf`` and ``combmnz`` alike.  :func:`sweep_pairings` sweeps every pairing under
every fusion into one long table with a leading ``fusion`` column.

Selection (:func:`select_best`, through the one rule of :mod:`pmrag.evaluate.select`): the paper takes the
configuration with the highest macro Recall@5; ties are broken by nDCG@5, MRR@5, β closest to 0.5, the smaller β
(documented choices; the paper names none).
:func:`best_per_pairing` selects β per (fusion, pairing); :func:`select_overall` — the paper's selected hybrid —
ranks each pairing's selected β of the ``minmax`` fusion only (the other fusions are compared beside it, never
selected in its place), a full tie going to the configured pairing order.  A table without a ``fusion``
column is read as all ``minmax`` (the paper's sweep).  Everything selected here is chosen on the questions it
is evaluated on (§4.4, §9.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns, run_frame
from pmrag.core.names import PAPER_FUSION, HybridId, RetrieverId
from pmrag.evaluate.metric_names import RECALL5, TABLE_METRICS, at_k, metric_columns
from pmrag.evaluate.metrics import (RelevanceMatrix, macro, ndcg, per_question_metrics, per_question_rows, recall,
                                    reciprocal_rank, relevance_matrix)
from pmrag.evaluate.runs import Qrels
from pmrag.evaluate.select import DECIMALS, beta_near_half, listed, select
from pmrag.retrieve.fusion import (CandidateLists, _kernel, _require, _validated_beta, _validated_rrf_k, candidates,
                                   minmax_fuse, minmax_normalize)

CONFIGURATION = ("fusion", "bm25", "vector", "beta")   # a sweep table's configuration columns


def sweep(bm25: pd.DataFrame, vec: pd.DataFrame, qrels: Qrels | pd.DataFrame, betas: Sequence[float],
          k: int = 5, fusion: str = "minmax", rrf_k: int = 60) -> pd.DataFrame:
    """Per-question ``recall@k, mrr@k, ndcg@k`` of :func:`pmrag.retrieve.fusion.fuse` for every β, vectorised.

    P(q) is laid out as dense ``(n_questions, width)`` arrays in chunk-ID-descending order, so a stable sort
    of −score over the ``(n_betas, n_questions, width)`` scores ranks by score ↓ then chunk ID ↓.  Questions
    and metric definitions are those of :func:`pmrag.metrics.per_question_metrics` (IDCG from all judged
    chunks).  ``fusion`` (``minmax``, the paper's eq. 15, by default; ``rrf``, ``combmnz``) and ``rrf_k`` as in
    :func:`~pmrag.retrieve.fusion.fuse`.  Long result: ``beta, question_id, recall@k, mrr@k, ndcg@k``,
    β-major, questions sorted.
    """
    betas, k, kernel, rrf_k = _sweep_arguments(betas, k, fusion, rrf_k)
    return _swept(_Layout.of(bm25, vec, qrels, k), betas, k, kernel, rrf_k)


class _Layout:
    """A pairing's candidates P(q) as dense ``(n_questions, width)`` arrays and their relevance, built once
    and swept under every fusion."""

    def __init__(self, lists: CandidateLists, valid: np.ndarray, matrix):
        self.lists, self.valid, self.matrix = lists, valid, matrix

    @classmethod
    def of(cls, bm25: pd.DataFrame, vec: pd.DataFrame, qrels: Qrels | pd.DataFrame, k: int) -> _Layout:
        union = candidates(bm25, vec)
        slot = union.groupby("question_id", sort=False).cumcount().to_numpy()
        width = max(int(slot.max()) + 1 if len(slot) else 1, k)
        layout = union.loc[:, ["question_id", "chunk_id"]].assign(rank=slot + 1)
        matrix = relevance_matrix(layout, qrels, depth=width)
        row = matrix.question_ids.get_indexer(union["question_id"])
        shape = (len(matrix.question_ids), width)
        dense = []
        for column in CandidateLists.of(union):
            array = np.zeros(shape, dtype=column.dtype)
            array[row, slot] = column
            dense.append(array)
        valid = np.zeros(shape, dtype=bool)
        valid[row, slot] = True
        return cls(CandidateLists(*dense), valid, matrix)


class _Coded:
    """Every ranking of a sweep validated and min-max normalised once, its questions and chunks as integer codes
    (chunk codes in chunk ID order), so that a pairing's :class:`_Layout` is built from arrays: the same union,
    order, scores and relevance as :meth:`_Layout.of`, without a pandas group-by per pairing."""

    def __init__(self, rankings, names, qrels: Qrels, k: int):
        frames = {name: rankings[name] for name in names}
        for name, frame in frames.items():
            run_frame(_require(frame, name))
        judged = qrels.frame
        chunks = pd.concat([*(f["chunk_id"] for f in frames.values()), judged["chunk_id"]], ignore_index=True)
        codes, self.chunk_ids = pd.factorize(chunks.to_numpy(dtype=object), sort=True)
        self.n_chunks = max(len(self.chunk_ids), 1)
        asked = pd.unique(np.concatenate([f["question_id"].to_numpy(dtype=object) for f in frames.values()]))
        base = relevance_matrix(pd.DataFrame({"question_id": asked, "chunk_id": "", "rank": 1}), qrels, depth=k)
        self.questions, self.ideal, self.n_primary, self.k = base.question_ids, base.ideal, base.n_primary, k
        self.lists, start = {}, 0
        for name, frame in frames.items():
            q = self.questions.get_indexer(frame["question_id"])
            c = codes[start:start + len(frame)]
            start += len(frame)
            self.lists[name] = (self._keys(q, c), minmax_normalize(frame).to_numpy(),
                                frame["rank"].to_numpy(dtype=np.int64))
        judged_keys = self._keys(self.questions.get_indexer(judged["question_id"]), codes[start:])
        order = np.argsort(judged_keys, kind="stable")
        self.judged_keys, self.grades = judged_keys[order], judged["relevance"].to_numpy()[order]

    def _keys(self, question: np.ndarray, chunk: np.ndarray) -> np.ndarray:
        """One int64 per (question, chunk), ascending in question, then in chunk ID descending."""
        return question.astype(np.int64) * self.n_chunks + (self.n_chunks - 1 - chunk.astype(np.int64))

    def layout(self, first: str, second: str) -> _Layout:
        (keys_a, hat_a, rank_a), (keys_b, hat_b, rank_b) = self.lists[first], self.lists[second]
        union, where = np.unique(np.concatenate([keys_a, keys_b]), return_inverse=True)
        row = union // self.n_chunks
        slot = np.arange(len(union)) - np.searchsorted(row, row, side="left")
        width = max(int(slot.max()) + 1 if len(slot) else 1, self.k)
        shape = (len(self.questions), width)
        dense = []
        for part, values in ((slice(0, len(keys_a)), hat_a), (slice(len(keys_a), None), hat_b),
                             (slice(0, len(keys_a)), rank_a), (slice(len(keys_a), None), rank_b)):
            array = np.zeros(shape, dtype=values.dtype)
            array[row[where[part]], slot[where[part]]] = values
            dense.append(array)
        valid = np.zeros(shape, dtype=bool)
        valid[row, slot] = True
        found = np.minimum(np.searchsorted(self.judged_keys, union), max(len(self.judged_keys) - 1, 0))
        grade = np.where(self.judged_keys[found] == union, self.grades[found], 0) if len(self.judged_keys) else 0
        ranked = np.zeros(shape, dtype=np.int8)
        ranked[row, slot] = grade
        return _Layout(CandidateLists(*dense), valid, RelevanceMatrix(self.questions, ranked, self.ideal,
                                                                     self.n_primary))


def _swept(layout: _Layout, betas: np.ndarray, k: int, kernel, rrf_k: int) -> pd.DataFrame:
    matrix = layout.matrix
    n_q = len(matrix.question_ids)
    scores = np.where(layout.valid, kernel(layout.lists, betas[:, None, None], rrf_k), -np.inf)
    order = top_k(scores, k)
    ranked = np.take_along_axis(np.broadcast_to(matrix.ranked, scores.shape), order, axis=-1).reshape(-1, k)
    ideal = np.tile(matrix.ideal[:, :k], (len(betas), 1))
    n_primary = np.tile(matrix.n_primary, len(betas))
    recall_k, mrr_k, ndcg_k = at_k(k)
    return pd.DataFrame({
        "beta": np.repeat(betas, n_q),
        "question_id": np.tile(matrix.question_ids.to_numpy(dtype=object), len(betas)),
        str(recall_k): recall(ranked, n_primary, k),
        str(mrr_k): reciprocal_rank(ranked, k),
        str(ndcg_k): ndcg(ranked, ideal, k),
    })


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(-scores, axis=-1, kind="stable")[..., :k]`` by k passes of ``argmax`` (which takes the first of
    equal maxima, as the stable sort keeps them): the k best columns of each row, ties in column order, with −inf
    (an empty slot) ranked after every finite score and among itself in column order.  Linear in the row's width
    where the sort is not: the sweep's top 5 of up to 400 candidates."""
    work = np.where(np.isneginf(scores), np.finfo(np.float64).min, scores)   # an empty slot: below any score...
    order = np.empty((*scores.shape[:-1], min(k, scores.shape[-1])), dtype=np.intp)
    for j in range(order.shape[-1]):
        order[..., j] = work.argmax(axis=-1)
        np.put_along_axis(work, order[..., j, None], -np.inf, axis=-1)      # ...and above one already taken
    return order


def _sweep_arguments(betas, k, fusion, rrf_k):
    betas = np.asarray([_validated_beta(b) for b in np.atleast_1d(betas)], dtype=np.float64)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return betas, k, _kernel(fusion), _validated_rrf_k(rrf_k)


def sweep_macro(per_question: pd.DataFrame, bm25: str | None = None, vector: str | None = None) -> pd.DataFrame:
    """Macro average over questions of a :func:`sweep` result, one row per β, tagged with the pairing names."""
    means = per_question.drop(columns="question_id").groupby("beta", sort=True).mean().reset_index()
    return means.assign(bm25=bm25, vector=vector).loc[:, ["bm25", "vector", *means.columns]]


def select_best(sweep_macro: pd.DataFrame, decimals: int = DECIMALS) -> pd.Series:
    """The configuration with the highest macro ``recall@5`` (the paper's rule, §6.2, :mod:`pmrag.evaluate.select`).

    Ties (metrics compared after rounding to ``decimals``, so summation noise does not decide) are broken by
    higher ``ndcg@5``, then higher ``mrr@5``, then β closest to 0.5, then the smaller β, then the first row.
    """
    require_columns(sweep_macro, ("bm25", "vector", "beta", *map(str, TABLE_METRICS)), "sweep_macro")
    if sweep_macro.empty:
        raise ValueError("sweep_macro has no rows")
    frame = sweep_macro.reset_index(drop=True)
    return frame.iloc[select(frame, beta_near_half(frame["beta"], decimals), decimals=decimals)]


def candidate_ceiling(ranking: pd.DataFrame, qrels: Qrels | pd.DataFrame, depth: int = 200) -> float:
    """Macro Recall@depth on primary gold (relevance 2) of one retriever's list (§5.3)."""
    return float(macro(per_question_metrics(ranking, qrels, ks=(depth,), metrics=("recall",))).iloc[0])


def oracle_union_ceiling(bm25: pd.DataFrame, vec: pd.DataFrame, qrels: Qrels | pd.DataFrame) -> float:
    """Macro |P(q) ∩ G2(q)| / |G2(q)|: the recall any reranking of the union P(q) (eq. 11) can reach (§5.3)."""
    union = minmax_fuse(bm25, vec, 0.5)
    depth = max(int(union["rank"].max()) if len(union) else 1, 1)
    return candidate_ceiling(union, qrels, depth=depth)


def sweep_pairings(rankings, qrels: Qrels | pd.DataFrame, pairings, betas: Sequence[float], k: int = 5,
                   fusions: Sequence[str] = (PAPER_FUSION,), rrf_k: int = 60) -> pd.DataFrame:
    """Per-question Recall/MRR/nDCG@k of every (fusion, pairing, β).

    Parameters: ``rankings`` maps a retriever name to its ranking; ``pairings`` are ``(first, second)`` names,
    β weighting the first; ``fusions`` name :data:`pmrag.retrieve.fusion.FUSION_SCORES` entries (the paper's
    ``minmax`` alone by default); ``rrf_k`` is RRF's offset.
    Returns: columns ``fusion, bm25, vector, beta, question_id`` and the metrics, where ``bm25`` / ``vector``
    name the pairing's first and second retriever; fusion-major, then pairing, then β.  Each pairing's
    candidates are laid out once and swept under every fusion.
    """
    fusions = tuple(fusions)
    if not fusions or len(set(fusions)) != len(fusions):
        raise ValueError(f"fusions must name each fusion once, got {fusions!r}")
    betas, k, _, rrf_k = _sweep_arguments(betas, k, fusions[0], rrf_k)
    kernels = {fusion: _kernel(fusion) for fusion in fusions}
    qrels = Qrels.of(qrels)
    frames = {fusion: [] for fusion in fusions}
    coded = _Coded(rankings, list(dict.fromkeys(str(r) for pair in pairings for r in pair)), qrels, k)
    for first, second in pairings:
        layout = coded.layout(str(first), str(second))
        for fusion, kernel in kernels.items():
            per_question = _swept(layout, betas, k, kernel, rrf_k)
            frames[fusion].append(per_question.assign(fusion=fusion, bm25=str(first), vector=str(second)))
    table = pd.concat([frame for fusion in fusions for frame in frames[fusion]], ignore_index=True)
    return table[[*CONFIGURATION, "question_id", *map(str, at_k(k))]]


def macro_by_configuration(per_question: pd.DataFrame) -> pd.DataFrame:
    """One row per (fusion, bm25, vector, beta) of a :func:`sweep_pairings` result with the macro metrics
    (a table without ``fusion`` gets ``fusion = minmax``)."""
    per_question = _with_fusion(per_question)
    metrics = metric_columns(per_question.columns)
    return per_question.groupby(list(CONFIGURATION), sort=False)[metrics].mean().reset_index()


def best_per_pairing(macro_table: pd.DataFrame) -> pd.DataFrame:
    """The selected β of each (fusion, pairing) (:func:`select_best`): fusions in their order of appearance
    (``minmax`` first from :func:`sweep_pairings`), within one fusion best Recall@5 first (stable)."""
    macro_table = _with_fusion(macro_table)
    rows = [select_best(group) for _, group in macro_table.groupby(["fusion", "bm25", "vector"], sort=False)]
    best = pd.DataFrame(rows).reset_index(drop=True)
    fusion_order = {fusion: i for i, fusion in enumerate(dict.fromkeys(macro_table["fusion"]))}
    keys = pd.DataFrame({"fusion": best["fusion"].map(fusion_order), "recall": -best[str(RECALL5)]})
    return best.loc[keys.sort_values(["fusion", "recall"], kind="stable").index].reset_index(drop=True)


def select_overall(best: pd.DataFrame, pairing_order: Sequence[tuple[str, str]],
                   fusion: str = PAPER_FUSION) -> pd.Series:
    """The paper's selected hybrid: among the ``minmax`` rows of ``best`` (:func:`best_per_pairing`; a table
    without ``fusion`` is all ``minmax``), each pairing's selected β ranked by Recall@5, then nDCG@5, then
    MRR@5 (descending); a remaining tie keeps ``pairing_order``.  Other fusions are never selected here unless
    ``fusion`` names one (the same rule within that fusion's rows, for comparisons beside the paper's)."""
    best = _with_fusion(best)
    best = best[best["fusion"] == fusion]
    if best.empty:
        raise ValueError(f"best has no {fusion} rows: the paper's selection uses the min-max fusion")
    order = {(str(a), str(b)): i for i, (a, b) in enumerate(pairing_order)}
    position = [order[(b, v)] for b, v in zip(best["bm25"], best["vector"])]
    return best.iloc[select(best, listed(position), decimals=None)]


def hybrid_ids(table: pd.DataFrame) -> list[HybridId]:
    """The :class:`~pmrag.core.names.HybridId` of each row of a table with ``bm25, vector, beta`` (and
    ``fusion``; ``minmax`` where absent), e.g. :func:`best_per_pairing`'s, in row order."""
    table = _with_fusion(table)
    return [HybridId.of(first, second, beta, fusion)
            for fusion, first, second, beta in zip(table["fusion"], table["bm25"], table["vector"], table["beta"])]


def _with_fusion(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with a leading ``fusion`` column, ``minmax`` where it had none (never mutating ``table``)."""
    if "fusion" in table.columns:
        return table
    return table.assign(fusion=PAPER_FUSION).loc[:, ["fusion", *table.columns]]


def candidate_ceilings(rankings, qrels: Qrels | pd.DataFrame, pairings, depth: int) -> pd.DataFrame:
    """Macro Recall@depth on primary gold of each pairing's two lists and of their oracle union (§5.3)."""
    qrels = Qrels.of(qrels)
    return pd.DataFrame([
        {"bm25": str(a), "vector": str(b),
         f"bm25 {RECALL5.at(depth)}": candidate_ceiling(rankings[str(a)], qrels, depth),
         f"vector {RECALL5.at(depth)}": candidate_ceiling(rankings[str(b)], qrels, depth),
         "oracle union recall": oracle_union_ceiling(rankings[str(a)], rankings[str(b)], qrels)}
        for a, b in pairings
    ])


# ---------------------------------------------------------------------------------------------- the selection

@dataclass(frozen=True)
class Hybrids:
    """The sweep's selection: macro metrics of every configuration (every fusion), each pairing's selected β
    under the paper's min-max fusion among the pairings the paper's selection chooses from (``best``, Table 4),
    the overall selected hybrid, the diagnostic hybrid, and per-question metric rows of every selected
    configuration (and of the diagnostic one).  A sweep broader than those pairings (``hybrid.pairings: auto`` or
    ``all``) adds ``broader``, each swept pairing's selected β (best Recall@5 first), and ``broader_selected``,
    the same rule's choice among all of them: reported beside the paper's, never in its place.  ``rankings``: the
    fused ranking of each selected configuration and of the diagnostic hybrid, by name (``str(HybridId)``), so
    that what reads them (the statistics stage) does not fuse them again."""

    macro: pd.DataFrame
    best: pd.DataFrame
    selected: HybridId
    diagnostic: HybridId
    per_question: pd.DataFrame
    broader: pd.DataFrame | None = None
    broader_selected: HybridId | None = None
    rankings: dict[str, pd.DataFrame] | None = None

    def ids(self) -> list[HybridId]:
        """Each pairing's selected configuration, in ``best`` order."""
        return hybrid_ids(self.best)

    def selected_rows(self) -> pd.DataFrame:
        """Per-question rows of each pairing's selected configuration (without the diagnostic hybrid unless
        it was selected)."""
        names = {str(h) for h in self.ids()}
        return self.per_question[self.per_question["retriever"].isin(names)].reset_index(drop=True)


def select_hybrids(swept: pd.DataFrame, rankings: Mapping[RetrieverId, pd.DataFrame], qrels: Qrels | pd.DataFrame,
                   types: pd.Series, pairings: Sequence[tuple[RetrieverId, RetrieverId]], diagnostic: HybridId,
                   ks: Sequence[int], write_run: Callable[[HybridId, pd.DataFrame], None] | None = None) -> Hybrids:
    """The paper's selection from a :func:`sweep_pairings` table: each of ``pairings``' β under min-max fusion,
    the best pairing (:func:`select_overall`), and per-question metrics at ``ks`` of each selected configuration
    and the diagnostic hybrid, fused again from ``rankings``; ``write_run`` receives each selected configuration's
    fused ranking (the study writes its TREC file).  Pairings swept beyond ``pairings`` are selected among
    beside it (:attr:`Hybrids.broader`), in sample only: their out-of-fold number is the statistics stage's."""
    macro_table = macro_by_configuration(swept)
    qrels = Qrels.of(qrels)
    minmax = macro_table[macro_table["fusion"] == PAPER_FUSION]
    among = {(str(a), str(b)) for a, b in pairings}
    chosen = np.array([pair in among for pair in zip(minmax["bm25"].astype(str), minmax["vector"].astype(str))])
    best = best_per_pairing(minmax[chosen])
    [selected] = hybrid_ids(pd.DataFrame([select_overall(best, pairings)]))
    broader = broader_selected = None
    if not chosen.all():
        broader = best_per_pairing(minmax)
        order = list(dict.fromkeys(zip(minmax["bm25"].astype(str), minmax["vector"].astype(str))))
        [broader_selected] = hybrid_ids(pd.DataFrame([select_overall(broader, order)]))
    configurations = hybrid_ids(best)
    frames, fused_rankings = [], {}
    for hybrid in configurations + ([diagnostic] if diagnostic not in configurations else []):
        fused_rankings[str(hybrid)] = fused = minmax_fuse(rankings[hybrid.first], rankings[hybrid.second], hybrid.beta)
        if write_run is not None and hybrid in configurations:
            write_run(hybrid, fused)
        frames.append(per_question_rows(fused, str(hybrid), qrels, types, ks))
    return Hybrids(macro_table, best, selected, diagnostic, pd.concat(frames, ignore_index=True), broader,
                   broader_selected, fused_rankings)
