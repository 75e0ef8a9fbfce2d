"""Percentile bootstrap over questions (paper §4.4): scipy agreement, determinism, pairing, vectorisation."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import (
    ci, ci_table, percentiles, difference_table, paired_difference, resample_counts, resample_indices,
    resample_means,
)

PAPER = BootstrapSection()


def datasets():
    rng = np.random.default_rng(2024)
    return {
        "binary_recall": rng.binomial(1, 0.62, size=100).astype(float),
        "recall_fractions": rng.choice([0.0, 1 / 3, 0.5, 2 / 3, 1.0], size=100, p=[0.3, 0.1, 0.2, 0.1, 0.3]),
        "continuous_ndcg": np.clip(rng.beta(0.8, 0.6, size=100), 0, 1),
        "mrr_like": rng.choice([0.0, 0.2, 0.25, 1 / 3, 0.5, 1.0], size=100),
    }


def test_paper_defaults():
    assert (PAPER.n_resamples, PAPER.seed, PAPER.confidence) == (5000, 12345, 0.95)
    assert percentiles(PAPER) == pytest.approx((2.5, 97.5))


@pytest.mark.agreement
@pytest.mark.parametrize("name", list(datasets()))
def test_agrees_with_scipy_percentile_bootstrap(name):
    x = datasets()[name]
    mean, low, high = ci(x, PAPER)
    reference = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=5000, confidence_level=0.95,
                                rng=np.random.default_rng(99)).confidence_interval
    assert mean == pytest.approx(x.mean())
    assert low == pytest.approx(reference.low, abs=0.01)
    assert high == pytest.approx(reference.high, abs=0.01)
    assert low < mean < high


def test_interval_is_the_linear_percentile_of_resample_means_by_fancy_indexing():
    x = datasets()["continuous_ndcg"]
    means = x[resample_indices(len(x), PAPER)].mean(axis=1)
    np.testing.assert_allclose(resample_means(x, PAPER), means, rtol=0, atol=1e-12)
    _, low, high = ci(x, PAPER)
    assert low == pytest.approx(np.percentile(means, 2.5), abs=1e-12)
    assert high == pytest.approx(np.percentile(means, 97.5), abs=1e-12)


def test_same_seed_same_intervals_other_seed_other_intervals():
    x = datasets()["binary_recall"]
    assert ci(x, BootstrapSection(seed=7)) == ci(x, BootstrapSection(seed=7))
    np.testing.assert_array_equal(resample_indices(100, PAPER), resample_indices(100, BootstrapSection()))
    assert ci(x, BootstrapSection(seed=7))[1:] != ci(x, BootstrapSection(seed=8))[1:]


def test_resamples_come_from_one_default_rng_call():
    expected = np.random.default_rng(12345).integers(0, 100, size=(5000, 100))
    np.testing.assert_array_equal(resample_indices(100), expected)
    counts = resample_counts(100)
    assert counts.shape == (5000, 100) and not counts.flags.writeable
    assert (counts.sum(axis=1) == 100).all()
    np.testing.assert_array_equal(counts[3], np.bincount(expected[3], minlength=100))


def test_paired_difference_with_a_constant_gap_has_a_degenerate_interval():
    rng = np.random.default_rng(5)
    b = rng.integers(0, 8, size=100) / 8
    a = b + 1 / 64
    assert paired_difference(a, b, PAPER) == (1 / 64, 1 / 64, 1 / 64)
    assert ci(a, PAPER)[1] < ci(b, PAPER)[2], "unpaired intervals overlap: pairing is what resolves the gap"


def test_paired_difference_uses_the_same_resamples_for_both_methods():
    data = datasets()
    a, b = data["continuous_ndcg"], data["binary_recall"]
    delta, low, high = paired_difference(a, b, PAPER)
    per_method = resample_means(np.vstack([a, b]), PAPER)
    differences = per_method[:, 0] - per_method[:, 1]
    assert delta == pytest.approx(a.mean() - b.mean())
    assert low == pytest.approx(np.percentile(differences, 2.5), abs=1e-12)
    assert high == pytest.approx(np.percentile(differences, 97.5), abs=1e-12)


def test_vectorised_over_methods_equals_a_loop():
    values = np.vstack(list(datasets().values()))
    mean, low, high = ci(values, PAPER)
    loop = np.array([ci(row, PAPER) for row in values])
    np.testing.assert_allclose(np.column_stack([mean, low, high]), loop, rtol=0, atol=1e-12)
    delta, dlow, dhigh = paired_difference(values, values[::-1], PAPER)
    loop = np.array([paired_difference(a, b, PAPER) for a, b in zip(values, values[::-1])])
    np.testing.assert_allclose(np.column_stack([delta, dlow, dhigh]), loop, rtol=0, atol=1e-12)


def long_table():
    data = datasets()
    questions = [f"q{i:03d}" for i in range(100)]
    frames = []
    for method, (r, n) in {"bm25": ("binary_recall", "continuous_ndcg"), "dense": ("recall_fractions", "mrr_like")}.items():
        frames.append(pd.DataFrame({"method": method, "question_id": questions, "recall@5": data[r], "ndcg@5": data[n]}))
    return pd.concat(frames, ignore_index=True)


def test_ci_table_long_and_wide_forms_agree():
    long = long_table()
    table = ci_table(long, params=PAPER)
    assert list(table.columns) == ["method", "metric", "mean", "ci_low", "ci_high"]
    assert list(zip(table["method"], table["metric"])) == [
        ("bm25", "recall@5"), ("bm25", "ndcg@5"), ("dense", "recall@5"), ("dense", "ndcg@5")]
    data = datasets()
    assert tuple(table.iloc[1][["mean", "ci_low", "ci_high"]]) == pytest.approx(ci(data["continuous_ndcg"], PAPER))

    shuffled = long.sample(frac=1.0, random_state=1).set_index(["method", "question_id"])
    pd.testing.assert_frame_equal(ci_table(shuffled, params=PAPER), table)
    wide_pairs = long.pivot(index="question_id", columns="method", values=["recall@5", "ndcg@5"]).swaplevel(axis=1)
    pd.testing.assert_frame_equal(ci_table(wide_pairs[["bm25", "dense"]], params=PAPER), table)
    wide_one = long.pivot(index="question_id", columns="method", values="recall@5")
    pd.testing.assert_frame_equal(
        ci_table(wide_one, "recall@5", PAPER), table[table["metric"] == "recall@5"].reset_index(drop=True)
    )


def test_difference_table():
    table = difference_table(long_table(), [("dense", "bm25")], params=PAPER)
    assert list(table.columns) == ["method_a", "method_b", "metric", "delta", "ci_low", "ci_high"]
    data = datasets()
    expected = paired_difference(data["recall_fractions"], data["binary_recall"], PAPER)
    assert tuple(table.iloc[0][["delta", "ci_low", "ci_high"]]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="unknown"):
        difference_table(long_table(), [("dense", "splade")])


def test_unpaired_tables_are_rejected():
    long = long_table()
    with pytest.raises(ValueError, match="every method on every question"):
        ci_table(long.iloc[:-1])
    with pytest.raises(ValueError, match="twice"):
        ci_table(pd.concat([long, long.iloc[:1]]))
    with pytest.raises(ValueError, match="lacks metric"):
        ci_table(long, ["mrr@5"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 5000.0}, "n_resamples"),
        ({"n_resamples": True}, "n_resamples"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"confidence": float("nan")}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0}, "confidence"),
        ({"confidence": "95%"}, "confidence"),
    ],
)
def test_invalid_params(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BootstrapSection(**kwargs)


def test_params_from_a_mapping_and_invalid_values():
    assert BootstrapSection.model_validate({"n_resamples": 100}) == BootstrapSection(n_resamples=100)
    with pytest.raises(ValueError, match="B"):
        BootstrapSection.model_validate({"B": 100})
    with pytest.raises(ValueError, match="finite"):
        ci([0.5, np.nan])
    with pytest.raises(ValueError, match="shape"):
        ci(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="same shape"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(TypeError, match="BootstrapSection"):
        ci([1.0], {"seed": 1})
