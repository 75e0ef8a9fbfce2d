"""The same chat twice: the same file under another name, and overlapping re-exports (LINE exports
the whole history each time), are merged; the paper's rule (every record stored) stays available."""

import json
import shutil
import sqlite3

import pytest
from pathlib import Path

from pmrag.core import store
from pmrag.core.params import DatasetSection
from pmrag.ingest.pipeline import ingest_files
from conftest import older_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

DAYS = {
    "2024/04/08(月)": ["09:00\t山田\tおはよう", "09:01\tゆい\t[スタンプ]", "09:01\tゆい\t[スタンプ]"],
    "2024/04/09(火)": ["10:00\t山田\t駅で待ってる", "10:05\tゆい\t今行く"],
    "2024/04/10(水)": ["20:00\t山田\tまたね", "20:01\tゆい\tおやすみ"],
    "2024/04/11(木)": ["08:00\t山田\t昨日はありがとう"],
}


def txt_export(path: Path, days, title: str = "山田") -> Path:
    lines = [f"[LINE] {title}とのトーク履歴", "保存日時：2024/04/11 09:00", ""]
    for day in days:
        lines += [day, *DAYS[day], ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def json_export(path: Path, dates) -> Path:
    content = {
        "2024-04-08": [{"time": "09:00", "sender": "Aki", "type": "text", "text": "おはよう"},
                       {"time": "09:01", "sender": "Ben", "type": "sticker", "text": "[スタンプ]"},
                       {"time": "09:01", "sender": "Ben", "type": "sticker", "text": "[スタンプ]"}],
        "2024-04-09": [{"time": "10:00", "sender": "Aki", "type": "text", "text": "駅で待ってる"}],
        "2024-04-10": [{"time": "20:00", "sender": "Ben", "type": "text", "text": "またね"}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({d: content[d] for d in dates}, ensure_ascii=False), encoding="utf-8")
    return path


def ingest(db: Path, *paths: Path, merge: bool = True) -> list:
    engine = store.open_store(db)
    try:
        return [report for _, report in ingest_files(engine, [(p, "auto") for p in paths],
                                                     options=DatasetSection(merge_exports=merge))]
    finally:
        engine.dispose()


def count(db: Path, sql: str):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_the_same_file_under_another_name_is_not_stored_twice(tmp_path):
    first = shutil.copy(FIXTURES / "line_json" / "family.json", tmp_path / "family.json")
    second = shutil.copy(first, tmp_path / "family_backup.json")
    db = tmp_path / "s.sqlite"
    [one] = ingest(db, Path(first))
    [two] = ingest(db, Path(second))
    assert two.stored == 0 and two.already_present == one.stored + one.already_present and two.read == one.read
    assert two.same_as == str(first) and "the same content as" in two.line()
    assert count(db, "SELECT COUNT(*) FROM messages") == [(one.stored,)]
    paths = count(db, "SELECT path FROM files ORDER BY path")
    assert paths == [(str(first),), (str(second),)]                      # the first file's row is kept


def test_two_names_of_one_file_in_one_run(tmp_path):
    a = txt_export(tmp_path / "a.txt", list(DAYS))
    b = Path(shutil.copy(a, tmp_path / "b.txt"))
    reports = ingest(tmp_path / "s.sqlite", a, b)
    assert [r.stored for r in reports] == [8, 0] and reports[1].already_present == 8
    assert count(tmp_path / "s.sqlite", "SELECT COUNT(*) FROM messages") == [(8,)]


def test_an_overlapping_txt_re_export_stores_only_what_is_new(tmp_path):
    days = list(DAYS)
    earlier = txt_export(tmp_path / "chat_march.txt", days[:3])          # days 1-3, then 2-4 under another name
    later = txt_export(tmp_path / "chat_april.txt", days[1:])
    db = tmp_path / "s.sqlite"
    [one] = ingest(db, earlier)
    [two] = ingest(db, later)
    assert (one.stored, one.already_present) == (7, 0)
    assert (two.read, two.stored, two.already_present) == (5, 1, 4)      # only 2024/04/11 is new
    assert count(db, "SELECT source, COUNT(*) FROM messages GROUP BY source") == [("山田", 8)]
    # identical messages in one minute (two stickers) are two messages, stored once each
    assert count(db, "SELECT COUNT(*) FROM messages WHERE text = '[スタンプ]'") == [(2,)]


def test_an_overlapping_json_re_export_of_the_same_conversation_merges(tmp_path):
    db = tmp_path / "s.sqlite"
    [one] = ingest(db, json_export(tmp_path / "march" / "family.json", ["2024-04-08", "2024-04-09"]))
    [two] = ingest(db, json_export(tmp_path / "april" / "family.json", ["2024-04-09", "2024-04-10"]))
    assert (one.stored, two.stored, two.already_present) == (4, 1, 1)
    assert count(db, "SELECT COUNT(*) FROM messages") == [(5,)]


def test_the_papers_rule_stores_every_record_of_every_file(tmp_path):
    first = shutil.copy(FIXTURES / "line_json" / "family.json", tmp_path / "family.json")
    second = shutil.copy(first, tmp_path / "family_backup.json")
    db = tmp_path / "s.sqlite"
    [one] = ingest(db, Path(first), merge=False)
    [two] = ingest(db, Path(second), merge=False)
    assert two.stored == one.stored and two.same_as is None
    assert count(db, "SELECT COUNT(*) FROM messages") == [(2 * one.stored,)]
    assert count(db, "SELECT COUNT(*) FROM messages WHERE merge_key IS NOT NULL") == [(0,)]


def test_a_re_export_is_merged_through_the_command_line_and_kept_with_keep_duplicates(tmp_path):
    from pmrag.cli import main

    days = list(DAYS)
    a, b = txt_export(tmp_path / "x.txt", days[:3]), txt_export(tmp_path / "y.txt", days[1:])
    assert main(["ingest", str(a), str(b), "--db", str(tmp_path / "merged.sqlite")]) == 0
    assert main(["ingest", str(a), str(b), "--db", str(tmp_path / "paper.sqlite"), "--keep-duplicates"]) == 0
    assert count(tmp_path / "merged.sqlite", "SELECT COUNT(*) FROM messages") == [(8,)]
    assert count(tmp_path / "paper.sqlite", "SELECT COUNT(*) FROM messages") == [(12,)]


def test_a_store_written_before_merge_keys_is_upgraded_and_its_files_kept(tmp_path):
    db = tmp_path / "old.sqlite"
    [one] = ingest(db, txt_export(tmp_path / "a.txt", list(DAYS)[:2]))
    older_store(db, 1, "DROP INDEX ix_messages_merge_key", "ALTER TABLE messages DROP COLUMN merge_key",   # version 1
                "ALTER TABLE files RENAME TO files_new",
                "CREATE TABLE files (sha256 VARCHAR(64) PRIMARY KEY, path TEXT NOT NULL, format VARCHAR NOT NULL, "
                "encoding VARCHAR, dialect VARCHAR, records_read INTEGER NOT NULL, rejected INTEGER NOT NULL)",
                "INSERT INTO files SELECT * FROM files_new", "DROP TABLE files_new")
    [two] = ingest(db, txt_export(tmp_path / "b.txt", list(DAYS)[1:]))
    assert count(db, "PRAGMA user_version") == [(store.SCHEMA_VERSION,)]
    assert "merge_key" in [row[1] for row in count(db, "PRAGMA table_info(messages)")]
    assert count(db, "SELECT COUNT(*) FROM files") == [(2,)]
    # messages stored before the upgrade have no key, so the overlap with them is stored again (documented)
    assert two.stored == 5 and count(db, "SELECT COUNT(*) FROM messages") == [(one.stored + 5,)]


def _stored(db: Path) -> dict:
    with sqlite3.connect(db) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                for table in ("messages", "files", "rejections")}


def _merge_index(db: Path) -> list:
    with sqlite3.connect(db) as conn:
        return [(row[1], row[2]) for row in conn.execute("PRAGMA index_list(messages)")
                if row[1] == "ix_messages_merge_key"]


def test_the_study_ingest_makes_the_merge_index_after_its_inserts_with_the_counts_of_one_checking_each_row(
        tmp_path, monkeypatch):
    """ingest_study stores every chat file in one transaction with the merge key's unique index made after the
    inserts.  With overlapping exports (merge keys repeated across files) the later rows of each key are deleted and
    counted as already present; where a message ID was also met twice, the files are stored again with the index in
    place.  Every way: the rows, files and per-file counts of storing file by file through the index
    (ingest_files), and the index is there, unique, after."""
    from pmrag.ingest import pipeline
    from pmrag.ingest.pipeline import ingest_study

    passes, store_files = {}, pipeline._store_files

    def counted(conn, jobs, *args):
        if jobs:
            passes[name] = passes.get(name, 0) + 1
        return store_files(conn, jobs, *args)

    monkeypatch.setattr(pipeline, "_store_files", counted)
    apart = [txt_export(tmp_path / "a" / "chat.txt", list(DAYS)[:2], title="山田"),
             txt_export(tmp_path / "b" / "chat.txt", list(DAYS)[2:], title="佐藤")]       # no message in common
    overlapping = [txt_export(tmp_path / "c" / "days1-3.txt", list(DAYS)[:3]),
                   txt_export(tmp_path / "c" / "days2-4.txt", list(DAYS)[1:]),
                   txt_export(tmp_path / "c" / "again.txt", list(DAYS)[:3])]              # same bytes as the first
    (tmp_path / "c" / "again.txt").write_bytes((tmp_path / "c" / "days1-3.txt").read_bytes())
    same_ids = [txt_export(tmp_path / "d" / "days1-3.txt", list(DAYS)[:3]),
                txt_export(tmp_path / "d" / "days1-4.txt", list(DAYS)),                  # its first 7: the same IDs
                txt_export(tmp_path / "d" / "days2-4.txt", list(DAYS)[1:])]              # the same keys, other IDs
    expected = {"apart": ([0, 0], 1), "overlapping": ([0, 4, 7], 1), "same_ids": ([0, 7, 5], 2)}
    for name, paths in (("apart", apart), ("overlapping", overlapping), ("same_ids", same_ids)):
        one_by_one = ingest(tmp_path / f"{name}-files.sqlite", *paths)
        engine = store.open_store(tmp_path / f"{name}-study.sqlite")
        ingested = ingest_study(engine, paths, None, DatasetSection(format="line-txt"), display=str)
        engine.dispose()
        assert ingested.report[["stored", "already_present"]].values.tolist() == \
            [[r.stored, r.already_present] for r in one_by_one], name
        assert _stored(tmp_path / f"{name}-study.sqlite") == _stored(tmp_path / f"{name}-files.sqlite"), name
        assert _merge_index(tmp_path / f"{name}-study.sqlite") == [("ix_messages_merge_key", 1)], name
        assert ([r.already_present for r in one_by_one], passes[name]) == expected[name], name


def test_questions_of_overlapping_exports_are_resolved_against_the_messages_kept(tmp_path):
    """Evidence named by source and position: the questions file is stored once the overlapping exports' repeated
    messages are gone, so positions 0 and 3 name one message each (the first export's), as they do when the files
    are ingested one by one; with the second export's repeats still stored, each named two."""
    from pmrag.ingest.pipeline import ingest_study

    paths = [txt_export(tmp_path / "days1-3.txt", list(DAYS)[:3]), txt_export(tmp_path / "days2-4.txt", list(DAYS)[1:])]
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": [{
        "question_id": "q1", "question": "Where was Yamada waiting?", "type": "factual",
        "evidence": [{"source": "山田", "source_order": 3, "relevance": 2},
                     {"source": "山田", "source_order": 0, "relevance": 1}]}]}, ensure_ascii=False), encoding="utf-8")
    evidence_sql = ("SELECT m.source_order, m.text, e.relevance FROM question_evidence e "
                    "JOIN messages m USING (message_id) ORDER BY e.relevance")
    one_by_one = ingest(tmp_path / "files.sqlite", *paths, questions)
    assert [r.already_present for r in one_by_one] == [0, 4, 0]
    engine = store.open_store(tmp_path / "study.sqlite")
    ingested = ingest_study(engine, paths, questions, DatasetSection(format="line-txt"), display=str)
    engine.dispose()
    assert ingested.report[["stored", "already_present"]].values.tolist() == \
        [[r.stored, r.already_present] for r in one_by_one]
    assert count(tmp_path / "study.sqlite", evidence_sql) == count(tmp_path / "files.sqlite", evidence_sql) == \
        [(0, "おはよう", 1), (3, "駅で待ってる", 2)]


def test_a_study_ingest_that_fails_leaves_the_store_as_it_was_merge_index_included(tmp_path):
    from pmrag.core.errors import InputError
    from pmrag.ingest.pipeline import ingest_study

    good = txt_export(tmp_path / "chat.txt", list(DAYS))
    engine = store.open_store(tmp_path / "s.sqlite")
    ingest_study(engine, [good], None, DatasetSection(format="line-txt"))
    before = _stored(tmp_path / "s.sqlite")
    bad = tmp_path / "bad.txt"
    bad.write_text("[LINE] 山田とのトーク履歴\n2024/04/08(月)\nnot a message line at all\n", encoding="utf-8")
    with pytest.raises(InputError):
        ingest_study(engine, [txt_export(tmp_path / "other.txt", list(DAYS)[:1], title="佐藤"), bad], None,
                     DatasetSection(format="line-txt"))
    engine.dispose()
    assert _stored(tmp_path / "s.sqlite") == before and before["messages"]
    assert _merge_index(tmp_path / "s.sqlite") == [("ix_messages_merge_key", 1)]
