"""Question tags (the questions file's optional ``tags``): read, stored, upgraded into older stores, and Table 9
split by them."""

import json
from pathlib import Path

import pandas as pd
import pytest

from pmrag.core import store
from pmrag.core.errors import InputError
from pmrag.evaluate import failures
from pmrag.evaluate.gold import question_tags
from pmrag.ingest import questions_json
from pmrag.ingest import store as ingest_store
from pmrag.ingest.line_json import read as read_line_json
from conftest import older_store

FAMILY = Path(__file__).parents[1] / "fixtures" / "line_json" / "family.json"


def question(qid="q1", **extra):
    return {"question_id": qid, "question": "q?", "type": "contextual",
            "evidence": [{"source": "family", "source_order": 0, "relevance": 2}], **extra}


def write(tmp_path, *items, name="q.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"questions": list(items)}, ensure_ascii=False), encoding="utf-8")
    return path


def test_tags_are_read_sorted_and_optional(tmp_path):
    batch = questions_json.read(write(tmp_path, question("q1", tags={"z": "1", "cue": "exact"}), question("q2"),
                                      question("q3", tags=None), question("q4", tags={})))
    assert [q.tags for q in batch.questions] == [(("cue", "exact"), ("z", "1")), (), (), ()]


@pytest.mark.parametrize("tags, expected", [
    (["cue"], "questions[0].tags: expected an object of tag names to string values"),
    ({"cue": 1}, "questions[0].tags['cue']: expected a string, got 1"),
    ({"cue": None}, "questions[0].tags['cue']: expected a string"),
    ({"x" * 100_000: 1}, "questions[0].tags['xxx"),
    ({"": "x"}, "questions[0].tags: expected non-empty tag names"),
])
def test_bad_tags_are_refused_naming_the_key(tmp_path, tags, expected):
    path = write(tmp_path, question("q1", tags=tags))
    with pytest.raises(InputError) as info:
        questions_json.read(path)
    message = str(info.value)
    assert expected in message and str(path) in message and len(message) < 500 and "\n" not in message
    permissive = questions_json.read(path, permissive=True)        # skipped and reported, never stored half-read
    assert permissive.questions == [] and permissive.questions_read == 1 and len(permissive.rejected) == 1


def _store_with_family(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    batch = read_line_json(FAMILY)
    ingest_store.store_batch(engine, batch, batch.path)
    return engine


def test_tags_are_stored_and_a_change_of_tags_stores_the_question_again(tmp_path):
    engine = _store_with_family(tmp_path)
    first = questions_json.read(write(tmp_path, question("q1", tags={"cue": "exact"}), question("q2")))
    report = ingest_store.store_batch(engine, first, first.path)
    assert report.questions_stored == 2
    stored = store.read_table(engine, "questions", ("question_id",))
    assert stored["tags"].iloc[0] == '{"cue": "exact"}' and pd.isna(stored["tags"].iloc[1])
    assert question_tags(stored).values.tolist() == [["q1", "cue", "exact"]]
    again = ingest_store.store_batch(engine, first, first.path)
    assert (again.questions_stored, again.questions_already_present) == (0, 2)
    changed = questions_json.read(write(tmp_path, question("q1", tags={"cue": "paraphrase"}), question("q2"),
                                        name="q2.json"))
    report = ingest_store.store_batch(engine, changed, changed.path)
    assert (report.questions_stored, report.questions_already_present) == (1, 1)
    assert question_tags(store.read_table(engine, "questions")).values.tolist() == [["q1", "cue", "paraphrase"]]


def test_questions_without_a_tags_column_have_no_tags():
    assert question_tags(pd.DataFrame({"question_id": ["q1"], "type": ["t"]})).empty


def test_a_store_of_schema_8_gains_the_questions_tags_column(tmp_path):
    path = older_store(tmp_path / "old.sqlite", 8, "DROP TABLE questions",
                       "CREATE TABLE questions (question_id VARCHAR NOT NULL, text TEXT NOT NULL, type VARCHAR NOT NULL, "
                       "answer TEXT, source VARCHAR, PRIMARY KEY (question_id))",
                       "INSERT INTO questions VALUES ('q1', 'q?', 'contextual', NULL, NULL)")
    engine = store.open_store(path)
    stored = store.read_table(engine, "questions")
    assert stored["question_id"].tolist() == ["q1"] and stored["tags"].isna().all() and question_tags(stored).empty
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA user_version").scalar() == store.SCHEMA_VERSION == 9


def rows(successes):
    return pd.DataFrame({"question_id": [f"q{i}" for i in range(len(successes))], "question_type": "t",
                         "recall@5": [float(s) for s in successes]})


def test_table9_by_tag_is_table9_of_each_tags_questions():
    bm25 = rows([1, 1, 0, 0, 1, 0, 1, 1])
    vector = rows([1, 0, 1, 0, 0, 1, 1, 0]).iloc[::-1]          # another row order: matched by question id
    tags = pd.DataFrame({"question_id": ["q0", "q1", "q2", "q3", "q4", "q0", "q5"],
                         "tag": ["cue", "cue", "cue", "cue", "cue", "kind", "kind"],
                         "value": ["exact", "exact", "paraphrase", "paraphrase", "mixed", "a", "b"]})
    table = failures.success_overlap_by_tag(bm25, vector, tags)
    patterns = list(failures.OVERLAP_PATTERNS)
    whole = failures.success_overlap(bm25, vector)["Questions"].tolist()
    for tag, part in table.groupby("tag"):
        assert part[patterns].sum().tolist() == whole and part["questions"].sum() == 8   # (none) holds the rest
    for _, row in table.iterrows():
        of_tag = tags[tags["tag"] == row["tag"]].set_index("question_id")["value"]
        ids = [q for q in bm25["question_id"] if of_tag.get(q, "(none)") == row["value"]]
        subset = failures.success_overlap(bm25[bm25["question_id"].isin(ids)], vector[vector["question_id"].isin(ids)])
        assert row[patterns].tolist() == subset["Questions"].tolist() and row["questions"] == len(ids), row
    assert table[table["tag"] == "cue"]["value"].tolist() == ["(none)", "exact", "mixed", "paraphrase"]
    assert failures.success_overlap_by_tag(bm25, vector, None).empty
    assert failures.success_overlap_by_tag(bm25, vector, tags.iloc[:0]).empty
    with pytest.raises(ValueError, match="same questions"):
        failures.success_overlap_by_tag(bm25, vector.iloc[:4], tags)
