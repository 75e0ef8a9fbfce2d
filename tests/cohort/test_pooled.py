"""The pooled kernels: macro and micro means, the two-level bootstrap (against a direct double loop over resamples
and drawn participants), Cochran's Q, I² and DerSimonian–Laird by hand, wins by the paper's rule, and the tables."""

import numpy as np
import pandas as pd
import pytest

from pmrag.cohort.pooled import (heterogeneity, macro_micro, percentile_interval, two_level_means, winners,
                                 within_variances)
from pmrag.cohort.tables import BEST_SINGLE, SELECTED_HYBRID, cohort_tables
from pmrag.core.params import BootstrapSection


def cohort_values(sizes=(3, 5, 8, 2), methods=2, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random((methods, n)) for n in sizes]


def test_macro_counts_participants_once_and_micro_counts_questions_once():
    values = [np.array([[1.0, 1.0, 1.0, 1.0]]), np.array([[0.0]])]
    macro, micro = macro_micro(values)
    assert macro == pytest.approx([0.5]) and micro == pytest.approx([0.8])


def direct_double_loop(values, n_resamples, seed):
    """The two-level bootstrap written out: for each resample, for each drawn participant, draw its questions."""
    generators = [np.random.default_rng(c) for c in np.random.SeedSequence(seed).spawn(len(values) + 1)]
    drawn = generators[0].integers(0, len(values), size=(n_resamples, len(values)))
    macro = np.zeros((n_resamples, values[0].shape[0]))
    micro = np.zeros_like(macro)
    for b in range(n_resamples):
        slot_means, total, count = [], 0.0, 0
        for p in drawn[b]:
            n = values[p].shape[1]
            questions = generators[p + 1].integers(0, n, size=n)
            chosen = values[p][:, questions]
            slot_means.append(chosen.mean(axis=1))
            total = total + chosen.sum(axis=1)
            count += n
        macro[b] = np.mean(slot_means, axis=0)
        micro[b] = total / count
    return macro, micro


def test_the_vectorised_two_level_bootstrap_equals_a_direct_double_loop():
    values = cohort_values()
    macro, micro = two_level_means(values, 300, seed=12345)
    loop_macro, loop_micro = direct_double_loop(values, 300, seed=12345)
    np.testing.assert_allclose(macro, loop_macro, rtol=0, atol=1e-12)
    np.testing.assert_allclose(micro, loop_micro, rtol=0, atol=1e-12)


def test_the_two_level_bootstrap_is_seeded_and_paired_across_methods():
    values = cohort_values(methods=3)
    first, _ = two_level_means(values, 200, seed=7)
    again, _ = two_level_means(values, 200, seed=7)
    other, _ = two_level_means(values, 200, seed=8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    differences, _ = two_level_means([v[0:1] - v[1:2] for v in values], 200, seed=7)   # paired: the same draws
    np.testing.assert_allclose(differences[:, 0], first[:, 0] - first[:, 1], atol=1e-12)


def test_the_two_level_interval_is_wider_than_the_question_bootstrap_when_participants_differ():
    from pmrag.evaluate.bootstrap import ci

    rng = np.random.default_rng(1)
    values = [np.clip(rng.normal(level, 0.05, size=(1, 30)), 0, 1) for level in (0.2, 0.5, 0.8, 0.35, 0.65)]
    macro, _ = two_level_means(values, 2000, seed=3)
    low, high = percentile_interval(macro, 0.95)
    _, flat_low, flat_high = ci(np.concatenate([v[0] for v in values]), BootstrapSection(n_resamples=2000))
    assert high[0] - low[0] > 2 * (flat_high - flat_low)


def test_the_kernels_refuse_values_that_do_not_line_up():
    with pytest.raises(ValueError, match="one \\(m, n_p\\) array per participant"):
        two_level_means([np.zeros((2, 3)), np.zeros((1, 3))], 10, 0)
    with pytest.raises(ValueError):
        macro_micro([np.zeros((1, 0))])


def test_heterogeneity_by_hand():
    means = np.array([0.10, 0.30, -0.05])
    variances = np.array([0.01, 0.02, 0.015])
    w = 1 / variances
    fixed = (w * means).sum() / w.sum()
    q = (w * (means - fixed) ** 2).sum()
    tau2 = max(0.0, (q - 2) / (w.sum() - (w ** 2).sum() / w.sum()))
    w_star = 1 / (variances + tau2)
    mean = (w_star * means).sum() / w_star.sum()
    found = heterogeneity(means, variances, 0.95)
    assert found.q == pytest.approx(q, abs=1e-12) and found.df == 2
    assert found.i2 == pytest.approx(max(0.0, (q - 2) / q), abs=1e-12)
    assert found.tau2 == pytest.approx(tau2, abs=1e-12) and found.fixed_mean == pytest.approx(fixed, abs=1e-12)
    assert found.re_mean == pytest.approx(mean, abs=1e-12)
    assert found.re_high - found.re_mean == pytest.approx(1.959963984540054 * w_star.sum() ** -0.5, abs=1e-9)


def test_homogeneous_participants_have_no_between_variance():
    found = heterogeneity(np.array([0.2, 0.2, 0.2]), np.array([0.01, 0.02, 0.03]))
    assert (found.q, found.i2, found.tau2) == (0.0, 0.0, 0.0)
    assert found.re_mean == pytest.approx(0.2) and found.re_low < 0.2 < found.re_high


def test_a_wide_spread_of_participants_gives_a_large_i2():
    found = heterogeneity(np.array([-0.4, 0.0, 0.4, 0.8]), np.full(4, 0.001))
    assert found.i2 > 0.95 and found.tau2 > 0.1


def test_within_variances_fall_back_to_the_pooled_variance():
    means, variances = within_variances([np.array([0.0, 1.0, 0.0, 1.0]), np.array([0.5, 0.5]), np.array([0.3])])
    assert means == pytest.approx([0.5, 0.5, 0.3])
    pooled = (3 * np.var([0, 1, 0, 1], ddof=1) + 1 * 0.0) / (3 + 1)   # Σ (n_p − 1) s_p² / Σ (n_p − 1)
    assert variances == pytest.approx([np.var([0, 1, 0, 1], ddof=1) / 4, pooled / 2, pooled / 1])


def test_nothing_varying_anywhere_leaves_heterogeneity_undefined():
    found = heterogeneity(*within_variances([np.zeros(3), np.ones(2)]))
    assert np.isnan(found.q) and np.isnan(found.re_low) and found.re_mean == 0.5


def test_winners_follow_the_papers_rule_then_the_listed_order():
    # (P, m, [recall, ndcg, mrr])
    macro = np.array([[[0.5, 0.4, 0.3], [0.5, 0.6, 0.1]],     # recall tie: nDCG decides → 1
                      [[0.7, 0.1, 0.1], [0.6, 0.9, 0.9]],     # recall decides → 0
                      [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]])    # all tied: the first listed → 0
    assert winners(macro).tolist() == [1, 0, 0]


def scores_frame(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for participant, n in (("a", 4), ("b", 6), ("c", 5)):
        for method, selected, shift in (("raw_text_bm25", False, 0.0), ("summary_bm25", False, 0.1),
                                        ("hybrid:summary_bm25+summary_vector@0.50", True, 0.2)):
            for q in range(n):
                value = float(np.clip(rng.random() * 0.6 + shift, 0, 1))
                rows.append({"participant": participant, "method": method, "selected": selected,
                             "question_id": f"q{q}", "question_type": "contextual",
                             "recall@5": value, "mrr@5": value / 2, "ndcg@5": value * 0.8})
    return pd.DataFrame(rows)


def test_the_tables_say_how_many_participants_and_questions_they_rest_on():
    tables = cohort_tables(scores_frame(), BootstrapSection(n_resamples=300))
    for name, table in tables.items():
        assert {"n_participants", "n_questions"} <= set(table.columns), name
    assert (tables["pooled"][["n_participants", "n_questions"]].drop_duplicates().values.tolist() == [[3, 15]])
    per = tables["per_participant"]
    assert per.groupby("participant")["role"].apply(lambda r: sorted(r)).to_dict() == {
        p: sorted(["single", BEST_SINGLE, SELECTED_HYBRID]) for p in "abc"}
    assert "participant" in tables["participant_differences"].columns
    assert tables["wins"]["wins"].sum() == 3


def test_the_pooled_table_agrees_with_per_participant_means():
    scores = scores_frame()
    tables = cohort_tables(scores, BootstrapSection(n_resamples=200))
    per = tables["per_participant"]
    best = per[per["role"] == BEST_SINGLE].set_index("participant")["recall@5"]
    row = tables["pooled"].query("method == @BEST_SINGLE and metric == 'recall@5'").iloc[0]
    assert row["macro"] == pytest.approx(best.mean(), abs=1e-12)
    assert row["macro_ci_low"] <= row["macro"] <= row["macro_ci_high"]
    diff = tables["differences"].query("metric == 'recall@5'").iloc[0]
    sel = per[per["role"] == SELECTED_HYBRID].set_index("participant")["recall@5"]
    assert diff["macro"] == pytest.approx((sel - best).mean(), abs=1e-12)
    forest = tables["participant_differences"].query("metric == 'recall@5'").set_index("participant")["delta"]
    assert forest.to_dict() == pytest.approx((sel - best).to_dict(), abs=1e-12)


def test_by_type_is_each_participants_roles_over_each_types_questions():
    scores = scores_frame()
    scores.loc[scores["question_id"].isin(["q0", "q3"]), "question_type"] = "aggregate"
    tables = cohort_tables(scores, BootstrapSection(n_resamples=100))
    found = tables["by_type"]
    assert found[["participant", "role", "question_type"]].drop_duplicates().shape[0] == len(found)
    assert found["question_type"].tolist()[:4] == ["aggregate", "contextual", "aggregate", "contextual"]   # cohort's order
    assert found["role"].tolist()[:4] == [BEST_SINGLE, BEST_SINGLE, SELECTED_HYBRID, SELECTED_HYBRID]
    per = tables["per_participant"].set_index(["participant", "role"])
    for (participant, role), rows in found.groupby(["participant", "role"]):
        assert rows["n_questions"].sum() == per.loc[(participant, role), "n_questions"]
        [method] = set(rows["method"])
        direct = scores[(scores["participant"] == participant) & (scores["method"] == method)]
        means = direct.groupby("question_type")["recall@5"].mean()
        assert rows.set_index("question_type")["recall@5"].to_dict() == pytest.approx(means.to_dict(), abs=1e-12)
    assert set(found["n_participants"]) == {1}
