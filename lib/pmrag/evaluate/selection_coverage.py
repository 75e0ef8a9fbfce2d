"""How often the intervals a study prints for its selected hybrid cover what they claim to (§8.1, §9.1): the
coverage simulation of :mod:`pmrag.evaluate.selection`'s estimators, on the study's own questions.

The study's per-question sweep is taken as the population: N questions, C configurations, X_qc per metric.  The
population value of a configuration is its mean over the N questions, θ(c) = (1/N) Σ_q X_qc.  One simulated
study (dataset d of D) draws n questions with replacement from the population, runs the paper's selection on
them (:meth:`~pmrag.evaluate.selection.Configurations.select`, the same rule and tie-breaks), and computes every
interval as :func:`~pmrag.evaluate.selection.selection_bootstrap` does, on B inner resamples of its n questions
(:func:`~pmrag.evaluate.selection.resampled_selection`).  The target of every interval is the population value
θ(ĉ_d) of the configuration ĉ_d that dataset d selected.  Intervals (module docstring of
:mod:`~pmrag.evaluate.selection` for the formulas):

* ``conditional`` — the in-sample best's percentile interval [L, H] (the configuration held fixed; the paper's),
  point estimate the in-sample best;
* ``bias_corrected`` — [L − ô, H − ô] around apparent − ô (Efron's bootstrap optimism; the headline);
* ``oob`` — the out-of-bag percentiles of E_b around Err⁽¹⁾ (the conservative bound);
* ``.632`` — the percentiles of T_b around 0.368 · apparent + 0.632 · Err⁽¹⁾;
* ``fixed configuration`` — a reference without selection: the population's own choice (the study's in-sample
  best) held fixed in every dataset, its percentile interval against its population value.  It is what a
  percentile interval of n questions reaches with nothing selected, the ceiling for the others at this n.

Per metric and interval: ``coverage`` = #{d : low_d ≤ θ_d ≤ high_d} / D', its Monte Carlo standard error
√(coverage · (1 − coverage) / D'), ``mean_width`` = mean of high_d − low_d, ``mean_error`` = mean of
estimate_d − θ_d (the point estimate's bias), over the D' datasets where the interval exists (an out-of-bag
interval needs a resample with a question out of bag; D' = D for n ≥ 2 in practice).

Since the population is the sample itself, this is the double bootstrap's calibration check (Hall 1986, "On the
bootstrap and confidence intervals", Ann. Statist. 14:1431–1452; Efron & Tibshirani 1993, ch. 18): the
coverage a study's intervals would have if its questions were the population.  It uses fewer inner resamples B
than the study's bootstrap (percentiles of B values; the study's own use 5,000), so it speaks for the study's
intervals up to that.

Random numbers: one ``numpy.random.default_rng((seed, COVERAGE_STREAM))`` — seeded by ``seed`` but a stream apart
from the bootstrap's ``default_rng(seed)`` — draws the D datasets ``integers(0, N, (D, n))`` first, then each
dataset's inner resamples ``integers(0, n, (B, n))`` in dataset order.  Each dataset is one vectorised pass over
its B resamples (``(B, n) @ (n, C)`` per metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from pmrag.core.names import PAPER_FUSION
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import percentiles
from pmrag.evaluate.selection import (
    METRICS, Configurations, _confidence, _integer, resampled_selection, select_columns,
)

COVERAGE_STREAM = 2
INTERVALS = ("conditional", "bias_corrected", "oob", ".632", "fixed configuration")


@dataclass(frozen=True)
class SelectionCoverage:
    """Result of :func:`selection_coverage`.

    ``table``: one row per metric and interval (:data:`INTERVALS`): ``metric, interval, coverage, mc_se,
    mean_width, mean_error, datasets`` (module docstring); ``per_dataset``: ``dataset``, the configuration
    chosen (``fusion, bm25, vector, beta``) and per metric its population value ``true <metric>``;
    ``n_datasets, n_resamples, n_questions, population, seed, confidence``: the simulation's parameters
    (``population``: N, ``n_questions``: n).
    """

    table: pd.DataFrame
    per_dataset: pd.DataFrame
    n_datasets: int
    n_resamples: int
    n_questions: int
    population: int
    seed: int
    confidence: float

    def row(self, interval: str, metric: str = METRICS[0]) -> pd.Series:
        """The table's row of ``interval`` and ``metric`` (default Recall@5)."""
        rows = self.table[(self.table["interval"] == interval) & (self.table["metric"] == str(metric))]
        if rows.empty:
            raise KeyError(f"no coverage row for interval {interval!r} and metric {metric!r}")
        return rows.iloc[0]


def selection_coverage(sweep: pd.DataFrame, n_datasets: int = 400, n_resamples: int = 500, seed: int = 12345,
                       confidence: float = 0.95, n_questions: int | None = None, pairings=None,
                       fusion: str = PAPER_FUSION) -> SelectionCoverage:
    """Coverage, width and bias of the selected hybrid's intervals, simulated from the study's own questions.

    Parameters: ``sweep``, ``pairings``, ``fusion`` — as in :func:`~pmrag.evaluate.selection.
    selection_bootstrap` (the sweep's questions are the population); ``n_datasets`` — D simulated studies;
    ``n_resamples`` — B inner resamples per study; ``seed`` — of the random stream (module docstring);
    ``confidence`` — of every interval; ``n_questions`` — n per simulated study (default: the population's N).
    Returns: :class:`SelectionCoverage`.
    """
    d_count = _integer(n_datasets, "n_datasets", 1)
    b_count = _integer(n_resamples, "n_resamples", 1)
    params = BootstrapSection(n_resamples=b_count, seed=_integer(seed, "seed", 0), confidence=_confidence(confidence))
    configs = Configurations.of(sweep, pairings, fusion)
    population = configs.values                                                    # (3, N, C)
    big_n = population.shape[1]
    n = big_n if n_questions is None else _integer(n_questions, "n_questions", 1)
    truth_of = population.mean(axis=1)                                             # θ(c), (3, C)
    fixed = _in_sample_choice(population)

    rng = np.random.default_rng((params.seed, COVERAGE_STREAM))
    datasets = rng.integers(0, big_n, size=(d_count, n))
    shape = (len(METRICS), len(INTERVALS), d_count)
    low, high, estimate, truth = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape)
    chosen = np.empty(d_count, dtype=np.int64)
    # one BLAS thread: D small (B, n) @ (n, C) products, each too small for OpenBLAS's threads to pay for waking
    # them; on the loaded 2-core reference machine two threads took several times as long (threadpoolctl: a
    # dependency of scikit-learn)
    with threadpool_limits(limits=1, user_api="blas"):
        for d, questions in enumerate(datasets):
            values = population[:, questions, :]                                   # (3, n, C)
            counts = _counts(rng.integers(0, n, size=(b_count, n)), n)
            chosen[d] = c = _in_sample_choice(values)
            for i, (bound, point) in enumerate(_intervals(values, counts, c, fixed, params)):
                low[:, i, d], high[:, i, d] = bound
                estimate[:, i, d] = point
                truth[:, i, d] = truth_of[:, fixed] if INTERVALS[i] == "fixed configuration" else truth_of[:, c]

    exists = ~np.isnan(low)
    covered = exists & (low <= truth) & (truth <= high)
    used = exists.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        coverage = covered.sum(axis=2) / used
        width = np.where(exists, high - low, 0.0).sum(axis=2) / used
        error = np.where(exists, estimate - truth, 0.0).sum(axis=2) / used
    table = pd.DataFrame({
        "metric": np.repeat(np.array(METRICS, dtype=object), len(INTERVALS)),
        "interval": np.tile(np.array(INTERVALS, dtype=object), len(METRICS)),
        "coverage": coverage.ravel(), "mc_se": np.sqrt(coverage * (1 - coverage) / used).ravel(),
        "mean_width": width.ravel(), "mean_error": error.ravel(), "datasets": used.ravel()})
    per_dataset = pd.concat([pd.DataFrame({"dataset": np.arange(d_count)}), configs.chosen(chosen),
                             pd.DataFrame({f"true {m}": truth_of[i, chosen] for i, m in enumerate(METRICS)})], axis=1)
    return SelectionCoverage(table, per_dataset, d_count, b_count, n, big_n, params.seed, params.confidence)


def _intervals(values: np.ndarray, counts: np.ndarray, c: int, fixed: int, params: BootstrapSection) -> list:
    """Per :data:`INTERVALS`: ``((2, 3) bounds, (3,) point estimate)`` on one study's ``(3, n, C)`` values, its
    in-sample choice ``c``, the population's choice ``fixed`` and its ``(B, n)`` resample counts."""
    n = values.shape[1]
    drawn = resampled_selection(values, counts)
    apparent = values[:, :, c].mean(axis=1)
    conditional = np.percentile(counts @ values[:, :, c].T / n, percentiles(params), axis=0)
    reference = np.percentile(counts @ values[:, :, fixed].T / n, percentiles(params), axis=0)
    kept = drawn.n_out > 0
    loo = np.nanmean(drawn.per_question, axis=1) if kept.any() else np.full(len(METRICS), np.nan)
    mixed = 0.368 * drawn.apparent + 0.632 * drawn.oob
    return [(conditional, apparent),
            (conditional - drawn.optimism, apparent - drawn.optimism),
            (_percentiles(drawn.oob, kept, params), loo),
            (_percentiles(mixed, kept, params), 0.368 * apparent + 0.632 * loo),
            (reference, values[:, :, fixed].mean(axis=1))]


def _in_sample_choice(values: np.ndarray) -> int:
    """The paper's choice on all n questions of ``(3, n, C)`` values (columns in tie-break order)."""
    recall, mrr, ndcg = (np.ones((1, values.shape[1])) @ values[m] / values.shape[1] for m in range(len(METRICS)))
    return int(select_columns(recall, ndcg, mrr)[0])


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """``(B, n)`` float64 draw counts of ``(B, n)`` indices (as :func:`pmrag.evaluate.bootstrap.resample_counts`)."""
    b = indices.shape[0]
    flat = (indices + n * np.arange(b, dtype=np.int64)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def _percentiles(values: np.ndarray, kept: np.ndarray, params: BootstrapSection) -> np.ndarray:
    """``(2, 3)`` percentiles of ``(3, B)`` values over the kept resamples; NaN when none is kept."""
    if not kept.any():
        return np.full((2, values.shape[0]), np.nan)
    return np.percentile(values[:, kept], percentiles(params), axis=1)
