"""Array helpers (pmrag.core.arrays)."""

import itertools

import numpy as np
import pytest

from pmrag.core.arrays import run_bounds


def groupby_bounds(values) -> list[int]:
    """The runs of equal neighbours by itertools.groupby (NaN equals nothing, as != says)."""
    bounds, position = [0], 0
    for _, run in itertools.groupby(range(len(values)), key=lambda i: _key(values[i], i)):
        position += len(list(run))
        bounds.append(position)
    return bounds if len(values) else [0]


def _key(value, i):
    return ("nan", i) if isinstance(value, float) and value != value else ("value", value)


@pytest.mark.parametrize("kind", ["int", "str", "float"])
def test_run_bounds_are_the_runs_of_equal_neighbours(kind):
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(0, 25))
        codes = rng.integers(0, int(rng.integers(1, 5)), n)
        if kind == "int":
            values = codes
        elif kind == "str":
            values = np.array([f"q{c}" for c in codes], dtype=object)
        else:
            values = np.where(rng.random(n) < 0.2, np.nan, codes.astype(float))
        bounds = run_bounds(values)
        assert bounds.dtype == np.int64
        assert bounds.tolist() == groupby_bounds(list(values)), values
    assert run_bounds(np.sort(np.array(["b", "a", "b", "c"], dtype=object))).tolist() == [0, 1, 3, 4]
    assert run_bounds([]).tolist() == [0]
