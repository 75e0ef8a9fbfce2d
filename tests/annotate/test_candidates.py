"""Typed question candidates: reading CSV / YAML files, idempotent storing, status changes, bad input."""

from datetime import datetime

import pytest

from pmrag.annotate.candidates import (Candidate, Hint, accept_candidate, add_typed_questions, candidate_id,
                                       drop_candidate, edit_candidate, read_candidates, read_hints,
                                       read_typed_questions, store_candidates, typed_candidate,
                                       candidates_of_questions)
from pmrag.core import store
from pmrag.core.errors import InputError, PmragError
from conftest import older_store

YAML = """\
- text: 弟がパソコンを借りた理由は？
  type: contextual
  hints:
    - {time: "2024-04-10 18:30", speaker: そうた, phrase: 画面がつかない}
    - {time_from: 2024-04-10, time_to: 2024-04-11}
- {text: 誕生日に何をもらった？, type: named_entity, phrase: プレゼント}
- {text: 最近の気分は？, type: aggregate}
"""

CSV = """text,type,time,time_from,time_to,speaker,phrase
Where did we eat?,contextual,2024-04-10 18:30,,,Ann,ramen
Where did we eat?,contextual,,,,,noodles
Who won?,named_entity,,,,,
"""


@pytest.fixture
def engine(tmp_path):
    return store.open_store(tmp_path / "s.sqlite")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_questions_hints_times_and_batch(tmp_path):
    found = read_typed_questions(write(tmp_path, "mine.yaml", YAML))
    assert [c.type for c in found.candidates] == ["contextual", "named_entity", "aggregate"]
    first = found.candidates[0]
    assert first.hints == (Hint(datetime(2024, 4, 10, 18, 30), None, "そうた", "画面がつかない"),
                           Hint(datetime(2024, 4, 10), datetime(2024, 4, 11, 23, 59, 59), None, None))
    assert found.candidates[1].hints == (Hint(phrase="プレゼント"),)
    assert found.candidates[2].hints == ()
    assert {c.batch for c in found.candidates} == {"mine.yaml"} and found.read == 3


def test_csv_rows_of_one_question_are_its_hints(tmp_path):
    found = read_typed_questions(write(tmp_path, "q.csv", CSV))
    assert [c.text for c in found.candidates] == ["Where did we eat?", "Who won?"]
    assert found.candidates[0].hints == (Hint(datetime(2024, 4, 10, 18, 30), None, "Ann", "ramen"), Hint(phrase="noodles"))
    assert found.read == 2


def test_a_date_alone_is_the_whole_day(tmp_path):
    found = read_typed_questions(write(tmp_path, "d.yaml", "- {text: a, type: t, time: 2024-04-10}\n"))
    hint = found.candidates[0].hints[0]
    assert (hint.time_from, hint.time_to) == (datetime(2024, 4, 10), datetime(2024, 4, 10, 23, 59, 59))


@pytest.mark.parametrize(("name", "text", "where"), [
    ("a.yaml", "- {text: a}\n", "a.yaml, entry 0: key 'type': expected a non-empty string"),
    ("a.yaml", "- {text: a, type: t, time: yesterday}\n", "entry 0: key 'time': expected YYYY-MM-DD"),
    ("a.yaml", "- {text: a, type: t, hints: [{colour: red}]}\n", "entry 0: key 'hints[0].colour': unknown"),
    ("a.yaml", "- {text: a, type: t, time_from: 2024-04-10}\n", "entry 0: key 'time_from': a range needs both"),
    ("a.yaml", "- {text: a, type: t, time_from: 2024-04-12, time_to: 2024-04-10}\n", "key 'time_to': the range ends"),
    ("a.yaml", "- {text: a, type: t, time: 2024-04-10, time_from: 2024-04-10, time_to: 2024-04-11}\n",
     "key 'time': give a time or a range"),
    ("a.yaml", "- {text: a, type: t, hints: [{}]}\n", "key 'hints[0]': an empty hint"),
    ("a.yaml", "- just text\n", "entry 0: expected a mapping"),
    ("a.yaml", "text: a\n", "top level: expected a list"),
    ("a.yaml", "- [unclosed\n", "a.yaml, line 2: not valid YAML"),
    ("a.csv", "text,type,colour\na,t,red\n", "a.csv, line 1: unknown column 'colour'"),
    ("a.csv", "text\na\n", "line 1: missing column 'type'"),
    ("a.csv", "text,type\na,t,extra\n", "a.csv, line 2: more fields than columns"),
    ("a.csv", "text,type,speaker\na,t,\nb,,x\n", "a.csv, line 3: key 'type'"),
    ("a.txt", "", "a.txt: a typed-questions file must be .csv, .yaml or .yml"),
])
def test_bad_input_is_one_line_naming_file_entry_and_key(tmp_path, name, text, where):
    with pytest.raises(InputError) as info:
        read_typed_questions(write(tmp_path, name, text))
    assert where in str(info.value) and "\n" not in str(info.value)


def test_bad_bytes_and_one_text_with_two_types(tmp_path):
    path = tmp_path / "b.csv"
    path.write_bytes(b"text,type\n\xff,t\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        read_typed_questions(path)
    with pytest.raises(InputError, match="one text is given with 2 types"):
        read_typed_questions(write(tmp_path, "c.csv", "text,type\na,t\na,u\n"))


def test_permissive_records_and_skips(tmp_path, engine):
    path = write(tmp_path, "p.yaml", "- {text: a, type: t}\n- {text: b}\n- {text: c, type: t, time: soon}\n")
    report = add_typed_questions(engine, path, permissive=True)
    assert (report.read, report.stored, report.already_present, report.rejected) == (3, 1, 0, 2)
    assert [where for where, _ in report.problems] == ["entry 1", "entry 2"]


def test_storing_is_idempotent_and_reconciled(tmp_path, engine):
    path = write(tmp_path, "mine.yaml", YAML)
    first = add_typed_questions(engine, path)
    again = add_typed_questions(engine, path)
    assert (first.read, first.stored, first.already_present, first.rejected) == (3, 3, 0, 0)
    assert (again.read, again.stored, again.already_present, again.rejected) == (3, 0, 3, 0)
    assert again.line() == "mine.yaml: questions read 3, stored 0, already present 3, rejected 0"
    stored = read_candidates(engine)
    assert set(stored["status"]) == {"proposed"} and set(stored["origin"]) == {"typed"}
    assert set(stored["batch"]) == {"mine.yaml"}           # the file's name, never its folder
    hints = read_hints(engine)
    assert len(hints) == 3 and hints["excerpt"].tolist().count("プレゼント") == 1
    assert candidate_id("typed", "誕生日に何をもらった？") in set(stored["candidate_id"])


def test_the_same_question_with_other_hints_is_rejected_and_left_as_it_was(tmp_path, engine):
    add_typed_questions(engine, write(tmp_path, "a.yaml", "- {text: q, type: t, phrase: x}\n"))
    report = add_typed_questions(engine, write(tmp_path, "b.yaml", "- {text: q, type: t, phrase: y}\n"))
    assert (report.stored, report.rejected) == (0, 1)
    assert read_hints(engine)["excerpt"].tolist() == ["x"]


def test_status_changes(engine):
    candidates = [Candidate("q1", "t"), Candidate("q2", "t"), Candidate("q3", "t"),
                  Candidate("q4", "t", origin="model", model="m", prompt_sha256="0" * 64, batch="b7")]
    store_candidates(engine, candidates, "typed.csv")
    ids = [c.candidate_id for c in candidates]
    accept_candidate(engine, ids[0])
    edit_candidate(engine, ids[1], "  q2, better worded ")
    drop_candidate(engine, ids[2], "not answerable from the chat")
    stored = read_candidates(engine).set_index("candidate_id")
    assert stored.loc[ids, "status"].tolist() == ["accepted", "edited", "dropped", "proposed"]
    assert stored.loc[ids[1], "question"] == "q2, better worded" and stored.loc[ids[0], "question"] == "q1"
    assert stored.loc[ids[2], "reason"] == "not answerable from the chat"
    assert stored.loc[ids[3], ["model", "batch"]].tolist() == ["m", "b7"]
    assert read_candidates(engine, ("accepted", "edited")).index.size == 2
    with pytest.raises(PmragError, match="no question candidate 'cand_nope'"):
        accept_candidate(engine, "cand_nope")
    with pytest.raises(PmragError, match="needs a reason"):
        drop_candidate(engine, ids[0], " ")
    with pytest.raises(PmragError, match="non-empty string"):
        edit_candidate(engine, ids[0], "")


def test_a_yaml_timestamp_keeps_its_clock_time(tmp_path):
    found = read_typed_questions(write(tmp_path, "z.yaml", "- {text: a, type: t, time: 2024-04-10T18:30:00+09:00}\n"))
    assert found.candidates[0].hints[0].time_from == datetime(2024, 4, 10, 18, 30)


def test_a_model_question_from_another_batch_merges_new_hints_and_keeps_its_status(engine):
    first = Candidate("q", "t", "model", "b1", (Hint(phrase="x"),), "m", "0" * 64)
    store_candidates(engine, [first], "run 1")
    accept_candidate(engine, first.candidate_id)
    later = Candidate("q", "t", "model", "b2", (Hint(phrase="y"), Hint(phrase="x"), Hint(phrase="y")), "m", "0" * 64)
    report = store_candidates(engine, [later], "run 2")
    assert (report.read, report.stored, report.already_present, report.merged, report.rejected) == (1, 0, 0, 1, 0)
    assert report.line() == "run 2: questions read 1, stored 0, already present 0, merged 1, rejected 0"
    hints = read_hints(engine)
    assert hints[["hint", "excerpt", "batch"]].values.tolist() == [[0, "x", "b1"], [1, "y", "b2"]]
    assert read_candidates(engine)["status"].tolist() == ["accepted"]
    same_batch = Candidate("q", "t", "model", "b1", (Hint(phrase="z"),), "m", "0" * 64)
    assert store_candidates(engine, [same_batch], "run 3").rejected == 1       # other hints from its own batch
    assert store_candidates(engine, [first], "run 4").already_present == 1     # its hints are among the stored
    assert len(read_hints(engine)) == 2


def test_a_typed_entry_is_checked_by_the_files_rules():
    candidate = typed_candidate({"text": " q ", "type": "t", "time": "2024-04-10", "speaker": "Ann"}, "typed by me")
    assert candidate == Candidate("q", "t", "typed", "typed by me",
                                  (Hint(datetime(2024, 4, 10), datetime(2024, 4, 10, 23, 59, 59), "Ann", None),))
    with pytest.raises(ValueError, match=r"^key 'time_from': a range needs both time_from and time_to$"):
        typed_candidate({"text": "q", "type": "t", "time_from": "2024-04-10"}, "b")


def test_an_edit_can_change_the_type(engine):
    store_candidates(engine, [Candidate("q", "t")], "typed.csv")
    cid = candidate_id("typed", "q")
    edit_candidate(engine, cid, "q, reworded", type="aggregate")
    row = read_candidates(engine).iloc[0]
    assert (row["status"], row["question"], row["text"], row["type"]) == ("edited", "q, reworded", "q", "aggregate")
    with pytest.raises(PmragError, match="the edited type must be a non-empty string"):
        edit_candidate(engine, cid, "q", type=" ")


def test_a_store_of_schema_7_gains_the_hints_batch_column(tmp_path):
    path = older_store(tmp_path / "old.sqlite", 7, "DROP TABLE candidate_hints",
                       "CREATE TABLE candidate_hints (candidate_id VARCHAR NOT NULL, hint INTEGER NOT NULL, "
                       "time_from DATETIME, time_to DATETIME, speaker TEXT, excerpt TEXT, PRIMARY KEY (candidate_id, hint))",
                       "INSERT INTO candidate_hints (candidate_id, hint, excerpt) VALUES ('c', 0, 'x')")
    engine = store.open_store(path)
    assert read_hints(engine)[["excerpt", "batch"]].values.tolist() == [["x", None]]
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA user_version").scalar() == store.SCHEMA_VERSION >= 8


def test_a_datasets_questions_become_typed_candidates_by_question_id():
    import pandas as pd

    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3"], "text": [" Who? ", "Where?", "Who?"],
                              "type": ["named_entity", "contextual", "aggregate"]})
    made = candidates_of_questions(questions, "the study's questions")
    assert made == {"q1": Candidate("Who?", "named_entity", "typed", "the study's questions"),
                    "q2": Candidate("Where?", "contextual", "typed", "the study's questions")}   # one text, one candidate
    with pytest.raises(ValueError, match="key 'type': expected a non-empty string"):
        candidates_of_questions(questions.assign(type=""), "b")
