"""Measures over incomplete judgments: our kernels against brute force from the definitions and against
ir-measures (trec_eval), bpref against a hand-computed example."""

import math

import numpy as np
import pandas as pd
import pytest

from pmrag.annotate.judged import (bpref, complete_judgments_of, condense, ir_measures_evaluator, ir_measures_scores,
                                   judged_at, judged_scores, judged_scores_of_runs, judgment_matrix, measure_columns)
from pmrag.evaluate.metrics import per_question_metrics


def random_case(seed, n_questions=6, n_chunks=25, depth=12):
    """A run (every question ranks ``depth`` chunks, one question ranks fewer) and judgments of a random subset
    of the chunks, each judged question holding a relevance-2 chunk."""
    rng = np.random.default_rng(seed)
    runs, judged = [], []
    for q in range(n_questions):
        length = depth if q else 3
        for rank, c in enumerate(rng.choice(n_chunks, size=length, replace=False), start=1):
            runs.append((f"q{q}", f"c{c:02d}", rank))
        chosen = rng.choice(n_chunks, size=rng.integers(2, 15), replace=False)
        grades = rng.integers(0, 3, size=len(chosen))
        grades[0] = 2
        judged += [(f"q{q}", f"c{c:02d}", int(g)) for c, g in zip(chosen, grades)]
    return (pd.DataFrame(runs, columns=["question_id", "chunk_id", "rank"]),
            pd.DataFrame(judged, columns=["question_id", "chunk_id", "relevance"]))


def brute(run, judgments, k):
    """Every measure from its definition, one question at a time, with plain Python lists."""
    rows = {}
    for q, grades_of in judgments.groupby("question_id"):
        grade = dict(zip(grades_of["chunk_id"], grades_of["relevance"]))
        ranked = list(run[run["question_id"] == q].sort_values("rank")["chunk_id"])
        relevant = sum(g == 2 for g in grade.values())
        nonrelevant = sum(g < 2 for g in grade.values())
        ideal = sorted(grade.values(), reverse=True)

        def dcg(grades):
            return sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(grades[:k]))

        def recall_of(chunks):
            return sum(grade.get(c, 0) == 2 for c in chunks[:k]) / relevant

        condensed = [c for c in ranked if c in grade]
        top = ranked[:k]
        total, seen = 0.0, 0
        for c in ranked:
            if c not in grade:
                continue
            if grade[c] == 2:
                total += 1.0 - (min(seen, relevant) / min(relevant, nonrelevant) if seen else 0.0)
            else:
                seen += 1
        rows[q] = [recall_of(ranked), dcg([grade.get(c, 0) for c in ranked]) / dcg(ideal),
                   sum(c in grade for c in top) / len(top) if top else 0.0,
                   recall_of(condensed), dcg([grade[c] for c in condensed]) / dcg(ideal), total / relevant]
    return pd.DataFrame.from_dict(rows, orient="index", columns=measure_columns(k)).rename_axis("question_id")


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [1, 5, 10])
def test_every_measure_equals_its_definition_computed_one_question_at_a_time(seed, k):
    run, judgments = random_case(seed)
    ours = judged_scores(run, judgments, k)
    pd.testing.assert_frame_equal(ours, brute(run, judgments, k).loc[ours.index], rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_recall_and_ndcg_are_the_papers_when_unjudged_count_as_zero(seed):
    run, judgments = random_case(seed)
    ours = judged_scores(run, judgments, 5)
    paper = per_question_metrics(run, judgments, ks=[5], metrics=["recall", "ndcg"])
    np.testing.assert_allclose(ours[["recall@5", "ndcg@5"]].to_numpy(), paper.loc[ours.index].to_numpy(), atol=1e-12)


@pytest.mark.agreement
@pytest.mark.parametrize("seed", range(8))
def test_judged_and_bpref_agree_with_ir_measures(seed):
    run, judgments = random_case(seed)
    ours = judged_scores(run, judgments, 5)
    library = ir_measures_scores(run, ir_measures_evaluator(judgments, 5), 5).loc[ours.index]
    np.testing.assert_allclose(ours[["judged@5", "bpref"]].to_numpy(), library.to_numpy(), rtol=0, atol=1e-12)
    through = judged_scores(run, judgments, 5, evaluator=ir_measures_evaluator(judgments, 5))
    pd.testing.assert_frame_equal(through, ours, rtol=0, atol=1e-12)


@pytest.mark.agreement
@pytest.mark.parametrize("seed", range(4))
def test_condensed_ndcg_agrees_with_ir_measures_judged_only_ndcg(seed):
    import ir_measures

    run, judgments = random_case(seed)
    measure = ir_measures.nDCG(cutoff=5, judged_only=True, gains={0: 0, 1: 1, 2: 3})   # 2^rel − 1 (eq. 5)
    qrels = judgments.rename(columns={"question_id": "query_id", "chunk_id": "doc_id"})
    scored = run.rename(columns={"question_id": "query_id", "chunk_id": "doc_id"}).assign(score=-run["rank"] * 1.0)
    library = pd.Series({m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, scored)})
    ours = judged_scores(run, judgments, 5)["condensed_ndcg@5"]
    np.testing.assert_allclose(ours.to_numpy(), library.loc[ours.index].to_numpy(), rtol=0, atol=1e-12)


def test_bpref_of_a_hand_computed_example():
    # R = 2 relevant (a, b), N = 3 judged non-relevant (x, y and the relevance-1 s); u is unjudged.
    # Ranked: x u a y b s → a has 1 non-relevant above: 1 − 1/min(2, 3) = 1/2; b has 2: 1 − 2/2 = 0.
    # bpref = (1/2 + 0) / 2 = 1/4
    judgments = pd.DataFrame({"question_id": ["q"] * 5, "chunk_id": ["a", "b", "x", "y", "s"],
                              "relevance": [2, 2, 0, 0, 1]})
    run = pd.DataFrame({"question_id": ["q"] * 6, "chunk_id": ["x", "u", "a", "y", "b", "s"], "rank": range(1, 7)})
    assert judged_scores(run, judgments, 5).at["q", "bpref"] == pytest.approx(0.25, abs=1e-12)
    library = ir_measures_scores(run, ir_measures_evaluator(judgments, 5), 5)
    assert library.at["q", "bpref"] == pytest.approx(0.25, abs=1e-12)
    assert library.at["q", "judged@5"] == pytest.approx(4 / 5, abs=1e-12)


def test_condense_moves_judged_ranks_up_in_order_and_pads_with_unjudged_zeros():
    grades = np.array([[0, 2, 1, 0], [2, 0, 0, 1]], dtype=np.int8)
    judged = np.array([[False, True, False, True], [True, True, False, False]])
    condensed, mask = condense(grades, judged)
    np.testing.assert_array_equal(condensed, [[2, 0, 0, 0], [2, 0, 0, 0]])
    np.testing.assert_array_equal(mask, [[True, True, False, False], [True, True, False, False]])


def test_judged_at_k_divides_by_the_chunks_retrieved_and_is_zero_for_an_empty_list():
    judged = np.array([[True, False, True], [False, False, False], [True, False, False]])
    retrieved = np.array([[True, True, True], [False, False, False], [True, False, False]])
    np.testing.assert_allclose(judged_at(judged, retrieved, 2), [0.5, 0.0, 1.0])


def test_bpref_without_judged_nonrelevant_counts_every_relevant_retrieved():
    grades = np.array([[2, 0, 2]], dtype=np.int8)
    judged = np.array([[True, False, True]])
    assert bpref(grades, judged, np.array([3]), np.array([0]))[0] == pytest.approx(2 / 3)


def test_the_matrix_scores_the_judged_questions_only_and_an_unranked_one_as_empty():
    judgments = pd.DataFrame({"question_id": ["q1", "q2"], "chunk_id": ["a", "b"], "relevance": [2, 2]})
    run = pd.DataFrame({"question_id": ["q1", "q3"], "chunk_id": ["a", "z"], "rank": [1, 1]})
    matrix = judgment_matrix(run, judgments, 3)
    assert list(matrix.question_ids) == ["q1", "q2"]
    assert matrix.retrieved.tolist() == [[True, False, False], [False, False, False]]
    assert judged_scores(run, judgments, 5).loc["q2"].tolist() == [0.0] * 6


@pytest.mark.parametrize("judgments, depth, message", [
    (pd.DataFrame({"question_id": ["q"], "chunk_id": ["a"], "relevance": [1]}), 5, "no relevance-2 chunk"),
    (pd.DataFrame({"question_id": ["q"], "chunk_id": ["a"], "relevance": [2]}), 0, "depth must be a positive"),
])
def test_bad_input_is_refused_in_one_line(judgments, depth, message):
    run = pd.DataFrame({"question_id": ["q"], "chunk_id": ["a"], "rank": [1]})
    with pytest.raises(ValueError, match=message):
        judgment_matrix(run, judgments, depth)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("complete", [False, True])
def test_runs_scored_together_equal_each_run_scored_alone(seed, complete):
    """judged_scores_of_runs looks every run's entries up at once; each run's frame is judged_scores' of it alone,
    bit for bit, whatever the runs' depths (3 to 12 ranks, one run deeper than the cut-off for none), with a run that
    ranks a question nobody judged, an empty run, and with ir-measures' judged@k and bpref."""
    rng = np.random.default_rng(seed)
    run, judgments = random_case(seed)
    runs = {"full": run, "shallow": run[run["rank"] <= 3], "one": run[run["rank"] == 1]}
    other, _ = random_case(seed + 100)
    runs["other"] = pd.concat([other, pd.DataFrame({"question_id": ["unjudged"], "chunk_id": ["c00"], "rank": [1]})])
    runs["empty"] = run.iloc[:0]
    judgments = judgments.sample(frac=1.0, random_state=int(rng.integers(1 << 31)))
    if complete:
        judgments = complete_judgments_of(judgments, [f"c{c:02d}" for c in range(25)])
    for k in (1, 5):
        together = judged_scores_of_runs(runs, judgments, k)
        assert list(together) == list(runs)
        for name, ranking in runs.items():
            pd.testing.assert_frame_equal(together[name], judged_scores(ranking, judgments, k), check_exact=True)
    library = judged_scores_of_runs(runs, judgments, 5, evaluator=ir_measures_evaluator(judgments, 5))
    for name, ranking in runs.items():
        alone = judged_scores(ranking, judgments, 5, evaluator=ir_measures_evaluator(judgments, 5))
        pd.testing.assert_frame_equal(library[name], alone, check_exact=True)
