"""Array helpers shared by the stages."""

from __future__ import annotations

import numpy as np


def run_bounds(values) -> np.ndarray:
    """The bounds of the runs of equal neighbours in ``values``: ``[0, s₁, …, n]`` (int64), run ``i`` being
    ``values[bounds[i]:bounds[i + 1]]``; ``[0]`` for no values.  Over sorted values, one run per distinct value
    (so ``bounds[:-1]`` are each value's first position, ``np.diff(bounds)`` its count); a missing value (NaN)
    equals no other, so each is a run of its own."""
    values = np.asarray(values)
    if not len(values):
        return np.zeros(1, dtype=np.int64)
    return np.flatnonzero(np.r_[True, values[1:] != values[:-1], True]).astype(np.int64, copy=False)
