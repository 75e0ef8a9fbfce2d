"""Percentile bootstrap over questions (paper §4.4, eq. 7): B = 5,000 resamples, seed 12,345, 95 %.

Resampling unit: the question.  One ``(B, n)`` matrix of question indices is drawn *once* from
``np.random.default_rng(seed).integers(0, n, size=(B, n))`` (:func:`resample_indices`) and every method and
every metric is evaluated on those same resamples, so intervals of different methods are paired.

For per-question values x_q (one method) the b-th resample mean is
``x̄*_b = (1/n) Σ_q c_bq x_q`` with c_bq the number of times question q is drawn in resample b
(:func:`resample_counts`); all methods at once are one ``(B, n) @ (n, m)`` product.  The interval is

    [P_{α/2}(x̄*_1 … x̄*_B),  P_{1−α/2}(x̄*_1 … x̄*_B)],   α = 1 − confidence,

the percentiles taken by ``numpy.percentile`` with its default ``method="linear"`` (Hyndman & Fan type 7:
linear interpolation between the order statistics at positions (B − 1)·p).  For confidence 0.95: the 2.5th
and 97.5th percentiles.

A paired difference of methods a and b (eq. 7) is Δ̂ = (1/n) Σ_q (x_q^(a) − x_q^(b)), and its interval the
same percentiles of (1/n) Σ_q c_bq (x_q^(a) − x_q^(b)): both methods' means on the same resample, differenced
(:func:`paired_difference`).

As in the paper, the intervals are conditional on the configurations compared: they do not include the
uncertainty of having selected the best hybrid on the same questions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from pmrag.core.params import BootstrapSection

def percentiles(params: BootstrapSection) -> tuple[float, float]:
    """The lower and upper percentiles (0–100): ``50·(1 − confidence)`` and ``50·(1 + confidence)``."""
    return 50.0 * (1.0 - params.confidence), 50.0 * (1.0 + params.confidence)


def resample_indices(n_questions: int, params: BootstrapSection | None = None) -> np.ndarray:
    """``(B, n)`` int64 question indices, drawn with replacement from ``default_rng(seed)`` in one call."""
    params = _params(params)
    if isinstance(n_questions, bool) or not isinstance(n_questions, (int, np.integer)) or n_questions < 1:
        raise ValueError(f"n_questions must be a positive integer, got {n_questions!r}")
    rng = np.random.default_rng(params.seed)
    return rng.integers(0, n_questions, size=(params.n_resamples, n_questions), dtype=np.int64)


def resample_counts(n_questions: int, params: BootstrapSection | None = None) -> np.ndarray:
    """``(B, n)`` float64 matrix ``c_bq``: how often resample b of :func:`resample_indices` draws question q.

    Cached per ``(n_questions, params)`` and read-only: every caller sees the same resamples.
    """
    return _counts(int(n_questions), _params(params))


def clear_resample_cache() -> None:
    """Forget the cached count matrices (they are redrawn, identically, on next use)."""
    _counts.cache_clear()


@lru_cache(maxsize=16)
def _counts(n: int, params: BootstrapSection) -> np.ndarray:
    indices = resample_indices(n, params)
    b = indices.shape[0]
    flat = (indices + n * np.arange(b, dtype=np.int64)[:, None]).ravel()
    counts = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
    counts.flags.writeable = False
    return counts


def resample_means(values, params: BootstrapSection | None = None) -> np.ndarray:
    """The B resample means: ``(B,)`` for ``(n,)`` values, ``(B, m)`` for ``(m, n)`` values."""
    x = _values(values)
    counts = resample_counts(x.shape[-1], params)
    return counts @ x.T / x.shape[-1]


def ci(values, params: BootstrapSection | None = None):
    """``(mean, low, high)``: the mean over questions and its percentile-bootstrap interval.

    ``values`` is ``(n,)`` (floats come back) or ``(m, n)``, one row per method (``(m,)`` arrays come back,
    every row evaluated on the same resamples).
    """
    params = _params(params)
    x = _values(values)
    low, high = np.percentile(resample_means(x, params), percentiles(params), axis=0)
    mean = x.mean(axis=-1)
    if x.ndim == 1:
        return float(mean), float(low), float(high)
    return mean, low, high


def paired_difference(a, b, params: BootstrapSection | None = None):
    """``(delta, low, high)``: Δ̂ = mean(a − b) (eq. 7) and its paired percentile interval.

    ``a`` and ``b`` are per-question values in the same question order, ``(n,)`` or ``(m, n)``.
    """
    a, b = _values(a), _values(b)
    if a.shape != b.shape:
        raise ValueError(f"paired values must have the same shape, got {a.shape} and {b.shape}")
    return ci(a - b, params)


def ci_table(
    per_question: pd.DataFrame, metrics: str | Sequence[str] | None = None, params: BootstrapSection | None = None
) -> pd.DataFrame:
    """Mean and interval of every method × metric: columns ``method, metric, mean, ci_low, ci_high``.

    ``per_question`` is long (columns or index levels ``method`` and ``question_id`` plus one column per
    metric) or wide (index: question ids; columns: methods, or ``(method, metric)`` pairs).  For long tables
    ``metrics`` picks the metric columns (default: all others); for flat wide tables it is the single
    metric's name (default ``"value"``).  All methods must score the same questions.
    """
    methods, names, cube = _cube(per_question, metrics)
    mean, low, high = ci(cube.reshape(-1, cube.shape[-1]), params)
    return pd.DataFrame({
        "method": np.repeat(np.array(methods, dtype=object), len(names)),
        "metric": np.tile(np.array(names, dtype=object), len(methods)),
        "mean": mean, "ci_low": low, "ci_high": high,
    })


def difference_table(
    per_question: pd.DataFrame,
    pairs: Iterable[tuple[str, str]],
    metrics: str | Sequence[str] | None = None,
    params: BootstrapSection | None = None,
) -> pd.DataFrame:
    """Paired differences a − b for each ``(a, b)`` in ``pairs`` and each metric:
    columns ``method_a, method_b, metric, delta, ci_low, ci_high`` (``per_question`` as in :func:`ci_table`)."""
    methods, names, cube = _cube(per_question, metrics)
    pairs = [tuple(p) for p in pairs]
    position = {m: i for i, m in enumerate(methods)}
    unknown = sorted({m for p in pairs for m in p} - set(position), key=str)
    if not pairs or any(len(p) != 2 for p in pairs) or unknown:
        raise ValueError(f"pairs must be (method_a, method_b) of known methods {methods}; unknown: {unknown}")
    a = cube[[position[p[0]] for p in pairs]]
    b = cube[[position[p[1]] for p in pairs]]
    delta, low, high = paired_difference(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), params)
    return pd.DataFrame({
        "method_a": np.repeat(np.array([p[0] for p in pairs], dtype=object), len(names)),
        "method_b": np.repeat(np.array([p[1] for p in pairs], dtype=object), len(names)),
        "metric": np.tile(np.array(names, dtype=object), len(pairs)),
        "delta": delta, "ci_low": low, "ci_high": high,
    })


def _cube(per_question: pd.DataFrame, metrics) -> tuple[list, list, np.ndarray]:
    """``(methods, metrics, values)`` with values ``(n_methods, n_metrics, n_questions)``."""
    if not isinstance(per_question, pd.DataFrame):
        raise TypeError(f"per_question must be a DataFrame, got {type(per_question).__name__}")
    frame = per_question
    if "method" in frame.columns or "method" in frame.index.names:
        levels = [n for n in frame.index.names if n in ("method", "question_id")]
        wide = _long_to_wide(frame.reset_index(levels) if levels else frame, metrics)
    elif isinstance(frame.columns, pd.MultiIndex):
        if frame.columns.nlevels != 2:
            raise ValueError("wide per_question tables need columns = methods or (method, metric) pairs")
        wide = frame if metrics is None else frame.loc[:, frame.columns.get_level_values(1).isin(_names(metrics))]
    else:
        if "question_id" in frame.columns:
            frame = frame.set_index("question_id")
        label = "value" if metrics is None else metrics
        if not isinstance(label, str):
            raise ValueError("a flat wide per_question table holds one metric: pass its name as a string")
        wide = pd.concat({label: frame}, axis=1).swaplevel(axis=1)
    methods = list(pd.unique(wide.columns.get_level_values(0)))
    names = list(pd.unique(wide.columns.get_level_values(1)))
    if not methods or not names or len(wide) == 0:
        raise ValueError("per_question has no methods, metrics or questions")
    grid = pd.MultiIndex.from_product([methods, names])
    if len(wide.columns) != len(grid) or not wide.columns.is_unique:
        raise ValueError("every method needs exactly one column per metric")
    try:
        values = wide.reindex(columns=grid).to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"per_question metric values must be numbers: {exc}") from None
    missing = ~np.isfinite(values)
    if missing.any():
        q, col = np.argwhere(missing)[0]
        raise ValueError(
            f"{int(missing.sum())} missing or non-finite value(s), e.g. method {grid[col][0]!r}, metric "
            f"{grid[col][1]!r}, question {wide.index[q]!r}: a paired bootstrap needs every method on every question"
        )
    return methods, names, values.T.reshape(len(methods), len(names), len(wide))


def _long_to_wide(frame: pd.DataFrame, metrics) -> pd.DataFrame:
    if "question_id" not in frame.columns:
        raise ValueError("a long per_question table needs a question_id column (or index level)")
    names = [c for c in frame.columns if c not in ("method", "question_id")] if metrics is None else _names(metrics)
    missing = [m for m in names if m not in frame.columns]
    if missing:
        raise ValueError(f"per_question lacks metric column(s) {', '.join(map(str, missing))}")
    duplicated = frame.duplicated(["method", "question_id"])
    if duplicated.any():
        row = frame.loc[duplicated.idxmax()]
        raise ValueError(f"per_question has method {row['method']!r} twice on question {row['question_id']!r}")
    methods = pd.unique(frame["method"])
    wide = frame.pivot(index="question_id", columns="method", values=names)
    return wide.swaplevel(axis=1).reindex(columns=pd.MultiIndex.from_product([methods, names]))


def _names(metrics) -> list:
    return [metrics] if isinstance(metrics, str) else list(metrics)


def _params(params: BootstrapSection | None) -> BootstrapSection:
    if params is None:
        return BootstrapSection()
    if not isinstance(params, BootstrapSection):
        raise TypeError(f"params must be a BootstrapSection, got {type(params).__name__}")
    return params


def _values(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim not in (1, 2) or x.shape[-1] == 0:
        raise ValueError(f"values must be (n_questions,) or (n_methods, n_questions) with n ≥ 1, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite (a NaN question score would poison every resample)")
    return x
