"""Tests for the LoCoMo adapter (``pmrag.ingest.locomo``) on a small hand-written ``locomo10.json``-shaped file."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from pmrag.core.errors import InputError
from pmrag.ingest import detect_format, read_source
from pmrag.ingest.locomo import LOCOMO_CATEGORIES, dia_id_reading, parse_session_datetime, question_type, read

FIXTURES = Path(__file__).parents[1] / "fixtures" / "locomo"
MINI = FIXTURES / "mini_locomo.json"
ODD = FIXTURES / "odd_evidence.json"


def load(path=MINI, **kwargs):
    batch = read(path, **kwargs)
    batch.check_reconciled()
    return batch


def by_native(batch, source):
    return {m.native_id: m for m in batch.messages if m.source == source}


def questions_by_id(batch):
    return {q.question_id: q for q in batch.questions}


def test_one_source_per_sample_and_counts():
    batch = load()
    assert batch.format == "locomo"
    assert detect_format(MINI) == "locomo"
    assert [m.source for m in batch.messages] == ["conv-a"] * 7 + ["conv-b"] * 2
    assert batch.records_read == 9
    assert batch.questions_read == 6
    assert len(batch.questions) == 5


def test_sessions_are_ordered_numerically_and_source_order_runs_across_them():
    messages = [m for m in load().messages if m.source == "conv-a"]
    # the file lists session_10 before session_2; numeric order puts it last
    assert [m.native_id for m in messages] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D10:1", "D10:2"]
    assert [m.source_order for m in messages] == list(range(7))
    assert [m.date_order for m in messages] == [0, 1, 2, 0, 1, 0, 1]
    conv_b = [m for m in load().messages if m.source == "conv-b"]
    assert [m.source_order for m in conv_b] == [0, 1]  # restarts per sample


def test_timestamps_are_session_datetime_plus_position_seconds():
    turns = by_native(load(), "conv-a")
    assert turns["D1:1"].occurred_at == datetime(2023, 5, 18, 13, 47, 0)
    assert turns["D1:3"].occurred_at == datetime(2023, 5, 18, 13, 47, 2)
    assert turns["D2:1"].occurred_at == datetime(2023, 6, 2, 9, 5, 0)
    assert turns["D2:2"].occurred_at == datetime(2023, 6, 2, 9, 5, 1)
    assert turns["D10:2"].occurred_at == datetime(2023, 7, 15, 20, 30, 1)
    assert not any(m.time_unknown for m in turns.values())


def test_parse_session_datetime_handles_am_pm_and_extra_spaces():
    assert parse_session_datetime("1:47 pm on 18 May, 2023") == datetime(2023, 5, 18, 13, 47)
    assert parse_session_datetime("12:05 am on 1 January,  2024") == datetime(2024, 1, 1, 0, 5)
    with pytest.raises(ValueError):
        parse_session_datetime("13:47 on 18 May, 2023")


def test_turn_fields_native_id_speaker_and_location():
    turns = by_native(load(), "conv-a")
    first = turns["D1:1"]
    assert (first.sender, first.type, first.text) == ("Mina", "text", "Hi Theo, how was the hike?")
    assert first.native_id == "D1:1"
    assert turns["D2:1"].location == "[0].conversation.session_2[0]"
    assert turns["D10:2"].location == "[0].conversation.session_10[1]"


def test_blip_caption_is_appended_as_image_marker():
    turns = by_native(load(), "conv-a")
    assert turns["D1:2"].text == "Great, we reached the lake. [image: a photo of a lake surrounded by pine trees]"
    assert "[image:" not in turns["D1:1"].text
    assert "example.invalid" not in turns["D1:2"].text  # the URL is not text a retriever should see


def test_questions_with_evidence_point_to_the_right_messages():
    batch = load()
    a = by_native(batch, "conv-a")
    b = by_native(batch, "conv-b")
    qs = questions_by_id(batch)
    assert list(qs) == ["conv-a:q000", "conv-a:q001", "conv-a:q002", "conv-a:q004", "conv-b:q000"]

    q0 = qs["conv-a:q000"]
    assert (q0.text, q0.type, q0.answer, q0.source) == ("Where did Theo hike to?", "single-hop", "a lake", "conv-a")
    assert [(e.relevance, e.message_id) for e in q0.evidence] == [(2, a["D1:2"].message_id)]

    # "D1:3; D2:1" in one evidence entry names two turns
    q1 = qs["conv-a:q001"]
    assert q1.type == "multi-hop"
    assert [(e.relevance, e.message_id) for e in q1.evidence] == [(2, a["D1:3"].message_id), (2, a["D2:1"].message_id)]

    assert [e.message_id for e in qs["conv-a:q002"].evidence] == [a["D10:1"].message_id]

    # the same dia_id in another sample resolves within its own sample
    qb = qs["conv-b:q000"]
    assert [e.message_id for e in qb.evidence] == [b["D1:1"].message_id, b["D1:2"].message_id]
    assert b["D1:1"].message_id != a["D1:1"].message_id
    assert qb.answer == "2022"  # a numeric answer is kept as text
    assert all(e.source is None and e.source_order is None for q in batch.questions for e in q.evidence)


def test_category_5_uses_the_adversarial_answer():
    q = questions_by_id(load())["conv-a:q004"]
    assert q.type == "adversarial"
    assert q.answer == "Pebble"


def test_question_without_evidence_is_rejected_and_reconciles():
    batch = load(permissive=False)  # reported, not an error, even in strict mode
    rejected = [r for r in batch.rejected if r.kind == "question"]
    assert [(r.location, r.reason) for r in rejected] == [
        ("[0].qa[3]", "question has no evidence, so it cannot be scored")
    ]
    assert not [r for r in batch.rejected if r.kind == "message"]
    assert batch.questions_read == len(batch.questions) + len(rejected)


def test_message_ids_are_stable_across_reads():
    assert [m.message_id for m in load().messages] == [m.message_id for m in load().messages]


@pytest.mark.parametrize("permissive", [False, True])
def test_unknown_dia_id_is_dropped_and_the_question_keeps_its_other_evidence(permissive):
    """An evidence id naming no turn used to stop a strict ingest (and reject the whole question when
    permissive); it is now dropped, in either mode, and noted; the question keeps D1:2."""
    batch = load(FIXTURES / "unknown_dia_id.json", permissive=permissive)
    turns = by_native(batch, "conv-u")
    assert len(batch.messages) == 2
    qs = questions_by_id(batch)
    assert list(qs) == ["conv-u:q000", "conv-u:q001"]
    assert [e.message_id for e in qs["conv-u:q001"].evidence] == [turns["D1:2"].message_id]
    assert [(r.kind, r.action, r.location, r.reason) for r in batch.rejected] == [
        ("evidence", "dropped", "[0].qa[1]", "'D9:9' dropped: names no turn of sample 'conv-u'"),
    ]
    assert batch.questions_read == 2


def test_bad_session_datetime_names_the_key():
    path = FIXTURES / "bad_session_datetime.json"
    with pytest.raises(InputError) as info:
        read(path)
    assert info.value.location == "[0].conversation.session_2_date_time"
    assert "'sometime in spring'" in info.value.reason
    assert str(path) in str(info.value)


@pytest.mark.parametrize("value", [None, 20230518, ""])
def test_non_string_or_empty_session_datetime_is_an_input_error(tmp_path, value):
    data = json.loads(MINI.read_text(encoding="utf-8"))
    data[1]["conversation"]["session_1_date_time"] = value
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as info:
        read(path)
    assert info.value.location == "[1].conversation.session_1_date_time"


def test_missing_session_datetime_names_the_missing_key(tmp_path):
    data = json.loads(MINI.read_text(encoding="utf-8"))
    del data[0]["conversation"]["session_10_date_time"]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match="missing key 'session_10_date_time'"):
        read(path)


def test_bad_turn_is_rejected_in_permissive_mode_and_its_evidence_too(tmp_path):
    data = json.loads(MINI.read_text(encoding="utf-8"))
    del data[0]["conversation"]["session_1"][1]["speaker"]  # D1:2 loses its speaker
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as info:
        read(path)
    assert info.value.location == "[0].conversation.session_1[1]"

    batch = load(path, permissive=True)
    assert len(batch.messages) == 8 and batch.records_read == 9
    # the turn's position still counts: D1:3 keeps source_order 2
    assert by_native(batch, "conv-a")["D1:3"].source_order == 2
    assert [(r.kind, r.action, r.location) for r in batch.rejected] == [
        ("message", "rejected", "[0].conversation.session_1[1]"),
        ("evidence", "dropped", "[0].qa[0]"),   # its only evidence was D1:2 ...
        ("question", "rejected", "[0].qa[0]"),  # ... so it has none left
        ("question", "rejected", "[0].qa[3]"),
    ]
    assert batch.rejected[1].reason == "'D1:2' dropped: names a turn of sample 'conv-a' that was rejected"
    assert batch.rejected[2].reason == ("question has no evidence left, so it cannot be scored: "
                                        "its evidence 'D1:2' names a turn of sample 'conv-a' that was rejected")


def test_top_level_must_be_a_list(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps({"sample_id": "x"}), encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON list of samples"):
        read_source(path, "locomo")


def test_image_only_turn_text_is_just_the_marker(tmp_path):
    data = json.loads(MINI.read_text(encoding="utf-8"))
    data[0]["conversation"]["session_1"][1]["text"] = ""
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    turn = by_native(load(path), "conv-a")["D1:2"]
    assert turn.text == "[image: a photo of a lake surrounded by pine trees]"


# --- odd evidence ids and category names (odd_evidence.json reproduces each pattern of the public file) ---


def notes(batch, kind="evidence"):
    return [(r.location, r.action, r.reason) for r in batch.rejected if r.kind == kind]


def test_dia_id_reading_removes_leading_zeros_and_a_colon_after_the_d():
    assert dia_id_reading("D30:05") == "D30:5"
    assert dia_id_reading("D:11:26") == "D11:26"
    assert dia_id_reading("D010:019") == "D10:19"
    assert dia_id_reading("D10:19") == "D10:19"     # a reading is not a turn: whether it names one is checked apart
    for unreadable in ("D", "D1126", "D1:2:3", "d1:2", "S1:2", "D1:", "D" + "9" * 40 + ":1"):
        assert dia_id_reading(unreadable) is None, unreadable


@pytest.mark.parametrize("permissive", [False, True])
def test_odd_evidence_ids_are_normalised_or_dropped_in_either_mode(permissive):
    batch = load(ODD, permissive=permissive)
    assert notes(batch) == [
        ("[0].qa[0]", "normalised", "'D1:03' normalised to D1:3"),                        # leading zero
        ("[0].qa[1]", "normalised", "'D:2:1' normalised to D2:1"),                        # stray colon
        ("[0].qa[2]", "dropped", "'D2:9' dropped: names no turn of sample 'conv-o'"),     # beyond session 2's turns
        ("[0].qa[3]", "dropped", "'D' dropped: names no turn of sample 'conv-o'"),        # a bare D
        ("[0].qa[4]", "dropped", "'D1:4' dropped: names no turn of sample 'conv-o'"),
        ("[0].qa[4]", "dropped", "'D' dropped: names no turn of sample 'conv-o'"),
        ("[0].qa[5]", "normalised", "'D01:03' normalised to D1:3"),
        ("[1].qa[0]", "dropped", "'D01:1' dropped: reads as D1:1, as do 'D1:1', 'D1:01' of sample 'conv-p'"),
    ]


def test_questions_keep_their_valid_and_normalised_evidence():
    batch = load(ODD)
    o, p = by_native(batch, "conv-o"), by_native(batch, "conv-p")
    evidence = {q.question_id: [e.message_id for e in q.evidence] for q in batch.questions}
    assert evidence == {
        "conv-o:q000": [o["D1:3"].message_id],
        "conv-o:q001": [o["D2:1"].message_id],
        "conv-o:q002": [o["D1:1"].message_id],        # one good id, one beyond the session: the good one stays
        "conv-o:q003": [o["D2:2"].message_id],        # "D; D2:2" in one entry
        "conv-o:q005": [o["D1:3"].message_id],        # D1:3 and D01:03 are one turn, listed once
        "conv-o:q007": [o["D1:2"].message_id],
        "conv-o:q008": [o["D1:1"].message_id],
        "conv-p:q001": [p["D1:01"].message_id],       # a turn's own dia_id is matched as written
    }
    assert all(e.relevance == 2 for q in batch.questions for e in q.evidence)


def test_a_question_whose_every_id_is_dropped_is_reported_like_one_without_evidence():
    batch = load(ODD)
    assert notes(batch, "question") == [
        ("[0].qa[4]", "rejected", "question has no evidence left, so it cannot be scored: "
                                  "its evidence 'D1:4', 'D' names no turn of sample 'conv-o'"),
        ("[0].qa[6]", "rejected", "question has no evidence, so it cannot be scored"),
        ("[1].qa[0]", "rejected", "question has no evidence left, so it cannot be scored: "
                                  "its evidence 'D01:1' reads as D1:1, as do 'D1:1', 'D1:01' of sample 'conv-p'"),
    ]
    assert (batch.records_read, len(batch.messages), batch.questions_read, len(batch.questions)) == (7, 7, 11, 8)


def test_many_dropped_ids_are_counted_not_all_quoted(tmp_path):
    data = json.loads(ODD.read_text(encoding="utf-8"))[:1]
    data[0]["qa"] = [{"question": "q?", "answer": "a", "evidence": [f"D9:{i}" for i in range(1, 8)], "category": 4}]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    batch = load(path)
    assert len(notes(batch)) == 7
    [(_, _, reason)] = notes(batch, "question")
    assert reason.endswith("its evidence 'D9:1', 'D9:2', 'D9:3' and 4 more names no turn of sample 'conv-o'")


def test_categories_are_named_as_locomo_evaluates_them():
    assert LOCOMO_CATEGORIES == {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    types = {q.question_id: q.type for q in load(ODD).questions}
    assert types == {
        "conv-o:q000": "single-hop", "conv-o:q001": "multi-hop", "conv-o:q002": "temporal",
        "conv-o:q003": "open-domain", "conv-o:q005": "category_7", "conv-o:q007": "category_unknown",
        "conv-o:q008": "category_4",   # the string "4" is not LoCoMo's integer 4: not converted
        "conv-p:q001": "single-hop",
    }
    assert question_type(5) == "adversarial" and question_type(0) == "category_0" and question_type(None) == "category_unknown"
