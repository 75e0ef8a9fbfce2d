"""Many comparisons: Holm against a brute-force loop, BH against scipy, the sign-flip test against
scipy's exact permutation test, the comparisons table, and its declared and exploratory families."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.multiplicity import (benjamini_hochberg, comparisons_table, family_table, holm, sign_flip_test,
                                         sign_flips, uses_exact)
from pmrag.evaluate.power import detectable_difference
from pmrag.evaluate.reliability import paired_differences


def brute_holm(p, alpha):
    """Holm's procedure as its textbook loop: reject in ascending order until the first p_(i) > α/(m − i + 1)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    reject, adjusted, running = [False] * m, [0.0] * m, 0.0
    stopped = False
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
        if not stopped and p[i] <= alpha / (m - rank):
            reject[i] = True
        else:
            stopped = True
    return np.array(adjusted), np.array(reject)


def p_value_sets():
    rng = np.random.default_rng(5)
    return [
        np.array([0.01, 0.04, 0.03, 0.005, 0.2]),
        np.array([0.012, 0.012, 0.013, 0.5, 1.0, 0.0]),          # ties and the bounds
        rng.uniform(0, 0.1, size=40),
        np.concatenate([rng.uniform(0, 0.002, size=10), rng.uniform(size=121)]),
    ]


@pytest.mark.parametrize("index", range(4))
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_holm_matches_the_step_down_loop(index, alpha):
    p = p_value_sets()[index]
    adjusted, reject = holm(p, alpha)
    expected_adjusted, expected_reject = brute_holm(list(p), alpha)
    np.testing.assert_allclose(adjusted, expected_adjusted, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(reject, expected_reject)


@pytest.mark.agreement
@pytest.mark.parametrize("index", range(4))
def test_benjamini_hochberg_matches_scipy(index):
    p = p_value_sets()[index]
    adjusted, reject = benjamini_hochberg(p, 0.05)
    np.testing.assert_allclose(adjusted, stats.false_discovery_control(p, method="bh"), rtol=1e-12, atol=0)
    # the step-up rule itself: reject the k smallest, k = max{i : p_(i) ≤ i α / m}
    ordered = np.sort(p)
    passing = np.nonzero(ordered <= np.arange(1, len(p) + 1) * 0.05 / len(p))[0]
    k = passing.max() + 1 if len(passing) else 0
    assert reject.sum() == k
    assert set(np.nonzero(reject)[0]) == set(np.argsort(p, kind="stable")[:k])


def test_holm_is_never_less_strict_than_bh():
    for p in p_value_sets():
        assert np.all(holm(p)[0] >= benjamini_hochberg(p)[0] - 1e-15)


@pytest.mark.agreement
@pytest.mark.parametrize("kind", ["continuous", "lattice", "many_zeros"])
def test_exact_sign_flip_equals_scipy_permutation_test(kind):
    rng = np.random.default_rng(11)
    n = 10
    if kind == "continuous":
        a, b = rng.random(n), rng.random(n) * 0.8
    elif kind == "lattice":                      # recall-like values: many exactly tied null statistics
        a, b = rng.choice([0.0, 0.5, 1.0], n), rng.choice([0.0, 0.5, 1.0], n)
    else:
        a = rng.choice([0.0, 1.0], n)
        b = a.copy()
        b[:3] = 1 - b[:3]
    reference = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                       permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    assert uses_exact(n, 5000)
    assert sign_flip_test(a - b) == pytest.approx(reference.pvalue, rel=1e-12)


def test_vectorised_rows_equal_one_at_a_time():
    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 0.3, size=(7, 60))
    together = sign_flip_test(d, n_resamples=2000, seed=4)
    alone = np.array([sign_flip_test(row, n_resamples=2000, seed=4) for row in d])
    np.testing.assert_array_equal(together, alone)


def test_monte_carlo_p_uses_plus_one_rule_and_is_deterministic():
    rng = np.random.default_rng(8)
    d = rng.normal(0.02, 0.3, size=50)
    signs = sign_flips(50, 999, seed=1)
    count = int((np.abs(signs @ d) / 50 >= abs(d.mean()) - 1e-10 * np.abs(d).max()).sum())
    assert sign_flip_test(d, n_resamples=999, seed=1) == (1 + count) / 1000
    assert sign_flip_test(d, n_resamples=999, seed=1) == sign_flip_test(d, n_resamples=999, seed=1)
    assert sign_flip_test(np.full(50, 1.0), n_resamples=999, seed=1) == 1 / 1000   # never 0
    assert sign_flip_test(np.zeros(50), n_resamples=999, seed=1) == 1.0


@pytest.mark.agreement
def test_monte_carlo_agrees_with_scipy_within_monte_carlo_error():
    rng = np.random.default_rng(21)
    a, b = rng.random(40), rng.random(40) - 0.12
    ours = sign_flip_test(a - b, n_resamples=20000, seed=2)
    reference = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                       permutation_type="samples", n_resamples=20000, rng=np.random.default_rng(3))
    assert abs(ours - reference.pvalue) < 4 * np.sqrt(reference.pvalue * (1 - reference.pvalue) / 20000) + 1e-3


def test_sign_stream_is_not_the_bootstrap_stream():
    signs = sign_flips(100, 5000, seed=12345)
    indices = np.random.default_rng(12345).integers(0, 100, size=(5000, 100))
    agreement = np.mean((signs < 0) == (indices >= 50))
    assert abs(agreement - 0.5) < 0.01


def test_level_under_the_null():
    rng = np.random.default_rng(9)
    d = rng.normal(0, 1, size=(400, 30)) * rng.choice([-1, 1], size=(400, 30))
    p = sign_flip_test(d, n_resamples=999, seed=5)
    assert abs(np.mean(p <= 0.05) - 0.05) < 3 * np.sqrt(0.05 * 0.95 / 400)


def per_question_long(n_methods=6, n=60, seed=0):
    rng = np.random.default_rng(seed)
    frames = []
    base = rng.choice([0.0, 0.5, 1.0], size=n)
    for i in range(n_methods):
        shift = rng.random(n) < 0.1 * i
        values = np.where(shift, 1.0, base) if i else base
        frames.append(pd.DataFrame({"retriever": f"m{i}", "question_id": [f"q{j:02d}" for j in range(n)],
                                    "question_type": "contextual", "recall@5": values}))
    return pd.concat(frames, ignore_index=True)


def test_comparisons_table_combines_the_pieces():
    table_in = per_question_long()
    table = comparisons_table(table_in, "m0", B=2000, seed=7, alpha=0.05)
    assert list(table["method"]) == ["m1", "m2", "m3", "m4", "m5"]
    assert list(table.columns) == ["method", "reference", "metric", "delta", "ci_low", "ci_high", "ci_excludes_zero",
                                   "p_permutation", "p_holm", "reject_holm", "p_bh", "reject_bh"]
    intervals = paired_differences(table_in, [(m, m, "m0") for m in table["method"]], "recall@5",
                                   BootstrapSection(n_resamples=2000, seed=7, confidence=0.95))
    np.testing.assert_array_equal(table["ci_low"], intervals["ci_low"])
    wide = table_in.pivot(index="question_id", columns="retriever", values="recall@5")
    for row in table.itertuples():
        d = (wide[row.method] - wide["m0"]).to_numpy()
        assert row.delta == pytest.approx(d.mean())
        assert row.p_permutation == sign_flip_test(d, n_resamples=2000, seed=7)
    np.testing.assert_array_equal(table["p_holm"], holm(table["p_permutation"])[0])
    np.testing.assert_array_equal(table["reject_bh"], benjamini_hochberg(table["p_permutation"])[1])
    assert table["reject_holm"].sum() <= table["reject_bh"].sum()
    assert table["reject_bh"].any() and not table["reject_holm"].all()


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="p_values must lie in"):
        holm([0.1, np.nan])
    with pytest.raises(ValueError, match="alpha must be"):
        benjamini_hochberg([0.1], alpha=1.5)
    with pytest.raises(ValueError, match="exact enumeration needs"):
        sign_flip_test(np.ones(30), exact=True)
    with pytest.raises(ValueError, match="differences must be finite"):
        sign_flip_test([0.1, np.inf])
    with pytest.raises(ValueError, match="reference 'zz'"):
        comparisons_table(per_question_long(), "zz")
    with pytest.raises(ValueError, match="per_question lacks column"):
        comparisons_table(per_question_long(), "m0", metric="mrr@5")


def test_exact_enumeration_covers_every_sign_vector_once():
    signs = sign_flips(4, 16)
    assert signs.shape == (16, 4)
    assert set(map(tuple, signs)) == set(itertools.product([-1.0, 1.0], repeat=4))
    assert (signs[0] == 1).all()


# ------------------------------------------------------------------------------ declared and exploratory families

def family_input(n=60, seed=0):
    """m0 the reference; m1…m6 other methods; ``copy`` has m2's values (an alias when its ranking is m2's too)."""
    table = per_question_long(n_methods=7, n=n, seed=seed)
    copy = table[table["retriever"] == "m2"].assign(retriever="copy")
    twin = table[table["retriever"] == "m3"].assign(retriever="m3_again")     # m3's values under another name
    return pd.concat([table, copy, twin], ignore_index=True)


def family(per_question, **kwargs):
    arguments = dict(reference="m0", declared=[("m0", "m1"), ("m4", "m5")], B=2000, seed=7, alpha=0.05, power=0.8,
                     aliases=pd.DataFrame({"method": ["m2", "copy"], "representative": ["m2", "m2"]}),
                     selected_in_sample=["m0"])
    return family_table(per_question, **{**arguments, **kwargs})


def test_families_are_declared_pairs_then_one_row_per_alias_group():
    per_question = family_input()
    table = family(per_question)
    assert list(table.columns) == ["family", "method", "reference", "aliases", "metric", "delta", "ci_low", "ci_high",
                                   "ci_excludes_zero", "p_permutation", "p_holm", "reject_holm", "p_bh", "reject_bh",
                                   "selected_in_sample", "same_differences_as", "detectable_difference",
                                   "significance_threshold", "alpha", "power"]
    assert list(zip(table["family"], table["method"], table["reference"])) == [
        ("declared", "m0", "m1"), ("declared", "m4", "m5"),
        # m1 − m0 is declared (as m0 − m1); copy is m2's alias; the rest against the reference
        ("exploratory", "m2", "m0"), ("exploratory", "m3", "m0"), ("exploratory", "m4", "m0"),
        ("exploratory", "m5", "m0"), ("exploratory", "m6", "m0"), ("exploratory", "m3_again", "m0")]
    assert list(table["aliases"]) == ["", "", "copy", "", "", "", "", ""]
    wide = per_question.pivot(index="question_id", columns="retriever", values="recall@5")
    for row in table.itertuples():
        d = (wide[row.method] - wide[row.reference]).to_numpy()
        assert row.delta == pytest.approx(d.mean(), abs=1e-12)                 # Δ = method − reference, as declared
        assert row.p_permutation == sign_flip_test(d, n_resamples=2000, seed=7)
    assert list(table["selected_in_sample"]) == [True, False, True, True, True, True, True, True]
    assert table.loc[table["method"] == "m3_again", "same_differences_as"].item() == "m3 − m0"
    assert (table.loc[table["method"] != "m3_again", "same_differences_as"] == "").all()
    assert (table["alpha"] == 0.05).all() and (table["power"] == 0.8).all()
    # the same differences with the other sign are the same evidence
    flipped = family(per_question, declared=[("m0", "m3")])
    assert flipped.loc[flipped["method"] == "m3_again", "same_differences_as"].item() == "m0 − m3"
    assert "m3" not in set(flipped.loc[flipped["family"] == "exploratory", "method"])


def test_holm_and_bh_are_applied_within_each_family():
    table = family(family_input(n=80, seed=3))
    for name in ("declared", "exploratory"):
        rows = table[table["family"] == name]
        expected_adjusted, expected_reject = brute_holm(list(rows["p_permutation"]), 0.05)
        np.testing.assert_allclose(rows["p_holm"], expected_adjusted, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(rows["reject_holm"], expected_reject)
        np.testing.assert_allclose(rows["p_bh"], stats.false_discovery_control(rows["p_permutation"], method="bh"),
                                   rtol=1e-12, atol=0)
    everything = holm(table["p_permutation"])[0]       # one family of all rows would adjust more
    assert (table["p_holm"].to_numpy() <= everything + 1e-15).all()


def test_power_columns_are_each_rows_own():
    per_question = family_input()
    table = family(per_question)
    wide = per_question.pivot(index="question_id", columns="retriever", values="recall@5")
    for row in table.itertuples():
        d = (wide[row.method] - wide[row.reference]).to_numpy()
        oriented = d if d.mean() >= 0 else -d
        assert row.detectable_difference == detectable_difference(oriented, len(d), 0.8, 0.05, 2000, 7)
        assert row.significance_threshold == pytest.approx(
            stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)), rel=1e-12)
    assert table["detectable_difference"].nunique() > 3          # pair-specific, not one number


def test_no_declared_family_and_no_aliases_is_the_comparisons_table():
    per_question = per_question_long()
    table = family_table(per_question, "m0", B=2000, seed=7)
    plain = comparisons_table(per_question, "m0", B=2000, seed=7)
    assert (table["family"] == "exploratory").all()
    pd.testing.assert_frame_equal(table[plain.columns], plain)


def test_the_references_aliases_are_not_compared_and_bad_pairs_are_named():
    per_question = family_input()
    aliases = pd.DataFrame({"method": ["m0", "copy", "m2"], "representative": ["m0", "m0", "m0"]})
    table = family(per_question, aliases=aliases, declared=[])
    assert not {"copy", "m2"} & set(table["method"])
    with pytest.raises(ValueError, match="declared comparison .*unknown: 'zz'"):
        family(per_question, declared=[("m0", "zz")])
    with pytest.raises(ValueError, match="reference 'zz'"):
        family(per_question, reference="zz")
    alone = per_question[per_question["retriever"].isin(["m0", "copy"])]
    with pytest.raises(ValueError, match="nothing to compare"):
        family(alone, declared=[], aliases=pd.DataFrame({"method": ["m0", "copy"], "representative": ["m0", "m0"]}))
