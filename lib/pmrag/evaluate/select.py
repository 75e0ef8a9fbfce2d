"""The paper's selection rule (§6.2), written once: the candidate with the highest macro Recall@5; a tie goes to
the higher nDCG@5, then to the higher MRR@5, then to the caller's tie-break, then to the first candidate.

The paper names no tie-break; each caller passes its own, documented where it is used and unchanged:

=====================================  ==========================  =========  =========================================
caller                                 candidates                  metrics    tie-break after MRR@5
=====================================  ==========================  =========  =========================================
``sweep.select_best``                  one pairing's β             rounded    β closest to 0.5, the smaller β (both
                                                                              rounded), the first row
``sweep.select_overall``               each pairing's selected β   as they    the pairing order
                                                                   are
``selection.Configurations.select``    every (pairing, β), per     rounded    the column order: pairing position,
(held-out folds, selection bootstrap)  row of question weights                |β − 0.5|, β, sweep row
``beyond.paper_best_flat``             the paper's six flat        rounded    the listed order
                                       retrievers (those listed)
``graph_eval.best_flat``               the flat retrievers, on     rounded    the name (ascending)
                                       the tuning part
``graph_eval.tune_interest_choice``    the (threshold, cap) grid   rounded    (its metrics: set F1, then set recall)
                                                                              the larger threshold, the smaller cap
=====================================  ==========================  =========  =========================================

"Rounded" compares the metrics after ``numpy.round`` to :data:`DECIMALS` (12) decimals, so a difference that the
order of a floating-point sum alone makes stays a tie.  (``beyond.paper_best_flat`` rounded with Python's
``round`` on ``numpy.float64`` means, which is ``numpy.round`` itself: NumPy scalars define ``__round__``.)

:func:`best_columns` is the kernel, vectorised over any leading axes (the bootstrap's B rows of means at once):
each row is narrowed metric by metric to the candidates with the best value, then tie-break key by key, and the
first remaining candidate is taken — the first row of a stable lexicographic sort, without sorting.  A NaN ranks
last on its key.  :func:`select` applies it to a frame of candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pmrag.evaluate.metric_names import PAPER_METRICS, Metric

DECIMALS = 12


def best_columns(metrics: Sequence, tie_break: Sequence = (), decimals: int | None = DECIMALS) -> np.ndarray:
    """The selected candidate of each row of ``(..., C)`` arrays.

    Parameters
    ----------
    metrics : arrays ``(..., C)`` compared in order, the larger value better (the paper's: Recall@5, nDCG@5,
        MRR@5), rounded to ``decimals`` first (``None``: compared as they are).
    tie_break : keys ``(C,)`` or ``(..., C)`` compared in order after the metrics, the smaller value better,
        as given (see :func:`beta_near_half`, :func:`listed`, :func:`by_name`, :func:`larger_first`).
    decimals : the metrics' rounding.

    Returns
    -------
    ``(...)`` int64: the first candidate that no other beats on the metrics, then on the tie-break keys.
    """
    keys = [_rounded(m, decimals) for m in metrics]
    if not keys or any(k.shape != keys[0].shape for k in keys) or keys[0].ndim < 1 or keys[0].shape[-1] == 0:
        raise ValueError(f"metrics must be one or more arrays of one shape (..., C) with C ≥ 1, got "
                         f"{[k.shape for k in keys]}")
    alive = np.ones(keys[0].shape, dtype=bool)
    for key in keys:
        alive = _narrowed(alive, key, better=np.max, worst=-np.inf)
    for key in tie_break:
        key = np.asarray(key, dtype=np.float64)
        if key.shape[-1:] != alive.shape[-1:]:
            raise ValueError(f"a tie-break key has {key.shape[-1:]} candidates, the metrics {alive.shape[-1]}")
        alive = _narrowed(alive, np.broadcast_to(key, alive.shape), better=np.min, worst=np.inf)
    return alive.argmax(axis=-1)


def select(candidates: pd.DataFrame, tie_break: Sequence = (), metrics: Sequence[Metric | str] = PAPER_METRICS,
           decimals: int | None = DECIMALS) -> int:
    """The position (``iloc``) of the selected row of ``candidates``, one row per candidate with a column per
    metric: :func:`best_columns` of ``metrics`` (the paper's Recall@5, nDCG@5, MRR@5 by default), then the
    ``tie_break`` keys (one value per row, the smaller better), then the first row."""
    missing = [str(m) for m in metrics if str(m) not in candidates.columns]
    if missing:
        raise ValueError(f"candidates lack metric column(s) {', '.join(missing)}")
    if candidates.empty:
        raise ValueError("no candidates to select from")
    values = [candidates[str(m)].to_numpy(dtype=np.float64) for m in metrics]
    return int(best_columns(values, tie_break, decimals))


def beta_near_half(beta, decimals: int | None = DECIMALS) -> tuple[np.ndarray, np.ndarray]:
    """``sweep.select_best``'s tie-break: β closest to 0.5, then the smaller β, both rounded to ``decimals``
    (so 0.1 + 0.2 and 0.7 are equally close)."""
    beta = np.asarray(beta, dtype=np.float64)
    return _rounded(np.abs(beta - 0.5), decimals), _rounded(beta, decimals)


def listed(positions) -> tuple[np.ndarray]:
    """A tie-break by a listed order: each candidate's position in it (the pairing order, a list of names)."""
    return (np.asarray(positions, dtype=np.float64),)


def by_name(names) -> tuple[np.ndarray]:
    """A tie-break by name, ascending in Python's string order (as ``sort_values`` orders strings)."""
    codes, _ = pd.factorize(pd.Series(names, dtype=object), sort=True)
    return (codes.astype(np.float64),)


def larger_first(values) -> tuple[np.ndarray]:
    """A tie-break by a value, the larger first (as it is, not rounded)."""
    return (-np.asarray(values, dtype=np.float64),)


def _rounded(values, decimals: int | None) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values if decimals is None else np.round(values, decimals)


def _narrowed(alive: np.ndarray, key: np.ndarray, better, worst: float) -> np.ndarray:
    """``alive`` keeping, per row, the live candidates with the best ``key`` (NaN counts as ``worst``)."""
    if np.isnan(key).any():
        key = np.where(np.isnan(key), worst, key)
    key = np.where(alive, key, worst)
    return alive & (key == better(key, axis=-1, keepdims=True))
