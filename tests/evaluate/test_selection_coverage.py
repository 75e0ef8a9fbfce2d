"""The coverage simulation of the selected hybrid's intervals: the vectorised function against an explicit loop
over datasets and resamples on a small synthetic population, known answers (no selection, pure noise),
determinism and named errors.

The brute force follows the documented random stream (``default_rng((seed, COVERAGE_STREAM))``: the D datasets
first, then each dataset's B inner resamples) and chooses by ``argmax`` of the Recall@5 means: the values are
continuous, so no two configurations tie and the paper's tie-breaks never act.
"""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.selection import METRICS
from pmrag.evaluate.selection_coverage import COVERAGE_STREAM, INTERVALS, selection_coverage

CONFIGURATIONS = [("bm25_a", "dense_a", 0.3), ("bm25_a", "dense_a", 0.6), ("bm25_b", "dense_b", 0.3),
                  ("bm25_b", "dense_b", 0.6)]


def population(n_questions, seed, spread=0.15):
    """Continuous per-question metrics of four configurations whose means differ by less than their noise."""
    rng = np.random.default_rng(seed)
    questions = [f"q{i:02d}" for i in range(n_questions)]
    frames = [pd.DataFrame({"fusion": "minmax", "bm25": first, "vector": second, "beta": beta,
                            "question_id": questions,
                            "recall@5": np.clip(rng.normal(0.5 + 0.02 * c, spread, n_questions), 0, 1),
                            "mrr@5": rng.random(n_questions), "ndcg@5": rng.random(n_questions)})
              for c, (first, second, beta) in enumerate(CONFIGURATIONS)]
    return pd.concat(frames, ignore_index=True)


def brute_force(sweep, n_datasets, n_resamples, seed, confidence=0.95):
    """Per interval kind and metric: (covered, width, error) per dataset, by an explicit loop."""
    questions = list(dict.fromkeys(sweep["question_id"]))
    big_n = len(questions)
    values = {key: rows.set_index("question_id").loc[questions, list(METRICS)].to_numpy().T      # (3, N)
              for key, rows in sweep.groupby(["bm25", "vector", "beta"], sort=False)}
    keys = list(values)

    def choice(positions):
        means = [values[key][0, positions].mean() for key in keys]
        assert len(set(means)) == len(means)
        return keys[int(np.argmax(means))]

    tails = [50 * (1 - confidence), 50 * (1 + confidence)]
    fixed = choice(np.arange(big_n))
    rng = np.random.default_rng((seed, COVERAGE_STREAM))
    datasets = rng.integers(0, big_n, size=(n_datasets, big_n))
    outcomes = {kind: [] for kind in INTERVALS}
    for pick in datasets:
        inner = rng.integers(0, big_n, size=(n_resamples, big_n))
        chosen = choice(pick)
        truth, apparent = values[chosen].mean(axis=1), values[chosen][:, pick].mean(axis=1)
        gaps, oob, mixed, conditional, reference = [], [], [], [], []
        oob_sum, oob_count = np.zeros((3, big_n)), np.zeros(big_n)
        for draw in inner:
            drawn = pick[draw]
            winner = choice(drawn)
            a = values[winner][:, drawn].mean(axis=1)
            gaps.append(a - values[winner][:, pick].mean(axis=1))
            out = np.setdiff1d(np.arange(big_n), draw)
            if len(out):
                e = values[winner][:, pick[out]].mean(axis=1)
                oob.append(e)
                mixed.append(0.368 * a + 0.632 * e)
                oob_sum[:, out] += values[winner][:, pick[out]]
                oob_count[out] += 1
            conditional.append(values[chosen][:, drawn].mean(axis=1))
            reference.append(values[fixed][:, drawn].mean(axis=1))
        optimism = np.mean(gaps, axis=0)
        seen = oob_count > 0
        loo = (oob_sum[:, seen] / oob_count[seen]).mean(axis=1)
        low, high = np.percentile(conditional, tails, axis=0)
        intervals = {
            "conditional": (low, high, apparent, truth),
            "bias_corrected": (low - optimism, high - optimism, apparent - optimism, truth),
            "oob": (*np.percentile(oob, tails, axis=0), loo, truth),
            ".632": (*np.percentile(mixed, tails, axis=0), 0.368 * apparent + 0.632 * loo, truth),
            "fixed configuration": (*np.percentile(reference, tails, axis=0), values[fixed][:, pick].mean(axis=1),
                                    values[fixed].mean(axis=1)),
        }
        for kind, (lo, hi, estimate, target) in intervals.items():
            outcomes[kind].append(((lo <= target) & (target <= hi), hi - lo, estimate - target))
    return outcomes


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_coverage_equals_an_explicit_loop_over_datasets_and_resamples(confidence):
    sweep = population(30, 1)
    result = selection_coverage(sweep, n_datasets=40, n_resamples=60, seed=11, confidence=confidence)
    expected = brute_force(sweep, 40, 60, 11, confidence)
    table = result.table.set_index(["interval", "metric"])
    assert list(result.table.columns) == ["metric", "interval", "coverage", "mc_se", "mean_width", "mean_error",
                                          "datasets"]
    for kind in INTERVALS:
        covered, width, error = (np.array(column) for column in zip(*expected[kind]))      # (D, 3) each
        for m, metric in enumerate(METRICS):
            row = table.loc[(kind, metric)]
            share = covered[:, m].mean()
            assert row["coverage"] == share                                  # a count over 40 datasets: exact
            assert row["mc_se"] == pytest.approx(np.sqrt(share * (1 - share) / 40), abs=1e-12)
            assert row["mean_width"] == pytest.approx(width[:, m].mean(), abs=1e-12)
            assert row["mean_error"] == pytest.approx(error[:, m].mean(), abs=1e-12)
            assert row["datasets"] == 40
    assert 0 < table.loc[("conditional", "recall@5"), "coverage"] < 1     # the check is not vacuous


def test_without_a_choice_every_selection_interval_is_the_fixed_one():
    sweep = population(30, 2)
    best = sweep["bm25"].eq("bm25_b") & sweep["beta"].eq(0.6)
    sweep.loc[best, "recall@5"] += 2.0                                 # best on every question: always chosen
    result = selection_coverage(sweep, n_datasets=30, n_resamples=50, seed=3)
    assert set(zip(result.per_dataset["bm25"], result.per_dataset["beta"])) == {("bm25_b", 0.6)}
    table = result.table.set_index(["interval", "metric"])
    for metric in METRICS:
        fixed, conditional = table.loc[("fixed configuration", metric)], table.loc[("conditional", metric)]
        assert conditional[["coverage", "mean_width", "mean_error"]].tolist() == pytest.approx(
            fixed[["coverage", "mean_width", "mean_error"]].tolist(), abs=1e-12)
    truth = sweep[best].set_index("question_id")["recall@5"].mean()
    np.testing.assert_allclose(result.per_dataset["true recall@5"], truth, rtol=0, atol=1e-12)


def test_on_noise_the_in_sample_best_is_biased_and_the_correction_removes_most_of_it():
    rng = np.random.default_rng(5)
    n = 40
    noise = pd.concat([pd.DataFrame({"fusion": "minmax", "bm25": f"b{p}", "vector": f"v{p}", "beta": beta,
                                     "question_id": [f"q{i:02d}" for i in range(n)],
                                     "recall@5": rng.binomial(1, 0.5, n).astype(float), "mrr@5": rng.random(n),
                                     "ndcg@5": rng.random(n)})
                       for p in range(4) for beta in (0.3, 0.5, 0.7)], ignore_index=True)
    table = selection_coverage(noise, n_datasets=120, n_resamples=100, seed=0).table.set_index(["interval", "metric"])
    conditional, corrected = table.loc[("conditional", "recall@5")], table.loc[("bias_corrected", "recall@5")]
    assert conditional["mean_error"] > 0.03                            # the winner of 12 coins flatters itself
    assert abs(corrected["mean_error"]) < conditional["mean_error"] / 2
    assert corrected["coverage"] > conditional["coverage"]
    assert table.loc[("oob", "recall@5"), "mean_width"] > conditional["mean_width"]


def test_coverage_is_deterministic_and_depends_on_the_seed():
    sweep = population(30, 4)
    first = selection_coverage(sweep, n_datasets=20, n_resamples=30, seed=8)
    again = selection_coverage(sweep, n_datasets=20, n_resamples=30, seed=8)
    pd.testing.assert_frame_equal(first.table, again.table)
    pd.testing.assert_frame_equal(first.per_dataset, again.per_dataset)
    other = selection_coverage(sweep, n_datasets=20, n_resamples=30, seed=9)
    assert not first.table["mean_width"].equals(other.table["mean_width"])
    assert sweep.equals(population(30, 4))                             # the input is not mutated
    assert (first.n_datasets, first.n_resamples, first.n_questions, first.population) == (20, 30, 30, 30)
    assert first.row("bias_corrected")["metric"] == "recall@5"


def test_smaller_studies_can_be_drawn_from_the_population():
    result = selection_coverage(population(30, 6), n_datasets=15, n_resamples=20, seed=1, n_questions=10)
    assert result.n_questions == 10 and result.population == 30
    assert (result.table["datasets"] == 15).all()


@pytest.mark.parametrize("arguments, message", [
    (dict(n_datasets=0), "n_datasets"), (dict(n_resamples=1.5), "n_resamples"), (dict(seed=-1), "seed"),
    (dict(confidence=95), "confidence"), (dict(n_questions=0), "n_questions"), (dict(fusion="rrf"), "fusion 'rrf'"),
])
def test_invalid_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        selection_coverage(population(10, 0), **arguments)
