"""The disagreement view without a browser: only disagreeing chunks, every annotator named with their grade, no
retriever or rank, grades written to ``adjudications`` (the annotators' own untouched), undo, resume."""

import pytest

from conftest import GRADING_POOL, make_grading_store
from pmrag.annotate import adjudicate as D
from pmrag.annotate.judgments import annotator_grades, record_grade
from pmrag.present.grading import AdjudicationWidget, render_annotator_grades
from pmrag.present.grading.adjudicate import settled_progress


@pytest.fixture
def disagreeing(tmp_path):
    """ann and ben grade every pooled chunk; they differ on q1 positions 1 and 3 and on q2 position 2."""
    engine, rows = make_grading_store(tmp_path / "s.sqlite")
    at = {(r.question_id, r.position): r.chunk_id for r in rows.itertuples()}
    differ = {("q1", 1): (0, 2), ("q1", 3): (1, 2), ("q2", 2): (2, 0)}
    for (question, position), chunk in at.items():
        ann, ben = differ.get((question, position), (1, 1))
        record_grade(engine, question, chunk, "ann", ann, pool=GRADING_POOL)
        record_grade(engine, question, chunk, "ben", ben, pool=GRADING_POOL)
    yield engine, at
    engine.dispose()


def press(widget, keys):
    for key in keys:
        widget.keys._handle_custom_msg({"key": key}, [])


def test_annotator_grades_render_named_and_escaped():
    assert render_annotator_grades(()) == ""
    text = render_annotator_grades((("ann", 0), ("<b>ben</b>", 2)))
    assert 'class="annotator-grades"' in text and "ann: " in text and "&lt;b&gt;ben&lt;/b&gt;" in text
    assert '<span class="grade g0">0 · not relevant</span>' in text and "2 · relevant (answers)" in text


def test_progress_counts_settled_disagreements():
    import pandas as pd
    table = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"]})
    progress = settled_progress(table, {("q1", "a"), ("q2", "c")})
    assert (progress.questions, progress.finished, progress.candidates, progress.graded) == (2, 1, 3, 2)


def test_the_view_walks_only_disagreements_and_writes_adjudications(disagreeing):
    engine, at = disagreeing
    before = annotator_grades(engine, "ann")
    widget = AdjudicationWidget(engine, GRADING_POOL, "judge")
    assert widget.question.options == (("1. q1", "q1"), ("2. q2", "q2"))
    assert (widget.question_id, widget.index) == ("q1", 0)
    assert widget._candidates["chunk_id"].tolist() == [at["q1", 1], at["q1", 3]]
    html = widget.candidate.value
    assert "candidate 1 of 2" in html and "ann: " in html and "ben: " in html
    assert "raw_text_bm25" not in html + widget.header.value and "rank" not in html
    assert widget.drop_button.layout.display == "none"
    press(widget, "1")                                    # settles q1's first disagreement, moves to the second
    assert D.adjudication_of(engine, "q1", at["q1", 1]).relevance == 1
    assert D.adjudication_of(engine, "q1", at["q1", 1]).adjudicator == "judge"
    assert widget.index == 1
    press(widget, "u")
    assert D.adjudication_of(engine, "q1", at["q1", 1]) is None
    press(widget, "12")                                   # both of q1, then on to q2's one
    assert (widget.question_id, widget._candidates["chunk_id"].tolist()) == ("q2", [at["q2", 2]])
    assert "candidate 1 of 1" in widget.candidate.value
    widget.note.value = "ben misread"                     # no adjudication yet: the note waits for a grade
    assert D.adjudication_of(engine, "q2", at["q2", 2]) is None
    press(widget, "0")
    assert D.adjudication_of(engine, "q2", at["q2", 2]).note == "ben misread"
    settled = D.read_adjudications(engine)
    assert sorted(zip(settled["chunk_id"], settled["relevance"])) == sorted(
        [(at["q1", 1], 1), (at["q1", 3], 2), (at["q2", 2], 0)])
    assert D.adjudicated_grades(engine)[2] == 0           # nothing left unsettled
    assert annotator_grades(engine, "ann").drop(columns="judged_at").equals(before.drop(columns="judged_at"))
    assert "3 of 3</b> candidates graded" in widget.header.value


def test_the_view_resumes_at_the_first_unsettled_disagreement(disagreeing):
    engine, at = disagreeing
    D.record_adjudication(engine, "q1", at["q1", 1], 2, "judge")
    D.record_adjudication(engine, "q1", at["q1", 3], 2, "judge")
    widget = AdjudicationWidget(engine, GRADING_POOL, "judge")
    assert (widget.question_id, widget.index) == ("q2", 0)
    widget.open("q1", 0)
    assert "2 · relevant (answers)" in widget.candidate.value


def test_a_pool_without_disagreement_says_so(tmp_path):
    engine, rows = make_grading_store(tmp_path / "s.sqlite")
    for r in rows.itertuples():
        record_grade(engine, r.question_id, r.chunk_id, "ann", 1, pool=GRADING_POOL)
    widget = AdjudicationWidget(engine, GRADING_POOL, "judge")
    assert "holds no disagreement to adjudicate" in widget.status.value
    engine.dispose()
