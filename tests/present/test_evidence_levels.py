"""Notebook 09's evidence table at three levels (chunk, evidence group, message), its reading, the README line."""

import pandas as pd
import pytest

from pmrag.present.artifacts import T, check_columns
from pmrag.present.report import evidence_levels, headline
from pmrag.present.statistics import evidence_reading, group_table


def rows(method: str, values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame({"retriever": method, "question_id": ["q1", "q2"], "question_type": "contextual", **values})


def inputs():
    chunk = pd.concat([rows("hybrid:a+b@0.50", {"recall@5": [0.5, 1.0], "mrr@5": [1.0, 0.5], "ndcg@5": [0.6, 0.8]}),
                       rows("bm25", {"recall@5": [0.0, 0.5], "mrr@5": [0.0, 1.0], "ndcg@5": [0.0, 0.4]})])
    group = pd.concat([rows("bm25", {"group_recall@5": [0.0, 1.0], "group_mrr@5": [0.0, 1.0],
                                     "group_ndcg@5": [0.0, 0.5]}),
                       rows("hybrid:a+b@0.50", {"group_recall@5": [1.0, 1.0], "group_mrr@5": [1.0, 0.5],
                                                "group_ndcg@5": [0.7, 0.9]})])
    message = pd.concat([rows("hybrid:a+b@0.50", {"message_recall@5": [2 / 3, 1.0], "message_recall@10": [1.0, 1.0]}),
                         rows("bm25", {"message_recall@5": [0.0, 0.25], "message_recall@10": [0.0, 0.5]})])
    # q1: 2 gold chunks in 1 group; q2: 3 gold chunks in 2 groups
    groups = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q2", "q2"], "chunk_id": list("abcde"),
                           "group": [0, 0, 0, 0, 1]})
    evidence = pd.DataFrame({"question_id": ["q1", "q2"], "evidence_messages": [3, 4], "in_no_chunk": [0, 1]})
    return chunk, group, groups, message, evidence


def test_the_table_puts_the_three_levels_side_by_side_in_the_chunk_rows_order():
    table = group_table(*inputs())
    check_columns(T.evidence_groups, table.columns)      # the declared layout
    assert table["retriever"].tolist() == ["hybrid:a+b@0.50", "bm25"]
    hybrid, bm25 = table.iloc[0], table.iloc[1]
    assert (hybrid["recall@5"], hybrid["group_recall@5"], hybrid["message_recall@5"]) == pytest.approx(
        (0.75, 1.0, (2 / 3 + 1) / 2))
    assert (bm25["recall@5"], bm25["group_recall@5"], bm25["message_recall@5"]) == pytest.approx((0.25, 0.5, 0.125))
    assert hybrid["Δ recall@5"] == pytest.approx(0.25) and hybrid["Δ message_recall@5"] == pytest.approx(5 / 6 - 0.75)
    assert bm25["ndcg@5"] == pytest.approx(0.2) and bm25["group_ndcg@5"] == pytest.approx(0.25)
    assert table[["gold chunks", "groups", "evidence messages", "in no chunk"]].drop_duplicates().values.tolist() == [
        [5, 3, 7, 1]]


def test_a_method_missing_at_one_level_is_left_out():
    chunk, group, groups, message, evidence = inputs()
    table = group_table(chunk, group, groups, message[message["retriever"] == "bm25"], evidence)
    assert table["retriever"].tolist() == ["bm25"]


def test_the_reading_says_what_each_level_counts():
    text = evidence_reading(group_table(*inputs()), "hybrid:a+b@0.50")
    assert text.startswith("hybrid:a+b@0.50: Recall@5 is 0.750 by chunk (the paper's: primary-gold chunks found, 5 "
                           "in all; evidence in two overlapping windows counts twice, several evidence messages in one "
                           "window once), 1.000 by evidence group (groups of those chunks found, 3 in all")
    assert "0.833 by message (primary-evidence messages held by a retrieved chunk, each once, 7 in all; 1 of them " \
           "lie in no chunk and count as never found)" in text
    # message − chunk: hybrid 5/6 − 3/4 = +0.083, bm25 0.125 − 0.25 = −0.125; group − chunk: +0.25 both
    assert text.endswith("Over the 2 methods, message − chunk ranges from -0.125 to +0.083, group − chunk from "
                         "+0.250 to +0.250.")
    with pytest.raises(ValueError, match="no row for method 'dense'"):
        evidence_reading(group_table(*inputs()), "dense")


def test_the_run_readme_states_the_selected_hybrid_at_the_three_levels(tmp_path):
    (tmp_path / "tables").mkdir()
    assert evidence_levels(tmp_path) == []
    table = pd.DataFrame({"retriever": ["bm25", "hybrid:a+b@0.50"], "recall@5": [0.4, 0.6], "ndcg@5": [0.3, 0.5],
                          "group_recall@5": [0.45, 0.62], "group_ndcg@5": [0.3, 0.5], "Δ recall@5": [0.05, 0.02],
                          "gold chunks": [12, 12], "groups": [10, 10], "message_recall@5": [0.35, 0.7],
                          "Δ message_recall@5": [-0.05, 0.1], "evidence messages": [15, 15], "in no chunk": [0, 0],
                          "summarizer": "stand-in"})
    table.to_csv(tmp_path / T.evidence_groups.file, index=False)
    assert evidence_levels(tmp_path) == []                     # no Table 5: the selected hybrid is not known
    pd.DataFrame({"comparison": ["Best − E-BM25"], "method_a": ["hybrid:a+b@0.50"], "method_b": ["bm25"],
                  "metric": ["recall@5"], "delta": [0.2], "ci_low": [0.1], "ci_high": [0.3], "excludes_zero": [True],
                  "interpretation": ["x"]}).to_csv(tmp_path / T.table5_differences.file, index=False)
    (line,) = evidence_levels(tmp_path)
    assert line.startswith("- Evidence counted three ways (notebook 09): hybrid:a+b@0.50: Recall@5 is 0.600 by chunk "
                           "(the paper's: primary-gold chunks found, 12 in all;")
    assert "0.620 by evidence group (groups of those chunks found, 10 in all" in line and "0.700 by message " \
           "(primary-evidence messages held by a retrieved chunk, each once, 15 in all; every one lies in some " \
           "chunk)" in line
    assert "from -0.050 to +0.100, group − chunk from +0.020 to +0.050" in line
    assert line in headline(tmp_path)
