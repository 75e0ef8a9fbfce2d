"""How incomplete gold moves the numbers: the simulated annotator, coverage, τ and the pool-bias test against
brute force on small random data; the incompleteness params."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from pmrag.annotate import incomplete as inc
from pmrag.annotate.judged import complete_judgments_of, judged_scores, measure_columns
from pmrag.annotate.pool import pool_chunks
from conftest import params_error, write_file

N_CHUNKS = 20
MINIMAL = "run: x\ndataset: {synthetic: {enabled: true}}\n"


def random_study(seed, n_retrievers=4, n_questions=8, depth=N_CHUNKS):
    """Rankings of every chunk by each retriever and complete gold (1–3 chunks of each question graded 1 or 2,
    one at least 2)."""
    rng = np.random.default_rng(seed)
    chunks = [f"c{c:02d}" for c in range(N_CHUNKS)]
    rankings = {}
    for r in range(n_retrievers):
        rows = [(f"q{q}", rank, chunks[c]) for q in range(n_questions)
                for rank, c in enumerate(rng.permutation(N_CHUNKS)[:depth], start=1)]
        rankings[f"r{r}"] = pd.DataFrame(rows, columns=["question_id", "rank", "chunk_id"])
    gold = []
    for q in range(n_questions):
        picked = rng.choice(N_CHUNKS, size=rng.integers(1, 4), replace=False)
        gold += [(f"q{q}", chunks[c], 2 if i == 0 else int(rng.integers(1, 3))) for i, c in enumerate(picked)]
    return rankings, pd.DataFrame(gold, columns=["question_id", "chunk_id", "relevance"]), chunks


def brute_pool_judgments(rankings, gold, pooled, depth):
    grade = {(q, c): g for q, c, g in gold.itertuples(index=False)}
    pairs = {(q, c) for name in pooled for q, rank, c in rankings[name].itertuples(index=False) if rank <= depth}
    return {(q, c): grade.get((q, c), 0) for q, c in pairs}


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_the_simulated_annotator_grades_every_pooled_chunk_by_the_complete_gold(depth):
    rankings, gold, _ = random_study(depth)
    judged = inc.pool_judgments(pool_chunks(rankings, depth, ["r0", "r1"]), gold)
    assert dict(zip(zip(judged["question_id"], judged["chunk_id"]), judged["relevance"])) == \
        brute_pool_judgments(rankings, gold, ["r0", "r1"], depth)
    assert not judged.duplicated(["question_id", "chunk_id"]).any()


@pytest.mark.parametrize("depth", [1, 3, 7])
def test_a_pool_judged_from_each_retrievers_top_pairs_is_the_pool_chunks_pool(depth):
    rankings, gold, _ = random_study(depth + 10)
    pooled = ["r2", "r0", "r3"]
    pairs = pd.concat([inc.top_pairs(rankings[name], depth) for name in pooled], ignore_index=True)
    judged = inc.pool_judgments(pairs, gold)
    brute = brute_pool_judgments(rankings, gold, pooled, depth)
    assert {(q, c): g for q, c, g in judged.itertuples(index=False)} == brute
    reference = inc.pool_judgments(pool_chunks(rankings, depth, pooled), gold)
    pd.testing.assert_frame_equal(inc.method_scores(rankings, judged), inc.method_scores(rankings, reference),
                                  check_exact=True)


def listed_complete_judgments(gold, chunks):
    """The complete gold row by row: every chunk of ``chunks`` for every question holding a relevance-2 chunk
    among them, graded by the gold, else 0."""
    grade = {(q, c): g for q, c, g in gold.itertuples(index=False)}
    questions = sorted({q for (q, c), g in grade.items() if g == 2 and c in chunks})
    return pd.DataFrame([(q, c, grade.get((q, c), 0)) for q in questions for c in chunks],
                        columns=["question_id", "chunk_id", "relevance"])


@pytest.mark.parametrize("seed", range(4))
def test_complete_judgments_score_as_every_chunk_listed_for_every_question(seed):
    rankings, gold, chunks = random_study(seed, depth=6)
    # a chunk outside the universe (ranked and in the gold: unjudged, and q0's gold there is not counted),
    # a question with its only relevance-2 chunk outside (dropped), a question the run does not rank
    rankings["r0"].loc[0, "chunk_id"] = "elsewhere"
    gold = pd.concat([gold, pd.DataFrame({"question_id": ["q0", "q_out", "q_unranked"],
                                          "chunk_id": ["elsewhere", "elsewhere", chunks[3]],
                                          "relevance": [2, 2, 2]})], ignore_index=True)
    listed = listed_complete_judgments(gold, chunks)
    complete = complete_judgments_of(gold, chunks)
    assert list(complete.question_ids) == sorted(listed["question_id"].unique())
    assert "q_out" not in complete.question_ids and "q_unranked" in complete.question_ids
    for ranking in rankings.values():
        np.testing.assert_allclose(judged_scores(ranking, complete, 5).to_numpy(),
                                   judged_scores(ranking, listed, 5).to_numpy(), atol=1e-12)


def test_complete_judgments_count_every_other_chunk_as_judged_non_relevant():
    """bpref's min(R, N) with N < R: three chunks, two of them relevant, so N = 1."""
    gold = pd.DataFrame({"question_id": ["q", "q"], "chunk_id": ["a", "b"], "relevance": [2, 2]})
    ranking = pd.DataFrame({"question_id": ["q"] * 3, "rank": [1, 2, 3], "chunk_id": ["c", "a", "b"]})
    complete = complete_judgments_of(gold, ["a", "b", "c"])
    assert list(complete.n_nonrelevant) == [1]
    scores = judged_scores(ranking, complete, 5)
    assert scores.loc["q", "bpref"] == pytest.approx(0.0)   # both relevant below the one non-relevant: 1 − 1/1 each
    assert scores.loc["q", "judged@5"] == 1.0
    with pytest.raises(ValueError, match="'a' is listed twice"):
        complete_judgments_of(gold, ["a", "b", "a"])


@pytest.mark.agreement
def test_complete_judgments_give_ir_measures_numbers():
    rankings, gold, chunks = random_study(5, depth=8)
    complete = complete_judgments_of(gold, chunks)
    assert inc.library_agreement(rankings, complete).max() < 1e-12
    listed = listed_complete_judgments(gold, chunks)
    np.testing.assert_allclose(inc.method_scores(rankings, complete, library=True).to_numpy(float),
                               inc.method_scores(rankings, listed).to_numpy(float), atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_gold_coverage_is_the_share_of_gold_rows_the_pool_holds(seed):
    rankings, gold, _ = random_study(seed)
    judged = inc.pool_judgments(pool_chunks(rankings, 3), gold)
    held = set(zip(judged["question_id"], judged["chunk_id"]))
    rows = list(gold.itertuples(index=False))
    coverage = inc.gold_coverage(judged, gold)
    assert coverage["gold_share"] == pytest.approx(np.mean([(q, c) in held for q, c, g in rows]))
    assert coverage["primary_share"] == pytest.approx(np.mean([(q, c) in held for q, c, g in rows if g == 2]))


def test_questions_without_a_pooled_relevance_2_chunk_are_dropped():
    judged = pd.DataFrame({"question_id": ["a", "a", "b", "c"], "chunk_id": ["x", "y", "x", "z"],
                           "relevance": [0, 2, 1, 0]})
    assert list(inc.kept_questions(judged)["question_id"]) == ["a", "a"]


@pytest.mark.agreement
@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_is_scipys_tau_b_and_counts_pairs_without_ties(seed):
    rng = np.random.default_rng(seed)
    index = [f"m{i}" for i in range(7)]
    a, b = pd.Series(rng.permutation(7) * 1.0, index=index), pd.Series(rng.permutation(7) * 1.0, index=index)
    concordant = sum(np.sign(a.iloc[i] - a.iloc[j]) * np.sign(b.iloc[i] - b.iloc[j])
                     for i, j in itertools.combinations(range(7), 2))
    assert inc.kendall_tau(a, b[::-1]) == pytest.approx(concordant / 21, abs=1e-12)
    ties = pd.Series([1.0, 1.0, 2.0, 3.0, 3.0, 0.5, 4.0], index=index)
    assert inc.kendall_tau(ties, b) == pytest.approx(kendalltau(ties.to_numpy(), b.to_numpy()).statistic, abs=1e-12)
    assert np.isnan(inc.kendall_tau(a.iloc[:1], b))


@pytest.mark.parametrize("seed", range(3))
def test_depth_scores_are_each_retriever_scored_on_the_pools_judgments_of_the_kept_questions(seed):
    rankings, gold, chunks = random_study(seed)
    pooled = ["r0", "r1"]
    scores = inc.depth_scores(rankings, gold, chunks, pooled, [1, 3])
    for depth in (1, 3):
        judged = brute_pool_judgments(rankings, gold, pooled, depth)
        kept = {q for (q, _), g in judged.items() if g == 2}
        frame = pd.DataFrame([(q, c, g) for (q, c), g in judged.items() if q in kept],
                             columns=["question_id", "chunk_id", "relevance"])
        rows = scores[scores["depth"] == depth].set_index("retriever")
        same = gold[gold["question_id"].isin(kept)]
        for name, ranking in rankings.items():
            expected = judged_scores(ranking, frame, 5).mean() if kept else pd.Series(np.nan, measure_columns(5))
            np.testing.assert_allclose(rows.loc[name, measure_columns(5)].to_numpy(float), expected.to_numpy(),
                                       atol=1e-12)
            truth = judged_scores(ranking, same, 5).mean() if kept else pd.Series(np.nan, measure_columns(5))
            np.testing.assert_allclose(rows.loc[name, ["recall@5 complete kept", "ndcg@5 complete kept"]].to_numpy(float),
                                       truth[["recall@5", "ndcg@5"]].to_numpy(float), atol=1e-12)
            assert rows.loc[name, "pooled"] == (name in pooled)
        assert (rows["questions"] == len(kept)).all()
        assert (rows["pool_total"] == len(judged)).all()
        assert rows["pool_mean"].iloc[0] == pytest.approx(len(judged) / len({q for q, _ in judged}))


def test_a_pool_of_every_chunk_gives_the_complete_golds_numbers_and_tau_one():
    rankings, gold, chunks = random_study(7)
    scores = inc.depth_scores(rankings, gold, chunks, ["r0"], [N_CHUNKS])
    table = inc.pool_depth_table(scores)
    np.testing.assert_allclose(table["recall@5 pool"], table["recall@5 complete"], atol=1e-12)
    np.testing.assert_allclose(table["recall@5 complete kept"], table["recall@5 complete"], atol=1e-12)
    np.testing.assert_allclose(table["ndcg@5 pool"], table["ndcg@5 complete"], atol=1e-12)
    assert (table["gold_share"] == 1.0).all() and (table["primary_share"] == 1.0).all()
    assert table["tau recall@5"].iloc[0] == pytest.approx(1.0)
    judged = inc.judged_table(scores)
    assert (judged["judged@5"] == 1.0).all()
    np.testing.assert_allclose(judged["bpref"], judged["bpref complete"], atol=1e-12)
    agreement = inc.measure_agreement(scores)
    np.testing.assert_allclose(agreement["tau all"], 1.0)


def test_deeper_pools_hold_more_of_the_gold():
    rankings, gold, chunks = random_study(3)
    table = inc.pool_depth_table(inc.depth_scores(rankings, gold, chunks, ["r0", "r2"], [1, 2, 4, 8]))
    per_depth = table.drop_duplicates("depth")
    assert per_depth["gold_share"].is_monotonic_increasing
    assert per_depth["pool_total"].is_monotonic_increasing
    assert list(table.columns) == list(inc.COVERAGE_COLUMNS)


@pytest.mark.parametrize("seed", range(3))
def test_leave_one_out_scores_each_retriever_on_a_pool_without_it(seed):
    rankings, gold, chunks = random_study(seed)
    pooled, depth = ["r0", "r1", "r2"], 4
    table = inc.leave_one_out_table(rankings, gold, chunks, pooled, depth).set_index("retriever")

    def recall_on(pool_of, name):
        judged = brute_pool_judgments(rankings, gold, pool_of, depth)
        kept = {q for (q, _), g in judged.items() if g == 2}
        assert kept
        frame = pd.DataFrame([(q, c, g) for (q, c), g in judged.items() if q in kept],
                             columns=["question_id", "chunk_id", "relevance"])
        return {n: judged_scores(r, frame, 5)["recall@5"].mean() for n, r in rankings.items()}, len(kept)

    complete = {n: judged_scores(r, gold, 5)["recall@5"].mean() for n, r in rankings.items()}
    for name in rankings:
        others = [r for r in pooled if r != name]
        left_out, kept = recall_on(others, name)
        with_it, kept_with_it = recall_on(others + [name], name)
        row = table.loc[name]
        assert row["recall@5 left out"] == pytest.approx(left_out[name], abs=1e-12)
        assert row["recall@5 with it"] == pytest.approx(with_it[name], abs=1e-12)
        assert row["recall@5 complete"] == pytest.approx(complete[name], abs=1e-12)
        assert row["Δ recall@5"] == pytest.approx(left_out[name] - complete[name], abs=1e-12)
        assert row["rank left out"] == 1 + sum(v > left_out[name] for v in left_out.values())
        assert row["rank complete"] == 1 + sum(v > complete[name] for v in complete.values())
        assert row["pool"] == len(others) and row["pooled"] == (name in pooled)
        assert row["questions"] == kept and row["questions with it"] == kept_with_it


@pytest.mark.agreement
def test_our_judged_and_bpref_agree_with_ir_measures_on_a_pool():
    rankings, gold, _ = random_study(11)
    judged = inc.pool_judgments(pool_chunks(rankings, 2, ["r0", "r1"]), gold)
    assert (inc.library_agreement(rankings, inc.kept_questions(judged)) < 1e-12).all()


# ------------------------------------------------------------------------------------------------ params

def test_the_pooled_retrievers_default_to_the_six_the_study_lists(tmp_path):
    from pmrag.study.params import load_params

    params = load_params(write_file(tmp_path, MINIMAL + "retrieval: {retrievers: [summary_vector, raw_text_bm25, "
                                               "raw_text_bm25_char2, summary_bm25]}\n"
                                               "hybrid: {pairings: [[summary_bm25, summary_vector]]}\n"
                                               "analysis: {reference_retriever: summary_bm25, "
                                               "diagnostic_hybrid: [summary_bm25, summary_vector, 0.5]}\n"))
    assert params.pool_retrievers() == ("summary_vector", "raw_text_bm25", "summary_bm25")
    named = load_params(write_file(tmp_path, MINIMAL + "incompleteness: {pool_retrievers: [raw_text_rm3]}\n"
                                             "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, "
                                             "summary_vector, embedding_text_vector, raw_text_rm3]}\n"))
    assert named.pool_retrievers() == ("raw_text_rm3",)


@pytest.mark.parametrize("extra, key", [
    ("incompleteness: {pool_retrievers: [raw_text_rm3]}\n", "incompleteness.pool_retrievers"),
    ("incompleteness: {pool_retrievers: [raw_text_bm25, raw_text_bm25]}\n", "incompleteness.pool_retrievers"),
    ("incompleteness: {depths: [0]}\n", "incompleteness.depths"),
    ("incompleteness: {leave_out_depth: 0}\n", "incompleteness.leave_out_depth"),
])
def test_bad_incompleteness_params_are_one_line_naming_the_key(tmp_path, extra, key):
    path = write_file(tmp_path, MINIMAL + extra)
    message = params_error(path)
    assert message.startswith(str(path)) and key in message, message


def test_a_pooled_retriever_without_a_ranking_or_a_bad_depth_is_named():
    rankings, gold, chunks = random_study(1)
    with pytest.raises(ValueError, match="no ranking for retriever.s. 'nope'"):
        inc.leave_one_out_table(rankings, gold, chunks, ["r0", "nope"], 3)
    with pytest.raises(ValueError, match="no ranking for retriever.s. 'nope'"):
        inc.depth_scores(rankings, gold, chunks, ["nope"], [2])
    with pytest.raises(ValueError, match="depth must be an integer ≥ 1, got 0"):
        inc.leave_one_out_table(rankings, gold, chunks, ["r0"], 0)
    with pytest.raises(ValueError, match="retrievers must name at least one retriever"):   # r0 left out of {r0}
        inc.leave_one_out_table(rankings, gold, chunks, ["r0"], 3)
