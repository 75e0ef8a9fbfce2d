"""How many questions: power by resampling a pilot, checked against scipy's t-test on the same
simulated studies, its level at δ = 0, monotonicity in δ and n, and determinism."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pmrag.evaluate.power import (BLOCK, detectable_difference, detectable_differences, paired_power,
                                  pilot_differences, power_curve, power_sentence, questions_needed,
                                  significance_threshold)


def recall_pilot(n=100, seed=0):
    """Recall@5-like paired differences: mostly 0, some ±½ and ±1."""
    rng = np.random.default_rng(seed)
    return rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=n, p=[0.08, 0.07, 0.6, 0.12, 0.13])


def simulated_studies(differences, n, n_resamples, seed):
    """The replicates as the module defines them: row r of size n = the first n draws of row r, blocks of BLOCK."""
    centred = differences - differences.mean()
    rng = np.random.default_rng(seed)
    blocks = [rng.integers(0, len(centred), size=(n_resamples, BLOCK)) for _ in range(-(-n // BLOCK))]
    return centred[np.concatenate(blocks, axis=1)[:, :n]]


@pytest.mark.agreement
@pytest.mark.parametrize("n", [25, 100, 150])
def test_power_equals_scipy_t_test_on_the_same_studies(n):
    pilot = recall_pilot() + np.random.default_rng(1).normal(0, 0.01, size=100)   # no exact ties with the bound
    studies = simulated_studies(pilot, n, 400, seed=3)
    for delta in (0.0, 0.05, 0.12):
        p = stats.ttest_1samp(studies + delta, 0.0, axis=1).pvalue
        assert paired_power(pilot, n, delta, n_resamples=400, seed=3) == pytest.approx(np.mean(p < 0.05))


def test_power_at_zero_is_alpha_within_monte_carlo_error():
    pilot = np.random.default_rng(4).normal(0, 0.3, size=100)
    size = paired_power(pilot, 100, 0.0, alpha=0.05, n_resamples=20000, seed=11)
    assert abs(size - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 20000)


def test_larger_difference_has_higher_power():
    pilot = recall_pilot()
    power = paired_power(pilot, 100, np.array([0.0, 0.02, 0.05, 0.1, 0.2]), n_resamples=3000, seed=2)
    assert np.all(np.diff(power) > 0)
    assert power[-1] > 0.95


def test_detectable_difference_is_where_power_crosses_the_target():
    pilot = recall_pilot()
    for n in (25, 100, 300):
        mde = detectable_difference(pilot, n, power=0.8, n_resamples=2000, seed=6)
        assert paired_power(pilot, n, mde + 1e-9, n_resamples=2000, seed=6) >= 0.8
        assert paired_power(pilot, n, mde - 1e-9, n_resamples=2000, seed=6) < 0.8
        grid = np.linspace(0, 1, 2001)                  # brute force: scan δ on a grid
        scanned = grid[np.argmax(paired_power(pilot, n, grid, n_resamples=2000, seed=6) >= 0.8)]
        assert mde <= scanned < mde + 1e-3 + 1e-12


@pytest.mark.agreement
def test_curve_decreases_with_n_and_scales_like_one_over_root_n():
    pilot = recall_pilot()
    curve = power_curve(pilot, n_resamples=3000, seed=8)
    assert list(curve["n_questions"]) == [25, 50, 100, 200, 400]
    mde = curve["detectable_difference"].to_numpy()
    assert np.all(np.diff(mde) < 0)
    # normal theory: MDE ≈ (z_{0.975} + z_{0.8}) · sd / √n
    theory = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * pilot.std(ddof=1) / np.sqrt(400)
    assert mde[-1] == pytest.approx(theory, rel=0.08)


def test_questions_needed_inverts_the_curve():
    pilot = recall_pilot()
    mde = detectable_difference(pilot, 100, n_resamples=2000, seed=9)
    needed = questions_needed(pilot, mde + 1e-9, n_resamples=2000, seed=9)
    assert needed <= 100
    assert paired_power(pilot, needed, mde + 1e-9, n_resamples=2000, seed=9) >= 0.8
    assert paired_power(pilot, needed - 1, mde + 1e-9, n_resamples=2000, seed=9) < 0.8
    large, small = (questions_needed(pilot, delta, n_resamples=2000, seed=9) for delta in (0.3, 0.1))
    assert large < small
    assert questions_needed(pilot, 0.001, n_resamples=500, seed=9, max_questions=150) is None


def test_deterministic_and_seed_dependent():
    pilot = recall_pilot()
    first = power_curve(pilot, n_resamples=1000, seed=1)
    pd.testing.assert_frame_equal(first, power_curve(pilot, n_resamples=1000, seed=1))
    assert not first.equals(power_curve(pilot, n_resamples=1000, seed=2))
    # the same replicates whatever else is asked: the curve's point at 100 is the single MDE at 100
    assert first["detectable_difference"][2] == detectable_difference(pilot, 100, n_resamples=1000, seed=1)


def test_pilot_differences_and_sentence():
    rows = pd.DataFrame({"retriever": ["a", "a", "b", "b"], "question_id": ["q2", "q1", "q1", "q2"],
                         "recall@5": [1.0, 0.5, 0.0, 0.5]})
    np.testing.assert_array_equal(pilot_differences(rows, "a", "b"), [0.5, 0.5])
    sentence = power_sentence(100, 0.1234, 0.0871, pair=("a", "b"))
    assert sentence == ("With 100 questions and this pair's spread, a true difference in Recall@5 of a − b of 0.123 is "
                        "detected with 80 % power by a paired t-test at α = 0.05 (a smaller true difference is detected "
                        "less often); an observed difference is significant at that level when |Δ| > 0.087 (t · s / √n). "
                        "Other pairs spread differently, so their detectable differences differ.")
    assert "noise" not in sentence
    assert "no true difference in Recall@5 is detected with 90 % power" in power_sentence(100, np.inf, 0.1, power=0.9)
    with pytest.raises(ValueError, match="retriever 'c'"):
        pilot_differences(rows, "a", "c")
    with pytest.raises(ValueError, match="score different questions"):
        pilot_differences(rows.iloc[:3], "a", "b")


@pytest.mark.agreement
@pytest.mark.parametrize("seed", [0, 1])
def test_detectable_difference_of_a_large_pilot_is_the_normal_approximation(seed):
    """For a large pilot (n = 2,000 questions, a lattice like Recall@5 differences) resampled R = 4,000 times, the
    MDE agrees with (z_{1−α/2} + z_power) · σ / √n within 3 %: the t quantile at n − 1 = 1,999 is within 0.05 % of
    z, and the Monte Carlo error of the 80th percentile over 4,000 replicates is about 1 %."""
    pilot = recall_pilot(n=2000, seed=seed)
    for power, alpha in ((0.8, 0.05), (0.9, 0.01)):
        theory = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * pilot.std(ddof=1) / np.sqrt(2000)
        mde = detectable_difference(pilot, 2000, power=power, alpha=alpha, n_resamples=4000, seed=seed)
        assert mde == pytest.approx(theory, rel=0.03)


def test_detectable_differences_are_the_rows_one_at_a_time():
    rows = np.stack([recall_pilot(seed=s) for s in range(4)] + [np.full(100, 0.5)])
    together = detectable_differences(rows, 100, n_resamples=1000, seed=3)
    alone = [detectable_difference(row, 100, n_resamples=1000, seed=3) for row in rows[:4]]
    np.testing.assert_array_equal(together[:4], alone)
    assert np.isnan(together[4])                       # no spread: nothing to resample
    with pytest.raises(ValueError, match="rows must be"):
        detectable_differences(rows[0], 100)


@pytest.mark.agreement
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_significance_threshold_is_where_scipy_t_test_starts_to_reject(alpha):
    rng = np.random.default_rng(7)
    for n in (12, 100, 400):
        spread = recall_pilot(n=n, seed=n) + rng.normal(0, 0.01, size=n)
        spread = spread - spread.mean()                 # mean exactly ~0; shifting keeps the spread
        threshold = significance_threshold(spread, alpha)
        assert threshold == pytest.approx(stats.t.ppf(1 - alpha / 2, n - 1) * spread.std(ddof=1) / np.sqrt(n))
        for sign in (1.0, -1.0):
            above = stats.ttest_1samp(spread + sign * threshold * (1 + 1e-6), 0.0).pvalue
            below = stats.ttest_1samp(spread + sign * threshold * (1 - 1e-6), 0.0).pvalue
            assert above < alpha < below
    rows = np.stack([recall_pilot(seed=1), recall_pilot(seed=2)])
    np.testing.assert_array_equal(significance_threshold(rows, alpha),
                                  [significance_threshold(row, alpha) for row in rows])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="all equal"):
        power_curve(np.zeros(50))
    with pytest.raises(ValueError, match="n_questions must be an integer ≥ 2"):
        paired_power(recall_pilot(), 1, 0.1)
    with pytest.raises(ValueError, match="power must be"):
        power_curve(recall_pilot(), power=80)
    with pytest.raises(ValueError, match="alpha must be"):
        questions_needed(recall_pilot(), 0.1, alpha=0)
