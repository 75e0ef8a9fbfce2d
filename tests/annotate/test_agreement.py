"""Agreement between annotators: vectorised κ and α against scikit-learn and krippendorff, the bootstrap over
questions against a direct loop, rows graded once left out and counted, the table by question type."""

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from conftest import GRADING_POOL, make_grading_store
from pmrag.annotate import agreement as A
from pmrag.annotate.judgments import record_grade
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import resample_indices

TOL = 1e-12


def confusion(a, b):
    counts = np.zeros((3, 3))
    np.add.at(counts, (np.asarray(a), np.asarray(b)), 1)
    return counts


def long_grades(matrix, question_of_row, annotators=("a", "b", "c")):
    rows = []
    for r, (question, grades) in enumerate(zip(question_of_row, matrix)):
        rows += [(question, f"c{r}", name, int(g)) for name, g in zip(annotators, grades) if not np.isnan(g)]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "annotator", "relevance"])


@pytest.mark.agreement
@pytest.mark.parametrize("seed", range(20))
def test_kappa_equals_scikit_learn_on_random_grades(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    a = rng.integers(0, 3, n)
    b = np.clip(a + rng.integers(-2, 3, n) * (rng.random(n) < 0.5), 0, 2)
    expected = cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2])
    if np.isnan(expected):
        assert np.isnan(A.quadratic_kappa(confusion(a, b)))
    else:
        assert A.quadratic_kappa(confusion(a, b)) == pytest.approx(expected, abs=TOL)
    assert A.raw_agreement(confusion(a, b)) == pytest.approx(np.mean(a == b), abs=TOL)


@pytest.mark.agreement
def test_kappa_of_a_stack_is_the_kappa_of_each_matrix():
    rng = np.random.default_rng(1)
    pairs = [(rng.integers(0, 3, 30), rng.integers(0, 3, 30)) for _ in range(5)]
    stack = np.stack([confusion(a, b) for a, b in pairs])
    expected = [cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2]) for a, b in pairs]
    np.testing.assert_allclose(A.quadratic_kappa(stack), expected, atol=TOL)


@pytest.mark.agreement
def test_kappa_edge_cases_one_grade_only_is_undefined_as_in_scikit_learn():
    # both annotators gave one and the same grade throughout: no expected disagreement, κ undefined (NaN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(cohen_kappa_score([2] * 6, [2] * 6, weights="quadratic", labels=[0, 1, 2]))
    assert np.isnan(A.quadratic_kappa(confusion([2] * 6, [2] * 6)))
    assert np.isnan(A.quadratic_kappa(np.zeros((3, 3))))                  # no row at all
    assert np.isnan(A.raw_agreement(np.zeros((3, 3))))
    # one annotator constant, the other not: defined, and 0 (no association beyond chance)
    a, b = [1] * 6, [0, 1, 2, 0, 1, 2]
    assert A.quadratic_kappa(confusion(a, b)) == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"), abs=TOL)
    assert A.quadratic_kappa(confusion(a, b)) == pytest.approx(0.0, abs=TOL)
    # perfect agreement over two grades; complete reversal 0 ↔ 2
    assert A.quadratic_kappa(confusion([0, 2, 2], [0, 2, 2])) == pytest.approx(1.0, abs=TOL)
    assert A.quadratic_kappa(confusion([0, 2, 0, 2], [2, 0, 2, 0])) == pytest.approx(
        cohen_kappa_score([0, 2, 0, 2], [2, 0, 2, 0], weights="quadratic", labels=[0, 1, 2]), abs=TOL)


@pytest.mark.agreement
@pytest.mark.parametrize("seed", range(15))
def test_ordinal_alpha_equals_the_krippendorff_package(seed):
    rng = np.random.default_rng(100 + seed)
    n_rows, n_annotators = int(rng.integers(3, 60)), int(rng.integers(2, 5))
    base = rng.integers(0, 3, n_rows)[:, None]
    grades = np.clip(base + rng.integers(-1, 2, (n_rows, n_annotators)) * (rng.random((n_rows, n_annotators)) < 0.4),
                     0, 2).astype(float)
    grades[rng.random(grades.shape) < 0.25] = np.nan
    assert (np.sum(~np.isnan(grades), axis=1) >= 2).sum() >= 2
    expected = krippendorff.alpha(reliability_data=grades.T, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert A.ordinal_alpha(A.coincidences(grades).sum(axis=0)) == pytest.approx(expected, abs=1e-10)


def test_coincidences_leave_out_rows_graded_once_and_alpha_is_undefined_for_one_grade():
    grades = np.array([[1, np.nan, np.nan], [2, 2, np.nan], [0, 1, 2]])
    o = A.coincidences(grades)
    assert o[0].sum() == 0                                  # one grade: pairs with nothing
    assert o[1].sum() == pytest.approx(2) and o[2].sum() == pytest.approx(3)
    np.testing.assert_allclose(o[2], (np.ones((3, 3)) - np.eye(3)) / 2)
    assert np.isnan(A.ordinal_alpha(A.coincidences(np.array([[1, 1], [1, 1.0]])).sum(axis=0)))


def test_bootstrap_over_questions_equals_a_direct_loop():
    rng = np.random.default_rng(7)
    question_of_row = [f"q{i}" for i in rng.integers(0, 6, 40)]
    matrix = rng.integers(0, 3, (40, 2)).astype(float)
    grades = long_grades(matrix, question_of_row, ("a", "b"))
    params = BootstrapSection(n_resamples=300, seed=3, confidence=0.9)
    result = A.agreement_of(grades, None, params)

    questions = list(dict.fromkeys(grades.sort_values(["question_id", "chunk_id"])["question_id"]))
    by_question = {q: [r for r, rq in enumerate(question_of_row) if rq == q] for q in questions}
    kappas, alphas = [], []
    for draw in resample_indices(len(questions), params):
        rows = [r for q in draw for r in by_question[questions[q]]]
        a, b = matrix[rows, 0].astype(int), matrix[rows, 1].astype(int)
        kappas.append(cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2]))
        alphas.append(krippendorff.alpha(reliability_data=matrix[rows].T, level_of_measurement="ordinal",
                                         value_domain=[0, 1, 2]))
    table = result.table.set_index(["measure", "type"])
    for measure, values in (("kappa", kappas), ("alpha", alphas)):
        low, high = np.percentile(np.asarray(values)[~np.isnan(values)], [5, 95])
        assert table.loc[(measure, "all"), "ci_low"] == pytest.approx(low, abs=1e-10)
        assert table.loc[(measure, "all"), "ci_high"] == pytest.approx(high, abs=1e-10)
    assert table.loc[("kappa", "all"), "value"] == pytest.approx(
        cohen_kappa_score(matrix[:, 0], matrix[:, 1], weights="quadratic", labels=[0, 1, 2]), abs=TOL)


def test_agreement_by_type_pairs_and_rows_graded_once():
    matrix = np.array([[2, 2, 1], [0, 1, 0], [1, 1, np.nan], [2, np.nan, np.nan], [0, 0, 0], [2, 1, 2]])
    grades = long_grades(matrix, ["q1", "q1", "q2", "q2", "q3", "q3"])
    types = pd.Series({"q1": "named_entity", "q2": "contextual"})
    result = A.agreement_of(grades, types, BootstrapSection(n_resamples=200))
    assert result.annotators == ("a", "b", "c")
    assert (result.rows, result.single, result.disagreements) == (5, 1, 3)
    table = result.table
    assert list(table.columns) == list(A.TABLE_COLUMNS)
    assert set(table["annotators"]) == {"a|b", "a|c", "all", "b|c"}
    assert set(table["type"]) == {"all", "named_entity", "contextual", A.NO_TYPE}
    row = table[(table["measure"] == "raw") & (table["annotators"] == "a|b") & (table["type"] == "all")].iloc[0]
    assert (row["n_questions"], row["n_rows"]) == (3, 5) and row["value"] == pytest.approx(3 / 5)
    a_c = table[(table["measure"] == "kappa") & (table["annotators"] == "a|c")]
    assert set(a_c["type"]) == {"all", "named_entity", A.NO_TYPE}      # q2's only shared row is a and b's
    assert result.confusion["a", "b"].to_numpy().sum() == 5
    assert result.confusion["a", "c"].loc[2, 1] == 1 and result.confusion["a", "c"].loc[2, 2] == 1
    lines = result.lines()
    assert lines[0] == ("annotators: a, b, c; 5 row(s) graded by two or more, 1 graded by one only (left out), "
                        "3 disagreement(s)")


def test_agreement_with_one_annotator_has_nothing_to_compare():
    grades = long_grades(np.array([[1.0], [2.0]]), ["q1", "q2"], ("a",))
    result = A.agreement_of(grades)
    assert result.table.empty and result.single == 2
    assert result.lines()[-1] == "no row graded by two annotators: nothing to compare"


def test_agreement_reads_the_store_by_pool_and_types_its_questions(tmp_path):
    engine, rows = make_grading_store(tmp_path / "s.sqlite")
    for r in rows.itertuples():
        record_grade(engine, r.question_id, r.chunk_id, "ann", r.position % 3, pool=GRADING_POOL)
        record_grade(engine, r.question_id, r.chunk_id, "ben", min(r.position, 2), pool=GRADING_POOL)
    result = A.agreement(engine, pool=GRADING_POOL, params=BootstrapSection(n_resamples=100))
    assert result.rows == len(rows) and result.single == 0
    assert set(result.table["type"]) == {"all", "named_entity", "contextual", "aggregate"}
    assert A.agreement(engine, pool="other").table.empty
    engine.dispose()
