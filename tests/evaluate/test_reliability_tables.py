"""Table 5 / Table 6 builders: paired differences with the paper's reading, per-type intervals (vs scipy)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pmrag.core.params import BootstrapSection
from pmrag.evaluate import reliability
from pmrag.evaluate.bootstrap import ci, paired_difference
from pmrag.present import tables


def long_table(seed=3, n=60):
    rng = np.random.default_rng(seed)
    types = np.array(["named_entity", "contextual", "aggregate"])[rng.integers(0, 3, n)]
    frames = []
    for name, p in (("best", 0.7), ("ref", 0.4), ("diag", 0.65)):
        frames.append(pd.DataFrame({"retriever": name, "question_id": [f"q{i:03d}" for i in range(n)],
                                    "question_type": types, "recall@5": (rng.random(n) < p).astype(float)}))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("low, high, expected", [
    (0.01, 0.2, "Positive conditional difference; selection uncertainty excluded"),
    (-0.3, -0.02, "Negative conditional difference; selection uncertainty excluded"),
    (-0.01, 0.2, "CI includes 0; inconclusive"),
    (0.0, 0.2, "CI includes 0; inconclusive"),     # touching 0 does not exclude it
])
def test_interpretation_reads_the_interval_as_the_paper_does(low, high, expected):
    assert reliability.interpretation(low, high) == expected


def test_paired_differences_match_the_bootstrap_kernel_on_the_same_resamples():
    frame, params = long_table(), BootstrapSection(n_resamples=2000, seed=12345)
    diff = reliability.paired_differences(frame, [("Best − ref", "best", "ref"), ("Best − diag", "best", "diag")], "recall@5", params)
    value = {m: frame[frame["retriever"] == m].sort_values("question_id")["recall@5"].to_numpy() for m in ("best", "ref", "diag")}
    for row, other in zip(diff.itertuples(), ("ref", "diag")):
        expected = paired_difference(value["best"], value[other], params)
        assert (row.delta, row.ci_low, row.ci_high) == pytest.approx(expected, abs=1e-12)
        assert row.excludes_zero == (row.ci_low > 0 or row.ci_high < 0)
    formatted = tables.table5(diff)
    assert formatted.columns.tolist() == ["Comparison", "ΔRecall@5", "95% CI", "Interpretation"]
    assert formatted["ΔRecall@5"].iloc[0] == f"{diff['delta'].iloc[0]:+.3f}"


@pytest.mark.agreement
def test_by_type_intervals_resample_within_each_type_and_agree_with_scipy():
    frame, params = long_table(n=90), BootstrapSection(n_resamples=5000, seed=12345)
    table = reliability.by_type_cis(frame, "recall@5", params, types=["named_entity", "contextual", "aggregate"])
    best = table[table["retriever"] == "best"].set_index("question_type")
    assert best.index.tolist() == ["overall", "named_entity", "contextual", "aggregate"]
    rows = frame[frame["retriever"] == "best"].sort_values("question_id")
    for question_type in ("named_entity", "aggregate"):
        values = rows.loc[rows["question_type"] == question_type, "recall@5"].to_numpy()
        assert best.loc[question_type, "questions"] == len(values)
        assert tuple(best.loc[question_type, ["mean", "ci_low", "ci_high"]]) == pytest.approx(ci(values, params), abs=1e-12)
        reference = stats.bootstrap((values,), np.mean, n_resamples=5000, method="percentile", confidence_level=0.95,
                                    random_state=np.random.default_rng(1)).confidence_interval
        assert best.loc[question_type, "ci_low"] == pytest.approx(reference.low, abs=0.02)
        assert best.loc[question_type, "ci_high"] == pytest.approx(reference.high, abs=0.02)
    formatted = tables.table6(table, "best")
    assert formatted["Question type"].tolist() == ["overall", "named_entity", "contextual", "aggregate"]
    assert formatted["Recall@5"].iloc[0] == f"{rows['recall@5'].mean():.3f}"
