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
