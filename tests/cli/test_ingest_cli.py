"""End-to-end tests of ``pmrag ingest``: the real command in a subprocess, checked through sqlite3."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pmrag.ingest import read_source

FIXTURES = Path(__file__).parents[1] / "fixtures"
FAMILY = FIXTURES / "line_json" / "family.json"
MIXED_BAD = FIXTURES / "line_json" / "mixed_bad.json"
TRUNCATED = FIXTURES / "line_json" / "truncated.json"
LOCOMO = FIXTURES / "locomo" / "mini_locomo.json"
ODD_EVIDENCE = FIXTURES / "locomo" / "odd_evidence.json"
QUESTIONS = FIXTURES / "questions" / "family_questions.json"
DANGLING = FIXTURES / "questions" / "dangling_questions.json"
JA_TAB = FIXTURES / "line_txt" / "ja_tab.txt"


def pmrag(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pmrag", *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8",
        env=env, timeout=60,
    )


def copy_in(tmp_path: Path, *fixtures: Path) -> list[str]:
    """Copy fixtures next to the database so the command sees short relative paths."""
    for fixture in fixtures:
        shutil.copy(fixture, tmp_path / fixture.name)
    return [fixture.name for fixture in fixtures]


def query(db: Path, sql: str, *params):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def count(db: Path, table: str) -> int:
    return query(db, f"SELECT COUNT(*) FROM {table}")[0][0]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """``family.json`` + ``mini_locomo.json`` ingested, then ``family.json`` again with a question file."""
    tmp_path = tmp_path_factory.mktemp("cli")
    names = copy_in(tmp_path, FAMILY, LOCOMO, QUESTIONS)
    first = pmrag(tmp_path, "ingest", names[0], names[1], "--db", "store.sqlite")
    counts_after_first = {t: count(tmp_path / "store.sqlite", t) for t in ("messages", "questions", "question_evidence")}
    second = pmrag(tmp_path, "ingest", names[0], names[2], "--db", "store.sqlite")
    return tmp_path, first, counts_after_first, second


@pytest.mark.integration
def test_first_ingest_reports_reconciliation_per_file(ingested):
    _, first, _, _ = ingested
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    assert first.stdout.splitlines() == [
        "family.json: line-json (paper JSON (date → messages); utf-8): "
        "read 11, stored 11, already present 0, rejected 0",
        "mini_locomo.json: locomo (LoCoMo samples; utf-8): read 9, stored 9, already present 0, rejected 0; "
        "questions read 6, stored 5, already present 0, rejected 1",
        "  rejected question at [0].qa[3]: question has no evidence, so it cannot be scored",
    ]


@pytest.mark.integration
def test_first_ingest_database_contents(ingested):
    tmp_path, _, counts, _ = ingested
    assert counts == {"messages": 20, "questions": 5, "question_evidence": 7}
    db = tmp_path / "store.sqlite"
    per_source = dict(query(db, "SELECT source, COUNT(*) FROM messages GROUP BY source"))
    assert per_source == {"family": 11, "conv-a": 7, "conv-b": 2}
    # the stored IDs are the adapter's IDs
    stored_ids = {row[0] for row in query(db, "SELECT message_id FROM messages")}
    expected = {m.message_id for path in (FAMILY, LOCOMO) for m in read_source(path).messages}
    assert stored_ids == expected
    untimed = query(db, "SELECT source_order FROM messages WHERE source = 'family' AND time_unknown ORDER BY source_order")
    assert untimed == [(2,), (5,), (6,)]
    assert query(db, "SELECT sender, type, text FROM messages WHERE source = 'family' AND source_order = 10") == [
        ("SYSTEM", "text", "")
    ]
    assert query(db, "SELECT kind, location, action FROM rejections") == [("question", "[0].qa[3]", "rejected")]


@pytest.mark.integration
def test_locomo_questions_and_evidence_rows(ingested):
    db = ingested[0] / "store.sqlite"
    rows = query(
        db,
        "SELECT q.question_id, q.type, q.answer, m.native_id, e.relevance FROM questions q "
        "JOIN question_evidence e USING (question_id) JOIN messages m USING (message_id) "
        "WHERE q.source IS NOT NULL ORDER BY q.question_id, m.source_order",
    )
    assert rows == [
        ("conv-a:q000", "single-hop", "a lake", "D1:2", 2),
        ("conv-a:q001", "multi-hop", "August; Pebble", "D1:3", 2),
        ("conv-a:q001", "multi-hop", "August; Pebble", "D2:1", 2),
        ("conv-a:q002", "temporal", "He is huge now", "D10:1", 2),
        ("conv-a:q004", "adversarial", "Pebble", "D2:1", 2),
        ("conv-b:q000", "temporal", "2022", "D1:1", 2),
        ("conv-b:q000", "temporal", "2022", "D1:2", 2),
    ]
    # evidence of conv-b points at conv-b's turns, not conv-a's turns with the same dia_id
    assert query(
        db,
        "SELECT DISTINCT m.source FROM question_evidence e JOIN messages m USING (message_id) "
        "WHERE e.question_id = 'conv-b:q000'",
    ) == [("conv-b",)]


@pytest.mark.integration
def test_second_ingest_stores_no_duplicates(ingested):
    tmp_path, _, counts, second = ingested
    assert second.returncode == 0, second.stderr
    lines = second.stdout.splitlines()
    assert lines[0] == (
        "family.json: line-json (paper JSON (date → messages); utf-8): "
        "read 11, stored 0, already present 11, rejected 0"
    )
    assert count(tmp_path / "store.sqlite", "messages") == counts["messages"] == 20
    assert len(query(tmp_path / "store.sqlite", "SELECT sha256 FROM files")) == 3


@pytest.mark.integration
def test_question_file_evidence_resolves_to_message_ids(ingested):
    tmp_path, _, _, second = ingested
    assert second.stdout.splitlines()[1] == (
        "family_questions.json: questions-json (pmrag questions; utf-8): "
        "read 0, stored 0, already present 0, rejected 0; questions read 2, stored 2, already present 0, rejected 0"
    )
    db = tmp_path / "store.sqlite"
    ids = {m.source_order: m.message_id for m in read_source(FAMILY).messages}
    rows = query(
        db,
        "SELECT question_id, message_id, relevance FROM question_evidence "
        "WHERE question_id IN ('q001', 'q002') ORDER BY question_id, relevance DESC",
    )
    # q002 lists message 7 twice (relevance 2 and 1): one row, the higher relevance
    assert rows == [("q001", ids[0], 2), ("q001", ids[1], 1), ("q002", ids[7], 2)]
    assert query(db, "SELECT question_id, type, answer, source FROM questions WHERE question_id LIKE 'q00%' ORDER BY 1") == [
        ("q001", "factual", "おはよう", None),
        ("q002", "contextual", None, None),
    ]


@pytest.mark.integration
def test_malformed_file_exits_2_with_one_line(tmp_path):
    (name,) = copy_in(tmp_path, MIXED_BAD)
    result = pmrag(tmp_path, "ingest", name, "--db", "store.sqlite")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "pmrag ingest: error: mixed_bad.json, key '2024-04-09'[1]: time \"9 o'clock\" is not HH:MM or HH:MM:SS"
    ]
    assert count(tmp_path / "store.sqlite", "messages") == 0


def test_truncated_file_error_names_the_line(tmp_path, monkeypatch, capsys):
    # in-process (same main() as the subprocess runs) to keep the suite fast
    from pmrag.cli import main

    (name,) = copy_in(tmp_path, TRUNCATED)
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", name, "--db", "store.sqlite"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pmrag ingest: error: truncated.json, line 4, column ")
    assert "invalid JSON" in lines[0]


@pytest.mark.integration
def test_permissive_stores_the_good_records_and_prints_the_rejected(tmp_path):
    (name,) = copy_in(tmp_path, MIXED_BAD)
    result = pmrag(tmp_path, "ingest", name, "--db", "store.sqlite", "--permissive")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("read 9, stored 3, already present 0, rejected 6")
    assert lines[1:] == [
        "  rejected message at key '2024-04-09'[1]: time \"9 o'clock\" is not HH:MM or HH:MM:SS",
        "  rejected message at key '2024-04-09'[2]: expected a message object, got str",
        "  rejected message at key '2024-04-09'[3]: 'text' must be a string, got list",
        "  rejected message at key 'yesterday'[0]: date key 'yesterday' is not a date (expected YYYY-MM-DD)",
        "  rejected message at key 'yesterday'[1]: date key 'yesterday' is not a date (expected YYYY-MM-DD)",
        "  rejected message at key '2024-04-10': expected a list of messages, got str",
    ]
    db = tmp_path / "store.sqlite"
    assert query(db, "SELECT text FROM messages ORDER BY source_order") == [("good one",), ("good two",), ("good three",)]
    assert count(db, "rejections") == 6
    assert query(db, "SELECT records_read, rejected FROM files") == [(9, 6)]


@pytest.mark.integration
def test_question_file_with_dangling_evidence_exits_2_naming_the_question(tmp_path):
    names = copy_in(tmp_path, FAMILY, DANGLING)
    result = pmrag(tmp_path, "ingest", *names, "--db", "store.sqlite")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines == [
        "pmrag ingest: error: dangling_questions.json, question 'q-dangling', evidence[0]: "
        "source 'family' source_order 99 matches no message; expected one"
    ]
    db = tmp_path / "store.sqlite"
    assert count(db, "messages") == 11  # the message file before it was stored
    # the question file is all or nothing: q001, which resolved, was not stored either
    assert count(db, "questions") == 0
    assert count(db, "question_evidence") == 0


@pytest.mark.integration
def test_line_txt_format(tmp_path):
    (name,) = copy_in(tmp_path, JA_TAB)
    result = pmrag(tmp_path, "ingest", name, "--db", "store.sqlite", "--format", "line-txt")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ja_tab.txt: line-txt (ja tab-separated; chat 山田; utf-8): read 15, stored 15, already present 0, rejected 0"
    ]
    db = tmp_path / "store.sqlite"
    assert query(db, "SELECT source, COUNT(*) FROM messages GROUP BY source") == [("山田", 15)]   # the chat named in the header
    assert query(db, "SELECT sender, text FROM messages WHERE source_order = 0") == [("山田", "おはよう")]


# --- LoCoMo: odd evidence ids, their notes in the store, counts on re-ingest -------------------------------

ODD_FIRST = [
    "odd_evidence.json: locomo (LoCoMo samples; utf-8): read 7, stored 7, already present 0, rejected 0; "
    "questions read 11, stored 8, already present 0, rejected 3; evidence ids normalised 3, dropped 5",
    "  evidence at [0].qa[0]: 'D1:03' normalised to D1:3",
    "  evidence at [0].qa[1]: 'D:2:1' normalised to D2:1",
    "  evidence at [0].qa[2]: 'D2:9' dropped: names no turn of sample 'conv-o'",
    "  evidence at [0].qa[3]: 'D' dropped: names no turn of sample 'conv-o'",
    "  evidence at [0].qa[4]: 'D1:4' dropped: names no turn of sample 'conv-o'",
    "  evidence at [0].qa[4]: 'D' dropped: names no turn of sample 'conv-o'",
    "  rejected question at [0].qa[4]: question has no evidence left, so it cannot be scored: "
    "its evidence 'D1:4', 'D' names no turn of sample 'conv-o'",
    "  evidence at [0].qa[5]: 'D01:03' normalised to D1:3",
    "  rejected question at [0].qa[6]: question has no evidence, so it cannot be scored",
    "  evidence at [1].qa[0]: 'D01:1' dropped: reads as D1:1, as do 'D1:1', 'D1:01' of sample 'conv-p'",
    "  rejected question at [1].qa[0]: question has no evidence left, so it cannot be scored: "
    "its evidence 'D01:1' reads as D1:1, as do 'D1:1', 'D1:01' of sample 'conv-p'",
]


@pytest.fixture(scope="module")
def odd_ingested(tmp_path_factory):
    """``odd_evidence.json`` ingested twice into one store (strict mode: odd ids are not errors)."""
    tmp_path = tmp_path_factory.mktemp("odd")
    (name,) = copy_in(tmp_path, ODD_EVIDENCE)
    first = pmrag(tmp_path, "ingest", name, "--db", "store.sqlite")
    evidence_after_first = query(tmp_path / "store.sqlite", "SELECT * FROM question_evidence ORDER BY 1, 2")
    second = pmrag(tmp_path, "ingest", name, "--db", "store.sqlite")
    return tmp_path, first, evidence_after_first, second


@pytest.mark.integration
def test_odd_evidence_ids_are_reported_per_question_without_stopping(odd_ingested):
    _, first, _, _ = odd_ingested
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    assert first.stdout.splitlines() == ODD_FIRST


@pytest.mark.integration
def test_evidence_notes_are_stored_so_a_study_can_count_them(odd_ingested):
    db = odd_ingested[0] / "store.sqlite"
    counts = query(db, "SELECT kind, action, COUNT(*) FROM rejections GROUP BY kind, action ORDER BY kind, action")
    assert counts == [("evidence", "dropped", 5), ("evidence", "normalised", 3), ("question", "rejected", 3)]
    assert query(db, "SELECT location, reason FROM rejections WHERE action = 'normalised' ORDER BY location") == [
        ("[0].qa[0]", "'D1:03' normalised to D1:3"),
        ("[0].qa[1]", "'D:2:1' normalised to D2:1"),
        ("[0].qa[5]", "'D01:03' normalised to D1:3"),
    ]
    # the file's row counts records left out, not the notes on evidence ids
    assert query(db, "SELECT records_read, rejected FROM files") == [(7, 3)]


@pytest.mark.integration
def test_stored_evidence_of_odd_ids(odd_ingested):
    db = odd_ingested[0] / "store.sqlite"
    rows = query(db, "SELECT q.question_id, q.type, m.native_id FROM questions q JOIN question_evidence e "
                     "USING (question_id) JOIN messages m USING (message_id) ORDER BY q.question_id, m.source_order")
    assert rows == [
        ("conv-o:q000", "single-hop", "D1:3"),
        ("conv-o:q001", "multi-hop", "D2:1"),
        ("conv-o:q002", "temporal", "D1:1"),
        ("conv-o:q003", "open-domain", "D2:2"),
        ("conv-o:q005", "category_7", "D1:3"),
        ("conv-o:q007", "category_unknown", "D1:2"),
        ("conv-o:q008", "category_4", "D1:1"),
        ("conv-p:q001", "single-hop", "D1:01"),
    ]


@pytest.mark.integration
def test_re_ingest_counts_messages_and_questions_as_already_present(odd_ingested):
    tmp_path, _, evidence_after_first, second = odd_ingested
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [
        "odd_evidence.json: locomo (LoCoMo samples; utf-8): read 7, stored 0, already present 7, rejected 0; "
        "questions read 11, stored 0, already present 8, rejected 3; evidence ids normalised 3, dropped 5",
        *ODD_FIRST[1:],
    ]
    db = tmp_path / "store.sqlite"
    assert (count(db, "messages"), count(db, "questions"), count(db, "rejections")) == (7, 8, 11)
    assert query(db, "SELECT * FROM question_evidence ORDER BY 1, 2") == evidence_after_first


def test_a_question_stored_with_other_content_is_replaced_and_counted_as_stored(tmp_path):
    from pmrag.core import store
    from pmrag.ingest.pipeline import ingest_files

    data = json.loads(ODD_EVIDENCE.read_text(encoding="utf-8"))
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    first.write_text(json.dumps(data), encoding="utf-8")
    data[0]["qa"][0]["answer"] = "on Thursdays"          # conv-o:q000, other content
    data[0]["qa"][2]["evidence"] = ["D1:1"]              # conv-o:q002, the same evidence once D2:9 is dropped
    data[0]["qa"][3]["evidence"] = ["D2:1"]              # conv-o:q003, other evidence
    second.write_text(json.dumps(data), encoding="utf-8")
    engine = store.open_store(tmp_path / "s.sqlite")
    [(_, one)] = ingest_files(engine, [(first, "locomo")])
    [(_, two)] = ingest_files(engine, [(second, "locomo")])
    assert (one.questions_stored, one.questions_already_present, one.questions_rejected) == (8, 0, 3)
    assert (two.questions_stored, two.questions_already_present, two.questions_rejected) == (2, 6, 3)
    assert (two.evidence_normalised, two.evidence_dropped) == (3, 3)   # D2:9 and D are no longer in the file
    assert (two.stored, two.already_present) == (0, 7)
    db = tmp_path / "s.sqlite"
    assert query(db, "SELECT answer FROM questions WHERE question_id = 'conv-o:q000'") == [("on Thursdays",)]
    assert query(db, "SELECT m.native_id FROM question_evidence e JOIN messages m USING (message_id) "
                     "WHERE e.question_id = 'conv-o:q003'") == [("D2:1",)]
    assert count(db, "questions") == 8


@pytest.mark.integration
@pytest.mark.parametrize("stamped", [True, False])
def test_a_store_without_rejection_actions_is_upgraded(tmp_path, stamped):
    """A store of schema version 2 (or one from before the stamp) has no ``rejections.action``: it opens,
    its rejections read as ``rejected``, and evidence notes are stored next to them."""
    names = copy_in(tmp_path, LOCOMO, ODD_EVIDENCE)
    db = tmp_path / "store.sqlite"
    assert pmrag(tmp_path, "ingest", names[0], "--db", db.name).returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE rejections DROP COLUMN action")
        conn.execute("PRAGMA user_version = 2" if stamped else "PRAGMA application_id = 0")
    result = pmrag(tmp_path, "ingest", names[1], "--db", db.name)
    assert result.returncode == 0, result.stderr
    from pmrag.core.store import SCHEMA_VERSION

    assert query(db, "PRAGMA user_version")[0][0] == SCHEMA_VERSION
    assert query(db, "SELECT location, action FROM rejections WHERE kind = 'question' ORDER BY rowid") == [
        ("[0].qa[3]", "rejected"),      # mini_locomo's, stored before the column existed
        ("[0].qa[4]", "rejected"), ("[0].qa[6]", "rejected"), ("[1].qa[0]", "rejected"),
    ]
    assert query(db, "SELECT COUNT(*) FROM rejections WHERE kind = 'evidence'") == [(8,)]


def test_study_quiet_has_a_short_form():
    from pmrag.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["study", "p.yaml", "-q"]).quiet is True
    assert parser.parse_args(["study", "p.yaml", "--quiet"]).quiet is True
    assert parser.parse_args(["study", "p.yaml"]).quiet is False
