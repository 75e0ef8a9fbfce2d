"""Recall@k, MRR@k and nDCG@k as the paper defines them (§4.4, eq. 3–6): hand-computed cases per clause,
then agreement with ranx on random runs."""

from math import log2

import numpy as np
import pandas as pd
import pytest
from ranx import Qrels, Run, evaluate

from pmrag.evaluate.metrics import macro, per_question_metrics, per_question_table, relevance_matrix

COLUMNS = ["recall@5", "mrr@5", "ndcg@5"]


def qrels_of(judgments: dict[str, dict[str, int]]) -> pd.DataFrame:
    rows = [(q, c, r) for q, chunks in judgments.items() for c, r in chunks.items()]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"])


def scores(run, judgments, ks=(5,)):
    return per_question_metrics(run, qrels_of(judgments), ks=ks)


def one(run_list, judged, ks=(5,)):
    return scores({"q": run_list}, {"q": judged}, ks).loc["q"]


def dcg(gains):
    return sum((2**g - 1) / log2(i + 2) for i, g in enumerate(gains))


def test_gold_at_rank_1():
    row = one(["g", "x", "y"], {"g": 2})
    assert row[COLUMNS].tolist() == [1.0, 1.0, 1.0]


def test_gold_at_rank_3():
    row = one(["x", "y", "g", "z"], {"g": 2})
    assert row["recall@5"] == 1.0
    assert row["mrr@5"] == pytest.approx(1 / 3)
    assert row["ndcg@5"] == pytest.approx((3 / log2(4)) / 3)


def test_gold_absent_scores_zero():
    row = one(["x", "y", "z", "u", "v"], {"g": 2})
    assert row[COLUMNS].tolist() == [0.0, 0.0, 0.0]


def test_several_primary_gold():
    row = one(["x", "a", "y", "b", "z", "c"], {"a": 2, "b": 2, "c": 2})
    assert row["recall@5"] == pytest.approx(2 / 3)
    assert row["mrr@5"] == pytest.approx(1 / 2)
    assert row["ndcg@5"] == pytest.approx(dcg([0, 2, 0, 2, 0]) / dcg([2, 2, 2]))


def test_relevance_1_only_in_top_k_gives_recall_and_mrr_zero_but_ndcg_positive():
    row = one(["s", "x", "y", "z", "u", "g"], {"g": 2, "s": 1})
    assert row["recall@5"] == 0.0
    assert row["mrr@5"] == 0.0
    assert row["ndcg@5"] == pytest.approx(dcg([1]) / dcg([2, 1]))
    assert row["ndcg@5"] > 0


def test_idcg_uses_all_judged_chunks_including_unretrieved_ones():
    row = one(["g"], {"g": 2, "s1": 1, "s2": 1})
    assert row["recall@5"] == 1.0 and row["mrr@5"] == 1.0
    assert row["ndcg@5"] == pytest.approx(3 / (3 + 1 / log2(3) + 1 / log2(4)))


def test_idcg_is_truncated_at_k():
    gold = {f"g{i}": 2 for i in range(8)}
    row = one([f"g{i}" for i in range(5)], gold)
    assert row["ndcg@5"] == pytest.approx(1.0)
    assert row["recall@5"] == pytest.approx(5 / 8)


def test_k_cut_off():
    run = ["a", "b", "c", "d", "e", "g", "s"]
    row = one(run, {"g": 2, "s": 1}, ks=(5, 6, 10))
    assert row[["recall@5", "mrr@5", "ndcg@5"]].tolist() == [0.0, 0.0, 0.0]
    assert row["recall@6"] == 1.0 and row["mrr@6"] == pytest.approx(1 / 6)
    assert row["ndcg@6"] == pytest.approx((3 / log2(7)) / dcg([2, 1]))
    assert row["ndcg@10"] == pytest.approx((3 / log2(7) + 1 / log2(8)) / dcg([2, 1]))


def test_unjudged_and_judged_zero_chunks_count_as_relevance_0():
    judged = {"g": 2, "s": 1, "n": 0}
    with_zero = one(["n", "u", "g"], judged)
    unjudged = one(["v", "u", "g"], judged)
    pd.testing.assert_series_equal(with_zero, unjudged)
    assert with_zero["ndcg@5"] == pytest.approx((3 / log2(4)) / dcg([2, 1]))


def test_question_absent_from_run_scores_zero_and_rows_are_sorted():
    result = scores({"q2": ["g2"]}, {"q2": {"g2": 2}, "q1": {"g1": 2}})
    assert result.index.tolist() == ["q1", "q2"]
    assert result.index.name == "question_id"
    assert result.loc["q1"].tolist() == [0.0, 0.0, 0.0]
    assert result.loc["q2"].tolist() == [1.0, 1.0, 1.0]


def test_question_without_primary_gold_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"'q_side'.*primary"):
        scores({"q": ["g"]}, {"q": {"g": 2}, "q_side": {"s": 1}})
    with pytest.raises(ValueError, match="'q_unknown'"):
        scores({"q": ["g"], "q_unknown": ["g"]}, {"q": {"g": 2}})


def test_dataframe_run_in_any_row_order_equals_the_dict_run():
    judged = {"q1": {"a": 2, "b": 1}, "q2": {"c": 2, "d": 2}}
    as_dict = {"q1": ["x", "b", "a"], "q2": ["d", "y", "c"]}
    frame = pd.DataFrame(
        [(q, c, r + 1, 10.0 - r) for q, chunks in as_dict.items() for r, c in enumerate(chunks)],
        columns=["question_id", "chunk_id", "rank", "score"],
    ).sample(frac=1.0, random_state=3)
    ks = (1, 2, 5)
    pd.testing.assert_frame_equal(scores(frame, judged, ks), scores(as_dict, judged, ks))


def test_columns_follow_ks_then_metrics():
    result = per_question_metrics({"q": ["g"]}, qrels_of({"q": {"g": 2}}), ks=(10, 5), metrics=("ndcg", "recall"))
    assert list(result.columns) == ["ndcg@10", "recall@10", "ndcg@5", "recall@5"]


def test_per_question_table_stacks_each_method_in_the_given_order():
    judged = qrels_of({"q1": {"a": 2}, "q2": {"b": 2, "c": 1}})
    types = pd.Series({"q1": "single", "q2": "aggregate"})
    runs = {"second": {"q1": ["x", "a"], "q2": ["b"]}, "first": {"q1": ["a"], "q2": ["c", "x", "y", "z", "w", "b"]}}
    table = per_question_table(runs, judged, types, ks=(1, 5))
    assert list(table.columns) == ["retriever", "question_id", "question_type", "recall@1", "mrr@1", "ndcg@1",
                                   "recall@5", "mrr@5", "ndcg@5"]
    assert table[["retriever", "question_id", "question_type"]].values.tolist() == [
        ["second", "q1", "single"], ["second", "q2", "aggregate"], ["first", "q1", "single"], ["first", "q2", "aggregate"]]
    assert table["recall@1"].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert table["mrr@5"].tolist() == [0.5, 1.0, 1.0, 0.0]  # first's q2 has b at rank 6
    empty = per_question_table({}, judged, types, ks=(5, 20))
    assert empty.empty and list(empty.columns) == ["retriever", "question_id", "question_type", "recall@5", "mrr@5",
                                                   "ndcg@5", "recall@20", "mrr@20", "ndcg@20"]
    with pytest.raises(ValueError, match="ks must be"):
        per_question_table(runs, judged, types, ks=())


def test_macro_is_the_mean_over_questions():
    result = scores({"q1": ["g1"], "q2": ["x", "g2"]}, {"q1": {"g1": 2}, "q2": {"g2": 2}})
    averaged = macro(result)
    assert averaged["mrr@5"] == pytest.approx((1 + 0.5) / 2)
    assert averaged["recall@5"] == 1.0
    assert macro(result.reset_index())["mrr@5"] == averaged["mrr@5"]


def test_relevance_matrix_holds_ranked_and_ideal_grades():
    matrix = relevance_matrix({"q": ["x", "s", "g"]}, qrels_of({"q": {"g": 2, "s": 1, "t": 1, "n": 0}}), depth=4)
    assert matrix.ranked.tolist() == [[0, 1, 2, 0]]
    assert matrix.ideal.tolist() == [[2, 1, 1, 0]]
    assert matrix.n_primary.tolist() == [1]


@pytest.mark.parametrize(
    "run, judged, kwargs, message",
    [
        ({"q": ["g", "g"]}, {"q": {"g": 2}}, {}, "duplicate chunk"),
        ({"q": ["g"]}, {"q": {"g": 3}}, {}, "relevance must be one of"),
        ({"q": ["g"]}, {"q": {"g": 2}}, {"ks": (0,)}, "positive integers"),
        ({"q": ["g"]}, {"q": {"g": 2}}, {"ks": (5, 5)}, "duplicates"),
        ({"q": ["g"]}, {"q": {"g": 2}}, {"ks": ()}, "non-empty"),
        ({"q": ["g"]}, {"q": {"g": 2}}, {"metrics": ("map",)}, "metrics must be"),
    ],
)
def test_invalid_inputs(run, judged, kwargs, message):
    with pytest.raises(ValueError, match=message):
        per_question_metrics(run, qrels_of(judged), **kwargs)


def test_invalid_run_frames():
    qrels = qrels_of({"q": {"g": 2}})
    with pytest.raises(ValueError, match="lacks column"):
        per_question_metrics(pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"]}), qrels)
    with pytest.raises(ValueError, match="duplicate rank"):
        per_question_metrics(pd.DataFrame({"question_id": ["q", "q"], "chunk_id": ["g", "h"], "rank": [1, 1]}), qrels)
    with pytest.raises(ValueError, match="integers ≥ 1"):
        per_question_metrics(pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"], "rank": [0]}), qrels)
    with pytest.raises(ValueError, match="duplicate judgment"):
        per_question_metrics({"q": ["g"]}, pd.concat([qrels, qrels]))


def random_benchmark(seed=7, n_questions=200, n_docs=1000, run_depth=200):
    """Seeded runs and qrels: 1–5 judged chunks per question, grades 1/2 with at least one 2, mostly drawn
    from the run's top 12 so that every cutoff sees hits."""
    rng = np.random.default_rng(seed)
    docs = np.array([f"d{i:04d}" for i in range(n_docs)])
    run, judgments = {}, {}
    for i in range(n_questions):
        q = f"q{i:03d}"
        ranking = rng.choice(docs, size=run_depth, replace=False)
        judged = set()
        for _ in range(rng.integers(1, 6)):
            judged.add(rng.choice(ranking[:12]) if rng.random() < 0.6 else rng.choice(docs))
        judged = sorted(judged)
        grades = rng.integers(1, 3, size=len(judged))
        grades[rng.integers(len(judged))] = 2
        run[q] = list(ranking)
        judgments[q] = {d: int(g) for d, g in zip(judged, grades)}
    return run, judgments


@pytest.mark.agreement
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_agrees_with_ranx_on_random_runs():
    run, judgments = random_benchmark()
    ks = (5, 10, 20, 200)
    ours = per_question_metrics(run, qrels_of(judgments), ks=ks)
    ranx_run = Run.from_dict({q: {d: float(1000 - r) for r, d in enumerate(docs, start=1)} for q, docs in run.items()})
    names = {f"{m}@{k}": f"{r}@{k}{lvl}" for k in ks for m, r, lvl in
             (("recall", "recall", "-l2"), ("mrr", "mrr", "-l2"), ("ndcg", "ndcg_burges", ""))}
    evaluate(Qrels.from_dict(judgments), ranx_run, list(names.values()), return_mean=False, threads=1)
    assert (ours["mrr@5"] > 0).sum() > 50 and (ours["ndcg@200"] < 1).sum() > 50
    for ours_name, ranx_name in names.items():
        theirs = pd.Series(ranx_run.scores[ranx_name]).reindex(ours.index)
        np.testing.assert_allclose(ours[ours_name].to_numpy(), theirs.to_numpy(), rtol=0, atol=1e-9, err_msg=ours_name)
