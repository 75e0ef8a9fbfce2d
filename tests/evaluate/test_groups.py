"""Evidence groups: brute-force loops, equality with the chunk-level metrics, overlapping windows."""

import math

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.groups import evidence_groups, group_judgments, per_question_group_metrics, per_question_group_rows
from pmrag.evaluate.metrics import per_question_metrics


def windows(n_messages: int, width: int, stride: int) -> pd.DataFrame:
    """``chunk_messages`` of sliding windows over messages m000, m001, …"""
    rows = []
    for start in range(0, n_messages - width + 1, stride):
        for position in range(width):
            rows.append({"chunk_id": f"c{start:03d}", "position": position, "message_id": f"m{start + position:03d}"})
    return pd.DataFrame(rows)


def derived_qrels(question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame) -> pd.DataFrame:
    """The store's rule (pmrag.chunking.store.derive_qrels): a chunk's relevance is its best evidence's."""
    joined = question_evidence.merge(chunk_messages, on="message_id")
    best = joined.groupby(["question_id", "chunk_id"], as_index=False)["relevance"].max()
    return best.astype({"relevance": np.int64})


def brute_groups(qrels, question_evidence, chunk_messages, rule):
    """{question: {chunk: group}} by plain loops (union-find for share_any)."""
    result = {}
    for q in sorted(set(qrels.loc[qrels["relevance"] == 2, "question_id"])):
        primary = set(question_evidence.loc[(question_evidence["question_id"] == q)
                                            & (question_evidence["relevance"] == 2), "message_id"])
        chunks = sorted(qrels.loc[(qrels["question_id"] == q) & (qrels["relevance"] == 2), "chunk_id"])
        sets = {c: frozenset(set(chunk_messages.loc[chunk_messages["chunk_id"] == c, "message_id"]) & primary)
                for c in chunks}
        parent = {c: c for c in chunks}

        def find(c):
            while parent[c] != c:
                c = parent[c]
            return c

        for a in chunks:
            for b in chunks:
                joined = sets[a] == sets[b] if rule == "same_set" else bool(sets[a] & sets[b])
                if joined:
                    parent[find(b)] = find(a)
        roots, labels = [], {}
        for c in chunks:               # number groups by their smallest chunk id
            root = find(c)
            if root not in roots:
                roots.append(root)
            labels[c] = roots.index(root)
        result[q] = labels
    return result


def brute_metrics(ranking, qrels, groups, k):
    """Group recall, MRR and nDCG@k of one question by the definitions, one rank at a time."""
    grade = dict(zip(qrels["chunk_id"], qrels["relevance"]))
    seen, found, rr, dcg = set(), set(), 0.0, 0.0
    for i, chunk in enumerate(ranking[:k], start=1):
        if chunk in groups:
            group = groups[chunk]
            if rr == 0.0:
                rr = 1.0 / i
            if group not in seen:
                seen.add(group)
                found.add(group)
                dcg += 3.0 / math.log2(i + 1)
        elif grade.get(chunk, 0) == 1:
            dcg += 1.0 / math.log2(i + 1)
    n_groups = len(set(groups.values()))
    ideal = [3.0] * n_groups + [1.0] * int((qrels["relevance"] == 1).sum())
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
    return len(found) / n_groups, rr, dcg / idcg


def random_case(seed, width=3, stride=1, n_messages=40, n_questions=8):
    rng = np.random.default_rng(seed)
    chunk_messages = windows(n_messages, width, stride)
    evidence = []
    for q in range(n_questions):
        chosen = rng.choice(n_messages, size=rng.integers(1, 6), replace=False)
        for m in chosen:
            grade = int(rng.choice([1, 2, 2]))
            evidence.append({"question_id": f"q{q}", "message_id": f"m{m:03d}", "relevance": grade})
        evidence.append({"question_id": f"q{q}", "message_id": f"m{int(chosen[0]):03d}", "relevance": 2})
    question_evidence = pd.DataFrame(evidence).drop_duplicates(["question_id", "message_id"], keep="last")
    qrels = derived_qrels(question_evidence, chunk_messages)
    chunk_ids = chunk_messages["chunk_id"].unique()
    run = {f"q{q}": list(rng.permutation(chunk_ids)[:12]) for q in range(n_questions)}
    return qrels, question_evidence, chunk_messages, run


def overlapping_case():
    """Windows of 2 messages, stride 1: c000 = m000–m001, c001 = m001–m002, …"""
    chunk_messages = windows(8, 2, 1)
    question_evidence = pd.DataFrame({
        "question_id": ["q1", "q2", "q2", "q2", "q3", "q3"],
        "message_id": ["m002", "m000", "m004", "m007", "m001", "m002"],
        "relevance": [2, 2, 2, 1, 2, 2],
    })
    return derived_qrels(question_evidence, chunk_messages), question_evidence, chunk_messages


def test_overlapping_windows_holding_the_same_evidence_form_one_group():
    qrels, question_evidence, chunk_messages = overlapping_case()
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    got = {(q, c): g for q, c, g in groups.itertuples(index=False)}
    # q1: m002 lies in c001 and c002 -> one group; q2: m000 only in c000, m004 in c003 and c004
    assert got[("q1", "c001")] == got[("q1", "c002")] == 0
    assert (got[("q2", "c000")], got[("q2", "c003")], got[("q2", "c004")]) == (0, 1, 1)
    # q3: c000 {m001}, c001 {m001, m002}, c002 {m002}: three different sets, one connected component
    assert [got[("q3", c)] for c in ("c000", "c001", "c002")] == [0, 1, 2]
    chained = evidence_groups(qrels, question_evidence, chunk_messages, rule="share_any")
    assert set(chained.loc[chained["question_id"] == "q3", "group"]) == {0}


def test_an_overlapping_window_counts_once():
    qrels, question_evidence, chunk_messages = overlapping_case()
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    run = {"q1": ["c001", "c002", "c005"], "q2": ["c003", "c004", "c006"], "q3": ["c001"]}
    chunk = per_question_metrics(run, qrels, ks=[3])
    group = per_question_group_metrics(run, qrels, groups, ks=[3])
    # q2: the chunk level finds 2 of 3 gold chunks; by group, 1 of 2 pieces of evidence (c003, c004 are one)
    assert chunk.loc["q2", "recall@3"] == pytest.approx(2 / 3)
    assert group.loc["q2", "group_recall@3"] == pytest.approx(1 / 2)
    # q1: both windows of the one group found: recall 1 either way, but the second window gains nothing
    assert group.loc["q1", "group_recall@3"] == 1.0
    assert group.loc["q1", "group_ndcg@3"] == pytest.approx(1.0)
    assert chunk.loc["q1", "ndcg@3"] == pytest.approx(1.0)
    # q2's relevance-1 chunk c006 (holds m007) keeps its gain of 1 at rank 3
    expected = (3 / math.log2(2) + 1 / math.log2(4)) / (3 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4))
    assert group.loc["q2", "group_ndcg@3"] == pytest.approx(expected)


@pytest.mark.parametrize("rule", ["same_set", "share_any"])
@pytest.mark.parametrize("seed", range(4))
def test_groups_and_metrics_match_brute_force_loops(seed, rule):
    qrels, question_evidence, chunk_messages, run = random_case(seed)
    groups = evidence_groups(qrels, question_evidence, chunk_messages, rule=rule)
    expected = brute_groups(qrels, question_evidence, chunk_messages, rule)
    got = {}
    for q, c, g in groups.itertuples(index=False):
        got.setdefault(q, {})[c] = g
    assert got == expected
    metrics = per_question_group_metrics(run, qrels, groups, ks=[1, 5, 10])
    for q in metrics.index:
        for k in (1, 5, 10):
            recall, rr, ndcg = brute_metrics(run[q], qrels[qrels["question_id"] == q], expected[q], k)
            assert metrics.loc[q, f"group_recall@{k}"] == pytest.approx(recall)
            assert metrics.loc[q, f"group_mrr@{k}"] == pytest.approx(rr)
            assert metrics.loc[q, f"group_ndcg@{k}"] == pytest.approx(ndcg)


@pytest.mark.parametrize("seed", range(3))
def test_singleton_groups_equal_the_chunk_level_metrics_exactly(seed):
    qrels, question_evidence, chunk_messages, run = random_case(seed, width=3, stride=3)   # windows do not overlap
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    assert not groups.duplicated(["question_id", "group"]).any()
    chunk = per_question_metrics(run, qrels, ks=[1, 5, 10])
    group = per_question_group_metrics(run, qrels, groups, ks=[1, 5, 10])
    pd.testing.assert_frame_equal(group.rename(columns=lambda c: c.removeprefix("group_")), chunk, check_exact=True)


@pytest.mark.parametrize("seed", range(3))
def test_group_mrr_always_equals_chunk_mrr_and_recall_differs_under_overlap(seed):
    qrels, question_evidence, chunk_messages, run = random_case(seed, width=4, stride=1)
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    chunk = per_question_metrics(run, qrels, ks=[10])
    group = per_question_group_metrics(run, qrels, groups, ks=[10])
    np.testing.assert_array_equal(group["group_mrr@10"].to_numpy(), chunk["mrr@10"].to_numpy())
    assert groups.duplicated(["question_id", "group"]).any()       # some group has several windows


def test_rows_like_per_question_rows_and_run_frames():
    qrels, question_evidence, chunk_messages, run = random_case(7)
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    frame = pd.DataFrame([{"question_id": q, "chunk_id": c, "rank": i + 1}
                          for q, chunks in run.items() for i, c in enumerate(chunks)])
    types = pd.Series({q: "contextual" for q in run})
    rows = per_question_group_rows(frame.sample(frac=1, random_state=1), "bm25", qrels, groups, types, ks=[5])
    assert list(rows.columns) == ["retriever", "question_id", "question_type",
                                  "group_recall@5", "group_mrr@5", "group_ndcg@5"]
    assert (rows["retriever"] == "bm25").all() and (rows["question_type"] == "contextual").all()
    by_dict = per_question_group_metrics(run, qrels, groups, ks=[5])
    np.testing.assert_array_equal(rows[by_dict.columns].to_numpy(), by_dict.to_numpy())
    laid_out = per_question_group_rows(frame, "bm25", group_judgments(qrels, groups), None, types, ks=[5])
    pd.testing.assert_frame_equal(laid_out, rows)


def test_a_question_the_run_does_not_rank_scores_zero():
    qrels, question_evidence, chunk_messages = overlapping_case()
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    metrics = per_question_group_metrics({"q1": ["c001"]}, qrels, groups, ks=[5])
    assert list(metrics.index) == ["q1", "q2", "q3"]
    assert (metrics.loc[["q2", "q3"]].to_numpy() == 0).all()


def test_errors_name_the_input():
    qrels, question_evidence, chunk_messages = overlapping_case()
    with pytest.raises(ValueError, match="rule must be one of"):
        evidence_groups(qrels, question_evidence, chunk_messages, rule="overlap")
    with pytest.raises(ValueError, match="question_evidence lacks column"):
        evidence_groups(qrels, question_evidence.drop(columns="relevance"), chunk_messages)
    foreign = pd.concat([qrels, pd.DataFrame({"question_id": ["q1"], "chunk_id": ["c006"], "relevance": [2]})])
    with pytest.raises(ValueError, match="chunk 'c006' relevance 2 for question 'q1'"):
        evidence_groups(foreign, question_evidence, chunk_messages)
    groups = evidence_groups(qrels, question_evidence, chunk_messages)
    with pytest.raises(ValueError, match="groups must hold exactly"):
        per_question_group_metrics({"q1": ["c001"]}, qrels, groups.iloc[1:], ks=[5])
    with pytest.raises(ValueError, match="no primary-gold group"):
        per_question_group_metrics({"q9": ["c001"]}, qrels, groups, ks=[5])
