"""Chunk-level gold is derived from message-level evidence through chunk_messages (paper §4.2–4.3)."""

import sqlite3
from datetime import datetime, timedelta

import pytest

from pmrag import store
from pmrag.chunking import chunk_source
from pmrag.errors import InputError
from pmrag.records import Evidence, MessageRecord, QuestionRecord, SourceBatch

T0 = datetime(2024, 4, 10, 9, 0)


def batch_of(n, source="family"):
    batch = SourceBatch(path=f"{source}.json", format="line-json")
    batch.messages = [
        MessageRecord(source=source, source_order=i, occurred_at=T0 + timedelta(minutes=i), sender="A", type="text", text=f"m{i}")
        for i in range(n)
    ]
    batch.records_read = n
    return batch


def chunked_store(tmp_path, n=79, questions=()):
    engine = store.open_store(tmp_path / "s.sqlite")
    messages = batch_of(n)
    store.store_batch(engine, messages, "sha-messages")
    qbatch = SourceBatch(path="questions.json", format="questions-json", questions=list(questions), questions_read=len(questions))
    store.store_batch(engine, qbatch, "sha-questions")
    chunks = [c for src, msgs in store.load_chunk_messages(engine).items() for c in chunk_source(src, msgs)]
    store.replace_chunks(engine, chunks)
    store.derive_qrels(engine)
    return engine, messages.messages, chunks


def qrels_of(engine, question_id):
    frame = store.read_table(engine, "qrels")
    frame = frame[frame["question_id"] == question_id]
    return dict(zip(frame["chunk_id"], frame["relevance"]))


def test_evidence_in_the_overlap_makes_both_windows_primary_gold(tmp_path):
    q = QuestionRecord("q1", "?", "contextual", (Evidence(relevance=2, source="family", source_order=38),))
    engine, _, chunks = chunked_store(tmp_path, questions=[q])
    assert qrels_of(engine, "q1") == {chunks[0].chunk_id: 2, chunks[1].chunk_id: 2}


def test_supporting_only_chunk_gets_1_and_primary_wins_in_a_shared_chunk(tmp_path):
    q = QuestionRecord("q2", "?", "aggregate", (
        Evidence(relevance=1, source="family", source_order=2),    # chunk 0 only
        Evidence(relevance=1, source="family", source_order=50),   # chunk 1 only ...
        Evidence(relevance=2, source="family", source_order=60),   # ... which also holds primary evidence
        Evidence(relevance=1, source="family", source_order=78),   # only in chunk 2 (messages 72-78)
    ))
    engine, _, chunks = chunked_store(tmp_path, questions=[q])
    assert qrels_of(engine, "q2") == {chunks[0].chunk_id: 1, chunks[1].chunk_id: 2, chunks[2].chunk_id: 1}


def test_evidence_by_message_id_resolves_and_unknown_ids_are_errors(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    messages = batch_of(3)
    store.store_batch(engine, messages, "sha")
    known = messages.messages[1].message_id
    ok = SourceBatch(path="q.json", format="questions-json", questions_read=1,
                     questions=[QuestionRecord("q", "?", "named_entity", (Evidence(relevance=2, message_id=known),))])
    store.store_batch(engine, ok, "sha-q")
    assert store.read_table(engine, "question_evidence")[["message_id", "relevance"]].values.tolist() == [[known, 2]]
    bad = SourceBatch(path="q.json", format="questions-json", questions_read=1,
                      questions=[QuestionRecord("q9", "?", "named_entity", (Evidence(relevance=2, source="family", source_order=7),))])
    with pytest.raises(InputError, match=r"q\.json, question 'q9', evidence\[0\]: source 'family' source_order 7 matches no message"):
        store.store_batch(engine, bad, "sha-q2")


def test_storing_the_same_batch_twice_adds_nothing_and_reports_it(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    first = store.store_batch(engine, batch_of(10), "sha")
    second = store.store_batch(engine, batch_of(10), "sha")
    assert (first.stored, first.already_present) == (10, 0)
    assert (second.stored, second.already_present) == (0, 10)
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        assert conn.execute("select count(*) from messages").fetchone() == (10,)


def test_chunk_messages_is_the_papers_line_chunk_messages(tmp_path):
    engine, messages, chunks = chunked_store(tmp_path)
    links = store.read_table(engine, "chunk_messages", ("chunk_id", "position"))
    second = links[links["chunk_id"] == chunks[1].chunk_id]
    assert second["message_id"].tolist() == [m.message_id for m in messages[36:78]]
    assert len(links) == 42 + 42 + 7
