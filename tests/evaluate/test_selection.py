"""Selection-aware evaluation: the vectorised rule against select_best/select_overall, the held-out
folds and the selection bootstrap against brute-force loops, the winner's curse on noise, determinism.

Metric values are multiples of 1/4 (or 1/8) on few questions, so every macro mean is exact and ties are true
ties under any summation order: the vectorised rule and the pandas rule must then agree row for row.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import RepeatedStratifiedKFold

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci, resample_indices
from pmrag.evaluate.selection import (
    METRICS, POOLED_STRATUM, Configurations, held_out_selection, repeated_stratified_folds, select_columns,
    selection_bootstrap, stratify,
)
from pmrag.evaluate.sweep import best_per_pairing, macro_by_configuration, select_best, select_overall

PAIRINGS = [("bm25_a", "dense_a"), ("bm25_b", "dense_b"), ("bm25_a", "dense_b")]
BETAS = (0.0, 0.1 + 0.2, 0.5, 0.7, 1.0)          # 0.30000000000000004 and 0.7 tie on |β − 0.5| after rounding


def dyadic_sweep(n_questions, seed, pairings=PAIRINGS, betas=BETAS, levels=(0.0, 0.5, 1.0), fusions=("minmax",)):
    """A sweep_pairings-shaped table with few distinct values (many ties), every mean exact."""
    rng = np.random.default_rng(seed)
    questions = [f"q{i:02d}" for i in range(n_questions)]
    frames = []
    for fusion in fusions:
        for first, second in pairings:
            base = rng.choice(levels, size=(3, n_questions))
            for beta in betas:
                # a third of the configurations copy the pairing's base values: exact ties across β
                values = base if rng.random() < 1 / 3 else rng.choice(levels, size=(3, n_questions))
                frames.append(pd.DataFrame({"fusion": fusion, "bm25": first, "vector": second, "beta": beta,
                                            "question_id": questions, "recall@5": values[0],
                                            "mrr@5": values[1] / 4, "ndcg@5": values[2] / 2}))
    return pd.concat(frames, ignore_index=True)


def paper_choice(rows, pairings=PAIRINGS):
    """The paper's procedure with the pandas functions of pmrag.evaluate.sweep."""
    best = best_per_pairing(macro_by_configuration(rows))
    chosen = select_overall(best, pairings)
    return chosen["bm25"], chosen["vector"], float(chosen["beta"])


def key(frame_row):
    return frame_row["bm25"], frame_row["vector"], float(frame_row["beta"])


@pytest.mark.parametrize("seed", range(12))
def test_vectorised_rule_equals_select_best_and_select_overall_with_ties(seed):
    sweep = dyadic_sweep(8, seed)
    configs = Configurations.of(sweep)
    chosen = configs.chosen(configs.select(np.ones((1, 8))))
    assert key(chosen.iloc[0]) == paper_choice(sweep)
    for pairing in PAIRINGS:                          # the β of a fixed pairing: select_best itself
        fixed = Configurations.of(sweep, pairings=pairing)
        rows = sweep[(sweep["bm25"] == pairing[0]) & (sweep["vector"] == pairing[1])]
        expected = select_best(macro_by_configuration(rows))
        assert key(fixed.chosen(fixed.select(np.ones((1, 8)))).iloc[0]) == key(expected)


@pytest.mark.parametrize("betas, expected", [
    ((1.0, 0.7, 0.1 + 0.2, 0.0), 0.1 + 0.2),       # closest to 0.5 after rounding, then the smaller β
    ((1.0, 0.0), 0.0),
    ((0.0, 0.5, 1.0), 0.5),
])
def test_full_ties_across_beta_go_to_select_bests_choice(betas, expected):
    sweep = dyadic_sweep(8, 1, pairings=PAIRINGS[:1], betas=betas)
    for metric in METRICS:                            # every β scores alike on every question
        sweep[metric] = np.tile(sweep[metric].to_numpy()[:8], len(betas))
    configs = Configurations.of(sweep)
    chosen = configs.chosen(configs.select(np.ones((1, 8)))).iloc[0]
    assert chosen["beta"] == expected == select_best(macro_by_configuration(sweep))["beta"]


def test_vectorised_rule_follows_each_tie_break():
    # columns in tie-break order; each row of means is decided by a later key
    recall = np.array([[0.5, 0.5, 0.4], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5 + 1e-15, 0.5]])
    ndcg = np.array([[0.1, 0.2, 0.9], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2]])
    mrr = np.array([[0.0, 0.0, 0.0], [0.1, 0.3, 0.3], [0.3, 0.3, 0.3], [0.3, 0.3, 0.3]])
    np.testing.assert_array_equal(select_columns(recall, ndcg, mrr), [1, 1, 0, 0])


def test_pairing_order_breaks_a_full_tie_and_is_respected():
    sweep = dyadic_sweep(8, 3, pairings=PAIRINGS[:2], betas=(0.5,))
    second = sweep["bm25"] == "bm25_b"
    for metric in METRICS:                            # the two pairings score alike on every question
        sweep.loc[second, metric] = sweep.loc[~second, metric].to_numpy()
    for order in (PAIRINGS[:2], PAIRINGS[:2][::-1]):
        configs = Configurations.of(sweep, pairings=order)
        assert key(configs.chosen(configs.select(np.ones((1, 8)))).iloc[0]) == paper_choice(sweep, order)
        assert configs.chosen(configs.select(np.ones((1, 8)))).iloc[0]["bm25"] == order[0][0]


def test_selection_uses_the_requested_fusion_only():
    sweep = dyadic_sweep(8, 5, fusions=("minmax", "rrf"))
    configs = Configurations.of(sweep, fusion="rrf")
    assert set(configs.table["fusion"]) == {"rrf"}
    rows = sweep[sweep["fusion"] == "rrf"].assign(fusion="minmax")
    assert key(configs.chosen(configs.select(np.ones((1, 8)))).iloc[0]) == paper_choice(rows)
    assert key(Configurations.of(sweep).chosen(Configurations.of(sweep).select(np.ones((1, 8)))).iloc[0]) == \
        paper_choice(sweep[sweep["fusion"] == "minmax"])


@pytest.mark.agreement
@pytest.mark.parametrize("seed", [0, 5, 2**32 - 1])
def test_repeated_stratified_folds_are_scikit_learns(seed):
    rng = np.random.default_rng(seed % 1000)
    for n, n_splits, n_repeats, n_strata in [(20, 4, 3, 2), (100, 5, 2, 3), (37, 3, 4, 5), (9, 2, 1, 1), (61, 10, 2, 4)]:
        strata = rng.choice([f"t{i}" for i in range(n_strata)], size=n)
        while np.bincount(np.unique(strata, return_inverse=True)[1]).max() < n_splits:
            strata = rng.choice([f"t{i}" for i in range(n_strata)], size=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)      # a stratum smaller than n_splits: both warn
            ours = repeated_stratified_folds(strata, n_splits, n_repeats, seed)
            theirs = [test for _, test in RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=n_repeats,
                                                                  random_state=seed).split(np.zeros((n, 1)), strata)]
        assert ours.shape == (n_repeats * n_splits, n)
        assert [np.flatnonzero(mask).tolist() for mask in ours] == [test.tolist() for test in theirs], (n, n_splits)
    with pytest.warns(UserWarning, match="only 1 members"):
        repeated_stratified_folds(np.array(["a"] * 5 + ["b"]), 3, 1, 0)
    with pytest.raises(ValueError, match="cannot be greater"):
        repeated_stratified_folds(np.array(["a", "a", "b"]), 3, 1, 0)


@pytest.mark.agreement
def test_held_out_folds_match_a_direct_repeated_stratified_k_fold_loop():
    sweep = dyadic_sweep(20, 11, levels=(0.0, 0.25, 0.5, 0.75, 1.0))
    types = pd.Series(["fact"] * 8 + ["aggregate"] * 12, index=[f"q{i:02d}" for i in range(20)]).iloc[::-1]
    result = held_out_selection(sweep, types, n_splits=4, n_repeats=3, seed=5)

    questions = np.array([f"q{i:02d}" for i in range(20)])
    labels = types.reindex(questions).to_numpy()
    splitter = RepeatedStratifiedKFold(n_splits=4, n_repeats=3, random_state=5)
    oof = np.zeros((3, 20))
    for f, (train, test) in enumerate(splitter.split(np.zeros((20, 1)), labels)):
        chosen = paper_choice(sweep[sweep["question_id"].isin(questions[train])])
        fold = result.per_fold.iloc[f]
        assert key(fold) == chosen
        assert (fold["repeat"], fold["fold"], fold["n_test"]) == (f // 4, f % 4, len(test))
        rows = sweep[(sweep["bm25"] == chosen[0]) & (sweep["vector"] == chosen[1]) & (sweep["beta"] == chosen[2])]
        rows = rows.set_index("question_id").loc[questions[test]]
        for m, metric in enumerate(METRICS):
            assert fold[metric] == pytest.approx(rows[metric].mean(), abs=1e-12)
            oof[m, test] += rows[metric].to_numpy() / 3
    for m, metric in enumerate(METRICS):
        np.testing.assert_allclose(result.per_question[metric], oof[m], rtol=0, atol=1e-12)
        assert result.summary.loc[m, "out_of_fold"] == pytest.approx(oof[m].mean(), abs=1e-12)
    in_sample = paper_choice(sweep)
    assert key(result.in_sample) == in_sample
    assert result.summary["gap"].to_numpy() == pytest.approx(
        (result.summary["in_sample"] - result.summary["out_of_fold"]).to_numpy())
    assert result.chosen["times"].sum() == 12
    assert list(result.per_question["question_type"]) == list(labels)


def dominant_sweep(n_questions, seed):
    sweep = dyadic_sweep(n_questions, seed, levels=(0.0, 0.25, 0.5))
    winner = (sweep["bm25"] == "bm25_b") & (sweep["vector"] == "dense_b") & (sweep["beta"] == 0.7)
    sweep.loc[winner, "recall@5"] = sweep.loc[winner, "recall@5"] + 0.5      # best on every single question
    return sweep, sweep[winner].set_index("question_id")


def test_a_configuration_best_on_every_question_has_no_winners_curse():
    sweep, winner = dominant_sweep(30, 2)
    types = pd.Series(["a", "b", "c"] * 10, index=winner.index)
    held_out = held_out_selection(sweep, types, n_splits=5, n_repeats=4, seed=1)
    assert len(held_out.chosen) == 1 and key(held_out.chosen.iloc[0]) == ("bm25_b", "dense_b", 0.7)
    for metric in METRICS:
        np.testing.assert_allclose(held_out.per_question[metric], winner[metric], rtol=0, atol=1e-12)
    np.testing.assert_allclose(held_out.summary["gap"], 0.0, atol=1e-12)

    boot = selection_bootstrap(sweep, n_resamples=200, seed=3)
    assert len(boot.chosen) == 1 and boot.chosen.iloc[0]["share"] == 1.0
    np.testing.assert_allclose(boot.summary["gap"], 0.0, atol=1e-12)
    np.testing.assert_allclose(boot.per_question[list(METRICS)].to_numpy(), winner[list(METRICS)].to_numpy(),
                               atol=1e-12)


def test_pure_noise_configurations_show_a_positive_winners_curse():
    gaps, out_of_fold, boot_gaps = [], [], []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n = 60
        frames = [pd.DataFrame({"bm25": f"b{p}", "vector": f"v{p}", "beta": beta,
                                "question_id": [f"q{i:02d}" for i in range(n)],
                                "recall@5": rng.binomial(1, 0.5, n).astype(float), "mrr@5": rng.random(n),
                                "ndcg@5": rng.random(n)})
                  for p in range(5) for beta in np.linspace(0, 1, 8)]
        sweep = pd.concat(frames, ignore_index=True)
        types = pd.Series(["x", "y", "z"] * 20, index=[f"q{i:02d}" for i in range(n)])
        result = held_out_selection(sweep, types, n_splits=5, n_repeats=3, seed=seed)
        gaps.append(result.summary.loc[0, "gap"])
        out_of_fold.append(result.summary.loc[0, "out_of_fold"])
        boot_gaps.append(selection_bootstrap(sweep, n_resamples=300, seed=seed).summary.loc[0, "gap"])
    assert np.mean(gaps) > 0.05                       # the best of 40 fair coins looks better than a coin
    assert abs(np.mean(out_of_fold) - 0.5) < 0.05     # held out, it is a coin
    assert np.mean(boot_gaps) > 0.05


@pytest.mark.parametrize("kind", ["oob", ".632"])
def test_selection_bootstrap_equals_a_brute_force_loop(kind):
    n, b = 12, 25
    sweep = dyadic_sweep(n, 4, levels=(0.0, 0.25, 0.5, 0.75, 1.0))
    result = selection_bootstrap(sweep, n_resamples=b, seed=9, kind=kind)
    questions = np.array([f"q{i:02d}" for i in range(n)])
    by_question = {q: rows for q, rows in sweep.groupby("question_id", sort=False)}
    indexed = sweep.set_index(["bm25", "vector", "beta", "question_id"])
    per_resample, oob_sum, oob_count = [], np.zeros((3, n)), np.zeros(n)
    for draw in resample_indices(n, BootstrapSection(n_resamples=b, seed=9)):
        resample = pd.concat([by_question[q] for q in questions[draw]], ignore_index=True)
        chosen = paper_choice(resample)
        out = np.setdiff1d(np.arange(n), draw)
        scored = np.array([[indexed.loc[(*chosen, q), metric] for q in questions] for metric in METRICS])
        apparent = scored[:, draw].mean(axis=1)
        oob = scored[:, out].mean(axis=1)
        per_resample.append((chosen, len(out), apparent, oob if kind == "oob" else 0.368 * apparent + 0.632 * oob))
        oob_sum[:, out] += scored[:, out]
        oob_count[out] += 1
    for row, (chosen, n_out, apparent, value) in zip(result.per_resample.itertuples(index=False), per_resample):
        row = row._asdict()
        assert (row["bm25"], row["vector"], float(row["beta"])) == chosen and row["n_out_of_bag"] == n_out
    values = np.array([v for *_, v in per_resample]).T
    np.testing.assert_allclose(result.per_resample[list(METRICS)].to_numpy().T, values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.per_resample[[f"apparent {m}" for m in METRICS]].to_numpy().T,
                               np.array([a for _, _, a, _ in per_resample]).T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.summary["ci_low"], np.percentile(values, 2.5, axis=1), atol=1e-12)
    np.testing.assert_allclose(result.summary["ci_high"], np.percentile(values, 97.5, axis=1), atol=1e-12)
    loo = np.nanmean(oob_sum / oob_count, axis=1)
    in_sample = result.summary["in_sample"].to_numpy()
    expected = loo if kind == "oob" else 0.368 * in_sample + 0.632 * loo
    np.testing.assert_allclose(result.summary["estimate"], expected, atol=1e-12)
    assert result.dropped == 0 and result.per_question["out_of_bag"].to_numpy() == pytest.approx(oob_count)


def test_conditional_interval_is_the_papers_bootstrap_of_the_in_sample_best():
    sweep = dyadic_sweep(16, 8)
    result = selection_bootstrap(sweep, n_resamples=400, seed=21)
    best = key(result.in_sample)
    assert best == paper_choice(sweep)
    rows = sweep[(sweep["bm25"] == best[0]) & (sweep["vector"] == best[1]) & (sweep["beta"] == best[2])]
    mean, low, high = ci(rows[list(METRICS)].to_numpy().T, BootstrapSection(n_resamples=400, seed=21))
    np.testing.assert_allclose(result.summary["in_sample"], mean, atol=1e-12)
    np.testing.assert_allclose(result.summary["conditional_low"], low, atol=1e-12)
    np.testing.assert_allclose(result.summary["conditional_high"], high, atol=1e-12)


def test_results_are_deterministic_and_depend_on_the_seed():
    sweep = dyadic_sweep(20, 6)
    types = pd.Series(["a", "b"] * 10, index=[f"q{i:02d}" for i in range(20)])
    first, again = held_out_selection(sweep, types, seed=3), held_out_selection(sweep, types, seed=3)
    pd.testing.assert_frame_equal(first.per_fold, again.per_fold)
    pd.testing.assert_frame_equal(first.per_question, again.per_question)
    other = held_out_selection(sweep, types, seed=4)
    assert not first.per_fold[["n_train", *METRICS]].equals(other.per_fold[["n_train", *METRICS]])
    boot = selection_bootstrap(sweep, n_resamples=100, seed=1)
    boot_again = selection_bootstrap(sweep, n_resamples=100, seed=1)
    pd.testing.assert_frame_equal(boot.per_resample, boot_again.per_resample)
    pd.testing.assert_frame_equal(boot.summary, boot_again.summary)
    assert not boot.per_resample.equals(selection_bootstrap(sweep, n_resamples=100, seed=2).per_resample)
    assert sweep.equals(dyadic_sweep(20, 6))           # the input is not mutated


def test_rare_types_are_pooled_then_merged_into_the_largest():
    types = pd.Series(["a"] * 10 + ["b"] * 3 + ["c"] * 3 + ["d"] * 7)
    strata = stratify(types, 5)
    assert strata.value_counts().to_dict() == {"a": 10, "d": 7, POOLED_STRATUM: 6}
    merged = stratify(pd.Series(["a"] * 10 + ["b"] * 3 + ["d"] * 7), 5)
    assert merged.value_counts().to_dict() == {"a": 13, "d": 7}
    sweep = dyadic_sweep(20, 1)
    rare = pd.Series(["a"] * 10 + ["b"] * 3 + ["d"] * 7, index=[f"q{i:02d}" for i in range(20)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # scikit-learn warns about strata smaller than n_splits
        result = held_out_selection(sweep, rare, n_splits=5, n_repeats=2)
    assert set(result.per_question["stratum"]) == {"a", "d"}
    assert list(result.per_question["question_type"]) == list(rare)


def test_fixed_pairing_chooses_only_its_beta():
    sweep = dyadic_sweep(20, 7)
    types = pd.Series(["a", "b"] * 10, index=[f"q{i:02d}" for i in range(20)])
    result = held_out_selection(sweep, types, n_splits=4, n_repeats=2, pairings=("bm25_b", "dense_b"))
    assert set(zip(result.per_fold["bm25"], result.per_fold["vector"])) == {("bm25_b", "dense_b")}
    rows = sweep[(sweep["bm25"] == "bm25_b") & (sweep["vector"] == "dense_b")]
    assert key(result.in_sample) == key(select_best(macro_by_configuration(rows)))


@pytest.mark.parametrize("change, message", [
    (lambda s, t: (s.drop(index=3), t), "lacks configuration"),
    (lambda s, t: (pd.concat([s, s.iloc[:1]]), t), "twice on question"),
    (lambda s, t: (s, t.iloc[1:]), "types lacks 1 question"),
    (lambda s, t: (s.drop(columns="ndcg@5"), t), "lacks column"),
    (lambda s, t: (s.assign(**{"recall@5": np.nan}), t), "non-finite"),
])
def test_invalid_inputs_are_named(change, message):
    sweep, types = change(dyadic_sweep(10, 0), pd.Series(["a", "b"] * 5, index=[f"q{i:02d}" for i in range(10)]))
    with pytest.raises(ValueError, match=message):
        held_out_selection(sweep, types, n_splits=2, n_repeats=1)


def test_invalid_arguments_are_named():
    sweep = dyadic_sweep(10, 0)
    types = pd.Series(["a", "b"] * 5, index=[f"q{i:02d}" for i in range(10)])
    with pytest.raises(ValueError, match="n_splits"):
        held_out_selection(sweep, types, n_splits=11)
    with pytest.raises(ValueError, match="pairings not in the sweep"):
        held_out_selection(sweep, types, pairings=[("bm25_a", "nope")])
    with pytest.raises(ValueError, match="kind"):
        selection_bootstrap(sweep, kind="0.632")
    with pytest.raises(ValueError, match="fusion 'rrf'"):
        selection_bootstrap(sweep, fusion="rrf")
    with pytest.raises(ValueError, match="confidence"):
        selection_bootstrap(sweep, confidence=95)


def test_optimism_and_bias_corrected_interval_equal_a_direct_loop():
    n, b = 12, 30
    sweep = dyadic_sweep(n, 13, levels=(0.0, 0.25, 0.5, 0.75, 1.0))
    result = selection_bootstrap(sweep, n_resamples=b, seed=4)
    questions = np.array([f"q{i:02d}" for i in range(n)])
    by_question = {q: rows for q, rows in sweep.groupby("question_id", sort=False)}
    indexed = sweep.set_index(["bm25", "vector", "beta", "question_id"])
    best = paper_choice(sweep)
    best_rows = np.array([[indexed.loc[(*best, q), metric] for q in questions] for metric in METRICS])
    differences, samples, conditional = [], [], []
    for draw in resample_indices(n, BootstrapSection(n_resamples=b, seed=4)):
        chosen = paper_choice(pd.concat([by_question[q] for q in questions[draw]], ignore_index=True))
        scored = np.array([[indexed.loc[(*chosen, q), metric] for q in questions] for metric in METRICS])
        differences.append(scored[:, draw].mean(axis=1) - scored.mean(axis=1))   # A_b − S_b
        samples.append(scored.mean(axis=1))
        conditional.append(best_rows[:, draw].mean(axis=1))
    optimism = np.mean(differences, axis=0)
    low, high = np.percentile(np.array(conditional), [2.5, 97.5], axis=0)
    in_sample = best_rows.mean(axis=1)
    summary = result.summary
    np.testing.assert_allclose(summary["optimism"], optimism, rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["corrected"], in_sample - optimism, rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["corrected_low"], low - optimism, rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["corrected_high"], high - optimism, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.per_resample[[f"sample {m}" for m in METRICS]].to_numpy(), np.array(samples),
                               rtol=0, atol=1e-12)
    assert (summary["corrected_high"] - summary["corrected_low"]).to_numpy() == pytest.approx(
        (summary["conditional_high"] - summary["conditional_low"]).to_numpy(), abs=1e-12)


def test_the_optimism_is_zero_without_a_choice_and_positive_on_noise():
    sweep, winner = dominant_sweep(30, 2)
    boot = selection_bootstrap(sweep, n_resamples=200, seed=3)
    rows = winner.loc[[f"q{i:02d}" for i in range(30)], list(METRICS)].to_numpy()
    draws = resample_indices(30, BootstrapSection(n_resamples=200, seed=3))
    # always the same choice: ô is the resample means' Monte Carlo drift from the sample mean, nothing more
    drift = rows[draws].mean(axis=1).mean(axis=0) - rows.mean(axis=0)
    np.testing.assert_allclose(boot.summary["optimism"], drift, rtol=0, atol=1e-12)
    assert np.abs(drift).max() < 0.01
    np.testing.assert_allclose(boot.summary["corrected"], rows.mean(axis=0) - drift, rtol=0, atol=1e-12)
    rng = np.random.default_rng(7)
    n = 60
    noise = pd.concat([pd.DataFrame({"bm25": f"b{p}", "vector": f"v{p}", "beta": beta,
                                     "question_id": [f"q{i:02d}" for i in range(n)],
                                     "recall@5": rng.binomial(1, 0.5, n).astype(float), "mrr@5": rng.random(n),
                                     "ndcg@5": rng.random(n)})
                       for p in range(5) for beta in np.linspace(0, 1, 8)], ignore_index=True)
    recall = selection_bootstrap(noise, n_resamples=400, seed=1).summary.iloc[0]
    assert recall["optimism"] > 0.03                  # the best of 40 fair coins flatters itself
    assert abs(recall["corrected"] - 0.5) < abs(recall["in_sample"] - 0.5)


def test_partition_seeds_average_held_out_selection_run_per_seed():
    sweep = dyadic_sweep(20, 9, levels=(0.0, 0.25, 0.5, 0.75, 1.0))
    types = pd.Series(["a", "b"] * 10, index=[f"q{i:02d}" for i in range(20)])
    pooled = held_out_selection(sweep, types, n_splits=4, n_repeats=2, seed=5, n_seeds=3)
    singles = [held_out_selection(sweep, types, n_splits=4, n_repeats=2, seed=s) for s in (5, 6, 7)]
    macros = np.array([single.summary["out_of_fold"].to_numpy() for single in singles])        # (seeds, 3)
    summary = pooled.summary
    np.testing.assert_allclose(summary["out_of_fold"], macros.mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["gap"], summary["in_sample"] - macros.mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["out_of_fold_min"], macros.min(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["out_of_fold_max"], macros.max(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["out_of_fold_sd"], macros.std(axis=0, ddof=1), rtol=0, atol=1e-12)
    assert list(pooled.per_seed["seed"]) == [5, 6, 7] and pooled.n_seeds == 3 and pooled.seed == 5
    np.testing.assert_allclose(pooled.per_seed[list(METRICS)].to_numpy(), macros, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pooled.per_question[list(METRICS)].to_numpy(),
                               np.mean([single.per_question[list(METRICS)].to_numpy() for single in singles], axis=0),
                               rtol=0, atol=1e-12)
    folds = pd.concat([single.per_fold for single in singles], ignore_index=True)
    pd.testing.assert_frame_equal(pooled.per_fold, folds)
    assert pooled.chosen["times"].sum() == 3 * 4 * 2
    assert len(set(macros[:, 0])) > 1                 # the seeds' partitions do differ


def test_one_partition_seed_has_no_spread():
    sweep = dyadic_sweep(20, 9)
    types = pd.Series(["a", "b"] * 10, index=[f"q{i:02d}" for i in range(20)])
    result = held_out_selection(sweep, types, n_splits=4, n_repeats=2, seed=2)
    assert result.n_seeds == 1 and list(result.per_seed["seed"]) == [2] and set(result.per_fold["seed"]) == {2}
    np.testing.assert_array_equal(result.summary["out_of_fold_min"], result.summary["out_of_fold"])
    np.testing.assert_array_equal(result.summary["out_of_fold_max"], result.summary["out_of_fold"])
    assert result.summary["out_of_fold_sd"].isna().all()
    with pytest.raises(ValueError, match="n_seeds"):
        held_out_selection(sweep, types, n_seeds=0)
