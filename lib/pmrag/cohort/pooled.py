"""Pooled statistics over participants: means, a two-level bootstrap, heterogeneity, wins.

The paper's intervals resample questions of one person (§4.4): they say how sure we are about *this* history.
Across a cohort the unit of generalisation is the participant, so the intervals here resample participants
first and questions within each drawn participant second (the two-level, or cluster, bootstrap; Davison &
Hinkley 1997, §3.8, "strategy 1": both stages with replacement).

Notation: participants p = 1…P with n_p questions; x_pq a per-question metric (or a paired difference of two
methods, x_pq = a_pq − b_pq); x̄_p = (1/n_p) Σ_q x_pq.

* **macro** (over participants): M = (1/P) Σ_p x̄_p — every participant counts once.
* **micro** (over all questions): μ = Σ_p Σ_q x_pq / Σ_p n_p — every question counts once.
* **two-level bootstrap** (:func:`two_level_means`): resample b draws P participants p*_b1 … p*_bP with
  replacement, then for each drawn slot s, n_{p*} questions of that participant with replacement, c_bsq counting
  how often question q is drawn; the slot mean is x̄*_bs = (1/n_{p*}) Σ_q c_bsq x_{p*q}, and
  M*_b = (1/P) Σ_s x̄*_bs, μ*_b = Σ_s n_{p*} x̄*_bs / Σ_s n_{p*}.  The interval is the percentile interval of the
  B values (the percentiles of :func:`pmrag.evaluate.bootstrap.percentiles`).  Every method is evaluated on the
  same draws, so a paired difference's interval is that of the differences x_pq.
  Draws: ``SeedSequence(seed).spawn(P + 1)``; the first generator draws the (B, P) participants, generator p + 1
  draws participant p's questions, for the slots that drew p in row-major (b, s) order, n_p at a time.
* **heterogeneity** (:func:`heterogeneity`) of a paired difference between participants: with the within-
  participant variance of the mean v_p = s_p² / n_p (s_p² with n_p − 1 degrees of freedom) and w_p = 1/v_p,
  the fixed-effect mean d̄ = Σ w_p x̄_p / Σ w_p, Cochran's Q = Σ w_p (x̄_p − d̄)² on P − 1 degrees of freedom,
  I² = max(0, (Q − (P − 1)) / Q) (Higgins & Thompson 2002), and DerSimonian & Laird's (1986) between-participant
  variance τ² = max(0, (Q − (P − 1)) / (Σ w_p − Σ w_p² / Σ w_p)); the random-effects summary is
  μ_RE = Σ w*_p x̄_p / Σ w*_p with w*_p = 1 / (v_p + τ²), its standard error (Σ w*_p)^(−1/2) and the normal interval
  μ_RE ± z SE.  A participant whose questions all give the same difference (s_p² = 0) or who has one question
  takes the pooled within-participant variance Σ_p (n_p − 1) s_p² / Σ_p (n_p − 1) divided by its n_p; when that
  is 0 too, nothing varies within participants and Q, I², τ² and the interval are NaN (μ_RE is then the mean).
* **wins** (:func:`winners`): per participant, the method with the best macro metrics by the paper's rule
  (:mod:`pmrag.evaluate.select`: Recall@5, then nDCG@5, then MRR@5, then the listed order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def macro_micro(values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(macro, micro)``, each ``(m,)``: the mean over participants of their question means, and the mean over
    all questions.  ``values[p]`` is participant p's ``(m, n_p)`` per-question values of m methods."""
    values = _checked(values)
    means = np.stack([v.mean(axis=1) for v in values])
    total = sum(v.sum(axis=1) for v in values)
    return means.mean(axis=0), total / sum(v.shape[1] for v in values)


def two_level_means(values: Sequence[np.ndarray], n_resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The two-level bootstrap's ``(macro, micro)`` resample means, each ``(B, m)`` (see the module docstring).

    Parameters
    ----------
    values : per participant, ``(m, n_p)`` per-question values of the same m methods (or paired differences).
    n_resamples : B.
    seed : the root of the draws (``numpy.random.SeedSequence``).
    """
    values = _checked(values)
    n_participants, n_methods = len(values), values[0].shape[0]
    generators = [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(n_participants + 1)]
    drawn = generators[0].integers(0, n_participants, size=(n_resamples, n_participants)).ravel()
    slot_sums = np.zeros((drawn.size, n_methods))
    slot_sizes = np.zeros(drawn.size)
    for p, x in enumerate(values):
        slots = np.flatnonzero(drawn == p)
        n = x.shape[1]
        questions = generators[p + 1].integers(0, n, size=(slots.size, n))
        counts = np.bincount((questions + n * np.arange(slots.size)[:, None]).ravel(),
                             minlength=slots.size * n).reshape(slots.size, n)
        slot_sums[slots] = counts @ x.T
        slot_sizes[slots] = n
    slot_sums = slot_sums.reshape(n_resamples, n_participants, n_methods)
    slot_sizes = slot_sizes.reshape(n_resamples, n_participants)
    macro = (slot_sums / slot_sizes[..., None]).mean(axis=1)
    micro = slot_sums.sum(axis=1) / slot_sizes.sum(axis=1)[:, None]
    return macro, micro


def percentile_interval(resampled: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The central ``confidence`` percentile interval of ``(B, …)`` resampled values along B (numpy's linear
    percentiles, as :func:`pmrag.evaluate.bootstrap.ci`)."""
    low, high = np.percentile(resampled, [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)], axis=0)
    return low, high


@dataclass(frozen=True)
class Heterogeneity:
    """Between-participant heterogeneity of one quantity (see the module docstring)."""

    q: float
    df: int
    i2: float
    tau2: float
    fixed_mean: float
    re_mean: float
    re_se: float
    re_low: float
    re_high: float


def within_variances(values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(means, variances)`` ``(P,)``: each participant's mean of its ``(n_p,)`` values and the variance of that
    mean, s_p² / n_p; a participant with s_p² = 0 or one value takes the pooled within-participant variance."""
    arrays = [np.asarray(v, dtype=np.float64).ravel() for v in values]
    sizes = np.array([a.size for a in arrays], dtype=np.float64)
    means = np.array([a.mean() for a in arrays])
    sample_var = np.array([a.var(ddof=1) if a.size > 1 else 0.0 for a in arrays])
    dof = np.maximum(sizes - 1, 0)
    pooled = float((dof * sample_var).sum() / dof.sum()) if dof.sum() > 0 else 0.0
    return means, np.where(sample_var > 0, sample_var, pooled) / sizes


def heterogeneity(means: np.ndarray, variances: np.ndarray, confidence: float = 0.95) -> Heterogeneity:
    """Cochran's Q, I², DerSimonian–Laird τ² and the random-effects summary of per-participant ``means`` with
    within-participant ``variances`` of those means (see the module docstring)."""
    from scipy.stats import norm   # here, not at the top: the cohort's Dask workers import this module, never use it

    means, variances = np.asarray(means, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    k = means.size
    if k < 2 or not (variances > 0).all():
        mean = float(means.mean())
        return Heterogeneity(np.nan, k - 1, np.nan, np.nan, mean, mean, np.nan, np.nan, np.nan)
    w = 1.0 / variances
    fixed = float((w * means).sum() / w.sum())
    q = float((w * (means - fixed) ** 2).sum())
    df = k - 1
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    tau2 = max(0.0, (q - df) / (w.sum() - (w ** 2).sum() / w.sum()))
    w_star = 1.0 / (variances + tau2)
    mean = float((w_star * means).sum() / w_star.sum())
    se = float(w_star.sum() ** -0.5)
    z = float(norm.ppf(0.5 * (1.0 + confidence)))
    return Heterogeneity(q, df, i2, tau2, fixed, mean, se, mean - z * se, mean + z * se)


def winners(macro: np.ndarray) -> np.ndarray:
    """Per participant, the winning method's position: ``macro`` is ``(P, m, 3)``, each participant's macro
    Recall@5, nDCG@5, MRR@5 of m methods in the listed order (the paper's rule, :func:`pmrag.evaluate.select.best_columns`)."""
    from pmrag.evaluate.select import best_columns, listed

    macro = np.asarray(macro, dtype=np.float64)
    return best_columns([macro[..., i] for i in range(macro.shape[-1])], listed(np.arange(macro.shape[1])))


def _checked(values: Sequence[np.ndarray]) -> list[np.ndarray]:
    arrays = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in values]
    if not arrays or any(a.shape[1] == 0 for a in arrays) or len({a.shape[0] for a in arrays}) != 1:
        raise ValueError("values: one (m, n_p) array per participant, the same m methods, n_p ≥ 1 questions each, "
                         f"got shapes {[a.shape for a in arrays]}")
    return arrays
