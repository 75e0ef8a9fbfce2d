"""Tests for the paper's JSON adapter (``pmrag.ingest.line_json``, paper §3.2).

``{"YYYY-MM-DD": [{"time", "sender", "type", "text"}, ...], ...}``, one file per conversation source.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest

from pmrag.core.errors import InputError
from pmrag.core.ids import message_id
from pmrag.core.params import DatasetSection
from pmrag.ingest import detect_format, read_source
from pmrag.ingest.line_json import read
from pmrag.core.records import SYSTEM_SENDER

FIXTURES = Path(__file__).parents[1] / "fixtures" / "line_json"


def load(name: str, **kwargs):
    batch = read(FIXTURES / name, **kwargs)
    batch.check_reconciled()
    return batch


def summary(record):
    return record.occurred_at, record.sender, record.type, record.text


# --- the good file --------------------------------------------------------------------------------


def test_batch_metadata_and_source_name_is_the_file_stem():
    batch = load("family.json")
    assert batch.format == "line-json"
    assert batch.encoding == "utf-8"
    assert batch.records_read == len(batch.messages) == 11
    assert batch.rejected == []
    assert {m.source for m in batch.messages} == {"family"}


def test_source_order_is_document_order_across_dates_and_date_order_restarts():
    messages = load("family.json").messages
    assert [m.source_order for m in messages] == list(range(11))
    assert [m.date_order for m in messages] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5]
    assert [m.location for m in messages[4:7]] == ["key '2024-04-09'[4]", "key '2024-04-10'[0]", "key '2024-04-10'[1]"]


def test_times_hh_mm_and_hh_mm_ss_are_naive_datetimes():
    messages = load("family.json").messages
    assert summary(messages[0]) == (datetime(2024, 4, 9, 9, 5), "Aki", "text", "おはよう")
    assert summary(messages[1]) == (datetime(2024, 4, 9, 9, 6, 30), "Ben", "sticker", "[スタンプ]")
    assert messages[10].occurred_at == datetime(2024, 4, 10, 23, 59, 59)
    assert all(m.occurred_at.tzinfo is None for m in messages)
    assert not any(m.time_unknown for i, m in enumerate(messages) if i not in (2, 5, 6))


def test_missing_time_is_date_midnight_plus_date_order_seconds_by_default():
    messages = load("family.json").messages
    # absent key (2024-04-09, position 2), null (2024-04-10, position 0), "" (2024-04-10, position 1)
    untimed = {i: messages[i] for i in (2, 5, 6)}
    assert all(m.time_unknown for m in untimed.values())
    assert untimed[2].occurred_at == datetime(2024, 4, 9, 0, 0, 2)
    assert untimed[5].occurred_at == datetime(2024, 4, 10, 0, 0, 0)
    assert untimed[6].occurred_at == datetime(2024, 4, 10, 0, 0, 1)


def test_missing_time_with_source_order_offset_counts_file_wide():
    messages = load("family.json", options=DatasetSection(unknown_time_offset="source_order")).messages
    assert messages[2].occurred_at == datetime(2024, 4, 9, 0, 0, 2)
    assert messages[5].occurred_at == datetime(2024, 4, 10, 0, 0, 5)
    assert messages[6].occurred_at == datetime(2024, 4, 10, 0, 0, 6)
    assert messages[5].time_unknown and messages[6].time_unknown
    # timed messages are unaffected by the option
    assert messages[7].occurred_at == datetime(2024, 4, 10, 8, 0)


def test_unknown_time_offset_option_is_validated():
    with pytest.raises(ValueError, match="unknown_time_offset"):
        DatasetSection(unknown_time_offset="file_order")


def test_missing_sender_type_and_text_get_the_paper_defaults():
    messages = load("family.json").messages
    assert summary(messages[7]) == (datetime(2024, 4, 10, 8, 0), SYSTEM_SENDER, "system", "Ben unsent a message")
    assert summary(messages[8]) == (datetime(2024, 4, 10, 8, 1), "Aki", "text", "no type key")
    assert summary(messages[9]) == (datetime(2024, 4, 10, 8, 2), "Ben", "text", "")  # text absent
    assert summary(messages[10])[1:] == (SYSTEM_SENDER, "text", "")  # all three null
    assert SYSTEM_SENDER == "SYSTEM"


def test_no_deduplication_and_media_and_empty_records_are_kept():
    messages = load("family.json").messages
    first, second = messages[3], messages[4]
    assert summary(first) == summary(second) == (datetime(2024, 4, 9, 12, 0), "Ben", "text", "same words")
    assert first.message_id != second.message_id
    assert len({m.message_id for m in messages}) == len(messages)
    # a photo with empty text and a sticker are stored like any other message
    assert summary(messages[6])[1:] == ("Aki", "photo", "")
    assert messages[1].type == "sticker"


def test_message_id_is_the_ids_function_and_stable_across_reads():
    first = load("family.json").messages
    again = load("family.json").messages
    assert [m.message_id for m in first] == [m.message_id for m in again]
    for m in first:
        assert m.message_id == message_id(m.source, m.source_order, m.occurred_at, m.sender, m.type, m.text)
        assert len(m.message_id) == 16
        int(m.message_id, 16)


def test_changing_text_or_source_name_changes_the_message_id(tmp_path):
    original = load("family.json").messages[0]
    data = json.loads((FIXTURES / "family.json").read_text(encoding="utf-8"))
    data["2024-04-09"][0]["text"] = "おはよう!"
    edited_path = tmp_path / "family.json"
    edited_path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    edited = read(edited_path).messages
    assert edited[0].text == "おはよう!"
    assert edited[0].message_id != original.message_id
    # every other record, unchanged, keeps its ID
    assert [m.message_id for m in edited[1:]] == [m.message_id for m in load("family.json").messages[1:]]
    # same content under another source name is another message
    renamed = tmp_path / "family2.json"
    renamed.write_bytes((FIXTURES / "family.json").read_bytes())
    assert read(renamed).messages[0].message_id != original.message_id
    assert dataclasses.replace(original, text="おはよう!").message_id == edited[0].message_id


def test_utf8_bom_is_accepted_and_auto_detected():
    path = FIXTURES / "bom.json"
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert detect_format(path) == "line-json"
    batch = read_source(path)
    assert [summary(m) for m in batch.messages] == [(datetime(2024, 4, 10, 10, 0), "Aki", "text", "BOM first")]
    assert batch.messages[0].source == "bom"


def test_read_source_auto_detects_line_json():
    batch = read_source(FIXTURES / "family.json")
    assert batch.format == "line-json"
    assert len(batch.messages) == 11


# --- malformed input, strict mode -----------------------------------------------------------------


def error_of(name: str) -> InputError:
    with pytest.raises(InputError) as info:
        read(FIXTURES / name)
    err = info.value
    assert str(FIXTURES / name) in str(err)
    assert err.path == str(FIXTURES / name)
    return err


def test_truncated_file_names_its_line():
    err = error_of("truncated.json")
    assert err.location.startswith("line 4,")
    assert "line 4" in str(err)
    assert "invalid JSON" in err.reason


def test_invalid_json_names_the_line_of_the_syntax_error():
    err = error_of("missing_comma.json")
    assert err.location.startswith("line 4,")
    assert "Expecting ','" in err.reason


def test_empty_file_is_an_input_error(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="line 1"):
        read(path)


def test_invalid_utf8_is_an_input_error(tmp_path):
    path = tmp_path / "latin1.json"
    raw = '{"2024-04-10": [{"text": "café"}]}'.encode("latin-1")
    path.write_bytes(raw)
    with pytest.raises(InputError, match="not valid UTF-8") as info:
        read(path)
    assert raw.index("é".encode("latin-1")) == 29
    assert info.value.location == "byte 29"


def test_top_level_not_an_object():
    err = error_of("top_level_list.json")
    assert err.location == "top level"
    assert "expected a JSON object keyed by date, got a list" in err.reason


def test_top_level_not_an_object_is_fatal_even_when_permissive():
    with pytest.raises(InputError, match="top level"):
        read(FIXTURES / "top_level_list.json", permissive=True)


def test_date_key_not_a_date_names_the_key():
    err = error_of("bad_date_key.json")
    assert err.location == "key 'April 11'[0]"
    assert "'April 11' is not a date" in err.reason


def test_day_value_not_a_list_names_the_key():
    err = error_of("day_not_list.json")
    assert err.location == "key '2024-04-10'"
    assert "expected a list of messages, got dict" in err.reason


def test_message_not_an_object_names_key_and_index():
    err = error_of("message_not_object.json")
    assert err.location == "key '2024-04-10'[1]"
    assert "expected a message object, got str" in err.reason


def test_unparseable_time_names_key_and_index():
    err = error_of("bad_time.json")
    assert err.location == "key '2024-04-10'[2]"
    assert "key '2024-04-10'[2]" in str(err)
    assert "'25:61'" in err.reason


def test_non_string_text_is_an_error():
    err = error_of("text_not_string.json")
    assert err.location == "key '2024-04-10'[0]"
    assert "'text' must be a string, got int" in err.reason


def test_duplicate_date_key_is_refused_not_silently_dropped():
    # json.loads alone keeps only the last "2024-04-10" list; the first block would vanish unreported
    err = error_of("duplicate_date_key.json")
    assert err.location == "key '2024-04-10'"
    assert "duplicate key" in err.reason


# --- permissive mode ------------------------------------------------------------------------------


def test_permissive_keeps_good_records_and_reports_bad_ones():
    batch = load("mixed_bad.json", permissive=True)  # load() checks reconciliation
    assert [m.text for m in batch.messages] == ["good one", "good two", "good three"]
    # source_order still counts the rejected records: positions in the file do not shift
    assert [m.source_order for m in batch.messages] == [0, 4, 7]
    assert [m.date_order for m in batch.messages] == [0, 4, 0]
    rejected = {r.location: r.reason for r in batch.rejected}
    assert list(rejected) == [
        "key '2024-04-09'[1]",
        "key '2024-04-09'[2]",
        "key '2024-04-09'[3]",
        "key 'yesterday'[0]",
        "key 'yesterday'[1]",
        "key '2024-04-10'",
    ]
    assert "\"9 o'clock\"" in rejected["key '2024-04-09'[1]"]
    assert "got str" in rejected["key '2024-04-09'[2]"]
    assert "'text' must be a string, got list" in rejected["key '2024-04-09'[3]"]
    assert "'yesterday' is not a date" in rejected["key 'yesterday'[1]"]
    assert "expected a list of messages" in rejected["key '2024-04-10'"]
    assert all(r.kind == "message" for r in batch.rejected)
    assert batch.records_read == 9 == len(batch.messages) + len(batch.rejected)


def test_same_file_strict_stops_at_the_first_bad_record():
    with pytest.raises(InputError) as info:
        read(FIXTURES / "mixed_bad.json")
    assert info.value.location == "key '2024-04-09'[1]"


def test_reconciliation_check_catches_a_lost_record():
    batch = load("mixed_bad.json", permissive=True)
    batch.messages.pop()
    with pytest.raises(AssertionError, match="read 9 records but kept 2 and rejected 6"):
        batch.check_reconciled()


def test_empty_day_under_a_key_that_is_not_a_date_is_refused_in_strict_mode(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text('{"2024-04-10": [{"time": "09:00", "sender": "A", "text": "x"}], "notadate": []}', encoding="utf-8")
    with pytest.raises(InputError, match="key 'notadate'.*not a date"):
        read(path)
    assert len(read(path, permissive=True).messages) == 1
