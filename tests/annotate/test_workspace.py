"""The annotation store beside a study: the history copied in, the study's store only read, the annotation kept."""

from pathlib import Path

import pytest

from pmrag.annotate.candidates import Candidate, read_candidates, store_candidates
from pmrag.annotate.pooling import read_pool, write_pool
from pmrag.annotate.workspace import HISTORY_TABLES, annotation_store
from pmrag.core import store
from pmrag.core.store import StoreError


def test_the_history_is_copied_and_the_annotation_kept_across_opens(grading, tmp_path):
    study, at = grading
    study_path = Path(study.url.database)
    before = study_path.read_bytes()
    engine = annotation_store(tmp_path / "run" / "make_gold" / "annotation.sqlite", study_path)
    for table in HISTORY_TABLES:
        assert store.read_table(engine, table).equals(store.read_table(study, table)), table
    assert store.read_table(engine, "questions").empty and store.read_table(engine, "pool").empty
    store_candidates(engine, [Candidate("Who was late?", "contextual")], "typed.csv")
    pooled = read_pool(study, "p1")
    write_pool(engine, "mine", pooled)
    engine.dispose()
    assert study_path.read_bytes() == before                              # the study's store is only read
    with study.begin() as conn:                                           # the study's history changes: copied again
        conn.exec_driver_sql("DELETE FROM chunk_messages WHERE chunk_id = ?", (at["q1", 0],))
    again = annotation_store(tmp_path / "run" / "make_gold" / "annotation.sqlite", study_path)
    assert len(store.read_table(again, "chunk_messages")) == len(store.read_table(study, "chunk_messages"))
    assert len(read_candidates(again)) == 1 and len(read_pool(again, "mine")) == len(pooled)
    assert history_indexes(again) == history_indexes(study)   # dropped for the copy, made again from their SQL
    with again.connect() as conn:                             # ... and used: the merge key's is unique
        assert conn.exec_driver_sql("PRAGMA main.integrity_check").scalar() == "ok"
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT message_id FROM messages WHERE merge_key = 'x'").all()
    assert "ix_messages_merge_key" in str(plan)


def history_indexes(engine):
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name IN "
            f"({', '.join('?' * len(HISTORY_TABLES))}) ORDER BY name", HISTORY_TABLES).all()


def test_the_annotation_store_is_never_the_studys_and_needs_one(grading, tmp_path):
    study, _ = grading
    study_path = Path(study.url.database)
    with pytest.raises(StoreError, match="must be another file than the study's store"):
        annotation_store(study_path, study_path)
    with pytest.raises(StoreError, match="no study store to copy the history from"):
        annotation_store(tmp_path / "a.sqlite", tmp_path / "none.sqlite")


def test_a_new_store_is_put_in_place_whole_and_in_wal_mode(grading, tmp_path, monkeypatch):
    """A new annotation store is copied into without a journal under another name, then linked into place: a copy
    that fails leaves neither a store without its history nor its partial file, and the next open makes it."""
    import sqlite3

    from pmrag.annotate import workspace

    study, _ = grading
    study_path = Path(study.url.database)
    path = tmp_path / "make_gold" / "annotation.sqlite"
    real_copy = workspace._copy_table

    def fails_on_the_chunks(connection, table):
        if table == "chunks":
            raise sqlite3.OperationalError("disk full")
        real_copy(connection, table)

    monkeypatch.setattr(workspace, "_copy_table", fails_on_the_chunks)
    with pytest.raises(StoreError, match=r"cannot copy the history into annotation.sqlite \(disk full\)"):
        annotation_store(path, study_path)
    assert sorted(p.name for p in path.parent.iterdir()) == []
    monkeypatch.setattr(workspace, "_copy_table", real_copy)
    engine = annotation_store(path, study_path)
    assert sorted(p.name for p in path.parent.iterdir() if "partial" in p.name) == []
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA main.integrity_check").scalar() == "ok"
    for table in HISTORY_TABLES:
        assert store.read_table(engine, table).equals(store.read_table(study, table)), table


def test_a_store_another_process_made_meanwhile_is_kept(grading, tmp_path, monkeypatch):
    from pmrag.annotate import workspace

    study, _ = grading
    study_path = Path(study.url.database)
    path = tmp_path / "annotation.sqlite"
    real_copy = workspace._copy_table
    others = []

    def another_process_makes_it(connection, table):
        if table == "messages" and not others:
            others.append(table)
            other = annotation_store(path, study_path)   # the other process: done first, and graded at once
            store_candidates(other, [Candidate("Who was late?", "contextual")], "typed.csv")
            other.dispose()
        real_copy(connection, table)

    monkeypatch.setattr(workspace, "_copy_table", another_process_makes_it)
    engine = annotation_store(path, study_path)
    assert len(read_candidates(engine)) == 1   # the other's store, with its grade, not replaced by this copy
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []


def test_an_empty_file_where_the_store_goes_is_made_the_store(grading, tmp_path):
    study, _ = grading
    path = tmp_path / "annotation.sqlite"
    path.write_bytes(b"")
    engine = annotation_store(path, Path(study.url.database))
    assert len(store.read_table(engine, "messages")) == len(store.read_table(study, "messages")) > 0


def test_a_study_table_defined_otherwise_is_copied_by_column_name(grading, tmp_path):
    """Alike tables are copied whole (``SELECT *``, SQLite's transfer of rows and index entries as stored); a study
    store whose ``messages`` holds the same columns in another order (as a migrated one may) is copied column by
    column into the annotation store's order, and its indexes made again."""
    import sqlite3

    from pmrag.annotate import workspace

    study, _ = grading
    study_path = Path(study.url.database)
    expected = {table: store.read_table(study, table) for table in HISTORY_TABLES}
    alike = annotation_store(tmp_path / "alike.sqlite", study_path)
    for table in HISTORY_TABLES:
        assert store.read_table(alike, table).equals(expected[table]), table
    alike.dispose()
    study.dispose()
    with sqlite3.connect(study_path) as connection:   # messages' columns reversed, its indexes as they were
        columns = [row[1] for row in connection.execute("PRAGMA table_info(messages)")]
        indexes = [sql for (sql,) in connection.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' AND type = 'index' AND sql IS NOT NULL")]
        connection.execute("ALTER TABLE messages RENAME TO old_messages")
        for sql in indexes:
            connection.execute(f"DROP INDEX {sql.split()[sql.split().index('INDEX') + 1]}")
        connection.execute(f"CREATE TABLE messages AS SELECT {', '.join(reversed(columns))} FROM old_messages")
        connection.execute("DROP TABLE old_messages")
        for sql in indexes:
            connection.execute(sql)
        assert [row[1] for row in connection.execute("PRAGMA table_info(messages)")] == columns[::-1]
    copy = sqlite3.connect(tmp_path / "alike.sqlite")
    copy.execute("ATTACH DATABASE ? AS study", (f"file:{study_path}?mode=ro",))
    assert not workspace._same_definition(copy, "messages") and workspace._same_definition(copy, "chunks")
    copy.close()
    other = annotation_store(tmp_path / "other.sqlite", study_path)
    for table in HISTORY_TABLES:
        assert store.read_table(other, table).equals(expected[table]), table
    assert history_indexes(other) == history_indexes(annotation_store(tmp_path / "alike.sqlite", study_path))
    with other.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA main.integrity_check").scalar() == "ok"


def test_the_copy_reads_each_history_table_in_its_stored_order_not_through_an_index(grading):
    """A WITHOUT ROWID table read through one of its indexes arrives in that index's order, and filling the copy's
    primary key in that order was 13× slower at 10× the paper's scale."""
    import sqlite3

    from pmrag.annotate.workspace import study_rows

    study, _ = grading
    connection = sqlite3.connect(":memory:")
    connection.execute("ATTACH DATABASE ? AS study", (f"file:{study.url.database}?mode=ro",))
    for table in HISTORY_TABLES:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {study_rows(table)}").fetchall()
        assert [step[-1] for step in plan] == [f"SCAN study.{table}"], (table, plan)
    unordered = connection.execute("EXPLAIN QUERY PLAN SELECT chunk_id, position, message_id FROM study.chunk_messages")
    assert "USING COVERING INDEX" in str(unordered.fetchall())   # what the order avoids
