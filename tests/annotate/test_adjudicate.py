"""Adjudication: disagreements with every grade, a settled grade kept apart from the annotators', undo, and the
adjudicated gold read by export's one rule."""

import pandas as pd
import pytest

from conftest import GRADING_POOL, make_grading_store
from pmrag.annotate import adjudicate as D
from pmrag.annotate.export import gold_from_store
from pmrag.annotate.judgments import JudgmentError, grade_of, record_grade
from pmrag.core import store


@pytest.fixture
def graded(tmp_path):
    """q1's four chunks graded by ann and ben (two disagreements), q2's first chunk by ann only."""
    engine, rows = make_grading_store(tmp_path / "s.sqlite")
    at = {(r.question_id, r.position): r.chunk_id for r in rows.itertuples()}
    for position, (ann, ben) in enumerate([(2, 2), (0, 1), (1, 1), (2, 0)]):
        record_grade(engine, "q1", at["q1", position], "ann", ann, pool=GRADING_POOL)
        record_grade(engine, "q1", at["q1", position], "ben", ben, pool=GRADING_POOL)
    record_grade(engine, "q2", at["q2", 0], "ann", 2, pool=GRADING_POOL)
    yield engine, at
    engine.dispose()


def test_disagreements_list_every_grade_and_the_adjudication(graded):
    engine, at = graded
    table = D.disagreements(engine)
    assert list(table.columns) == ["question_id", "chunk_id", "ann", "ben", "adjudicated", "adjudicator"]
    expected = sorted([("q1", at["q1", 1], 0, 1), ("q1", at["q1", 3], 2, 0)])
    assert [tuple(r) for r in table[["question_id", "chunk_id", "ann", "ben"]].itertuples(index=False)] == expected
    assert table["adjudicated"].isna().all()
    D.record_adjudication(engine, "q1", at["q1", 3], 1, "judge", note=" partial ")
    table = D.disagreements(engine)
    settled = table[table["chunk_id"] == at["q1", 3]].iloc[0]
    assert (settled["adjudicated"], settled["adjudicator"]) == (1, "judge")
    assert D.disagreements(engine, pool="other").empty


def test_an_adjudication_is_stored_apart_and_undone(graded):
    engine, at = graded
    before, first = D.record_adjudication(engine, "q1", at["q1", 1], 1, "judge", note=" both fine ", judged_at="t1")
    assert before is None
    assert first == D.Adjudication("q1", at["q1", 1], 1, "judge", "both fine", "t1")
    assert D.adjudication_of(engine, "q1", at["q1", 1]) == first
    again, second = D.record_adjudication(engine, "q1", at["q1", 1], 0, "judge2", judged_at="t2")
    assert again == first and len(store.read_table(engine, "adjudications")) == 1
    assert grade_of(engine, "q1", at["q1", 1], "ann").relevance == 0            # the annotators' grades stay
    assert grade_of(engine, "q1", at["q1", 1], "ben").relevance == 1
    with pytest.raises(JudgmentError, match="changed since"):
        D.undo_adjudication(engine, None, first)
    assert D.undo_adjudication(engine, again, second) == first
    assert D.adjudication_of(engine, "q1", at["q1", 1]) == first
    D.undo_adjudication(engine, None, first)
    assert D.adjudication_of(engine, "q1", at["q1", 1]) is None
    assert D.read_adjudications(engine).empty


def test_adjudication_refuses_bad_input_and_writes_nothing(graded):
    engine, at = graded
    for args, message in [((at["q1", 1], 3, "judge"), "relevance must be 0, 1 or 2"),
                          ((at["q1", 1], 1, " "), "annotator must be a non-empty id"),
                          ((at["q2", 1], 1, "judge"), "has no annotator's grade to adjudicate")]:
        with pytest.raises(JudgmentError, match=message):
            D.record_adjudication(engine, "q1" if args[0] != at["q2", 1] else "q2", *args)
    assert D.read_adjudications(engine).empty


def test_adjudicated_grades_follow_export_rule_round_trip(graded):
    engine, at = graded
    grades, dropped, unresolved = D.adjudicated_grades(engine)
    assert unresolved == 2 and dropped.empty
    assert set(grades["chunk_id"]) == {at["q1", 0], at["q1", 2], at["q2", 0]}       # agreed, or graded by one
    D.record_adjudication(engine, "q1", at["q1", 1], 1, "judge")
    D.record_adjudication(engine, "q1", at["q1", 3], 2, "judge")
    D.record_adjudication(engine, "q1", at["q1", 0], 0, "judge")                   # overrides an agreed grade
    grades, _, unresolved = D.adjudicated_grades(engine)
    assert unresolved == 0
    settled = dict(zip(grades.loc[grades["question_id"] == "q1", "chunk_id"],
                       grades.loc[grades["question_id"] == "q1", "relevance"]))
    assert settled == {at["q1", 0]: 0, at["q1", 1]: 1, at["q1", 2]: 1, at["q1", 3]: 2}
    gold = gold_from_store(engine, "adjudicated")
    assert gold.unresolved == 0
    pd.testing.assert_frame_equal(gold.qrels[["question_id", "chunk_id", "relevance"]].reset_index(drop=True),
                                  grades.reset_index(drop=True))
