"""Tests for the LoCoMo adapter (``pmrag.ingest.locomo``) on a small hand-written ``locomo10.json``-shaped file."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from pmrag.core.errors import InputError
from pmrag.ingest import detect_format, read_source
from pmrag.ingest.locomo import parse_session_datetime, read

FIXTURES = Path(__file__).parent / "fixtures" / "locomo"
MINI = FIXTURES / "mini_locomo.json"


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
    assert (q0.text, q0.type, q0.answer, q0.source) == ("Where did Theo hike to?", "category_4", "a lake", "conv-a")
    assert [(e.relevance, e.message_id) for e in q0.evidence] == [(2, a["D1:2"].message_id)]

    # "D1:3; D2:1" in one evidence entry names two turns
    q1 = qs["conv-a:q001"]
    assert q1.type == "category_1"
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
    assert q.type == "category_5"
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


def test_unknown_dia_id_is_an_error_in_strict_mode():
    path = FIXTURES / "unknown_dia_id.json"
    with pytest.raises(InputError) as info:
        read(path)
    err = info.value
    assert err.path == str(path)
    assert err.location == "[0].qa[1]"
    assert "D9:9" in err.reason and "'conv-u'" in err.reason
    assert "D1:2" not in err.reason  # only the unknown one is named


def test_unknown_dia_id_is_rejected_in_permissive_mode():
    batch = load(FIXTURES / "unknown_dia_id.json", permissive=True)
    assert len(batch.messages) == 2
    assert [q.question_id for q in batch.questions] == ["conv-u:q000"]
    assert [(r.kind, r.location) for r in batch.rejected] == [("question", "[0].qa[1]")]
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
    assert [(r.kind, r.location) for r in batch.rejected] == [
        ("message", "[0].conversation.session_1[1]"),
        ("question", "[0].qa[0]"),  # its evidence was D1:2
        ("question", "[0].qa[3]"),
    ]


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
