"""Positive-score candidates per question (the lexical overlap BM25 has to work with) beside Recall@5."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.candidates import matching_table, with_recall


def test_matching_table_counts_and_percentiles_agree_with_numpy():
    counts = {"a_bm25": pd.Series([0, 3, 59, 120, 7]), "b_vector": pd.Series([9, 9, 9, 9, 9])}
    table = matching_table(counts, depth=100).set_index("retriever")
    values = np.array([0, 3, 59, 120, 7])
    assert table.loc["a_bm25", "median"] == np.median(values) == 7
    assert table.loc["a_bm25", "p10"] == pytest.approx(np.percentile(values, 10))
    assert table.loc["a_bm25", "questions under depth"] == 4 and table.loc["b_vector", "questions under depth"] == 5


def test_with_recall_puts_each_retrievers_mean_recall_beside_its_overlap():
    matching = matching_table({"a_bm25": pd.Series([1, 2]), "b_vector": pd.Series([5, 5])}, depth=10)
    per_question = pd.DataFrame({"retriever": ["b_vector", "a_bm25", "a_bm25", "b_vector"],
                                 "question_id": ["q1", "q1", "q2", "q2"], "recall@5": [1.0, 0.0, 0.5, 0.0]})
    table = with_recall(matching, per_question)
    assert table["retriever"].tolist() == ["a_bm25", "b_vector"]          # the matching table's order
    assert table["Recall@5"].tolist() == [0.25, 0.5]
    assert list(table.columns)[-1] == "Recall@5"
    missing = with_recall(matching, per_question[per_question["retriever"] == "a_bm25"])
    assert np.isnan(missing.loc[missing["retriever"] == "b_vector", "Recall@5"]).all()   # no rows: NaN, not 0
