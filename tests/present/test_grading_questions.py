"""The question-entry and candidate-review widgets without a browser: their controls set and their buttons
clicked, every result read back from a real store (the grading fixture: messages of Aki and Ben, questions q1 and
q2, an edited candidate q10)."""

import html
from datetime import datetime

import pytest

from pmrag.annotate.candidates import (Candidate, Hint, candidate_id, read_candidates, read_hints,
                                       store_candidates)
from pmrag.core.errors import PmragError
from pmrag.present.grading import CandidateReviewWidget, QuestionEntryWidget
from pmrag.present.grading.questions import ENTRY_HINT, REVIEW_HINT, hint_entry, origin_text, status_counts


def said(widget) -> str:
    """The status line's text, unescaped."""
    return html.unescape(widget.status.value)


def typed(widget, text, type_=None, time_from="", time_to="", speaker="", phrase=""):
    widget.text.value = text
    if type_ is not None:
        widget.type.value = type_
    widget.time_from.value, widget.time_to.value, widget.phrase.value = time_from, time_to, phrase
    widget.speaker.value = speaker


# -- entry -------------------------------------------------------------------------------------------------
def test_the_entry_offers_the_papers_types_and_the_stores_speakers(grading):
    engine, _ = grading
    widget = QuestionEntryWidget(engine, author="ann")
    assert list(widget.type.options) == ["named_entity", "contextual", "aggregate"]
    assert [value for _, value in widget.speaker.options] == ["", "Aki", "Ben"]
    assert list(QuestionEntryWidget(engine, types=["when", "who"]).type.options) == ["when", "who"]


def test_a_typed_question_is_stored_at_once_with_its_hints_and_author(grading):
    engine, _ = grading
    widget = QuestionEntryWidget(engine, author="ann")
    typed(widget, " Where did they play tennis? ", "named_entity", "2024-05-01", "", "Ben", "tennis court")
    widget.add_hint_button.click()
    assert "Hint 1 kept" in said(widget) and widget.time_from.value == "" and widget.speaker.value == ""
    widget.time_from.value, widget.time_to.value = "2024-05-01 09:00", "2024-05-02"
    widget.store_button.click()
    cid = candidate_id("typed", "Where did they play tennis?")
    assert f"Question {cid} stored (named_entity, 2 hint(s))" in said(widget)
    stored = read_candidates(engine).set_index("candidate_id")
    assert stored.loc[cid, ["origin", "batch", "status", "type"]].tolist() == [
        "typed", "typed by ann", "proposed", "named_entity"]
    hints = read_hints(engine, [cid])
    assert hints[["speaker", "excerpt", "batch"]].fillna("-").values.tolist() == [
        ["Ben", "tennis court", "typed by ann"], ["-", "-", "typed by ann"]]
    assert hints["time_from"].tolist() == [datetime(2024, 5, 1), datetime(2024, 5, 1, 9)]
    assert hints["time_to"].tolist() == [datetime(2024, 5, 1, 23, 59, 59), datetime(2024, 5, 2, 23, 59, 59)]
    assert widget.text.value == "" and widget.pending == []      # cleared for the next question
    typed(widget, "Where did they play tennis?", "named_entity", phrase="tennis court", speaker="Ben",
          time_from="2024-05-01")
    widget.add_hint_button.click()
    widget.time_from.value, widget.time_to.value = "2024-05-01 09:00", "2024-05-02"
    widget.store_button.click()
    assert "already stored" in said(widget) and len(read_candidates(engine)) == 2


@pytest.mark.parametrize(("boxes", "message"), [
    ({"text": "  "}, "key 'text': expected a non-empty string"),
    ({"text": "q", "time_from": "yesterday"}, "key 'hints[0].time': expected YYYY-MM-DD"),
    ({"text": "q", "time_to": "2024-05-01"}, "key 'hints[0].time_from': a range needs both time_from and time_to"),
    ({"text": "q", "time_from": "2024-05-03", "time_to": "2024-05-01"}, "key 'hints[0].time_to': the range ends"),
])
def test_a_bad_entry_is_refused_with_the_file_readers_message_and_nothing_stored(grading, boxes, message):
    engine, _ = grading
    widget = QuestionEntryWidget(engine, author="ann")
    typed(widget, **boxes)
    widget.store_button.click()
    assert message in said(widget) and len(read_candidates(engine)) == 1     # the fixture's q10 only


def test_an_entry_needs_an_author_and_a_hint_needs_a_box(grading):
    engine, _ = grading
    widget = QuestionEntryWidget(engine)
    typed(widget, "Who was late?")
    widget.store_button.click()
    assert "author: annotator must be a non-empty id" in said(widget)
    widget.add_hint_button.click()
    assert "The hint boxes are empty" in said(widget) and widget.pending == []
    widget.time_from.value = "soon"
    assert widget.add_hint() is False and "key 'hints[0].time'" in said(widget)
    widget.author.value = "bo"
    widget.time_from.value = ""
    assert widget.store() == candidate_id("typed", "Who was late?")


def test_hint_entry_writes_a_typed_files_keys():
    assert hint_entry("2024-05-01", "", "", "") == {"time": "2024-05-01"}
    assert hint_entry(" 2024-05-01 ", "2024-05-02", "Aki", " x ") == {
        "time_from": "2024-05-01", "time_to": "2024-05-02", "speaker": "Aki", "phrase": "x"}
    assert hint_entry("", "2024-05-02", "", "") == {"time_to": "2024-05-02"}
    assert hint_entry("", "", "", "  ") == {}


# -- review ------------------------------------------------------------------------------------------------
MODEL = Candidate("How often did they play?", "aggregate", "model", "batch_0123", (Hint(speaker="Aki", phrase="tennis"),),
                  "gpt-4o-mini", "ab" * 32)


@pytest.fixture
def reviewed(grading):
    engine, _ = grading
    store_candidates(engine, [Candidate("Who was late?", "contextual", batch="mine.yaml"), MODEL], "b")
    return engine


def test_the_review_shows_origin_and_hints_and_counts_per_status(reviewed):
    widget = CandidateReviewWidget(reviewed)
    assert "proposed <b>2</b> · accepted <b>0</b> · edited <b>1</b> · dropped <b>0</b>" in widget.counts.value
    ids = sorted([candidate_id("typed", "Who was late?"), MODEL.candidate_id])
    assert widget.candidate_id == ids[0] and "candidate 1 of 2" in widget.candidate.value
    widget.next_button.click()
    widget.next_button.click()                                 # stays at the end
    assert widget.candidate_id == ids[1] and "candidate 2 of 2" in widget.candidate.value
    views = {widget.candidate_id: widget.candidate.value}
    widget.previous_button.click()
    views[widget.candidate_id] = widget.candidate.value
    typed_view, model_view = views[candidate_id("typed", "Who was late?")], views[MODEL.candidate_id]
    assert "origin: typed · mine.yaml" in typed_view and "no evidence hint" in typed_view
    assert "origin: model gpt-4o-mini · prompts abababababab · batch batch_0123" in model_view
    assert '<td class="sender">Aki</td><td class="text">tennis</td><td>batch_0123</td>' in model_view


def test_accept_edit_and_drop_go_to_the_store_and_the_next_candidate_shows(reviewed):
    widget = CandidateReviewWidget(reviewed)
    first = widget.candidate_id
    widget.accept_button.click()
    assert f"Candidate {first} accepted" in said(widget)
    assert read_candidates(reviewed).set_index("candidate_id").loc[first, "status"] == "accepted"
    second = widget.candidate_id
    assert second != first and widget.edit_text.value in ("Who was late?", "How often did they play?")
    widget.drop_button.click()                                 # no reason: refused, nothing written
    assert "dropping needs a reason" in said(widget)
    widget.edit_text.value = "How many times did they play tennis?"
    widget.edit_type.value = "named_entity"
    widget.edit_button.click()
    row = read_candidates(reviewed).set_index("candidate_id").loc[second]
    assert (row["status"], row["question"], row["type"]) == ("edited", "How many times did they play tennis?",
                                                             "named_entity")
    assert "No proposed candidate in the store." in widget.candidate.value and widget.accept_button.disabled
    assert status_counts(reviewed) == {"proposed": 0, "accepted": 1, "edited": 2, "dropped": 0}
    widget.show.value = "edited"
    assert widget.candidate_id in ("q10", second) and "edited to:" in widget.candidate.value
    widget.drop_reason.value = "not answerable from the chat"
    widget.drop_button.click()
    widget.show.value = "dropped"
    assert "dropped: not answerable from the chat" in widget.candidate.value


def test_the_review_walks_every_status_and_refuses_an_unknown_one(reviewed):
    widget = CandidateReviewWidget(reviewed, status="all")
    assert "candidate 1 of 3" in widget.candidate.value
    with pytest.raises(PmragError, match="status must be one of proposed, accepted, edited, dropped, all"):
        CandidateReviewWidget(reviewed, status="maybe")


def test_origin_text_names_a_typed_candidates_batch():
    import pandas as pd

    assert origin_text(pd.Series({"origin": "typed", "batch": "typed by ann"})) == "typed · typed by ann"


def test_a_saved_notebook_shows_hints_not_widget_reprs(grading):
    engine, _ = grading
    assert QuestionEntryWidget(engine)._repr_mimebundle_()["text/plain"] == ENTRY_HINT
    assert CandidateReviewWidget(engine)._repr_mimebundle_()["text/plain"] == REVIEW_HINT
