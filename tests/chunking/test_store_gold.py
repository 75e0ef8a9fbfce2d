"""Chunk-level gold is derived from message-level evidence through chunk_messages (paper §4.2–4.3)."""

import sqlite3
from datetime import datetime, timedelta

import pandas as pd
import pytest

from pmrag.core import store
from pmrag.ingest import store as ingest_store
from pmrag.chunking import store as chunk_store
from pmrag.chunking.windows import chunk_source
from pmrag.core.errors import InputError
from pmrag.core.records import Evidence, MessageRecord, QuestionRecord, SourceBatch

T0 = datetime(2024, 4, 10, 9, 0)


def batch_of(n, source="family"):
    batch = SourceBatch(path=f"{source}.json", format="line-json")
    batch.messages = [
        MessageRecord(source=source, source_order=i, occurred_at=T0 + timedelta(minutes=i), sender="A", type="text", text=f"m{i}")
        for i in range(n)
    ]
    batch.records_read = n
    return batch


def load_chunk_messages(engine) -> dict:
    """Every stored message as chunking input, by source (name order), in ``(source_order, message_id)`` order:
    a reference path independent of ``rebuild_chunks``' worker pipeline."""
    from pmrag.chunking.windows import ChunkMessage

    grouped = {}
    rows = store.read_table(engine, "messages", ("source", "source_order", "message_id"))
    for row in rows.itertuples(index=False):
        grouped.setdefault(row.source, []).append(ChunkMessage(row.message_id, row.source, row.source_order,
                                                               row.occurred_at.to_pydatetime(), row.sender, row.text))
    return grouped


def replace_chunks(engine, new_chunks) -> None:
    """Store chunks made elsewhere (replacing every chunk and message link)."""
    with engine.begin() as conn:
        conn.execute(store.chunk_messages.delete())
        conn.execute(store.chunks.delete())
        for c in new_chunks:
            conn.execute(store.chunks.insert(), [{
                "chunk_id": c.chunk_id, "source": c.source, "chunk_index": c.chunk_index,
                "session_index": c.session_index, "window_index": c.window_index, "start_at": c.start_at,
                "end_at": c.end_at, "n_messages": c.n_messages, "n_trimmed": c.n_trimmed, "raw_text": c.raw_text}])
            conn.execute(store.chunk_messages.insert(), [
                {"chunk_id": c.chunk_id, "position": i, "message_id": m} for i, m in enumerate(c.message_ids)])


def chunked_store(tmp_path, n=79, questions=()):
    engine = store.open_store(tmp_path / "s.sqlite")
    messages = batch_of(n)
    ingest_store.store_batch(engine, messages, "sha-messages")
    qbatch = SourceBatch(path="questions.json", format="questions-json", questions=list(questions), questions_read=len(questions))
    ingest_store.store_batch(engine, qbatch, "sha-questions")
    chunks = [c for src, msgs in load_chunk_messages(engine).items() for c in chunk_source(src, msgs)]
    replace_chunks(engine, chunks)
    chunk_store.derive_qrels(engine)
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
    ingest_store.store_batch(engine, messages, "sha")
    known = messages.messages[1].message_id
    ok = SourceBatch(path="q.json", format="questions-json", questions_read=1,
                     questions=[QuestionRecord("q", "?", "named_entity", (Evidence(relevance=2, message_id=known),))])
    ingest_store.store_batch(engine, ok, "sha-q")
    assert store.read_table(engine, "question_evidence")[["message_id", "relevance"]].values.tolist() == [[known, 2]]
    bad = SourceBatch(path="q.json", format="questions-json", questions_read=1,
                      questions=[QuestionRecord("q9", "?", "named_entity", (Evidence(relevance=2, source="family", source_order=7),))])
    with pytest.raises(InputError, match=r"q\.json, question 'q9', evidence\[0\]: source 'family' source_order 7 matches no message"):
        ingest_store.store_batch(engine, bad, "sha-q2")


def test_storing_the_same_batch_twice_adds_nothing_and_reports_it(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    first = ingest_store.store_batch(engine, batch_of(10), "sha")
    second = ingest_store.store_batch(engine, batch_of(10), "sha")
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


def _two_file_store(path):
    """Two sources, one of them split over two files whose source_order values collide."""
    engine = store.open_store(path)
    ingest_store.store_batch(engine, batch_of(79), "sha-a")
    ingest_store.store_batch(engine, batch_of(50, source="club"), "sha-b")
    late = SourceBatch(path="family-2.json", format="line-json")
    late.messages = [  # same times and source_order as the first file's messages 0..9, other texts
        MessageRecord(source="family", source_order=i, occurred_at=T0 + timedelta(minutes=i), sender="B", type="text", text=f"n{i}")
        for i in range(10)
    ]
    late.records_read = 10
    ingest_store.store_batch(engine, late, "sha-c")
    return engine


def _chunk_table(engine):
    return (store.read_table(engine, "chunks", ("chunk_id",)).to_dict("records"),
            store.read_table(engine, "chunk_messages", ("chunk_id", "position")).to_dict("records"))


def test_rebuild_chunks_gives_the_same_rows_in_worker_processes_and_here(tmp_path):
    results = {}
    for workers in (0, 2):
        engine = _two_file_store(tmp_path / f"w{workers}.sqlite")
        n = chunk_store.rebuild_chunks(engine, workers=workers)
        results[workers] = _chunk_table(engine)
        assert n == len(results[workers][0])
    assert results[0] == results[2]
    # and it is what chunking the loaded messages gives (tied source_order broken by message ID)
    engine = _two_file_store(tmp_path / "ref.sqlite")
    loaded = load_chunk_messages(engine)
    family = loaded["family"]
    assert [m.source_order for m in family[:4]] == [0, 0, 1, 1]
    assert family[0].message_id < family[1].message_id
    replace_chunks(engine, [c for src, msgs in loaded.items() for c in chunk_source(src, msgs)])
    assert _chunk_table(engine) == results[0]


@pytest.mark.parametrize("workers", [0, 2])
def test_store_chunks_returns_what_reading_the_store_back_gives(tmp_path, workers):
    from pmrag.chunking.stats import chunk_speakers, session_sizes

    engine = _two_file_store(tmp_path / "s.sqlite")
    stored = chunk_store.store_chunks(engine, workers=workers)
    pd.testing.assert_frame_equal(stored.chunks, store.read_table(engine, "chunks", ("source", "chunk_index")))
    members = store.read_table(engine, "chunk_messages", ("chunk_id", "position"))
    pd.testing.assert_frame_equal(stored.members, members)
    # the rows come in another order (sources in name order, each source's chunks in ID order): the test can tell
    inserted = [cid for _, group in stored.chunks.groupby("source", sort=True) for cid in sorted(group["chunk_id"])]
    assert inserted != sorted(inserted) and stored.chunks["chunk_id"].tolist() != inserted
    pd.testing.assert_series_equal(stored.speakers, chunk_speakers(members, store.read_table(engine, "messages")))
    assert stored.speakers.index.is_monotonic_increasing and len(stored.speakers) == len(stored.chunks)
    assert {"A", "A, B"} <= set(stored.speakers)   # the second family file's sender B beside A in some chunks
    messages = store.stored_messages(engine)
    assert stored.sessions["messages"].tolist() == session_sizes(messages, 180)
    assert stored.sessions["source"].tolist() == ["club", "family"] and stored.sessions["messages"].sum() == len(messages)


@pytest.mark.parametrize("workers", [0, 2])
def test_store_chunks_counts_each_sessions_messages_as_their_times_give(tmp_path, workers):
    from pmrag.chunking.stats import session_sizes

    engine = store.open_store(tmp_path / "s.sqlite")
    minutes = {"family": [0, 1, 181, 362, 363, 2000, 2001, 2002], "club": [5, 600, 780, 961]}   # 180: same session
    for source, offsets in minutes.items():
        batch = SourceBatch(path=f"{source}.json", format="line-json")
        batch.messages = [MessageRecord(source=source, source_order=i, occurred_at=T0 + timedelta(minutes=m),
                                        sender="A", type="text", text=f"{source} {i}") for i, m in enumerate(offsets)]
        batch.records_read = len(offsets)
        ingest_store.store_batch(engine, batch, f"sha-{source}")
    sessions = chunk_store.store_chunks(engine, workers=workers).sessions
    assert list(zip(sessions["source"], sessions["messages"])) == [
        ("club", 1), ("club", 2), ("club", 1), ("family", 3), ("family", 2), ("family", 3)]
    assert sessions["messages"].tolist() == session_sizes(store.stored_messages(engine), 180)


@pytest.mark.parametrize("workers", [0, 2])
def test_store_chunks_counts_the_messages_no_window_holds_as_the_links_do(tmp_path, workers):
    from pmrag.core.params import ChunkingSection
    from pmrag.evaluate.coverage import chunk_coverage, session_coverage

    engine = store.open_store(tmp_path / "s.sqlite")
    for source, n in (("family", 60), ("club", 45)):
        batch = SourceBatch(path=f"{source}.json", format="line-json")
        batch.messages = [MessageRecord(source=source, source_order=i, occurred_at=T0 + timedelta(minutes=i + 300 * (i // 20)),
                                        sender="A", type="text", text="x" * (5 + 20 * (i % 3))) for i in range(n)]
        batch.records_read = n
        ingest_store.store_batch(engine, batch, f"sha-{source}")
    stored = chunk_store.store_chunks(engine, ChunkingSection(window_size=4, stride=3, max_summary_input_chars=100),
                                      workers=workers)
    expected = chunk_coverage(store.stored_messages(engine), stored.members)
    pd.testing.assert_frame_equal(session_coverage(stored.sessions), expected)
    assert expected["in_no_chunk"].sum() > 0 and len(stored.sessions) == 6   # trimmed windows left some out


def test_store_chunks_of_an_empty_store_returns_empty_frames_as_read_back(tmp_path):
    from pmrag.chunking.stats import chunk_speakers

    engine = store.open_store(tmp_path / "s.sqlite")
    stored = chunk_store.store_chunks(engine)
    pd.testing.assert_frame_equal(stored.chunks, store.read_table(engine, "chunks", ("source", "chunk_index")))
    members = store.read_table(engine, "chunk_messages", ("chunk_id", "position"))
    pd.testing.assert_frame_equal(stored.members, members)
    assert stored.speakers.empty and chunk_speakers(members, store.read_table(engine, "messages")).empty


def test_links_in_id_order_keep_each_chunks_block():
    import numpy as np

    links = pd.DataFrame({"chunk_id": ["b", "b", "d", "a", "a", "a", "c"], "position": [0, 1, 0, 0, 1, 2, 0]})
    ordered = chunk_store._in_id_order(links, np.array(["b", "d", "a", "c"], dtype=object), np.array([2, 1, 3, 1]))
    assert list(zip(ordered["chunk_id"], ordered["position"])) == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0), ("d", 0)]
    assert ordered.index.tolist() == list(range(7))


def test_rebuild_chunks_replaces_the_old_chunks_and_keeps_the_message_index(tmp_path):
    from pmrag.core.params import ChunkingSection

    engine = _two_file_store(tmp_path / "s.sqlite")
    first = chunk_store.rebuild_chunks(engine)
    second = chunk_store.rebuild_chunks(engine, ChunkingSection(window_size=10, stride=10))
    assert second > first and len(store.read_table(engine, "chunks")) == second
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        plan = " ".join(str(r) for r in con.execute("EXPLAIN QUERY PLAN SELECT chunk_id FROM chunk_messages WHERE message_id = 'x'"))
    assert "ix_chunk_messages_message_id" in plan
