"""Notebook 09's selection table, sentences and figure: each number where the statistics put it, and words that say
what each interval conditions on (the conditional one: the configuration fixed; the bias-corrected one: the
selection's optimism removed, with its coverage; the out-of-bag one: a conservative bound; the β row: conditional
on the pairing chosen on all questions)."""

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.selection import held_out_selection, selection_bootstrap
from pmrag.evaluate.selection_coverage import selection_coverage
from pmrag.present import statistics as ps
from pmrag.present.artifacts import T, check_columns

matplotlib.use("Agg")
PAIRINGS = [("bm25_a", "dense_a"), ("bm25_b", "dense_b")]


def statistics_of(kind="oob", n_seeds=3):
    rng = np.random.default_rng(0)
    n = 24
    questions = [f"q{i:02d}" for i in range(n)]
    sweep = pd.concat([pd.DataFrame({"fusion": fusion, "bm25": first, "vector": second, "beta": beta,
                                     "question_id": questions, "recall@5": rng.choice([0.0, 0.5, 1.0], n),
                                     "mrr@5": rng.random(n), "ndcg@5": rng.random(n)})
                       for fusion in ("minmax", "rrf") for first, second in PAIRINGS for beta in (0.0, 0.5, 1.0)],
                      ignore_index=True)
    types = pd.Series(["a", "b", "c"] * 8, index=questions)
    folds = dict(n_splits=3, n_repeats=2, seed=0, n_seeds=n_seeds)
    boot = dict(n_resamples=200, seed=1, kind=kind)
    held_out = held_out_selection(sweep, types, **folds)
    fixed = tuple(held_out.in_sample[["bm25", "vector"]])
    return SimpleNamespace(
        held_out=held_out, held_out_beta=held_out_selection(sweep, types, pairings=fixed, **folds),
        held_out_fusions={"rrf": held_out_selection(sweep, types, fusion="rrf", **folds)},
        bootstrap=selection_bootstrap(sweep, **boot), bootstrap_beta=selection_bootstrap(sweep, pairings=fixed, **boot),
        bootstrap_fusions={"rrf": selection_bootstrap(sweep, fusion="rrf", **boot)},
        coverage=selection_coverage(sweep, n_datasets=30, n_resamples=40, seed=2))


@pytest.fixture(scope="module")
def statistics():
    return statistics_of()


def test_the_table_has_the_declared_columns_and_the_statistics_numbers(statistics):
    table = ps.selection_table(statistics)
    check_columns(T.selection_summary, table.columns)
    assert list(table["procedure"].unique()) == [ps.PAPER_PROCEDURE, ps.BETA_PROCEDURE, "pairing and β, rrf fusion"]
    assert "conditional on that pairing" in ps.BETA_PROCEDURE
    paper = table[table["procedure"] == ps.PAPER_PROCEDURE].set_index("metric")
    boot, folds = statistics.bootstrap.summary.set_index("metric"), statistics.held_out.summary.set_index("metric")
    for metric in paper.index:
        row = paper.loc[metric]
        optimism = boot.at[metric, "optimism"]
        assert row["bias_corrected"] == pytest.approx(folds.at[metric, "in_sample"] - optimism, abs=1e-12)
        assert row["bias_corrected_low"] == pytest.approx(boot.at[metric, "conditional_low"] - optimism, abs=1e-12)
        assert row["bias_corrected_high"] == pytest.approx(boot.at[metric, "conditional_high"] - optimism, abs=1e-12)
        per_seed = statistics.held_out.per_seed[metric]
        assert row["out_of_fold"] == pytest.approx(per_seed.mean(), abs=1e-12)
        assert (row["out_of_fold_min"], row["out_of_fold_max"]) == (per_seed.min(), per_seed.max())
        assert row["out_of_fold_sd"] == pytest.approx(per_seed.std(ddof=1), abs=1e-12)
        assert row["bootstrap_estimate"] == boot.at[metric, "estimate"]
        assert (row["bootstrap_low"], row["bootstrap_high"]) == (boot.at[metric, "ci_low"], boot.at[metric, "ci_high"])
    assert set(table["bootstrap_kind"]) == {"out-of-bag percentiles: a conservative bound"}


def test_the_reading_says_what_each_interval_conditions_on(statistics):
    table = ps.selection_table(statistics)
    coverage = statistics.coverage.table
    text = ps.selection_reading(table, "oob", 3, 2, coverage=coverage, n_seeds=3)
    row = table[(table["procedure"] == ps.PAPER_PROCEDURE) & (table["metric"] == "recall@5")].iloc[0]
    recall = coverage[coverage["metric"] == "recall@5"].set_index("interval")
    corrected = recall.loc["bias_corrected"]
    assert "holds the configuration fixed" in text
    assert (f"{row['bias_corrected']:.3f} [{row['bias_corrected_low']:.3f}, {row['bias_corrected_high']:.3f}]"
            in text)
    assert (f"in 30 studies drawn from these questions such intervals covered it {corrected['coverage']:.1%} ± "
            f"{corrected['mc_se']:.1%} of the time") in text
    assert f"a conservative bound (coverage {recall.loc['oob', 'coverage']:.1%}" in text
    per_seed = statistics.held_out.per_seed["recall@5"]
    assert f"mean of 3 partition seeds, {per_seed.min():.3f}–{per_seed.max():.3f}) the procedure reaches" in text
    assert "conditional on that pairing" in text
    assert "selection uncertainty included" not in text
    unnamed = ps.selection_reading(table, "oob", 3, 2)              # the seeds' range is in the table itself
    assert f"(2 repeats, mean of partition seeds, {per_seed.min():.3f}–{per_seed.max():.3f})" in unnamed


def test_the_reading_without_coverage_or_seeds_and_for_632():
    statistics = statistics_of(kind=".632", n_seeds=1)
    table = ps.selection_table(statistics)
    text = ps.selection_reading(table, ".632", 3, 2)
    assert "studies drawn" not in text and "partition seeds" not in text and "coverage" not in text
    assert "its interval is too narrow" in text and "conservative" not in text
    assert set(table["bootstrap_kind"]) == {ps.BOOTSTRAP_KIND[".632"]}


def test_the_coverage_reading_and_the_figure(statistics):
    sentence = ps.coverage_reading(statistics.coverage)
    assert sentence.startswith("30 studies of 24 questions drawn with replacement from this study's 24")
    assert "40 resamples" in sentence
    figure = ps.selection_figure(ps.selection_table(statistics))
    labels = figure.axes[0].get_legend_handles_labels()[1]
    plt.close(figure)
    assert labels == ["in sample (conditional: configuration fixed)", "bias-corrected (optimism removed)",
                      "out of fold (range over partition seeds)", "out of bag (a conservative bound)"]


def test_a_broader_sweep_shows_its_own_selection_beside_the_papers_with_both_counts(statistics):
    from types import SimpleNamespace

    wider = statistics.held_out_beta   # any held-out selection stands in for the broader sweep's
    broader = SimpleNamespace(**vars(statistics), held_out_broader=wider, configurations=(126, 1470),
                              broader_pairings=70)
    table = ps.selection_table(broader)
    label = ps.broader_procedure(70, 1470, 126)
    assert list(table["procedure"].unique())[-1] == label
    assert "all 70 swept pairings" in label and "1470 configurations" in label and "among 126" in label
    rows = table[table["procedure"] == label].set_index("metric")
    folds = wider.summary.set_index("metric")
    for metric in rows.index:
        assert rows.at[metric, "out_of_fold"] == folds.at[metric, "out_of_fold"]
        assert rows.at[metric, "winners_curse"] == folds.at[metric, "gap"]
    assert label not in set(ps.selection_table(statistics)["procedure"])   # the paper's own sweep: no such row
    text = ps.broader_reading(table, (126, 1470))
    paper, other = (folds_of(h) for h in (statistics.held_out, wider))
    assert f"{other['out_of_fold']:.3f} out of fold" in text and "(1470 configurations, the paper's selection 126)" in text
    more = other["gap"] - paper["gap"]
    if more > 0:
        assert f"is {more:.3f} larger than the paper's" in text and "as 12× the configurations" in text
    else:
        assert f"is {-more:.3f} smaller than the paper's" in text and "although it chose among 12× the" in text
    assert ps.broader_reading(ps.selection_table(statistics), (126, 0)) == ""


def test_the_broader_reading_says_larger_only_when_it_is():
    def table(paper_gap, broader_gap):
        return pd.DataFrame({"procedure": [ps.PAPER_PROCEDURE, ps.broader_procedure(9, 90, 30)], "metric": "recall@5",
                             "in_sample": [0.8, 0.9], "out_of_fold": [0.8 - paper_gap, 0.9 - broader_gap],
                             "winners_curse": [paper_gap, broader_gap]})

    larger = ps.broader_reading(table(0.02, 0.05), (30, 90))
    assert "is 0.030 larger than the paper's +0.020, as 3× the configurations lead one to expect" in larger
    smaller = ps.broader_reading(table(0.05, 0.02), (30, 90))
    assert "is 0.030 smaller than the paper's +0.050 although it chose among 3× the configurations" in smaller
    assert "+0.130 beside the paper's selection out of fold (0.750)" in smaller


def folds_of(held_out):
    return held_out.summary.set_index("metric").loc["recall@5"]
