"""From judgments to gold: one annotator's or the adjudicated grades, message-level evidence, drops, files."""

from pathlib import Path

import pandas as pd
import pytest

from pmrag.annotate.candidates import Candidate, accept_candidate, edit_candidate, store_candidates
from pmrag.annotate.export import (annotator_grades, derived_chunk_grades, evidence_messages, gold_from_store,
                                   parse_store_source, write_gold)
from pmrag.core import store
from pmrag.core.errors import PmragError
from pmrag.evaluate import trec
from pmrag.ingest import questions_json

# c1 = m1 m2 m3, c2 = m3 m4 (m3 shared), c3 = m5 m6
MEMBERS = [("c1", 0, "m1"), ("c1", 1, "m2"), ("c1", 2, "m3"), ("c2", 0, "m3"), ("c2", 1, "m4"), ("c3", 0, "m5"),
           ("c3", 1, "m6")]


def grades(*rows):
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"])


def members():
    return pd.DataFrame(MEMBERS, columns=["chunk_id", "position", "message_id"])


def test_evidence_is_hint_matches_else_own_messages_else_all():
    matched = pd.DataFrame({"candidate_id": ["q", "q"], "message_id": ["m3", "m5"]})
    evidence = evidence_messages(grades(("q", "c1", 2), ("q", "c3", 1), ("q", "c2", 0), ("p", "c1", 1)),
                                 members(), matched)
    assert evidence.values.tolist() == [["p", "m1", 1], ["p", "m2", 1], ["q", "m3", 2], ["q", "m5", 1]]
    only_shared = pd.DataFrame([("a", 0, "m3"), ("b", 0, "m3")], columns=["chunk_id", "position", "message_id"])
    assert evidence_messages(grades(("q", "a", 2)), only_shared, matched.iloc[:0])["message_id"].tolist() == ["m3"]
    derived = derived_chunk_grades(evidence, members())
    assert derived[derived["question_id"] == "q"].values.tolist() == [["q", "c1", 2], ["q", "c2", 2], ["q", "c3", 1]]


@pytest.fixture
def engine(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    candidates = [Candidate("what?", "contextual"), Candidate("who?", "named_entity"), Candidate("when?", "aggregate")]
    store_candidates(engine, candidates, "typed.yaml")
    accept_candidate(engine, candidates[0].candidate_id)
    edit_candidate(engine, candidates[1].candidate_id, "who exactly?")
    accept_candidate(engine, candidates[2].candidate_id)
    a, b, c = (x.candidate_id for x in candidates)
    with engine.begin() as conn:
        store.bulk_insert(conn, store.chunk_messages, MEMBERS)
        store.bulk_insert(conn, store.questions, [("q1", "study question", "contextual", None, None, '{"cue": "exact"}')])
        store.bulk_insert(conn, store.hint_matches, [(a, 0, "m3", "text", None)])
        stamp = "2026-12-01 10:00:00"
        store.bulk_insert(conn, store.judgments, [
            (a, "c1", "ann", 2, None, "pool", stamp), (a, "c2", "ann", 0, None, "pool", stamp),
            (a, "c3", "ann", 1, None, "pool", stamp), (b, "c1", "ann", 1, None, "pool", stamp),
            (c, "c3", "ann", 2, None, "pool", stamp), ("q1", "c3", "ann", 2, "a note", "pool", stamp),
            (a, "c1", "bob", 2, None, "pool", stamp), (a, "c2", "bob", 1, None, "pool", stamp),
            (a, "c3", "bob", 0, None, "pool", stamp), (b, "c1", "bob", 2, None, "pool", stamp)])
        store.bulk_insert(conn, store.question_drops, [(c, "ann", "ambiguous", stamp), (c, "bob", "vague", stamp)])
        store.bulk_insert(conn, store.adjudications, [(a, "c2", 0, "carol", None, stamp)])
    engine.ids = (a, b, c)
    return engine


def test_one_annotators_gold(engine, tmp_path):
    a, b, c = engine.ids
    gold = gold_from_store(engine, "ann")
    assert sorted(gold.questions["question_id"]) == sorted([a, "q1"])
    assert dict(zip(gold.questions["question_id"], gold.questions["question"]))[a] == "what?"
    assert dict(zip(gold.dropped["question_id"], gold.dropped["reason"])) == {
        b: "no relevance-2 chunk (no primary gold)", c: "dropped by the annotator (ambiguous)"}
    assert gold.qrels[gold.qrels["question_id"] == a][["chunk_id", "relevance"]].values.tolist() == [
        ["c1", 2], ["c2", 0], ["c3", 1]]
    # a's c1 evidence is its hint match m3, which c2 (graded 0) holds too: counted, not hidden
    assert gold.regraded == 1 and gold.gained == 0
    qrels_path, questions_path = write_gold(gold, tmp_path / "gold")
    assert trec.read_qrels(qrels_path).equals(gold.qrels.astype({"relevance": "int64"}))
    batch = questions_json.read(questions_path)
    assert {q.question_id: [(e.message_id, e.relevance) for e in q.evidence] for q in batch.questions} == {
        a: [("m3", 2), ("m5", 1), ("m6", 1)], "q1": [("m5", 2), ("m6", 2)]}
    lines = gold.lines()
    assert lines[0].startswith("ann: 2 question(s) kept, 4 judged chunk(s) (2 primary, 1 supporting)")
    assert any("dropped by the annotator" in line for line in lines)


def test_a_question_graded_on_chunks_no_longer_in_the_history_is_dropped_not_exported(engine, tmp_path):
    a, b, c = engine.ids
    with engine.begin() as conn:       # q2's only primary chunk was made by another version of the history
        store.bulk_insert(conn, store.questions, [("q2", "old question", "contextual", None, None, None)])
        store.bulk_insert(conn, store.judgments, [("q2", "c9", "ann", 2, None, "pool", "2026-12-01 10:00:00"),
                                                  ("q2", "c3", "ann", 1, None, "pool", "2026-12-01 10:00:00")])
    gold = gold_from_store(engine, "ann")
    assert sorted(gold.questions["question_id"]) == sorted([a, "q1"])
    assert dict(zip(gold.dropped["question_id"], gold.dropped["reason"]))["q2"] == (
        "no relevance-2 chunk in the store's history (graded on another version of it)")
    assert "q2" not in set(gold.qrels["question_id"]) | set(gold.evidence["question_id"])
    _, questions_path = write_gold(gold, tmp_path / "gold")
    assert {q.question_id for q in questions_json.read(questions_path).questions} == {a, "q1"}


def test_adjudicated_gold(engine):
    a, b, c = engine.ids
    grades_, drops, unresolved = annotator_grades(engine, "adjudicated")
    assert grades_[grades_["question_id"] == a][["chunk_id", "relevance"]].values.tolist() == [["c1", 2], ["c2", 0]]
    assert unresolved == 2               # a/c3 (1 vs 0) and b/c1 (1 vs 2): no adjudication
    assert drops.values.tolist() == [[c, "ambiguous; vague"]]
    gold = gold_from_store(engine, "adjudicated")
    assert gold.unresolved == 2 and c in set(gold.dropped["question_id"])


def test_nothing_to_adjudicate_and_an_id_trec_cannot_hold(tmp_path, engine):
    with pytest.raises(PmragError, match="no judgment in the store to adjudicate"):
        annotator_grades(store.open_store(tmp_path / "empty.sqlite"), "adjudicated")
    gold = gold_from_store(engine, "ann")
    spaced = gold.__class__(**{**gold.__dict__, "qrels": gold.qrels.assign(question_id="q 1")})
    with pytest.raises(PmragError, match="qrels.trec: question id 'q 1' cannot be written to a TREC file"):
        write_gold(spaced, tmp_path / "out")


def test_bad_annotator_and_unknown_question(engine):
    with pytest.raises(PmragError, match="no judgment by annotator 'zoe'.*annotators: ann, bob"):
        gold_from_store(engine, "zoe")
    with engine.begin() as conn:
        store.bulk_insert(conn, store.judgments, [("ghost", "c1", "ann", 2, None, "pool", "2026-12-01 10:00:00")])
    with pytest.raises(PmragError, match="judged question 'ghost' is neither"):
        gold_from_store(engine, "ann")


@pytest.mark.parametrize(("text", "path", "annotator"), [
    ("store:runs/a/study.sqlite#ann", Path("/base/runs/a/study.sqlite"), "ann"),
    ("store:/abs/s.sqlite#adjudicated", Path("/abs/s.sqlite"), "adjudicated"),
    ("store:odd#name.sqlite#ann", Path("/base/odd#name.sqlite"), "ann"),
])
def test_store_source(text, path, annotator):
    assert parse_store_source(text, Path("/base")) == (path, annotator)


@pytest.mark.parametrize("text", ["store:s.sqlite", "store:#ann", "store:s.sqlite#", "s.sqlite#ann", "store:s#a b "])
def test_bad_store_source(text):
    with pytest.raises(ValueError, match="store:PATH#ANNOTATOR"):
        parse_store_source(text)


def test_a_studys_questions_source(engine, tmp_path):
    from pmrag.annotate.export import questions_file, questions_files

    params_path = tmp_path / "p.yaml"
    assert questions_files(None, params_path) == []
    assert questions_files("q.json", params_path) == [Path("q.json")]
    assert questions_files("store:s.sqlite#ann", params_path) == [tmp_path / "s.sqlite", tmp_path / "s.sqlite-wal"]
    assert questions_file("q.json", params_path, tmp_path / "x.json") == Path("q.json")
    written = questions_file("store:s.sqlite#ann", params_path, tmp_path / "gold" / "questions.json")
    assert written == tmp_path / "gold" / "questions.json"
    assert {q.question_id for q in questions_json.read(written).questions} == {engine.ids[0], "q1"}
    tags = {q.question_id: q.tags for q in questions_json.read(written).questions}
    assert tags == {engine.ids[0]: (), "q1": (("cue", "exact"),)}     # a study question's tags are kept
