"""The paper's selection rule written once (pmrag.evaluate.select), and each caller's documented tie-break.

Every case is a hand-made tie that a drifting order would decide differently: a later key decides only when all
earlier keys tie, rounding makes a 1e-15 difference a tie where the caller rounds and not where it does not, and
the final tie-break is the caller's own (β near 0.5, pairing order, list order, name, threshold and cap).
"""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from pmrag.evaluate import beyond
from pmrag.evaluate import graph_eval as ge
from pmrag.evaluate.select import (DECIMALS, best_columns, beta_near_half, by_name, larger_first, listed,
                                   select)
from pmrag.evaluate.selection import select_columns
from pmrag.evaluate.sweep import select_best, select_overall

NOISE = 1e-15                     # a difference that summation order alone could make


def test_each_metric_decides_only_when_the_earlier_ones_tie():
    recall = [[0.5, 0.5, 0.4], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.4, 0.5, 0.5]]
    ndcg = [[0.1, 0.2, 0.9], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2], [0.9, 0.1, 0.2]]
    mrr = [[0.9, 0.0, 0.0], [0.1, 0.3, 0.3], [0.3, 0.3, 0.3], [0.9, 0.9, 0.1]]
    # row 0: recall ties 0 and 1, nDCG picks 1 despite 0's MRR; row 1: MRR; row 2: full tie, the first; row 3: nDCG
    np.testing.assert_array_equal(best_columns((recall, ndcg, mrr)), [1, 1, 0, 2])


def test_rounding_makes_summation_noise_a_tie_and_none_compares_exactly():
    recall = [[0.5, 0.5 + NOISE]]
    ndcg = [[0.3, 0.2]]
    assert best_columns((recall, ndcg))[0] == 0                   # rounded to 12 decimals: a tie, nDCG decides
    assert best_columns((recall, ndcg), decimals=None)[0] == 1    # compared as they are
    assert best_columns((recall, ndcg), decimals=20)[0] == 1


def test_tie_break_keys_prefer_the_smaller_value_and_broadcast_over_rows():
    recall = np.array([[0.5, 0.5, 0.5], [0.1, 0.5, 0.5]])
    order = [2.0, 0.0, 1.0]
    np.testing.assert_array_equal(best_columns((recall,), listed(order)), [1, 1])
    np.testing.assert_array_equal(best_columns((recall,), (np.array([[3, 2, 1], [0, 2, 1]]),)), [2, 2])
    assert best_columns(([[0.5, 0.5, 0.5]],), ([1, 0, 0], [5, 7, 6]))[0] == 2       # second key among the first's best
    assert best_columns(([0.5, 0.5],),) == 0                                          # 1-D: one row, a scalar


def test_nan_ranks_last_on_its_key():
    assert best_columns(([np.nan, 0.1, 0.2],))[()] == 2
    assert best_columns(([np.nan, np.nan],), listed([1, 0]))[()] == 1                # all NaN: still a tie
    assert best_columns(([0.5, 0.5, 0.5],), ([np.nan, 2.0, 1.0],))[()] == 2


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        best_columns(([0.1, 0.2], [0.1]))
    with pytest.raises(ValueError, match="C ≥ 1"):
        best_columns((np.zeros((2, 0)),))
    with pytest.raises(ValueError, match="one or more"):
        best_columns(())
    with pytest.raises(ValueError, match="tie-break key has"):
        best_columns(([0.1, 0.2],), ([0, 1, 2],))


def test_select_reads_the_metric_columns_of_a_frame():
    frame = pd.DataFrame({"recall@5": [0.5, 0.5], "ndcg@5": [0.1, 0.1], "mrr@5": [0.2, 0.2], "name": ["b", "a"]},
                         index=["x", "y"])
    assert select(frame) == 0
    assert select(frame, by_name(frame["name"])) == 1
    assert select(frame, metrics=("mrr@5",)) == 0
    with pytest.raises(ValueError, match="candidates lack metric column"):
        select(frame.drop(columns="ndcg@5"))
    with pytest.raises(ValueError, match="no candidates"):
        select(frame.iloc[:0])


def test_named_tie_breaks():
    distance, beta = beta_near_half([0.7, 0.1 + 0.2, 0.5])
    assert distance[0] == distance[1] and beta[1] == 0.3                              # rounded to 12 decimals
    assert beta_near_half([0.1 + 0.2], decimals=None)[1][0] == 0.1 + 0.2
    assert by_name(["b", "a", "c", "a"])[0].tolist() == [1, 0, 2, 0]
    assert larger_first([0.5, 0.85])[0].tolist() == [-0.5, -0.85]
    assert DECIMALS == 12


# ------------------------------------------------------------------------------------------- the callers

def macro_rows(betas, recall, ndcg, mrr, bm25="summary_bm25", vector="summary_vector"):
    return pd.DataFrame({"bm25": bm25, "vector": vector, "beta": betas, "recall@5": recall, "mrr@5": mrr,
                         "ndcg@5": ndcg})


def test_select_best_breaks_ties_by_beta_near_half_then_the_smaller_beta():
    tie = [0.4] * 4
    chosen = select_best(macro_rows([1.0, 0.7, 0.1 + 0.2, 0.0], tie, tie, tie))
    assert chosen["beta"] == 0.1 + 0.2                                  # |β − 0.5| ties 0.7 after rounding
    assert select_best(macro_rows([0.0, 1.0, 0.45, 0.55], tie, tie, tie))["beta"] == 0.45
    # metric noise is rounded away (β decides), a real nDCG difference is not (it beats MRR and β)
    assert select_best(macro_rows([0.5, 0.0], [0.4, 0.4 + NOISE], [0.3, 0.3], [0.2, 0.2]))["beta"] == 0.5
    assert select_best(macro_rows([0.5, 0.0], [0.4, 0.4], [0.3, 0.31], [0.9, 0.2]))["beta"] == 0.0
    # a full tie on every key: the first row
    rows = pd.concat([macro_rows([0.3], [0.4], [0.3], [0.2], vector="raw_text_vector"),
                      macro_rows([0.3], [0.4], [0.3], [0.2])])
    assert select_best(rows)["vector"] == "raw_text_vector"


def test_select_overall_compares_unrounded_then_keeps_the_pairing_order():
    best = pd.concat([macro_rows([0.5], [0.4], [0.3], [0.2], bm25="raw_text_bm25"),
                      macro_rows([0.5], [0.4], [0.3], [0.2], bm25="summary_bm25")], ignore_index=True)
    forward = [("raw_text_bm25", "summary_vector"), ("summary_bm25", "summary_vector")]
    assert select_overall(best, forward)["bm25"] == "raw_text_bm25"
    assert select_overall(best, forward[::-1])["bm25"] == "summary_bm25"       # the pairing order, not the rows'
    best.loc[0, "recall@5"] += NOISE                                            # exact comparison: noise decides
    assert select_overall(best, forward[::-1])["bm25"] == "raw_text_bm25"


def per_question(means: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """One question per retriever, so each macro mean is the given (recall, ndcg, mrr)."""
    return pd.DataFrame([{"retriever": name, "question_id": "q", "question_type": "t", "recall@5": r, "ndcg@5": n,
                          "mrr@5": m} for name, (r, n, m) in means.items()])


def test_paper_best_flat_rounds_then_keeps_the_list_order():
    rows = per_question({"raw_text_bm25": (0.5, 0.2, 0.9), "summary_vector": (0.5 + NOISE, 0.2, 0.1),
                         "embedding_text_bm25": (0.5, 0.3, 0.0)})
    assert beyond.paper_best_flat(rows, ["summary_vector", "raw_text_bm25"]) == "raw_text_bm25"   # MRR after the tie
    assert beyond.paper_best_flat(rows, list(rows["retriever"])) == "embedding_text_bm25"        # nDCG
    tied = per_question({"raw_text_bm25": (0.5, 0.2, 0.1), "summary_vector": (0.5 + NOISE, 0.2, 0.1)})
    assert beyond.paper_best_flat(tied, ["summary_vector", "raw_text_bm25"]) == "summary_vector"  # list order
    assert beyond.paper_best_flat(tied, ["raw_text_bm25", "summary_vector"]) == "raw_text_bm25"


def test_python_round_on_numpy_means_is_numpy_round():
    # paper_best_flat once rounded with Python's round on numpy.float64 means: the same as numpy.round, which
    # Python's round on a float is not near a half at the 12th decimal
    rng = np.random.default_rng(0)
    values = (rng.integers(0, 10 ** 12, 2000) + 0.5) / 1e12 + rng.choice([-1e-17, 0.0, 1e-17], 2000)
    assert all(round(np.float64(v), 12) == np.round(v, 12) for v in values)
    assert any(round(float(v), 12) != np.round(v, 12) for v in values)


def test_best_flat_rounds_then_takes_the_name():
    rows = per_question({"raw_text_vector": (0.5, 0.2, 0.1), "raw_text_bm25": (0.5 + NOISE, 0.2, 0.1),
                         "summary_bm25": (0.5, 0.2, 0.1 - 0.01)})
    assert ge.best_flat(rows, ["summary_bm25", "raw_text_vector", "raw_text_bm25"], ["q"]) == "raw_text_bm25"
    rows.loc[rows["retriever"] == "raw_text_vector", "ndcg@5"] = 0.25
    assert ge.best_flat(rows, ["raw_text_bm25", "raw_text_vector"], ["q"]) == "raw_text_vector"


@pytest.mark.agreement
def test_tuning_ties_go_to_the_larger_threshold_then_the_smaller_cap():
    membership = sp.csr_matrix(np.array([[1, 0], [0, 1]], dtype=float))
    relevance = np.array([[0.9, 0.0], [0.95, 0.0]])          # every (threshold, cap) chooses interest 0 alone
    qrels = pd.DataFrame({"question_id": ["t1", "t2"], "chunk_id": ["m1", "m2"], "relevance": [2, 2]})
    grid, choice = ge.tune_interest_choice(relevance, membership, ["t1", "t2"], ["m1", "m2"], qrels,
                                           ["t1", "t2"], [0.5, 0.85], [2, 1])
    assert grid[["set_f1", "set_recall"]].nunique().tolist() == [1, 1]      # a full tie on the metrics
    assert choice == (0.85, 1)
    assert grid.loc[grid["chosen"], ["threshold", "cap"]].values.tolist() == [[0.85, 1]]


def test_the_vectorised_rule_takes_the_first_column_of_a_full_tie():
    means = np.array([[0.5, 0.5, 0.5], [0.5, 0.5 + NOISE, 0.5]])
    np.testing.assert_array_equal(select_columns(means, means * 0, means * 0), [0, 0])
    np.testing.assert_array_equal(select_columns(means, means * 0, means * 0, decimals=None), [0, 1])
