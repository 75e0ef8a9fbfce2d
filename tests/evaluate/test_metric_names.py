"""Metric names (pmrag.evaluate.metric_names): one type, one parser, the written form of every saved column."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.metric_names import (
    MRR5,
    NDCG5,
    PAPER_COLUMNS,
    PAPER_METRICS,
    RECALL5,
    SET_F1,
    SET_RECALL,
    TABLE_METRICS,
    InvalidMetric,
    Metric,
    at_k,
    is_metric,
    metric_columns,
    parse_metric,
)
from pmrag.evaluate.metrics import per_question_metrics
from pmrag.evaluate.set_metrics import SET_METRICS


@pytest.mark.parametrize("text", ["recall@5", "mrr@10", "ndcg@20", "recall@200", "group_recall@5", "group_mrr@10",
                                  "group_ndcg@5", "message_recall@5", "message_recall@20", "set_precision",
                                  "set_recall", "set_f1"])
def test_names_round_trip(text):
    metric = parse_metric(text)
    assert str(metric) == text
    assert parse_metric(str(metric)) == metric
    assert parse_metric(metric) is metric
    assert is_metric(text)


def test_parts_and_constants():
    assert parse_metric("ndcg@5") == Metric("ndcg", 5) == NDCG5
    assert parse_metric("set_f1") == Metric("set_f1") == SET_F1 and SET_F1.k is None
    assert (RECALL5.name, RECALL5.k) == ("recall", 5)
    assert [str(m) for m in PAPER_METRICS] == ["recall@5", "ndcg@5", "mrr@5"]        # the selection order, §6.2
    assert [str(m) for m in TABLE_METRICS] == ["recall@5", "mrr@5", "ndcg@5"]        # the tables' order
    assert PAPER_COLUMNS == ("recall@5", "mrr@5", "ndcg@5")
    assert SET_METRICS == ("set_precision", "set_recall", "set_f1") and str(SET_RECALL) == "set_recall"
    assert RECALL5.at(20) == Metric("recall", 20) and str(MRR5.at(10)) == "mrr@10"
    assert [str(m) for m in at_k(10)] == ["recall@10", "mrr@10", "ndcg@10"]
    assert [str(m) for m in at_k(5, ("group_recall", "group_ndcg"))] == ["group_recall@5", "group_ndcg@5"]
    assert Metric("recall", np.int64(5)) == RECALL5 and type(Metric("recall", np.int64(5)).k) is int
    assert {RECALL5: 1}[parse_metric("recall@5")] == 1                               # hashable, equal by value


def test_labels_are_the_papers_spelling():
    assert [m.label for m in TABLE_METRICS] == ["Recall@5", "MRR@5", "nDCG@5"]
    assert RECALL5.at(20).label == "Recall@20"
    assert SET_F1.label == "set_f1" and Metric("group_recall", 5).label == "group_recall@5"


@pytest.mark.parametrize("text, names", [
    ("map@5", "map"), ("recall", "cut-off"), ("message_recall", "cut-off"), ("message_mrr@5", "message_mrr"),
    ("recall@0", "cut-off"), ("recall@x", "recall@x"),
    ("set_f1@5", "no cut-off"), ("Recall@5", "Recall@5"), ("recall@5 ", "recall@5 "), ("", "''"),
    ("recall@-1", "recall@-1"), ("ndcg@5@5", "ndcg@5@5"), (5, "5"), (None, "None"),
])
def test_bad_names_are_one_line_errors_naming_the_name(text, names):
    with pytest.raises(InvalidMetric) as error:
        parse_metric(text)
    message = str(error.value)
    assert "\n" not in message and names in message
    assert repr(text) in message or not isinstance(text, str)
    assert isinstance(error.value, ValueError)
    assert not is_metric(text)


def test_bad_metrics_are_refused_when_made():
    with pytest.raises(InvalidMetric, match="unknown metric 'map'"):
        Metric("map", 5)
    with pytest.raises(InvalidMetric, match="recall needs a cut-off"):
        Metric("recall")
    with pytest.raises(InvalidMetric, match="recall needs a cut-off"):
        Metric("recall", True)
    with pytest.raises(InvalidMetric, match="set_recall has no cut-off"):
        Metric("set_recall", 5)
    with pytest.raises(InvalidMetric):
        RECALL5.at(0)


def test_a_long_bad_name_is_quoted_short():
    message = str(pytest.raises(InvalidMetric, parse_metric, "x" * 5000).value)
    assert len(message) < 400


def test_metric_columns_are_the_metric_names_among_a_frames_columns():
    columns = ["retriever", "question_id", "question_type", "recall@5", "bm25 recall@200", "set_f1", "group_ndcg@5",
               "beta", "success@5"]
    assert metric_columns(columns) == ["recall@5", "set_f1", "group_ndcg@5"]


def test_the_metric_functions_write_the_names_the_parser_reads():
    qrels = pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"], "relevance": [2]})
    table = per_question_metrics({"q": ["g"]}, qrels, ks=(5, 10), metrics=("ndcg", "recall"))
    assert list(table.columns) == ["ndcg@5", "recall@5", "ndcg@10", "recall@10"]
    assert [parse_metric(c) for c in table.columns] == [NDCG5, RECALL5, NDCG5.at(10), RECALL5.at(10)]
