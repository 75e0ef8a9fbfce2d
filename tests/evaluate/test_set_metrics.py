"""Set precision, recall and F1 of TOBUGraph's Table 2 (paper 002, §3.3.1): agreement with scikit-learn per
question, the empty-set and empty-gold rules, the bootstrap over the per-question rows, and the top-k →
memory-set helpers."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_recall_fscore_support

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci_table, difference_table
from pmrag.evaluate.metrics import per_question_rows
from pmrag.evaluate.reliability import by_type_cis, paired_differences
from pmrag.evaluate.set_metrics import (
    SET_METRICS, per_question_set_rows, pieces_to_memories, pooled_scores, set_counts, set_metric_cis, set_scores,
    top_k_set,
)

PAPER = BootstrapSection()


def qrels_of(judgments: dict[str, dict[str, int]]) -> pd.DataFrame:
    rows = [(q, c, r) for q, chunks in judgments.items() for c, r in chunks.items()]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"])


def sets_of(retrieved: dict[str, dict[str, list[str]]]) -> pd.DataFrame:
    rows = [(r, q, c) for r, questions in retrieved.items() for q, chunks in questions.items() for c in chunks]
    return pd.DataFrame(rows, columns=["retriever", "question_id", "chunk_id"])


def types_of(questions) -> pd.Series:
    return pd.Series("single", index=pd.Index(list(questions), name="question_id"))


def sklearn_scores(retrieved: set, gold: set, others: set = frozenset()) -> tuple[float, float, float]:
    """P, R, F1 of binary indicators over the candidate chunks R ∪ G ∪ others, ``zero_division=0``."""
    candidates = sorted(retrieved | gold | set(others))
    y_true = np.array([c in gold for c in candidates], dtype=int)
    y_pred = np.array([c in retrieved for c in candidates], dtype=int)
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average="binary", zero_division=0)
    return float(p), float(r), float(f)


def one(retrieved: list[str], judged: dict[str, int], **kwargs) -> pd.Series:
    rows = per_question_set_rows(sets_of({"m": {"q": retrieved}}), qrels_of({"q": judged}), types_of(["q"]),
                                 retrievers=["m"], **kwargs)
    assert len(rows) == 1
    return rows.iloc[0]


@pytest.mark.agreement
@pytest.mark.parametrize("retrieved, judged, expected", [
    ([], {"g1": 2, "g2": 2}, (0.0, 0.0, 0.0)),                                    # empty retrieved set
    (["g1", "g2", "x", "y"], {"g1": 2, "g2": 2}, (0.5, 1.0, 2 / 3)),              # R ⊇ G
    (["g1", "g2"], {"g1": 2, "g2": 2}, (1.0, 1.0, 1.0)),                          # R = G
    (["x", "y"], {"g1": 2}, (0.0, 0.0, 0.0)),                                     # disjoint
    (["g1", "x", "y"], {"g1": 2, "g2": 2, "g3": 2, "s": 1}, (1 / 3, 1 / 3, 1 / 3)),
    (["g1"], {"g1": 2, "g2": 2, "g3": 2}, (1.0, 1 / 3, 0.5)),                     # R ⊂ G
])
def test_hand_made_cases_match_hand_values_and_sklearn(retrieved, judged, expected):
    row = one(retrieved, judged)
    gold = {c for c, r in judged.items() if r == 2}
    assert tuple(row[list(SET_METRICS)]) == pytest.approx(expected)
    assert tuple(row[list(SET_METRICS)]) == pytest.approx(sklearn_scores(set(retrieved), gold, set(judged)))


def test_empty_retrieved_set_scores_zero_precision_not_one_or_nan():
    row = one([], {"g": 2})
    assert row["set_precision"] == 0.0
    assert np.isfinite(row[list(SET_METRICS)].to_numpy(dtype=float)).all()


def random_case(seed: int, n_questions: int = 40, pool: int = 25):
    rng = np.random.default_rng(seed)
    chunks = np.array([f"c{i:02d}" for i in range(pool)], dtype=object)
    judged, retrieved = {}, {r: {} for r in ("bm25", "dense", "graph")}
    for q in range(n_questions):
        qid = f"q{q:03d}"
        picked = rng.choice(chunks, size=rng.integers(1, 9), replace=False)
        grades = rng.choice([0, 1, 2], size=len(picked))
        grades[0] = 2                                         # every question has primary gold
        judged[qid] = dict(zip(picked, map(int, grades)))
        for r in retrieved:
            if rng.random() < 0.1:
                continue                                      # no rows at all: an empty set
            retrieved[r][qid] = list(rng.choice(chunks, size=rng.integers(0, 11), replace=False))
    return judged, retrieved


@pytest.mark.agreement
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("min_relevance", [2, 1])
def test_random_sets_agree_with_sklearn(seed, min_relevance):
    judged, retrieved = random_case(seed)
    rows = per_question_set_rows(sets_of(retrieved), qrels_of(judged), types_of(judged), min_relevance=min_relevance)
    assert len(rows) == 3 * len(judged)
    assert rows["set_precision"].eq(0).any() and rows["set_recall"].eq(1).any()   # the edge cases occur
    for row in rows.itertuples():
        gold = {c for c, r in judged[row.question_id].items() if r >= min_relevance}
        got = set(retrieved[row.retriever].get(row.question_id, []))
        expected = sklearn_scores(got, gold, set(judged[row.question_id]))
        assert (row.set_precision, row.set_recall, row.set_f1) == pytest.approx(expected, abs=1e-12)


def test_relevance_at_least_1_widens_the_gold_set():
    judged = {"g": 2, "s": 1, "z": 0}
    primary = one(["g", "s", "z"], judged)
    anything = one(["g", "s", "z"], judged, min_relevance=1)
    assert tuple(primary[list(SET_METRICS)]) == pytest.approx((1 / 3, 1.0, 0.5))
    assert tuple(anything[list(SET_METRICS)]) == pytest.approx((2 / 3, 1.0, 0.8))


def test_min_relevance_must_be_1_or_2():
    with pytest.raises(ValueError, match="min_relevance"):
        one(["g"], {"g": 2}, min_relevance=0)


def test_question_without_gold_is_refused_by_default_and_named():
    judged = {"q1": {"g": 2}, "q2": {"s": 1}}
    retrieved = sets_of({"m": {"q1": ["g"], "q2": ["s"]}})
    with pytest.raises(ValueError, match=r"1 question\(s\).*'q2'"):
        set_counts(retrieved, qrels_of(judged))
    counts = set_counts(retrieved, qrels_of(judged), min_relevance=1)          # q2 is evaluable at ≥ 1
    assert counts["question_id"].tolist() == ["q1", "q2"]


def test_question_without_gold_is_dropped_on_request_and_listed():
    judged = {"q1": {"g": 2}, "q2": {"s": 1}}
    retrieved = sets_of({"m": {"q1": ["g"], "q2": ["s"]}, "n": {"q3": ["x"]}})   # q3: not judged at all
    rows = per_question_set_rows(retrieved, qrels_of(judged), types_of(["q1"]), empty_gold="drop")
    assert rows[["retriever", "question_id"]].values.tolist() == [["m", "q1"], ["n", "q1"]]
    assert rows.attrs["dropped_questions"] == ["q2", "q3"]
    assert rows["set_f1"].tolist() == [1.0, 0.0]


def test_pairs_without_rows_are_empty_sets_and_retrievers_fixes_the_order():
    retrieved = sets_of({"a": {"q1": ["g1"]}})
    counts = set_counts(retrieved, qrels_of({"q1": {"g1": 2}, "q2": {"g2": 2}}), retrievers=["silent", "a"])
    assert counts.values.tolist() == [
        ["silent", "q1", 0, 1, 0], ["silent", "q2", 0, 1, 0], ["a", "q1", 1, 1, 1], ["a", "q2", 0, 1, 0],
    ]
    with pytest.raises(ValueError, match="'a'"):
        set_counts(retrieved, qrels_of({"q1": {"g1": 2}}), retrievers=["silent"])


def test_explicit_questions_restrict_and_guard_the_scored_set():
    qrels = qrels_of({"q1": {"g1": 2}, "q2": {"g2": 2}})
    counts = set_counts(sets_of({"a": {"q2": ["g2"]}}), qrels, questions=["q2"])
    assert counts["question_id"].tolist() == ["q2"]
    with pytest.raises(ValueError, match="outside questions: 'q1'"):
        set_counts(sets_of({"a": {"q1": ["g1"]}}), qrels, questions=["q2"])


def test_bad_inputs_are_refused():
    qrels = qrels_of({"q": {"g": 2}})
    with pytest.raises(ValueError, match="duplicate item"):
        set_counts(sets_of({"a": {"q": ["g", "g"]}}), qrels)
    with pytest.raises(ValueError, match="lacks column"):
        set_counts(sets_of({"a": {"q": ["g"]}}).drop(columns="retriever"), qrels)
    with pytest.raises(ValueError, match="relevance"):
        set_counts(sets_of({"a": {"q": ["g"]}}), qrels.assign(relevance=3))
    with pytest.raises(ValueError, match="no type"):
        per_question_set_rows(sets_of({"a": {"q": ["g"]}}), qrels, types_of(["other"]))


def test_inputs_are_not_mutated():
    judged, retrieved = random_case(5, n_questions=8)
    sets, qrels = sets_of(retrieved), qrels_of(judged)
    before = sets.copy(), qrels.copy()
    per_question_set_rows(sets, qrels, types_of(judged))
    pd.testing.assert_frame_equal(sets, before[0])
    pd.testing.assert_frame_equal(qrels, before[1])


def test_set_scores_kernel_refuses_impossible_counts():
    p, r, f = set_scores([0, 2], [0, 4], [3, 2])
    assert p.tolist() == [0.0, 0.5] and r.tolist() == [0.0, 1.0] and f == pytest.approx([0.0, 2 / 3])
    with pytest.raises(ValueError, match="non-empty gold"):
        set_scores([0], [1], [0])
    with pytest.raises(ValueError, match="min"):
        set_scores([2], [1], [3])


def test_rows_have_the_shape_of_the_rank_metric_rows():
    qrels = qrels_of({"q1": {"g1": 2}, "q2": {"g2": 2}})
    types = pd.Series({"q1": "single", "q2": "multi"})
    rank_rows = per_question_rows({"q1": ["g1"], "q2": ["x"]}, "a", qrels, types, ks=[5])
    set_rows = per_question_set_rows(sets_of({"a": {"q1": ["g1"], "q2": ["x"]}}), qrels, types)
    assert list(set_rows.columns[:3]) == list(rank_rows.columns[:3]) == ["retriever", "question_id", "question_type"]
    assert list(set_rows.columns[3:]) == list(SET_METRICS)
    pd.testing.assert_frame_equal(set_rows.iloc[:, :3], rank_rows.iloc[:, :3])
    np.testing.assert_array_equal(set_rows["set_recall"], rank_rows["recall@5"])


def bootstrap_rows():
    judged, retrieved = random_case(11, n_questions=60)
    types = pd.Series({q: ("multi" if int(q[1:]) % 3 == 0 else "single") for q in judged})
    return per_question_set_rows(sets_of(retrieved), qrels_of(judged), types)


def direct_ci(x: np.ndarray, params: BootstrapSection) -> tuple[float, float, float]:
    draws = np.random.default_rng(params.seed).integers(0, len(x), size=(params.n_resamples, len(x)))
    means = x[draws].mean(axis=1)
    return x.mean(), *np.percentile(means, [2.5, 97.5])


def test_macro_mean_and_ci_equal_a_direct_numpy_bootstrap():
    rows = bootstrap_rows()
    table = set_metric_cis(rows, PAPER)
    assert table[["retriever", "metric"]].values.tolist() == [[r, m] for r in ("bm25", "dense", "graph")
                                                               for m in SET_METRICS]
    for row in table.itertuples():
        x = rows.loc[rows["retriever"] == row.retriever].sort_values("question_id")[row.metric].to_numpy()
        assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(direct_ci(x, PAPER), abs=1e-12)
        assert row.ci_low < row.mean < row.ci_high
    long = rows.rename(columns={"retriever": "method"}).drop(columns="question_type")
    pd.testing.assert_frame_equal(table, ci_table(long, params=PAPER).rename(columns={"method": "retriever"}))


def test_paired_difference_through_reliability_equals_direct_numpy():
    rows = bootstrap_rows()
    diff = paired_differences(rows, [("graph vs bm25", "graph", "bm25")], metric="set_f1", params=PAPER)
    by = {r: f.sort_values("question_id")["set_f1"].to_numpy() for r, f in rows.groupby("retriever")}
    expected = direct_ci(by["graph"] - by["bm25"], PAPER)
    assert tuple(diff.loc[0, ["delta", "ci_low", "ci_high"]]) == pytest.approx(expected, abs=1e-12)
    long = rows.rename(columns={"retriever": "method"})[["method", "question_id", *SET_METRICS]]
    both = difference_table(long, [("graph", "bm25")], params=PAPER)
    assert both.loc[both["metric"] == "set_f1", "delta"].item() == pytest.approx(expected[0])


def test_by_type_intervals_apply_to_set_rows():
    rows = bootstrap_rows()
    table = by_type_cis(rows, metric="set_precision", params=PAPER)
    multi = table[(table["retriever"] == "dense") & (table["question_type"] == "multi")].iloc[0]
    x = rows[(rows["retriever"] == "dense") & (rows["question_type"] == "multi")].sort_values("question_id")
    assert multi["questions"] == len(x) == 20
    assert multi["mean"] == pytest.approx(x["set_precision"].mean())


def test_pooled_scores_sum_counts_before_dividing():
    counts = set_counts(sets_of({"a": {"q1": ["g1", "x"], "q2": []}}),
                        qrels_of({"q1": {"g1": 2}, "q2": {"g2": 2, "g3": 2}}))
    pooled = pooled_scores(counts).iloc[0]
    assert (pooled["micro_precision"], pooled["micro_recall"]) == pytest.approx((1 / 2, 1 / 3))
    assert pooled["micro_f1"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    assert pooled["questions"] == 2


def ranking_of(lists: dict[tuple[str, str], list[str]]) -> pd.DataFrame:
    rows = [(r, q, i + 1, c) for (r, q), chunks in lists.items() for i, c in enumerate(chunks)]
    return pd.DataFrame(rows, columns=["retriever", "question_id", "rank", "chunk_id"])


MAPPING = pd.DataFrame({"piece_id": ["p1", "p2", "p3", "p4", "p5", "p6"],
                        "memory_id": ["m1", "m1", "m2", "m3", "m3", "m4"]})


def test_top_k_set_keeps_ranks_1_to_k():
    ranking = ranking_of({("a", "q"): ["c1", "c2", "c3"], ("b", "q"): ["c9"]})
    assert top_k_set(ranking, 2).values.tolist() == [["a", "q", "c1"], ["a", "q", "c2"], ["b", "q", "c9"]]
    with pytest.raises(ValueError, match="k must be"):
        top_k_set(ranking, 0)


def test_top_k_set_orders_shuffled_rows_by_rank_and_respects_gaps():
    ranking = ranking_of({("a", "q"): ["c1", "c2", "c3", "c4"], ("a", "r"): ["d1", "d2"]})
    shuffled = ranking.iloc[[3, 5, 1, 0, 4, 2]]
    assert top_k_set(shuffled, 3).values.tolist() == [["a", "q", "c1"], ["a", "q", "c2"], ["a", "q", "c3"],
                                                      ["a", "r", "d1"], ["a", "r", "d2"]]
    gapped = ranking.assign(rank=[1, 3, 5, 7, 2, 4])
    assert top_k_set(gapped, 3)["chunk_id"].tolist() == ["c1", "c2", "d1"]


def test_pieces_to_memories_counts_a_memory_once_and_cuts_at_k():
    ranking = ranking_of({("v1", "q"): ["p1", "p2", "p4", "p3", "p5", "p6"]})
    as_sets = {k: pieces_to_memories(ranking, MAPPING, k)["chunk_id"].tolist() for k in (1, 2, 3, 4, 6)}
    assert as_sets == {1: ["m1"], 2: ["m1"], 3: ["m1", "m3"], 4: ["m1", "m3", "m2"], 6: ["m1", "m3", "m2", "m4"]}
    assert all(len(memories) <= k for k, memories in as_sets.items())
    reversed_rows = pieces_to_memories(ranking.iloc[::-1], MAPPING, 6)["chunk_id"].tolist()
    assert reversed_rows == as_sets[6]                                   # by best-ranked piece, not row order


def test_pieces_to_memories_feeds_set_metrics_per_question_and_retriever():
    ranking = ranking_of({("v1", "q1"): ["p1", "p2", "p3"], ("v1", "q2"): ["p6", "p4"], ("v2", "q1"): ["p4"]})
    memories = pieces_to_memories(ranking, MAPPING, k=2)
    assert memories.values.tolist() == [["v1", "q1", "m1"], ["v1", "q2", "m4"], ["v1", "q2", "m3"], ["v2", "q1", "m3"]]
    qrels = qrels_of({"q1": {"m1": 2, "m2": 2}, "q2": {"m3": 2}})
    rows = per_question_set_rows(memories, qrels, types_of(["q1", "q2"]))
    np.testing.assert_allclose(rows[list(SET_METRICS)].to_numpy(),
                               [[1.0, 0.5, 2 / 3], [0.5, 1.0, 2 / 3], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_pieces_to_memories_refuses_unmapped_pieces_and_ambiguous_mappings():
    ranking = ranking_of({("v1", "q"): ["p1", "zz"]})
    with pytest.raises(ValueError, match="lacks piece.*'zz'"):
        pieces_to_memories(ranking, MAPPING, k=2)
    assert pieces_to_memories(ranking, MAPPING, k=1)["chunk_id"].tolist() == ["m1"]     # zz is past the cut
    twice = pd.concat([MAPPING, pd.DataFrame({"piece_id": ["p1"], "memory_id": ["m9"]})])
    with pytest.raises(ValueError, match="duplicate piece"):
        pieces_to_memories(ranking, twice, k=1)
    repeated = pd.concat([MAPPING, MAPPING.iloc[:1]])                                    # same row twice is harmless
    assert pieces_to_memories(ranking, repeated, k=1)["chunk_id"].tolist() == ["m1"]
    with pytest.raises(ValueError, match="duplicate chunk"):
        pieces_to_memories(ranking_of({("v1", "q"): ["p1", "p1"]}), MAPPING, k=2)


@pytest.mark.agreement
def test_top_k_counts_and_macro_scores_equal_the_frames_of_every_top_k_set():
    """The one-pass counts of a ranking's top-k sets and their macro means against :func:`top_k_set` and
    :func:`per_question_set_rows` of each k: random rankings (gaps, questions without rows, rows of a question not
    asked, gold outside the ranking, grade-1 chunks)."""
    from pmrag.evaluate.set_metrics import gold_sizes, macro_set_scores, top_k_counts

    rng = np.random.default_rng(7)
    questions = [f"q{i}" for i in range(12)]
    rows = []
    for q in [*questions[:10], "other"]:                   # q10, q11 unranked; "other" is not asked
        ranks = np.sort(rng.choice(np.arange(1, 12), size=int(rng.integers(1, 9)), replace=False))
        chunks = rng.choice([f"c{j}" for j in range(30)], size=len(ranks), replace=False)
        rows += [("r", q, int(rank), str(c)) for rank, c in zip(ranks, chunks)]
    ranking = pd.DataFrame(rows, columns=["retriever", "question_id", "rank", "chunk_id"])
    qrels = pd.DataFrame([(q, f"c{j}", int(rng.choice([1, 2, 2]))) for q in [*questions, "other"]
                          for j in rng.choice(30, size=3, replace=False)],
                         columns=["question_id", "chunk_id", "relevance"])
    types = pd.Series("single", index=questions)
    n_gold = gold_sizes(qrels, questions)
    assert n_gold.tolist() == [int((qrels[qrels["question_id"] == q]["relevance"] == 2).sum()) for q in questions]
    asked = ranking[ranking["question_id"].isin(questions)]
    ks = [1, 2, 3, 5, 8, 11]
    counts = top_k_counts(ranking, qrels, questions, ks)
    evaluable = [i for i, g in enumerate(n_gold) if g > 0]
    for k in ks:
        expected = set_counts(top_k_set(asked, k), qrels, questions=questions, retrievers=["r"], empty_gold="drop")
        expected = expected.set_index("question_id")
        n_hit, n_retrieved = counts[k]
        for i, q in enumerate(questions):
            if q in expected.index:
                assert (n_hit[i], n_retrieved[i]) == (expected.loc[q, "n_hit"], expected.loc[q, "n_retrieved"]), (k, q)
        kept = [questions[i] for i in evaluable]
        frame = per_question_set_rows(top_k_set(asked[asked["question_id"].isin(kept)], k), qrels, types,
                                      questions=kept, retrievers=["r"])
        scores = macro_set_scores(n_hit[evaluable], n_retrieved[evaluable], n_gold[evaluable])
        for metric in SET_METRICS:
            assert scores[metric] == pytest.approx(frame[metric].mean(), rel=1e-12, abs=1e-15)
        assert scores["mean_retrieved"] == pytest.approx(n_retrieved[evaluable].mean())
        assert scores["empty_sets"] == len(set(kept) - set(top_k_set(asked, k)["question_id"]))
    with pytest.raises(ValueError, match="takes one"):
        top_k_counts(pd.concat([ranking, ranking.assign(retriever="s")]), qrels, questions, [1])
    with pytest.raises(ValueError, match="positive integer"):
        top_k_counts(ranking, qrels, questions, [0])
