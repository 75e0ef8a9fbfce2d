"""How many questions (§9.1: one user, 100 questions): power of a paired comparison, by resampling a pilot run.

Input: the per-question paired differences d_q = x_q^(a) − x_q^(b) of a pilot run (n₀ questions; e.g.
Recall@5 of two methods, :func:`pilot_differences`).

Model (a location shift).  The pilot's differences are centred, e_q = d_q − d̄, so that they describe the
question-to-question spread of a difference with mean exactly 0; a study of n questions whose true mean
difference is δ is simulated as n draws with replacement from {e_q} plus δ.  The shift keeps the pilot's
spread, skew and ties (many d_q are 0 for Recall@5); it ignores that a bounded metric's spread changes near
its bounds, which matters only for δ far from the pilot's own d̄.

Test.  Each simulated study is judged by the two-sided paired t-test at level α: reject H0: δ = 0 when
|ē + δ| > t_{1−α/2, n−1} · s / √n (ē, s: mean and standard deviation of the n draws; s = 0 rejects whenever
ē + δ ≠ 0).  It is chosen because it is cheap and vectorised (running sums give every n at once); for n ≥ 25 its
decisions are close to those of the percentile bootstrap or a sign-flip test on the same data, which would
cost B resamples inside every simulated study.  Power(n, δ) = the share of R simulated studies that reject.

Common random numbers.  One ``numpy.random.default_rng(seed)`` draws the indices in column blocks of
:data:`BLOCK`: replicate r of size n uses the first n draws of row r, for every n and every δ, so the curves are
smooth in n and δ and every function here agrees with every other on the same seed.

* :func:`paired_power`: Power(n, δ).
* :func:`detectable_difference` (and :func:`power_curve` over several n): the minimum detectable difference,
  MDE(n) = inf{δ ≥ 0 : Power(n, δ) ≥ power} (power 0.8 by default), found exactly over the R replicates: replicate
  r rejects iff δ > a_r = c·s_r/√n − ē_r or δ < b_r = −c·s_r/√n − ē_r, so Power jumps only at the a_r
  and b_r.
* :func:`detectable_differences`: MDE(n) of many pilots (one row of differences each, e.g. every comparison).
* :func:`questions_needed`: the smallest n ≤ ``max_questions`` with Power(n, δ) ≥ power.
* :func:`significance_threshold`: the smallest *observed* |mean difference| the paired t-test at α calls
  significant with the pilot's own spread, t_{1−α/2, n−1} · s / √n (s: the standard deviation of the n differences,
  ddof = 1).  It is not the MDE: the MDE is a *true* difference, detected in ``power`` of the studies; an observed
  difference between the threshold and the MDE is significant, and a true difference below the MDE is detected less
  often, not never.  For a normal pilot MDE ≈ (z_{1−α/2} + z_power) · σ / √n and threshold ≈ z_{1−α/2} · σ / √n, so
  at 80 % power and α = 0.05 the MDE is about 1.43 times the threshold.
* :func:`power_sentence`: both in one line for one pair.  Both are the pair's own: another pair's spread gives
  another MDE and threshold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from scipy import special   # stdtrit, the t quantile scipy.stats.t.ppf computes; scipy.stats takes ~1 s to import

from pmrag.core.frames import require_columns
from pmrag.evaluate.metric_names import RECALL5, Metric

BLOCK = 100                       # columns of indices drawn per call of the generator (fixes the stream)
DEFAULT_QUESTIONS = (25, 50, 100, 200, 400)


def pilot_differences(per_question: pd.DataFrame, method_a: str, method_b: str,
                      metric: Metric | str = RECALL5) -> np.ndarray:
    """d_q = ``metric`` of ``method_a`` − of ``method_b`` per question (sorted by question id), from long rows
    ``retriever, question_id, <metric>``; both methods must score the same questions."""
    metric = str(metric)
    require_columns(per_question, ["retriever", "question_id", metric], "per_question")
    pair = []
    for method in (method_a, method_b):
        rows = per_question[per_question["retriever"] == method]
        if rows.empty:
            raise ValueError(f"per_question has no rows of retriever {method!r}")
        if rows["question_id"].duplicated().any():
            raise ValueError(f"per_question has retriever {method!r} twice on one question")
        pair.append(rows.set_index("question_id")[metric].sort_index())
    a, b = pair
    if not a.index.equals(b.index):
        raise ValueError(f"retrievers {method_a!r} and {method_b!r} score different questions: a paired "
                         "difference needs both on every question")
    return (a - b).to_numpy(dtype=np.float64)


def paired_power(differences, n_questions: int, delta, alpha: float = 0.05, n_resamples: int = 5000,
                 seed: int = 12345):
    """Power(n, δ): the share of R simulated studies of ``n_questions`` questions with true mean difference
    ``delta`` that the paired t-test at ``alpha`` rejects.  A float for a scalar ``delta``, else an array."""
    centred = _centred(differences)
    n = _positive("n_questions", n_questions, low=2)
    _check(alpha, n_resamples, seed)
    deltas = np.asarray(delta, dtype=np.float64)
    if not np.isfinite(deltas).all():
        raise ValueError(f"delta must be finite, got {delta!r}")
    mean, sd = _moments_at(centred, [n], n_resamples, seed)
    half = _critical(n, alpha) * sd[:, 0] / np.sqrt(n)
    shifted = mean[:, 0, None] + deltas.reshape(-1)[None, :]
    power = (np.abs(shifted) > half[:, None]).mean(axis=0)
    return float(power[0]) if deltas.ndim == 0 else power.reshape(deltas.shape)


def detectable_difference(differences, n_questions: int, power: float = 0.8, alpha: float = 0.05,
                          n_resamples: int = 5000, seed: int = 12345) -> float:
    """MDE(n): the smallest δ ≥ 0 with Power(n, δ) ≥ ``power`` (module docstring)."""
    return float(power_curve(differences, [n_questions], power, alpha, n_resamples, seed)["detectable_difference"][0])


def power_curve(differences, n_questions: Sequence[int] = DEFAULT_QUESTIONS, power: float = 0.8, alpha: float = 0.05,
                n_resamples: int = 5000, seed: int = 12345) -> pd.DataFrame:
    """MDE(n) for each n: columns ``n_questions, detectable_difference`` (in the order given)."""
    centred = _centred(differences)
    ns = [_positive("n_questions", n, low=2) for n in np.atleast_1d(n_questions).tolist()]
    if not ns:
        raise ValueError("n_questions must name at least one study size")
    _check(alpha, n_resamples, seed, power)
    mean, sd = _moments_at(centred, ns, n_resamples, seed)
    sizes = np.array(ns)
    half = _critical(sizes, alpha) * sd / np.sqrt(sizes)
    mde = [_infimum(half[:, j] - mean[:, j], -half[:, j] - mean[:, j], power) for j in range(len(ns))]
    return pd.DataFrame({"n_questions": sizes, "detectable_difference": mde})


def questions_needed(differences, delta: float, power: float = 0.8, alpha: float = 0.05, n_resamples: int = 5000,
                     seed: int = 12345, max_questions: int = 2000) -> int | None:
    """The smallest n (2 ≤ n ≤ ``max_questions``) with Power(n, ``delta``) ≥ ``power``; None if none is."""
    centred = _centred(differences)
    _check(alpha, n_resamples, seed, power)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.number)) or not np.isfinite(delta):
        raise ValueError(f"delta must be a finite number, got {delta!r}")
    max_questions = _positive("max_questions", max_questions, low=2)
    for sizes, mean, sd in _running_moments(centred, max_questions, n_resamples, seed):
        half = _critical(sizes, alpha) * sd / np.sqrt(sizes)
        reached = np.nonzero((np.abs(mean + delta) > half).mean(axis=0) >= power)[0]
        if len(reached):
            return int(sizes[reached[0]])
    return None


def detectable_differences(rows, n_questions: int, power: float = 0.8, alpha: float = 0.05, n_resamples: int = 5000,
                           seed: int = 12345) -> np.ndarray:
    """MDE(n) of each row of ``(m, n₀)`` pilot differences (:func:`detectable_difference` row by row, on the same
    seed); NaN for a row whose differences are all equal (no spread to resample).  About 25 ms a row at R = 5,000:
    a (rows, R, n) layout of the shared draws was measured no faster, the gather and running sums being per row."""
    d = np.asarray(rows, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] < 2:
        raise ValueError(f"rows must be (n_comparisons, n_questions ≥ 2) differences, got shape {d.shape}")
    _check(alpha, n_resamples, seed, power)
    return np.array([detectable_difference(row, n_questions, power, alpha, n_resamples, seed) if np.ptp(row) > 0
                     else np.nan for row in d])


def significance_threshold(differences, alpha: float = 0.05):
    """t_{1−α/2, n−1} · s / √n: the paired t-test at ``alpha`` rejects H0: δ = 0 exactly when the observed
    |mean difference| exceeds it (module docstring).  ``differences``: (n,) → a float, (m, n) → one per row."""
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim not in (1, 2) or d.shape[-1] < 2:
        raise ValueError(f"differences must be (n_questions ≥ 2,) or (n_comparisons, n_questions), got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("differences must be finite")
    _check(alpha, 1, 0)
    n = d.shape[-1]
    threshold = _critical(n, alpha) * d.std(axis=-1, ddof=1) / np.sqrt(n)
    return float(threshold) if d.ndim == 1 else threshold


def power_sentence(n_questions: int, detectable: float, threshold: float, pair: tuple[str, str] | None = None,
                   metric: str = "Recall@5", power: float = 0.8, alpha: float = 0.05) -> str:
    """The one-line reading of one pair's :func:`detectable_difference` and :func:`significance_threshold`."""
    between = f" of {pair[0]} − {pair[1]}" if pair else ""
    if np.isfinite(detectable):
        detected = (f"a true difference in {metric}{between} of {detectable:.3f} is detected with {power * 100:g} % "
                    f"power by a paired t-test at α = {alpha:g} (a smaller true difference is detected less often)")
    else:
        detected = f"no true difference in {metric}{between} is detected with {power * 100:g} % power at α = {alpha:g}"
    return (f"With {n_questions} questions and this pair's spread, {detected}; an observed difference is significant "
            f"at that level when |Δ| > {threshold:.3f} (t · s / √n). Other pairs spread differently, so their "
            f"detectable differences differ.")


def _infimum(up: np.ndarray, down: np.ndarray, power: float) -> float:
    """inf{δ ≥ 0 : (#{up_r < δ} + #{down_r > δ}) / R ≥ power}; Power only rises just after an up_r."""
    r = len(up)
    down = np.sort(down)

    def share(delta: np.ndarray, rising: np.ndarray) -> np.ndarray:
        return (rising + r - np.searchsorted(down, delta, side="right")) / r

    if share(np.array([0.0]), np.array([np.searchsorted(np.sort(up), 0.0, side="left")]))[0] >= power:
        return 0.0
    up = np.sort(up)
    rising = np.searchsorted(up, up, side="right")          # replicates rejecting just above each up_r
    reached = np.nonzero((up >= 0) & (share(up, rising) >= power))[0]
    return float(up[reached[0]]) if len(reached) else float("inf")


def _critical(n, alpha: float) -> np.ndarray:
    """t_{1−α/2, n−1}, the two-sided critical value of the paired t test."""
    return special.stdtrit(np.asarray(n) - 1, 1.0 - alpha / 2.0)


def _moments_at(centred: np.ndarray, sizes: list[int], n_resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, sd)``, each ``(R, len(sizes))``: the replicates' moments at the requested sizes."""
    wanted = np.array(sizes)
    mean = np.empty((n_resamples, len(sizes)))
    sd = np.empty((n_resamples, len(sizes)))
    for block_sizes, block_mean, block_sd in _running_moments(centred, int(wanted.max()), n_resamples, seed):
        inside = (wanted >= block_sizes[0]) & (wanted <= block_sizes[-1])
        columns = wanted[inside] - block_sizes[0]
        mean[:, inside], sd[:, inside] = block_mean[:, columns], block_sd[:, columns]
    return mean, sd


def _running_moments(centred: np.ndarray, n_max: int, n_resamples: int,
                     seed: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Blocks ``(sizes, mean, sd)`` for n = 2 … ``n_max``: replicate r of size n is the first n draws of row r."""
    rng = np.random.default_rng(seed)
    total = np.zeros((n_resamples, 1))
    squares = np.zeros((n_resamples, 1))
    for start in range(0, n_max, BLOCK):
        draws = centred[rng.integers(0, len(centred), size=(n_resamples, BLOCK))]
        sums = total + np.cumsum(draws, axis=1)
        sums2 = squares + np.cumsum(draws * draws, axis=1)
        total, squares = sums[:, -1:], sums2[:, -1:]
        sizes = np.arange(start + 1, start + BLOCK + 1)
        keep = (sizes >= 2) & (sizes <= n_max)
        sizes, sums, sums2 = sizes[keep], sums[:, keep], sums2[:, keep]
        variance = np.maximum(sums2 - sums * sums / sizes, 0.0) / (sizes - 1)
        yield sizes, sums / sizes, np.sqrt(variance)


def _centred(differences) -> np.ndarray:
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size < 2:
        raise ValueError(f"differences must be a 1-D array of at least 2 pilot questions, got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("differences must be finite")
    if np.ptp(d) == 0:
        raise ValueError("the pilot differences are all equal: they show no question-to-question spread to resample")
    return d - d.mean()


def _positive(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
    return int(value)


def _check(alpha: float, n_resamples: int, seed: int, power: float | None = None) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    _positive("n_resamples", n_resamples, low=1)
    _positive("seed", seed, low=0)
    if power is not None and (isinstance(power, bool) or not isinstance(power, (int, float, np.floating))
                              or not 0 < power < 1):
        raise ValueError(f"power must be a number in (0, 1), got {power!r}")
