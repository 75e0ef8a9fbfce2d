"""Grades per annotator in the store: upsert with validation, undo, drops, progress and the resume point."""

import numpy as np
import pandas as pd
import pytest

from conftest import GRADING_POOL
from pmrag.annotate import judgments as J
from pmrag.core import store

POOL = GRADING_POOL


def one_line(error) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_grade_is_an_upsert_whose_change_knows_the_grade_before(grading):
    engine, at = grading
    first = J.record_grade(engine, "q1", at["q1", 0], "ann", 1, pool=POOL, note="  maybe ", judged_at="t1")
    assert first.before is None
    assert first.after == J.Judgment("q1", at["q1", 0], "ann", 1, "maybe", POOL, "t1")
    second = J.record_grade(engine, "q1", at["q1", 0], "ann", 2, pool=POOL, note="", judged_at="t2")
    assert second.before == first.after
    assert J.grade_of(engine, "q1", at["q1", 0], "ann") == J.Judgment("q1", at["q1", 0], "ann", 2, None, POOL, "t2")
    assert len(store.read_table(engine, "judgments")) == 1


def test_undo_restores_the_grade_before_or_removes_a_first_grade(grading):
    engine, at = grading
    first = J.record_grade(engine, "q1", at["q1", 0], "ann", 0, pool=POOL, note="n0")
    second = J.record_grade(engine, "q1", at["q1", 0], "ann", 2, pool=POOL)
    assert J.undo_grade(engine, second) == first.after
    assert J.grade_of(engine, "q1", at["q1", 0], "ann") == first.after       # note and time restored too
    assert J.undo_grade(engine, first) is None
    assert J.grade_of(engine, "q1", at["q1", 0], "ann") is None


def test_undo_refuses_when_the_grade_changed_since(grading):
    engine, at = grading
    earlier = J.record_grade(engine, "q1", at["q1", 0], "ann", 0, pool=POOL)
    J.record_grade(engine, "q1", at["q1", 0], "ann", 1, pool=POOL)
    with pytest.raises(J.JudgmentError) as error:
        J.undo_grade(engine, earlier)
    assert "changed since" in one_line(error)
    assert J.grade_of(engine, "q1", at["q1", 0], "ann").relevance == 1


@pytest.mark.parametrize("relevance", [3, -1, 1.5, 2.0, True, None, "high", np.int64(5)])
def test_a_relevance_outside_0_to_2_is_refused_and_nothing_written(grading, relevance):
    engine, at = grading
    with pytest.raises(J.JudgmentError) as error:
        J.record_grade(engine, "q1", at["q1", 0], "ann", relevance, pool=POOL)
    assert "relevance must be 0, 1 or 2" in one_line(error)
    assert store.read_table(engine, "judgments").empty


def test_a_relevance_typed_as_a_digit_or_read_from_a_frame_is_accepted(grading):
    engine, at = grading
    assert J.record_grade(engine, "q1", at["q1", 0], "ann", "2", pool=POOL).after.relevance == 2
    stored = J.record_grade(engine, "q1", at["q1", 1], "ann", np.int64(1), pool=POOL).after.relevance
    assert stored == 1 and type(stored) is int


def test_a_chunk_outside_the_questions_pool_is_refused(grading):
    engine, at = grading
    for question, chunk, pool_name in (("q1", at["q2", 0], POOL), ("q1", "nope", POOL), ("q1", at["q1", 0], "p9")):
        with pytest.raises(J.JudgmentError) as error:
            J.record_grade(engine, question, chunk, "ann", 2, pool=pool_name)
        assert f"chunk {chunk!r} is not in the pool {pool_name!r} of question 'q1'" in one_line(error)
    assert store.read_table(engine, "judgments").empty


@pytest.mark.parametrize("annotator", ["", "   ", None, 7, "a\nb", "x" * 65])
def test_a_bad_annotator_id_is_refused(grading, annotator):
    engine, at = grading
    with pytest.raises(J.JudgmentError) as error:
        J.record_grade(engine, "q1", at["q1", 0], annotator, 2, pool=POOL)
    assert "annotator" in one_line(error)


def test_each_annotator_sees_only_their_own_grades(grading):
    engine, at = grading
    J.record_grade(engine, "q1", at["q1", 0], "ann", 2, pool=POOL)
    J.record_grade(engine, "q1", at["q1", 0], "bob", 0, pool=POOL)
    J.record_grade(engine, "q2", at["q2", 1], "bob", 1, pool=POOL)
    ann, bob = J.annotator_grades(engine, "ann"), J.annotator_grades(engine, " bob ")
    assert list(ann.columns) == list(J.JUDGMENT_COLUMNS)
    assert ann[["question_id", "relevance"]].values.tolist() == [["q1", 2]]
    assert sorted(bob["relevance"]) == [0, 1] and set(bob["annotator"]) == {"bob"}
    assert J.annotator_grades(engine, "bob", question_id="q2")["chunk_id"].tolist() == [at["q2", 1]]
    assert J.annotator_grades(engine, "bob", pool="other").empty
    assert J.annotators(engine) == ["ann", "bob"]


def test_drop_and_undrop_a_question_with_a_reason(grading):
    engine, at = grading
    J.drop_question(engine, "q2", "ann", "ambiguous", dropped_at="t1")
    J.drop_question(engine, "q2", "ann", "  no answer in the chat ", dropped_at="t2")   # replaces the reason
    assert J.dropped_questions(engine, "ann").values.tolist() == [["q2", "no answer in the chat", "t2"]]
    assert J.dropped_questions(engine, "bob").empty
    assert J.undrop_question(engine, "q2", "ann") is True
    assert J.undrop_question(engine, "q2", "ann") is False
    assert J.dropped_questions(engine, "ann").empty


@pytest.mark.parametrize("question, reason, message", [
    ("q2", " ", "needs a reason"), ("q2", None, "needs a reason"), ("q99", "x", "unknown question 'q99'")])
def test_a_drop_without_reason_or_of_an_unknown_question_is_refused(grading, question, reason, message):
    engine, _ = grading
    with pytest.raises(J.JudgmentError) as error:
        J.drop_question(engine, question, "ann", reason)
    assert message in one_line(error)
    assert store.read_table(engine, "question_drops").empty


def test_progress_per_question_and_overall(grading):
    engine, at = grading
    for position in range(4):
        J.record_grade(engine, "q1", at["q1", position], "ann", position % 3, pool=POOL)
    J.record_grade(engine, "q2", at["q2", 2], "ann", 1, pool=POOL)
    J.record_grade(engine, "q2", at["q2", 0], "bob", 1, pool=POOL)   # another annotator's grade counts not
    J.drop_question(engine, "q10", "ann", "unanswerable")
    table = J.progress(engine, "ann", POOL)
    assert list(table.columns) == list(J.PROGRESS_COLUMNS)
    assert table.values.tolist() == [["q1", 4, 4, False, True], ["q2", 3, 1, False, False],
                                     ["q10", 2, 0, True, True]]
    overall = J.summarize_progress(table)
    assert overall == J.Progress(questions=3, finished=2, dropped=1, candidates=7, graded=5)
    assert overall.share_graded == pytest.approx(5 / 7, abs=1e-12)
    fresh = J.summarize_progress(J.progress(engine, "new", POOL))
    assert (fresh.finished, fresh.graded, fresh.candidates) == (0, 0, 9)


def test_the_resume_point_is_the_first_ungraded_position_of_the_first_unfinished_question(grading):
    engine, at = grading
    assert J.resume_point(engine, "ann", POOL) == ("q1", 0)
    J.record_grade(engine, "q1", at["q1", 0], "ann", 2, pool=POOL)
    J.record_grade(engine, "q1", at["q1", 2], "ann", 0, pool=POOL)
    assert J.resume_point(engine, "ann", POOL) == ("q1", 1)
    J.record_grade(engine, "q1", at["q1", 1], "ann", 0, pool=POOL)
    assert J.resume_point(engine, "ann", POOL) == ("q1", 3)
    J.record_grade(engine, "q1", at["q1", 3], "ann", 0, pool=POOL)
    assert J.resume_point(engine, "ann", POOL) == ("q2", 0)       # q2 before q10: natural order
    J.drop_question(engine, "q2", "ann", "off topic")
    assert J.resume_point(engine, "ann", POOL) == ("q10", 0)
    for position in range(2):
        J.record_grade(engine, "q10", at["q10", position], "ann", 1, pool=POOL)
    assert J.resume_point(engine, "ann", POOL) is None
    assert J.resume_point(engine, "bob", POOL) == ("q1", 0)        # another annotator starts afresh


def test_question_order_is_natural():
    assert J.question_order(["q10", "q2", "q1", "a", "q2", "b3x", "b12x"]) == ["a", "b3x", "b12x", "q1", "q2", "q10"]
    assert J.question_order(pd.Series(["003", "3", "02"])) == ["02", "003", "3"]


def test_many_grades_are_recorded_at_once_with_record_grades_checks(grading):
    engine, at = grading
    grades = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "chunk_id": [at["q1", 0], at["q1", 1], at["q2", 0]],
                           "relevance": [2, np.int64(0), "1"]})
    assert J.record_grades(engine, grades, " ann ", pool=POOL, judged_at="t1") == 3
    assert J.grade_of(engine, "q2", at["q2", 0], "ann") == J.Judgment("q2", at["q2", 0], "ann", 1, None, POOL, "t1")
    again = grades.assign(relevance=[1, 1, 1], note=["  why ", "", None])
    J.record_grades(engine, again, "ann", pool=POOL, judged_at="t2")          # replaces, keeps one row each
    got = [J.grade_of(engine, q, c, "ann") for q, c in zip(grades["question_id"], grades["chunk_id"])]
    assert [(g.relevance, g.note, g.judged_at) for g in got] == [(1, "why", "t2"), (1, None, "t2"), (1, None, "t2")]
    assert len(J.annotator_grades(engine, "ann")) == 3
    outside = pd.DataFrame({"question_id": ["q1", "q2"], "chunk_id": [at["q1", 2], at["q1", 0]], "relevance": [0, 0]})
    with pytest.raises(J.JudgmentError) as raised:
        J.record_grades(engine, outside, "bob", pool=POOL)
    assert one_line(raised) == (f"chunk {at['q1', 0]!r} is not in the pool 'p1' of question 'q2'; only pooled chunks "
                                "are graded")
    assert J.annotator_grades(engine, "bob").empty                           # nothing written, not even the first row
    with pytest.raises(J.JudgmentError, match="relevance must be 0, 1 or 2, got 3"):
        J.record_grades(engine, grades.assign(relevance=3), "bob", pool=POOL)
    with pytest.raises(ValueError, match="grades lacks column"):
        J.record_grades(engine, grades.drop(columns="relevance"), "bob", pool=POOL)
