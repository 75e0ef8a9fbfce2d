"""The grading widget without a browser: the pool reader on a real store, and the widget driven through its key
pad (the same ``{"key": …}`` message the browser sends) and buttons; grades are read back from the store."""

import pytest

from conftest import GRADING_POOL
from pmrag.annotate import judgments as J
from pmrag.core import store
from pmrag.present.grading import GradingWidget, PoolReader
from pmrag.present.grading.data import NO_QUESTION_TEXT

POOL = GRADING_POOL


def stored(engine, annotator="ann"):
    """``{(question, chunk): relevance}`` of the annotator's grades in the store."""
    grades = J.annotator_grades(engine, annotator)
    return {(q, c): r for q, c, r in zip(grades["question_id"], grades["chunk_id"], grades["relevance"])}


def press(widget, keys):
    for key in keys:
        widget.keys._handle_custom_msg({"key": key}, [])


# -- the pool reader ---------------------------------------------------------------------------------------
def test_the_reader_lists_questions_in_natural_order_with_text_from_questions_or_candidates(grading):
    engine, _ = grading
    reader = PoolReader(engine, POOL)
    assert reader.question_ids == ["q1", "q2", "q10"]
    assert reader.question("q10")[["text", "type"]].tolist() == ["How many times did they meet in May?", "aggregate"]
    assert reader.question("q1")["type"] == "named_entity"
    with pytest.raises(ValueError, match="question 'q9' is not in pool 'p1'"):
        reader.question("q9")


def test_a_pooled_question_without_text_in_the_store_says_so(grading):
    engine, at = grading
    with engine.begin() as conn:
        conn.execute(store.pool.insert(), [{"pool": POOL, "question_id": "q3", "chunk_id": at["q1", 0],
                                            "position": 0, "origins": "[]"}])
    assert PoolReader(engine, POOL).question("q3")["text"] == NO_QUESTION_TEXT


def test_candidates_come_in_blind_position_order_without_origins(grading):
    engine, at = grading
    candidates = PoolReader(engine, POOL).candidates("q1")
    assert list(candidates.columns) == ["position", "chunk_id", "start_at", "end_at"]
    assert candidates["position"].tolist() == [0, 1, 2, 3]
    assert candidates["chunk_id"].tolist() == [at["q1", p] for p in range(4)]


def test_a_chunks_lines_mark_the_hint_matched_message_and_neighbours_surround_it(grading):
    engine, _ = grading
    reader = PoolReader(engine, POOL)
    matched = reader.matched_messages("q1")
    messages = store.read_table(engine, "messages").set_index("message_id")
    assert [messages.loc[m, "source_order"] for m in matched] == [5]
    assert reader.excerpts("q1") == ("tennis court",) and reader.excerpts("q2") == ()
    links = store.read_table(engine, "chunk_messages")
    chunk = links.loc[links["message_id"] == next(iter(matched)), "chunk_id"].iloc[0]
    lines = reader.lines(chunk, matched)
    orders = [messages.loc[line.message_id, "source_order"] for line in lines]
    assert orders == sorted(orders) and len(lines) == 4
    assert [line.matched for line in lines] == [o == 5 for o in orders]
    before, after = reader.neighbours(chunk, 2, matched)
    assert [messages.loc[line.message_id, "source_order"] for line in before] == [orders[0] - 2, orders[0] - 1]
    assert [messages.loc[line.message_id, "source_order"] for line in after] == [orders[-1] + 1, orders[-1] + 2]
    first = links.loc[links["message_id"] == messages.index[messages["source_order"] == 0][0], "chunk_id"].iloc[0]
    assert reader.neighbours(first, 3)[0] == ()       # nothing before the first message


# -- the widget --------------------------------------------------------------------------------------------
def test_keys_grade_move_and_undo_and_every_grade_is_in_the_store(grading):
    engine, at = grading
    widget = GradingWidget(engine, POOL, "ann")
    assert (widget.question_id, widget.index) == ("q1", 0)
    press(widget, "21")
    assert stored(engine) == {("q1", at["q1", 0]): 2, ("q1", at["q1", 1]): 1}
    assert widget.index == 2 and "candidate 3 of 4" in widget.candidate.value
    press(widget, "pp")
    assert widget.index == 0 and "2 · relevant (answers)" in widget.candidate.value
    press(widget, "0")                                     # regrade, then on to the next ungraded one
    assert stored(engine)[("q1", at["q1", 0])] == 0 and widget.index == 2
    press(widget, "u")                                     # the regrade undone: 2 again, shown
    assert stored(engine)[("q1", at["q1", 0])] == 2 and widget.index == 0
    press(widget, "uu")                                    # both first grades undone
    assert stored(engine) == {}
    assert "Nothing to undo" not in widget.status.value
    press(widget, "u")
    assert "Nothing to undo in this session." in widget.status.value
    press(widget, "x")                                     # not a grading key: ignored
    assert stored(engine) == {}


def test_grading_the_last_candidate_moves_to_the_next_unfinished_question(grading):
    engine, at = grading
    widget = GradingWidget(engine, POOL, "ann")
    press(widget, "n" * 3)
    assert widget.index == 3
    press(widget, "n")                                     # stays at the end
    assert widget.index == 3
    press(widget, "0")                                     # q1 has ungraded candidates: on, wrapping round
    assert (widget.question_id, widget.index) == ("q1", 0)
    press(widget, "0")
    assert (widget.question_id, widget.index) == ("q1", 1)
    press(widget, "00")
    assert (widget.question_id, widget.index) == ("q2", 0)
    assert "question 2 of 3: q2" in widget.header.value
    assert "overall: <b>1 of 3</b> questions finished, <b>4 of 9</b> candidates graded" in widget.header.value


def test_a_new_widget_resumes_where_the_annotator_stopped_and_other_annotators_start_afresh(grading):
    engine, at = grading
    first = GradingWidget(engine, POOL, "ann")
    press(first, "2102")
    press(first, "1")
    assert (first.question_id, first.index) == ("q2", 1)
    again = GradingWidget(engine, POOL, "ann")
    assert (again.question_id, again.index) == ("q2", 1)
    assert "resumed at question q2, candidate 2" in again.status.value
    other = GradingWidget(engine, POOL, "bob")
    assert (other.question_id, other.index) == ("q1", 0)
    assert "this question: <b>0 of 4</b> graded" in other.header.value


def test_the_annotator_is_chosen_first(grading):
    engine, at = grading
    widget = GradingWidget(engine, POOL)
    assert widget.grade_buttons[0].disabled and widget.question_id is None
    press(widget, "2")
    assert "start grading" in widget.status.value and stored(engine) == {}
    widget.annotator.value = "  "
    widget.start_button.click()
    assert "annotator must be a non-empty id" in widget.status.value
    widget.annotator.value = "carol"
    widget.start_button.click()
    assert not widget.grade_buttons[0].disabled and widget.annotator.disabled
    widget.grade_buttons[2].click()
    assert stored(engine, "carol") == {("q1", at["q1", 0]): 2}


def test_a_note_is_saved_with_the_grade_and_updates_it_later(grading):
    engine, at = grading
    widget = GradingWidget(engine, POOL, "ann")
    widget.note.value = "mentions the court"
    assert "saved with the grade" in widget.status.value and stored(engine) == {}
    press(widget, "2")
    assert J.grade_of(engine, "q1", at["q1", 0], "ann").note == "mentions the court"
    assert widget.note.value == ""                         # the next candidate has no note
    press(widget, "p")
    assert widget.note.value == "mentions the court"
    widget.note.value = "court and time"
    grade = J.grade_of(engine, "q1", at["q1", 0], "ann")
    assert (grade.relevance, grade.note) == (2, "court and time")
    press(widget, "u")                                     # undoes the note change
    assert J.grade_of(engine, "q1", at["q1", 0], "ann").note == "mentions the court"


def test_drop_and_undrop_a_question(grading):
    engine, _ = grading
    widget = GradingWidget(engine, POOL, "ann")
    widget.drop_button.click()
    assert "needs a reason" in widget.status.value and widget.question_id == "q1"
    widget.drop_reason.value = "not answerable from the chat"
    widget.drop_button.click()
    assert widget.question_id == "q2"
    assert J.dropped_questions(engine, "ann")["question_id"].tolist() == ["q1"]
    widget.question.value = "q1"
    assert "dropped by you: not answerable from the chat" in widget.header.value
    widget.undrop_button.click()
    assert J.dropped_questions(engine, "ann").empty and "dropped by you" not in widget.header.value


def test_the_neighbours_toggle_shows_messages_around_the_chunk(grading):
    engine, _ = grading
    widget = GradingWidget(engine, POOL, "ann", n_neighbours=2)
    assert "before the chunk" not in widget.candidate.value
    widget.neighbours.value = True
    assert widget.candidate.value.count('class="neighbour ') > 0
    assert "the chunk" in widget.candidate.value


def test_the_matched_excerpt_is_highlighted_in_the_candidate_holding_it_only(grading):
    engine, _ = grading
    widget = GradingWidget(engine, POOL, "ann")
    highlighted = []
    for index in range(4):
        html = widget.candidate.value
        highlighted.append('class="matched"' in html and "<mark>tennis court</mark>" in html)
        assert html.count('class="matched"') <= 1
        press(widget, "n")
    assert highlighted == [False, False, True, False]   # the fixture pools the hint's chunk at position 2


def test_a_saved_notebook_shows_a_hint_not_widget_reprs(grading):
    engine, _ = grading
    bundle = GradingWidget(engine, POOL, "ann")._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Grading widget:")


def test_grading_is_blind_no_retriever_or_rank_of_the_pool_reaches_a_view(grading):
    engine, _ = grading
    origins = store.read_table(engine, "pool")["origins"]
    assert origins.str.contains("raw_text_bm25").all()       # the fixture's pool names a retriever and ranks
    widget = GradingWidget(engine, POOL, "ann")
    for question in ("q1", "q2", "q10"):
        widget.question.value = question
        for _ in range(4):
            views = widget.header.value + widget.candidate.value + widget.status.value
            assert "raw_text_bm25" not in views and "rank" not in views and "retriever" not in views
            press(widget, "n")


def test_a_question_pooled_after_the_widget_was_built_is_listed_and_graded(grading):
    engine, at = grading
    widget = GradingWidget(engine, POOL, "ann")
    reader = widget.reader
    assert reader.question_ids == ["q1", "q2", "q10"]
    with engine.begin() as conn:
        conn.execute(store.questions.insert(), [{"question_id": "q3", "text": "Who brought water?", "type": "contextual"}])
        conn.execute(store.pool.insert(), [{"pool": POOL, "question_id": "q3", "chunk_id": at["q1", 0],
                                            "position": 0, "origins": "[]"}])
    assert reader.question_ids == ["q1", "q2", "q3", "q10"]          # seen at the next use, no refresh needed
    press(widget, "n")
    assert [value for _, value in widget.question.options] == ["q1", "q2", "q3", "q10"]
    widget.question.value = "q3"
    assert "Who brought water?" in widget.header.value and "question 3 of 4" in widget.header.value
    press(widget, "2")
    assert stored(engine)[("q3", at["q1", 0])] == 2
    with engine.begin() as conn:                                      # a text edited since: seen after refresh()
        conn.execute(store.questions.update().where(store.questions.c.question_id == "q3").values(text="Who?"))
    assert reader.question("q3")["text"] == "Who brought water?"
    widget.open("q3")
    widget.refresh()
    assert reader.question("q3")["text"] == "Who?" and "Who?" in widget.header.value


def test_grading_starts_on_refresh_once_an_empty_pool_has_a_question(grading):
    engine, at = grading
    widget = GradingWidget(engine, "later", "ann")
    assert "holds no question to grade" in widget.status.value and widget.question_id is None
    with engine.begin() as conn:
        conn.execute(store.pool.insert(), [{"pool": "later", "question_id": "q2", "chunk_id": at["q2", 0],
                                            "position": 0, "origins": "[]"}])
    widget.refresh()
    assert widget.question_id == "q2" and not widget.grade_buttons[0].disabled
    press(widget, "1")
    assert J.annotator_grades(engine, "ann", pool="later")["relevance"].tolist() == [1]
