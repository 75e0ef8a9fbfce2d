"""Message-level Recall@k: a direct count on random data, three levels on LoCoMo-shaped windows, the identity with
chunk and group recall, unreachable evidence and one-line errors."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pmrag.chunking.store import chunk_study
from pmrag.core.params import ChunkingSection, DatasetSection
from pmrag.core.store import stored_messages
from pmrag.evaluate.groups import evidence_groups, per_question_group_metrics
from pmrag.evaluate.message_recall import (EvidenceJudgments, evidence_counts, evidence_judgments, evidence_matrix,
                                           message_recall, per_question_message_recall, per_question_message_rows)
from pmrag.evaluate.metrics import per_question_metrics
from pmrag.ingest.pipeline import ingest_study
from tests.evaluate.test_groups import derived_qrels, windows

REPO = Path(__file__).resolve().parents[2]


def direct_count(run: dict, question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame, q: str, k: int) -> float:
    """|{m ∈ M(q) : some chunk among the top k holds m}| / |M(q)|, by plain sets."""
    primary = set(question_evidence.loc[(question_evidence["question_id"] == q)
                                        & (question_evidence["relevance"] == 2), "message_id"])
    retrieved = set()
    for chunk in run.get(q, [])[:k]:
        retrieved |= set(chunk_messages.loc[chunk_messages["chunk_id"] == chunk, "message_id"])
    return len(primary & retrieved) / len(primary)


def random_case(seed, width=4, stride=2, n_messages=40, n_questions=10):
    """Overlapping windows over m000…m039; evidence may also name m040…m044, which lie in no chunk; some rows are
    repeated, some are supporting (relevance 1), and one question is never ranked."""
    rng = np.random.default_rng(seed)
    chunk_messages = windows(n_messages, width, stride)
    rows = []
    for q in range(n_questions):
        for m in rng.choice(n_messages + 5, size=rng.integers(1, 8), replace=False):
            rows.append({"question_id": f"q{q}", "message_id": f"m{m:03d}", "relevance": int(rng.choice([1, 2, 2]))})
        rows.append({"question_id": f"q{q}", "message_id": rows[-1]["message_id"], "relevance": 2})
    question_evidence = pd.DataFrame(rows)
    chunk_ids = chunk_messages["chunk_id"].unique()
    run = {f"q{q}": list(rng.permutation(chunk_ids)[:rng.integers(1, 15)]) for q in range(1, n_questions)}
    return question_evidence, chunk_messages, run


@pytest.mark.parametrize("seed", range(6))
def test_message_recall_matches_a_direct_count(seed):
    question_evidence, chunk_messages, run = random_case(seed)
    metrics = per_question_message_recall(run, question_evidence, chunk_messages, ks=[1, 3, 5, 10, 20])
    # a question whose only relevance-2 row repeats a supporting message still has that message as primary evidence
    primary_questions = sorted(set(question_evidence.loc[question_evidence["relevance"] == 2, "question_id"]))
    assert list(metrics.index) == primary_questions
    for q in metrics.index:
        for k in (1, 3, 5, 10, 20):
            assert metrics.loc[q, f"message_recall@{k}"] == pytest.approx(direct_count(run, question_evidence,
                                                                                       chunk_messages, q, k), abs=1e-12)


def test_the_kernel_is_one_slice_of_the_first_found_matrix():
    question_evidence, chunk_messages, run = random_case(11)
    judgments = evidence_judgments(question_evidence, chunk_messages)
    matrix = evidence_matrix(run, judgments, depth=10)
    # every evidence message is found at most once: the row sums never exceed |M(q)|
    assert (matrix.found.sum(axis=1) <= matrix.n_evidence).all()
    for k in (1, 4, 10):
        expected = [direct_count(run, question_evidence, chunk_messages, q, k) for q in matrix.question_ids]
        np.testing.assert_allclose(message_recall(matrix.found, matrix.n_evidence, k), expected, rtol=0, atol=1e-12)


def test_rows_name_the_method_and_type_like_the_chunk_rows():
    question_evidence, chunk_messages, run = random_case(3)
    judgments = evidence_judgments(question_evidence, chunk_messages)
    frame = pd.DataFrame([{"question_id": q, "chunk_id": c, "rank": i + 1}
                          for q, chunks in run.items() for i, c in enumerate(chunks)])
    types = pd.Series({q: "contextual" for q in judgments.question_ids})
    rows = per_question_message_rows(frame.sample(frac=1, random_state=2), "bm25", judgments, types, ks=[5, 10])
    assert list(rows.columns) == ["retriever", "question_id", "question_type", "message_recall@5", "message_recall@10"]
    assert (rows["retriever"] == "bm25").all() and (rows["question_type"] == "contextual").all()
    direct = per_question_message_recall(run, question_evidence, chunk_messages, ks=[5, 10])
    np.testing.assert_array_equal(rows[direct.columns].to_numpy(), direct.to_numpy())


# ------------------------------------------------------------------------------------ LoCoMo-shaped data

def locomo_file(path: Path) -> Path:
    """One LoCoMo sample: session 1 of 28 turns, session 2 of 6 turns ten days later; one multi-hop question whose
    evidence is D1:9, D1:20 and D1:25."""
    turns = {n: [{"speaker": "Ana" if i % 2 == 0 else "Ben", "dia_id": f"D{n}:{i + 1}",
                  "text": f"Turn {i + 1} of session {n} about the trip."} for i in range(size)]
             for n, size in ((1, 28), (2, 6))}
    conversation = {"speaker_a": "Ana", "speaker_b": "Ben",
                    "session_1_date_time": "1:47 pm on 18 May, 2023", "session_1": turns[1],
                    "session_2_date_time": "9:05 am on 28 May, 2023", "session_2": turns[2]}
    qa = [{"question": "Where did they go?", "answer": "the lake", "evidence": ["D1:9", "D1:20", "D1:25"],
           "category": 1}]
    path.write_text(json.dumps([{"sample_id": "conv-a", "conversation": conversation, "qa": qa}]), encoding="utf-8")
    return path


def test_chunk_group_and_message_recall_differ_on_overlapping_locomo_windows(engine, tmp_path):
    # the shipped LoCoMo chunking: windows of 10 turns, stride 8, so consecutive windows share 2 turns
    chunking = ChunkingSection(**yaml.safe_load((REPO / "params" / "locomo.yaml").read_text("utf-8"))["chunking"])
    ingested = ingest_study(engine, [locomo_file(tmp_path / "locomo10.json")], None, DatasetSection(format="locomo"))
    chunked = chunk_study(engine, chunking)
    turn = dict(stored_messages(engine, ("message_id", "native_id")).itertuples(index=False))
    name = {c: f"c{i}" for i, c in zip(chunked.chunks["chunk_index"], chunked.chunks["chunk_id"])}
    held = chunked.members.assign(turn=chunked.members["message_id"].map(turn)).groupby("chunk_id")["turn"]
    assert {name[c]: (t.iloc[0], t.iloc[-1]) for c, t in held} == {
        "c0": ("D1:1", "D1:10"), "c1": ("D1:9", "D1:18"), "c2": ("D1:17", "D1:26"), "c3": ("D1:25", "D1:28"),
        "c4": ("D2:1", "D2:6")}
    # by hand: D1:9 lies in c0 and c1, D1:20 in c2 only, D1:25 in c2 and c3, so the primary-gold chunks hold
    # c0 {9}, c1 {9}, c2 {20, 25}, c3 {25}: 4 gold chunks; same_set groups {c0, c1}, {c2}, {c3}: 3;
    # share_any groups {c0, c1}, {c2, c3}: 2; evidence messages: 3
    qrels = chunked.qrels
    assert sorted(name[c] for c in qrels.loc[qrels["relevance"] == 2, "chunk_id"]) == ["c0", "c1", "c2", "c3"]
    chunk_of = {v: k for k, v in name.items()}
    run = {qrels["question_id"].iloc[0]: [chunk_of[c] for c in ("c2", "c4", "c0", "c1", "c3")]}
    ks = [1, 3, 5]

    chunk = per_question_metrics(run, qrels, ks=ks).iloc[0]
    same_set = per_question_group_metrics(run, qrels, evidence_groups(qrels, ingested.evidence, chunked.members),
                                          ks=ks).iloc[0]
    share_any = per_question_group_metrics(run, qrels, evidence_groups(qrels, ingested.evidence, chunked.members,
                                                                       rule="share_any"), ks=ks).iloc[0]
    message = per_question_message_recall(run, ingested.evidence, chunked.members, ks=ks).iloc[0]
    # top 1 = c2: 1 of 4 chunks, 1 of 3 same_set groups, 1 of 2 share_any groups, 2 of 3 messages (D1:20, D1:25)
    assert [chunk["recall@1"], same_set["group_recall@1"], share_any["group_recall@1"],
            message["message_recall@1"]] == pytest.approx([1 / 4, 1 / 3, 1 / 2, 2 / 3])
    # top 3 = c2, c4, c0: 2 of 4 chunks, 2 of 3 groups, both share_any groups, all 3 messages
    assert [chunk["recall@3"], same_set["group_recall@3"], share_any["group_recall@3"],
            message["message_recall@3"]] == pytest.approx([2 / 4, 2 / 3, 1.0, 1.0])
    assert [chunk["recall@5"], same_set["group_recall@5"], message["message_recall@5"]] == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------------------------ identity, unreachable, errors

@pytest.mark.parametrize("seed", range(4))
def test_one_message_per_chunk_and_one_chunk_per_message_make_the_three_levels_coincide(seed):
    rng = np.random.default_rng(seed)
    chunk_messages = windows(60, 3, 3)                       # windows do not overlap: each message in one chunk
    rows = []
    for q in range(8):
        for window in rng.choice(20, size=rng.integers(1, 5), replace=False):   # at most one message per window
            rows.append({"question_id": f"q{q}", "message_id": f"m{3 * window + rng.integers(3):03d}",
                         "relevance": 2})
        rows.append({"question_id": f"q{q}", "message_id": "m059", "relevance": 1})
    question_evidence = pd.DataFrame(rows)
    qrels = derived_qrels(question_evidence, chunk_messages)
    chunk_ids = chunk_messages["chunk_id"].unique()
    run = {f"q{q}": list(rng.permutation(chunk_ids)[:12]) for q in range(8)}
    ks = [1, 3, 5, 10]
    chunk = per_question_metrics(run, qrels, ks=ks)
    message = per_question_message_recall(run, question_evidence, chunk_messages, ks=ks)
    for rule in ("same_set", "share_any"):
        group = per_question_group_metrics(run, qrels, evidence_groups(qrels, question_evidence, chunk_messages, rule),
                                           ks=ks)
        for k in ks:
            np.testing.assert_array_equal(group[f"group_recall@{k}"].to_numpy(), chunk[f"recall@{k}"].to_numpy())
    for k in ks:
        np.testing.assert_array_equal(message[f"message_recall@{k}"].to_numpy(), chunk[f"recall@{k}"].to_numpy())


def test_evidence_in_no_chunk_is_counted_and_never_found():
    chunk_messages = windows(6, 2, 2)                  # c000 = m000–m001, c002 = m002–m003, c004 = m004–m005
    question_evidence = pd.DataFrame({"question_id": ["q1", "q1", "q1", "q2"],
                                      "message_id": ["m000", "m001", "m009", "m002"], "relevance": [2, 2, 2, 2]})
    judgments = evidence_judgments(question_evidence, chunk_messages)
    counts = evidence_counts(judgments)
    assert counts.to_dict("list") == {"question_id": ["q1", "q2"], "evidence_messages": [3, 1], "in_no_chunk": [1, 0]}
    metrics = per_question_message_recall({"q1": list(chunk_messages["chunk_id"].unique())}, judgments, ks=[3])
    assert metrics.loc["q1", "message_recall@3"] == pytest.approx(2 / 3)      # m009 can never be found
    assert metrics.loc["q2", "message_recall@3"] == 0.0                        # not ranked: 0
    only_unreachable = pd.DataFrame({"question_id": ["q3"], "message_id": ["m009"], "relevance": [2]})
    assert per_question_message_recall({"q3": ["c000"]}, only_unreachable, chunk_messages, ks=[5]).iloc[0, 0] == 0.0


def test_scored_questions_can_be_restricted_to_the_evaluated_ones():
    question_evidence, chunk_messages, run = random_case(5)
    judgments = evidence_judgments(question_evidence, chunk_messages, questions=["q2", "q1"])
    assert list(judgments.question_ids) == ["q1", "q2"]
    metrics = per_question_message_recall({q: run[q] for q in ("q1", "q2")}, judgments, ks=[5])
    assert metrics["message_recall@5"].tolist() == pytest.approx(
        [direct_count(run, question_evidence, chunk_messages, q, 5) for q in ("q1", "q2")])


def test_errors_are_one_line_and_name_the_input():
    question_evidence, chunk_messages, run = random_case(1)
    cases = [
        (lambda: evidence_judgments(question_evidence.drop(columns="relevance"), chunk_messages),
         "question_evidence lacks column"),
        (lambda: evidence_judgments(question_evidence, chunk_messages.drop(columns="message_id")),
         "chunk_messages lacks column"),
        (lambda: evidence_judgments(question_evidence.assign(relevance=3), chunk_messages),
         r"question_evidence relevance must be one of \(0, 1, 2\)"),
        (lambda: evidence_judgments(question_evidence.assign(relevance=2.0), chunk_messages),
         r"question_evidence relevance must be one of \(0, 1, 2\)"),
        (lambda: evidence_judgments(question_evidence.assign(message_id=None), chunk_messages),
         "question_evidence has missing question or message ids"),
        (lambda: evidence_judgments(question_evidence, chunk_messages.assign(chunk_id=None)),
         "chunk_messages has missing chunk or message ids"),
        (lambda: evidence_judgments(question_evidence, chunk_messages, questions=["q1", "q404"]),
         "1 question\\(s\\) have no primary-evidence message .* 'q404'"),
        (lambda: per_question_message_recall({"q404": ["c000"]}, question_evidence, chunk_messages),
         "the run ranks question 'q404', which is not scored"),
        (lambda: per_question_message_recall(run, question_evidence), "chunk_messages is needed"),
        (lambda: per_question_message_recall(run, evidence_judgments(question_evidence, chunk_messages),
                                             chunk_messages), "pass chunk_messages only with a question_evidence"),
        (lambda: per_question_message_recall(run, question_evidence, chunk_messages, ks=[0]), "ks must be"),
        (lambda: evidence_matrix(run, evidence_judgments(question_evidence, chunk_messages), depth=0),
         "depth must be a positive integer"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as error:
            call()
        assert "\n" not in str(error.value)
    with pytest.raises(TypeError, match="judgments must be an EvidenceJudgments"):
        evidence_matrix(run, question_evidence, depth=5)
    assert isinstance(evidence_judgments(question_evidence, chunk_messages), EvidenceJudgments)
