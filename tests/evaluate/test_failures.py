"""Failure analysis (§7): Top-K failures, rule-based labels in the paper's order, recoverability, overlap."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate import failures
from pmrag.evaluate.metrics import per_question_metrics


def rows(types, r5, r10=None, r20=None):
    n = len(types)
    return pd.DataFrame({
        "question_id": [f"q{i}" for i in range(n)], "question_type": types, "recall@5": r5,
        "recall@10": r5 if r10 is None else r10, "recall@20": r5 if r20 is None else r20,
    })


QRELS = pd.DataFrame({
    "question_id": ["q0", "q0", "q0", "q1", "q1", "q1", "q2", "q3", "q3", "q4"],
    "chunk_id": ["a", "b", "c", "a", "d", "e", "f", "g", "h", "i"],
    "relevance": [2, 2, 2, 2, 2, 2, 1, 2, 2, 2],
})


def test_success_means_primary_gold_in_the_top_k_as_a_ranking_shows():
    qrels = pd.DataFrame({"question_id": ["x", "x", "y", "z"], "chunk_id": ["g1", "s1", "g2", "g3"], "relevance": [2, 1, 2, 2]})
    run = {"x": ["n1", "s1", "n2", "n3", "n4", "g1"], "y": ["g2"], "z": ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "g3"]}
    metrics = per_question_metrics(run, qrels, ks=(5, 10)).reset_index()
    # by hand: x has only supporting gold in its top 5 (a failure), y succeeds, z only at rank 8
    assert failures.successes(metrics, 5).to_dict() == {"x": False, "y": True, "z": False}
    assert failures.successes(metrics, 10).to_dict() == {"x": True, "y": True, "z": True}


def test_failure_table_counts_and_rates_per_type_and_overall():
    per_question = rows(["aggregate", "contextual", "aggregate", "named_entity", "contextual"], [0, 0.5, 0, 1, 0])
    table = failures.failure_table(per_question, 5, types=["named_entity", "contextual", "aggregate"])
    assert table["Question type"].tolist() == ["named_entity", "contextual", "aggregate", "Overall"]
    assert table["Questions"].tolist() == [1, 2, 2, 5]
    assert table["Top-5 failures"].tolist() == [0, 1, 2, 3]
    assert table["Failure rate"].tolist() == ["0.0%", "50.0%", "100.0%", "60.0%"]


def test_rule_labels_follow_the_papers_order():
    # q0: aggregate with 3 primary gold -> aggregate rule fires first; q1: contextual with 3 -> multiple;
    # q2: no primary gold counted (only supporting) -> other; q3: 2 primary -> other; q4 succeeds -> no label
    per_question = rows(["aggregate", "contextual", "contextual", "named_entity", "contextual"], [0, 0, 0, 0, 1])
    labels = failures.rule_labels(per_question, QRELS, k=5)
    assert labels["question_id"].tolist() == ["q0", "q1", "q2", "q3"]
    assert labels["n_primary"].tolist() == [3, 3, 0, 2]
    assert labels["label"].tolist() == ["aggregate_failure", "multiple_primary_gold_nonaggregate",
                                        "other_rule_based_failure", "other_rule_based_failure"]
    stricter = failures.rule_labels(per_question, QRELS, k=5, min_primary=2)
    assert stricter.set_index("question_id").loc["q3", "label"] == "multiple_primary_gold_nonaggregate"
    renamed = failures.rule_labels(per_question.replace({"aggregate": "4"}), QRELS, k=5, aggregate_type="4")
    assert renamed["label"].iloc[0] == "aggregate_failure"


def test_label_table_lists_every_label_with_its_share():
    labels = pd.DataFrame({"label": ["other_rule_based_failure"] * 3 + ["aggregate_failure"]})
    table = failures.label_table(labels)
    assert table["Failure type"].tolist() == ["other_rule_based_failure", "aggregate_failure", "multiple_primary_gold_nonaggregate"]
    assert table["Count"].tolist() == [3, 1, 0]
    assert table["Percentage"].tolist() == ["75.0%", "25.0%", "0.0%"]


def test_recovery_is_cumulative_over_wider_cutoffs_of_the_same_ranking():
    per_question = rows(["aggregate"] * 4 + ["contextual"], [0, 0, 0, 1, 0], r10=[0.5, 0, 0, 1, 1], r20=[0.5, 0.5, 0, 1, 1])
    table = failures.recovery(per_question, 5, (10, 20), question_type="aggregate")
    assert table.to_dict("records") == [
        {"cutoff": 10, "failures": 3, "recovered": 1, "still_failing": 2},
        {"cutoff": 20, "failures": 3, "recovered": 2, "still_failing": 1},
    ]
    assert failures.recovery(per_question, 5, (10,))["recovered"].tolist() == [2]


def test_recovered_is_a_top_k_failure_that_a_wider_cutoff_finds():
    per_question = rows(["aggregate"] * 4, [0, 0, 0.5, 0], r20=[0.5, 0, 1, 1])
    assert failures.recovered(per_question, 5, 20).to_dict() == {"q0": True, "q1": False, "q2": False, "q3": True}
    assert failures.recovered(per_question, 5, 10).to_dict() == {"q0": False, "q1": False, "q2": False, "q3": False}
    assert failures.recovered(per_question, 5, 20).name == "recovered@20"


def test_gold_spread_and_aggregate_summary():
    chunks = pd.DataFrame({
        "chunk_id": list("abcdefghi"), "source": ["s1", "s2", "s1", "s1", "s1", "s1", "s1", "s1", "s1"],
        "start_at": ["2024-01-01 10:00:00", "2024-01-01 11:00:00", "2024-01-02 09:00:00"] + ["2024-02-01 00:00:00"] * 6,
    })
    spread = failures.gold_spread(QRELS, chunks, ["q0", "q3", "q9"]).set_index("question_id")
    assert spread.loc["q0"].tolist() == [3, 2, 2]   # a, b, c: two dates, two sources
    assert spread.loc["q3"].tolist() == [2, 1, 1]
    assert spread.loc["q9"].tolist() == [0, 0, 0]   # no gold: zeros, not an error
    per_question = rows(["aggregate", "contextual", "contextual", "aggregate", "named_entity"], [0, 1, 1, 0, 1],
                        r10=[0, 1, 1, 0.5, 1], r20=[0.3, 1, 1, 0.5, 1])
    summary = failures.aggregate_summary(per_question, QRELS, chunks, 5, (10, 20)).set_index("Quantity")["Value"]
    assert summary["aggregate questions"] == 2
    assert summary["mean primary-gold chunks per aggregate question"] == 2.5
    assert summary["aggregate questions whose primary gold spans several dates"] == 1
    assert summary["aggregate questions whose primary gold spans several sources"] == 1
    assert summary["aggregate Top-5 failures"] == 2
    assert summary["... of them recovered at Top-10"] == 1 and summary["... of them recovered at Top-20"] == 2


def test_topk_sensitivity_per_type_and_all():
    per_question = rows(["aggregate", "aggregate", "contextual"], [0, 0.5, 1], r10=[0.25, 0.5, 1], r20=[0.25, 1, 1])
    table = failures.topk_sensitivity(per_question, (5, 10, 20), types=["contextual", "aggregate"])
    agg = table[table["question_type"] == "aggregate"].set_index("k")
    assert agg["success_rate"].tolist() == [0.5, 1.0, 1.0]
    assert agg["recall"].tolist() == pytest.approx([0.25, 0.375, 0.625])
    assert table[(table["question_type"] == "all") & (table["k"] == 5)]["success_rate"].item() == pytest.approx(2 / 3)
    assert table["question_type"].unique().tolist() == ["contextual", "aggregate", "all"]


def test_success_overlap_partitions_the_questions():
    bm25 = rows(["t"] * 5, [1, 1, 0, 0, 0.5])
    vector = rows(["t"] * 5, [1, 0, 1, 0, 0])
    table = failures.success_overlap(bm25, vector, 5)
    assert dict(zip(table["Success pattern"], table["Questions"])) == {"BM25 only": 2, "Vector only": 1, "Both": 1, "Neither": 1}
    assert table["Questions"].sum() == 5
    with pytest.raises(ValueError, match="same questions"):
        failures.success_overlap(bm25, vector.iloc[:4], 5)


def test_missing_cutoff_column_is_a_clear_error():
    with pytest.raises(ValueError, match="recall@7"):
        failures.successes(rows(["t"], [1]), 7)
    assert np.all(failures.successes(rows(["t", "t"], [0, 1]), 5).to_numpy() == [False, True])
