"""Fusion of three or more retrievers (:mod:`pmrag.retrieve.multifusion`) with its weights chosen on training folds
only and scored out of fold, beside the paper's pairs (§5.3, §6.2, §9.1).

For retrievers r_1..r_k and a fusion (``minmax``: Σ_r w_r ŝ_r; ``rrf``: Σ_r w_r / (c + rank_r)), the weights w are
chosen by the paper's rule (:mod:`pmrag.evaluate.select`: max macro Recall@5, then nDCG@5, MRR@5) among

* ``grid``: every w of :func:`~pmrag.retrieve.multifusion.simplex_grid` (weights multiples of ``hybrid.multi_step``),
  ties going to the w closest to equal weights (L1), then grid order; used up to ``hybrid.multi_grid_max``
  retrievers, the grid growing as C(1/step + k − 1, k − 1);
* ``coordinate ascent`` (more retrievers): from equal weights, each retriever in turn takes the weight on the step
  grid (0, step, …, 1) that the rule prefers, the others rescaled to keep their proportions (equally shared when
  they are all 0), the current w kept on a tie; rounds repeat until one changes nothing (at most
  :data:`MAX_ROUNDS`);
* ``equal``: w_r = 1/k, nothing chosen (CombSUM of min-max scores; plain RRF), so in sample = out of fold.

Out of fold: the folds of the paper's held-out selection (:func:`pmrag.evaluate.selection.fold_masks`: repeated
stratified k-fold over the questions, ``statistics.n_splits``, ``n_repeats``, ``seed``, ``n_seeds``): on each
training part the search runs on the training questions' means alone, and its w is scored on the held-out fold;
a question's out-of-fold value is the mean over repeats (then seeds) of its held-out values, as for the pairs.  The
in-sample number is the search on all questions scored on them; the gap is the winner's curse, which grows with
the configurations a search chooses among (``configurations``: the grid's size, or the distinct w the ascent
scored over every fold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.evaluate.metric_names import PAPER_COLUMNS
from pmrag.evaluate.metrics import ndcg, recall, reciprocal_rank, relevance_matrix
from pmrag.evaluate.runs import Qrels
from pmrag.evaluate.selection import fold_masks, select_columns
from pmrag.evaluate.sweep import top_k
from pmrag.retrieve.multifusion import layout, scores, simplex_grid

METRICS = PAPER_COLUMNS          # recall@5, mrr@5, ndcg@5: the layout order of the values
SEARCHES = ("grid", "coordinate ascent", "equal")
MAX_ROUNDS = 20
_RECALL, _MRR, _NDCG = range(3)
_CELLS = 2 * 10**7               # fused scores held at once: weight vectors × questions × candidates (160 MB)


class WeightedLayout:
    """k rankings' candidates laid out once (:func:`pmrag.retrieve.multifusion.layout`) with their relevance, so that
    per-question Recall/MRR/nDCG@k of any weights are one vectorised sort."""

    def __init__(self, rankings: Sequence[pd.DataFrame], qrels: Qrels | pd.DataFrame, k: int = 5):
        self.lists = layout(rankings)
        width = max(self.lists.valid.shape[1], k)
        slots = np.nonzero(self.lists.valid)
        frame = pd.DataFrame({"question_id": self.lists.question_ids.to_numpy(dtype=object)[slots[0]],
                              "chunk_id": self.lists.chunk_ids[slots], "rank": slots[1] + 1})
        self.matrix = relevance_matrix(frame, qrels, depth=width)
        self.row = self.matrix.question_ids.get_indexer(self.lists.question_ids)
        self.k = k

    @property
    def question_ids(self) -> pd.Index:
        return self.matrix.question_ids

    def values(self, weights: np.ndarray, fusion: str, rrf_k: int = 60) -> np.ndarray:
        """``(3, n, G)`` per-question metrics in :data:`METRICS` order for the ``(G, k)`` weights."""
        weights = np.atleast_2d(weights)
        n, k = len(self.question_ids), self.k
        out = np.empty((len(METRICS), n, len(weights)))
        ranked_all = np.zeros((n, self.matrix.ranked.shape[1]), dtype=self.matrix.ranked.dtype)
        ideal = self.matrix.ideal[:, :k]
        step = max(1, _CELLS // self.lists.valid.size)
        for start in range(0, len(weights), step):
            batch = weights[start:start + step]
            fused = scores(self.lists, batch, fusion, rrf_k)                      # (g, n_listed, width)
            order = top_k(fused, k)                                              # the stable sort's first k
            for g in range(len(batch)):
                ranked = ranked_all.copy()
                top = np.take_along_axis(self.matrix.ranked[self.row], order[g], axis=1)
                ranked[self.row, :top.shape[1]] = top
                out[:, :, start + g] = (recall(ranked, self.matrix.n_primary, k), reciprocal_rank(ranked, k),
                                        ndcg(ranked, ideal, k))
        return out


@dataclass(frozen=True)
class MultiFusion:
    """One (retrievers, fusion, search): the weights chosen on all questions (``weights``) and how often each w was
    chosen on the training folds (``chosen``: ``weights, times, share``), ``summary`` (per metric ``metric,
    in_sample, out_of_fold, gap``), ``configurations`` (the w the search chose among), the folds' parameters."""

    retrievers: tuple[str, ...]
    fusion: str
    search: str
    configurations: int
    weights: tuple[float, ...]
    summary: pd.DataFrame
    chosen: pd.DataFrame
    n_splits: int
    n_repeats: int
    n_seeds: int

    @property
    def label(self) -> str:
        return f"{' + '.join(self.retrievers)}, {self.fusion} ({self.search})"


def multi_fusion(rankings: Mapping[str, pd.DataFrame], retrievers: Sequence[str], qrels: Qrels | pd.DataFrame,
                 types: pd.Series, fusion: str = "minmax", search: str = "grid", step: float = 0.1, rrf_k: int = 60,
                 n_splits: int = 5, n_repeats: int = 10, seed: int = 0, n_seeds: int = 1) -> MultiFusion:
    """The weights of ``retrievers``' ``fusion`` chosen by ``search`` (:data:`SEARCHES`) in sample and on each
    training part of the held-out folds, scored out of fold (module docstring).

    ``rankings`` maps names to rankings; ``types`` gives each question's type (indexed by question_id) for the
    folds' strata; ``step`` the weights' grid; the folds' parameters as :func:`pmrag.evaluate.selection.
    held_out_selection`'s."""
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {search!r}")
    names = tuple(map(str, retrievers))
    data = WeightedLayout([rankings[name] for name in names], Qrels.of(qrels))
    n, k = len(data.question_ids), len(names)
    n_splits = min(n_splits, n)   # as the statistics stage: fewer questions than folds, one fold per question
    if n_splits < 2:
        raise ValueError(f"weights scored out of fold need at least two questions, the rankings have {n}")
    held_out, _ = fold_masks(_aligned(types, data.question_ids), n_splits, n_repeats, seed, n_seeds)
    training = np.vstack([np.ones((1, n), dtype=bool), ~held_out])             # row 0: all questions (in sample)
    memo = _Scored(data, fusion, rrf_k)
    if search == "grid":
        grid = _tie_break_order(simplex_grid(k, step))
        choice = _select(memo.means(grid, training))
        chosen, configurations = grid[choice], len(grid)
    elif search == "equal":
        chosen, configurations = np.full((len(training), k), 1.0 / k), 1
    else:
        chosen = np.array([coordinate_ascent(memo, train, k, step) for train in training])
        configurations = len(memo.cache)
    values = memo.values(chosen)                                                # (3, n, F + 1)
    in_sample = values[:, :, 0].mean(axis=1)
    scored = np.moveaxis(values[:, :, 1:], 2, 1) * held_out                      # (3, F, n)
    per_question = scored.reshape(len(METRICS), n_seeds, n_repeats, n_splits, n).sum(axis=3).mean(axis=(1, 2))
    summary = pd.DataFrame({"metric": METRICS, "in_sample": in_sample, "out_of_fold": per_question.mean(axis=1)})
    summary["gap"] = summary["in_sample"] - summary["out_of_fold"]
    labels = pd.Series([weights_label(w) for w in chosen[1:]])
    counts = labels.value_counts(sort=True)
    chosen_table = pd.DataFrame({"weights": counts.index, "times": counts.to_numpy(),
                                 "share": counts.to_numpy() / len(labels)})
    return MultiFusion(names, fusion, search, configurations, tuple(float(w) for w in chosen[0]), summary,
                       chosen_table, n_splits, n_repeats, n_seeds)


def coordinate_ascent(scored: _Scored, train: np.ndarray, k: int, step: float) -> np.ndarray:
    """The weights coordinate ascent reaches from equal weights on the ``train`` questions (module docstring)."""
    levels = np.round(np.arange(round(1 / step) + 1) * step, 10)
    current = np.full(k, 1.0 / k)
    for _ in range(MAX_ROUNDS):
        moved = False
        for r in range(k):
            candidates = np.vstack([current, *(_with_weight(current, r, level) for level in levels)])
            best = int(_select(scored.means(candidates, train[None, :]))[0])
            if best and not np.allclose(candidates[best], current, rtol=0, atol=1e-12):
                current, moved = candidates[best], True
        if not moved:
            break
    return current


def weights_label(weights) -> str:
    """``0.5/0.3/0.2``: the weights in retriever order, as the tables show them."""
    return "/".join(f"{w:.3g}" for w in weights)


def multi_fusion_table(results: Sequence[MultiFusion]) -> pd.DataFrame:
    """One row per result: ``retrievers, fusion, search, configurations, weights`` (chosen on all questions) and
    per metric the in-sample and out-of-fold macro and the winner's curse (``… gap``)."""
    rows = []
    for result in results:
        row = {"retrievers": " + ".join(result.retrievers), "fusion": result.fusion, "search": result.search,
               "configurations": result.configurations, "weights": weights_label(result.weights)}
        for metric, in_sample, oof, gap in result.summary.itertuples(index=False):
            row.update({f"{metric} in sample": in_sample, f"{metric} out of fold": oof, f"{metric} gap": gap})
        rows.append(row)
    return pd.DataFrame(rows)


class _Scored:
    """Per-question metrics of weight vectors, each scored once (keyed by its weights rounded to 10 decimals)."""

    def __init__(self, data: WeightedLayout, fusion: str, rrf_k: int):
        self.data, self.fusion, self.rrf_k, self.cache = data, fusion, rrf_k, {}

    def values(self, weights: np.ndarray) -> np.ndarray:
        keys = [tuple(np.round(w, 10)) for w in weights]
        missing = list(dict.fromkeys(key for key in keys if key not in self.cache))
        if missing:
            fresh = self.data.values(np.array(missing), self.fusion, self.rrf_k)
            self.cache.update({key: fresh[:, :, i] for i, key in enumerate(missing)})
        return np.stack([self.cache[key] for key in keys], axis=2)

    def means(self, weights: np.ndarray, train: np.ndarray) -> np.ndarray:
        """``(3, R, G)`` macro means over each row of the ``(R, n)`` boolean ``train``."""
        values = self.values(weights)
        mask = train.astype(np.float64)
        return np.stack([mask @ values[m] for m in range(len(METRICS))]) / mask.sum(axis=1)[:, None]


def _select(means: np.ndarray) -> np.ndarray:
    return select_columns(means[_RECALL], means[_NDCG], means[_MRR])


def _tie_break_order(grid: np.ndarray) -> np.ndarray:
    distance = np.round(np.abs(grid - 1.0 / grid.shape[1]).sum(axis=1), 10)
    return grid[np.lexsort((np.arange(len(grid)), distance))]


def _with_weight(current: np.ndarray, r: int, level: float) -> np.ndarray:
    rest = np.delete(current, r)
    rest = rest * (1 - level) / rest.sum() if rest.sum() > 0 else np.full(len(rest), (1 - level) / len(rest))
    return np.insert(rest, r, level)


def _aligned(types: pd.Series, question_ids: pd.Index) -> pd.Series:
    missing = question_ids.difference(types.index)
    if len(missing):
        raise ValueError(f"types lacks {len(missing)} question(s) of the rankings, e.g. {missing[0]!r}")
    return types.reindex(question_ids)



def multi_fusions(rankings: Mapping[str, pd.DataFrame], lists: Sequence[Sequence[str]], qrels: Qrels | pd.DataFrame,
                  types: pd.Series, *, fusions: Sequence[str] = ("minmax", "rrf"), equal: bool = True,
                  step: float = 0.1, grid_max: int = 3, rrf_k: int = 60, n_splits: int = 5, n_repeats: int = 10,
                  seed: int = 0, n_seeds: int = 1) -> list[MultiFusion]:
    """:func:`multi_fusion` of every list of retriever names under every fusion: the weights by ``grid`` up to
    ``grid_max`` retrievers, by ``coordinate ascent`` beyond, and (``equal``) with equal weights beside them
    (``hybrid.multi``, ``multi_fusions``, ``multi_equal``, ``multi_step``, ``multi_grid_max``)."""
    folds = dict(step=step, rrf_k=rrf_k, n_splits=n_splits, n_repeats=n_repeats, seed=seed, n_seeds=n_seeds)
    results = []
    for names in lists:
        searches = ["grid" if len(names) <= grid_max else "coordinate ascent"] + (["equal"] if equal else [])
        results += [multi_fusion(rankings, names, qrels, types, fusion=fusion, search=search, **folds)
                    for fusion in fusions for search in searches]
    return results
