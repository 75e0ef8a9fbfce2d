"""Tests for the LINE ``.txt`` export adapter (``pmrag.ingest.line_txt``), one fixture per dialect."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.ingest import read_source
from pmrag.ingest.line_txt import read
from pmrag.core.records import SYSTEM_SENDER

FIXTURES = Path(__file__).parents[1] / "fixtures" / "line_txt"

GOOD_FIXTURES = [
    "ja_tab.txt",
    "en_tab.txt",
    "weekday_suffix_dates.txt",
    "us_dates.txt",
    "ja_dotted_group.txt",
    "ja_space.txt",
    "cp932_crlf.txt",
    "utf8_bom.txt",
]


def load(name: str, **kwargs):
    batch = read(FIXTURES / name, **kwargs)
    batch.check_reconciled()
    return batch


def summary(record):
    return record.occurred_at, record.sender, record.type, record.text


def by_location(batch):
    return {record.location: record for record in batch.messages}


# --- dialects -----------------------------------------------------------------------------------


def test_ja_tab_header_dates_and_messages():
    batch = load("ja_tab.txt")
    assert batch.format == "line-txt"
    assert batch.encoding == "utf-8"
    assert batch.dialect == "ja tab-separated; chat 山田"
    assert batch.records_read == len(batch.messages) == 15
    records = by_location(batch)
    assert summary(records["line 5"]) == (datetime(2024, 4, 9, 9, 5), "山田", "text", "おはよう")
    assert summary(records["line 24"]) == (datetime(2024, 4, 10, 20, 15), "山田", "text", "またね")


def test_ja_tab_quoted_multiline_message_is_joined_and_unescaped():
    records = by_location(load("ja_tab.txt"))
    assert summary(records["line 7"]) == (
        datetime(2024, 4, 9, 12, 30),
        "山田",
        "text",
        '今日のお昼は\nカレーにしよう\n\n「辛口」で"大盛り"',
    )
    assert records["line 11"].text == "[写真]"


def test_quote_closed_on_its_own_line_is_kept_as_written():
    records = by_location(load("ja_tab.txt"))
    assert records["line 17"].text == '"Yes" と言った'
    assert records["line 17"].type == "text"


def test_en_tab_am_pm_times():
    records = by_location(load("en_tab.txt"))
    assert summary(records["line 5"]) == (datetime(2024, 4, 10, 0, 5), "Taro", "text", "Still up?")
    assert summary(records["line 6"]) == (datetime(2024, 4, 10, 8, 15), "Emma", "text", "Morning!")
    assert summary(records["line 7"]) == (datetime(2024, 4, 10, 12, 5), "Taro", "text", "Lunch?")
    assert records["line 16"].occurred_at == datetime(2024, 4, 10, 23, 59)
    assert records["line 19"].occurred_at == datetime(2024, 4, 11, 1, 0)


def test_en_tab_header_quoted_message_and_dialect():
    batch = load("en_tab.txt")
    assert batch.dialect == "en tab-separated; chat Taro"
    records = by_location(batch)
    assert summary(records["line 8"]) == (
        datetime(2024, 4, 10, 22, 0),
        "Emma",
        "text",
        'Good night\nsee you "tomorrow"',
    )
    assert "line 9" not in records


def test_weekday_suffix_dates_without_header():
    batch = load("weekday_suffix_dates.txt")
    assert batch.dialect == "en tab-separated"
    assert [summary(r) for r in batch.messages] == [
        (datetime(2015, 12, 25, 19, 0), "Taro", "text", "Merry Christmas!"),
        (datetime(2015, 12, 25, 19, 2), "Emma", "text", "You too"),
        (datetime(2015, 12, 26, 10, 30), "Taro", "sticker", "[Sticker]"),
    ]


def test_us_month_first_dates():
    batch = load("us_dates.txt")
    assert batch.dialect == "en tab-separated; chat Hiking Club"
    assert [summary(r) for r in batch.messages] == [
        (datetime(2024, 4, 10, 19, 45), "Ken", "text", "Trail starts at 9"),
        (datetime(2024, 4, 10, 19, 46), SYSTEM_SENDER, "system", "Emma joined the group."),
        (datetime(2024, 4, 11, 9, 0), "Emma", "text", "On my way"),
    ]


def test_dotted_dates_with_group_header():
    batch = load("ja_dotted_group.txt")
    assert batch.dialect == "ja tab-separated; chat 週末サークル"
    assert [summary(r) for r in batch.messages] == [
        (datetime(2024, 4, 10, 18, 0), SYSTEM_SENDER, "system", "山田がグループに参加しました。"),
        (datetime(2024, 4, 10, 18, 1), "山田", "text", "よろしく"),
        (datetime(2024, 4, 10, 18, 2), "ゆい", "text", "よろしくね"),
        (datetime(2024, 4, 11, 7, 30), "ゆい", "text", "おはよう"),
    ]


def test_space_dialect_with_continuation_lines():
    batch = load("ja_space.txt")
    assert batch.dialect == "ja space-separated (newer export); chat 山田"
    assert [summary(r) for r in batch.messages] == [
        (datetime(2024, 4, 10, 20, 15), "山田", "text", "こんばんは"),
        (datetime(2024, 4, 10, 20, 16), "ゆい", "text", "明日の予定だけど\n10時に駅で\n\nいいかな？"),
        (datetime(2024, 4, 10, 20, 17), "山田", "sticker", "[スタンプ]"),
        (datetime(2024, 4, 10, 20, 18), SYSTEM_SENDER, "system", "ゆいがメッセージの送信を取り消しました"),
        (datetime(2024, 4, 10, 20, 19), "ゆい", "call", "☎ 通話時間 0:42"),
        (datetime(2024, 4, 11, 9, 0), "山田", "text", "おはよう 今日は 晴れ"),
        (datetime(2024, 4, 11, 9, 1), SYSTEM_SENDER, "system", "ゆいがKen Satoを招待しました"),
        (datetime(2024, 4, 11, 9, 2), SYSTEM_SENDER, "system", "Ken Sato joined the group."),
        (datetime(2024, 4, 11, 9, 3), "山田", "text", "私がケンを招待しました"),
        (datetime(2024, 4, 11, 9, 4), SYSTEM_SENDER, "system", "☎ 不在着信"),
    ]
    line_numbers = [int(r.location.removeprefix("line ")) for r in batch.messages]
    assert line_numbers == [5, 6, 10, 11, 12, 15, 16, 17, 18, 19]
    assert [r.date_order for r in batch.messages] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]


# --- encodings ----------------------------------------------------------------------------------


def test_cp932_file_with_crlf_line_endings():
    assert (FIXTURES / "cp932_crlf.txt").read_bytes().count(b"\r\n") == 7
    batch = load("cp932_crlf.txt")
    assert batch.encoding == "cp932"
    assert batch.dialect == "ja tab-separated; chat 山田"
    assert [summary(r) for r in batch.messages] == [
        (datetime(2012, 3, 1, 21, 58), "山田", "text", "こんばんは"),
        (datetime(2012, 3, 1, 21, 59), "ゆい", "text", "ひさしぶり\n元気？"),
    ]


def test_utf8_bom_file():
    assert (FIXTURES / "utf8_bom.txt").read_bytes().startswith(b"\xef\xbb\xbf")
    batch = load("utf8_bom.txt")
    assert batch.encoding == "utf-8-sig"
    assert batch.dialect == "ja tab-separated; chat ゆい"
    assert [summary(r) for r in batch.messages] == [(datetime(2024, 4, 10, 20, 0), "ゆい", "text", "ただいま")]


def test_undecodable_file_is_an_input_error():
    with pytest.raises(InputError, match="cannot decode the file as utf-8 or cp932"):
        read(FIXTURES / "undecodable.txt")


# --- message types ------------------------------------------------------------------------------


def test_two_column_notices_become_system_messages():
    ja = by_location(load("ja_tab.txt"))
    en = by_location(load("en_tab.txt"))
    notices = [ja["line 16"], en["line 15"], en["line 19"], en["line 20"]]
    assert [(r.sender, r.type, r.text) for r in notices] == [
        (SYSTEM_SENDER, "system", "ゆいがメッセージの送信を取り消しました"),
        (SYSTEM_SENDER, "system", "Taro unsent a message."),
        (SYSTEM_SENDER, "system", "Ken joined the group."),
        (SYSTEM_SENDER, "system", "Ken left the group."),
    ]


def test_calls_keep_their_sender():
    ja = by_location(load("ja_tab.txt"))
    en = by_location(load("en_tab.txt"))
    calls = [ja["line 12"], ja["line 13"], en["line 12"], en["line 13"], en["line 14"]]
    assert [(r.sender, r.type, r.text) for r in calls] == [
        ("山田", "call", "☎ 通話時間 1:23"),
        ("ゆい", "call", "☎ 不在着信"),
        ("Emma", "call", "☎ Call time 1:23"),
        ("Taro", "call", "☎ Missed call"),
        ("Emma", "call", "☎ Canceled call"),
    ]


@pytest.mark.parametrize(
    ("fixture", "location", "expected_type", "text"),
    [
        ("ja_tab.txt", "line 6", "sticker", "[スタンプ]"),
        ("ja_tab.txt", "line 11", "photo", "[写真]"),
        ("ja_tab.txt", "line 18", "video", "[動画]"),
        ("ja_tab.txt", "line 19", "file", "[ファイル]"),
        ("ja_tab.txt", "line 20", "audio", "[ボイスメッセージ]"),
        ("ja_tab.txt", "line 21", "album", "[アルバム] 旅行"),
        ("ja_tab.txt", "line 22", "location", "[位置情報]"),
        ("ja_tab.txt", "line 23", "contact", "[連絡先]"),
        ("en_tab.txt", "line 10", "sticker", "[Sticker]"),
        ("en_tab.txt", "line 11", "photo", "[Photo]"),
        ("en_tab.txt", "line 16", "audio", "[Voice message]"),
    ],
)
def test_placeholders_get_media_types(fixture, location, expected_type, text):
    record = by_location(load(fixture))[location]
    assert (record.type, record.text) == (expected_type, text)


# --- order, identity, reconciliation ------------------------------------------------------------


def test_source_order_date_order_and_fields():
    batch = load("ja_tab.txt")
    assert [r.source_order for r in batch.messages] == list(range(15))
    assert [r.date_order for r in batch.messages] == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert {r.source for r in batch.messages} == {"山田"}   # the chat named in the header, not the file
    assert not any(r.time_unknown for r in batch.messages)
    assert {r.occurred_at.second for r in batch.messages} == {0}


@pytest.mark.parametrize("name", GOOD_FIXTURES)
def test_every_dialect_fixture_reconciles_without_rejections(name):
    batch = load(name)
    assert batch.messages
    assert batch.rejected == []
    assert batch.records_read == len(batch.messages)


def test_message_ids_are_stable_across_reads():
    first = [r.message_id for r in load("ja_tab.txt").messages]
    second = [r.message_id for r in load("ja_tab.txt").messages]
    assert first == second
    assert len(set(first)) == len(first)


def test_options_are_accepted_and_read_source_dispatches_here():
    plain = load("en_tab.txt")
    with_options = load("en_tab.txt", options=DatasetSection(unknown_time_offset="source_order"))
    assert [summary(r) for r in with_options.messages] == [summary(r) for r in plain.messages]
    dispatched = read_source(FIXTURES / "en_tab.txt")
    assert dispatched.format == "line-txt"
    assert [r.message_id for r in dispatched.messages] == [r.message_id for r in plain.messages]


@pytest.mark.parametrize("name", ["empty.txt", "header_only.txt"])
def test_empty_and_header_only_files_give_no_messages(name):
    batch = load(name)
    assert batch.messages == []
    assert batch.rejected == []
    assert batch.records_read == 0


def test_header_only_file_still_reports_language_and_title():
    assert load("header_only.txt").dialect == "en (no messages); chat Taro"


# --- errors -------------------------------------------------------------------------------------


def test_unrecognised_dialect_names_the_first_line():
    with pytest.raises(InputError) as caught:
        read(FIXTURES / "unrecognised.txt")
    message = str(caught.value)
    assert caught.value.location == "line 1"
    assert "line 1: unrecognised line '[4/10/24, 20:15:00] Taro: hi'" in message
    assert "expected a date line (e.g. 2024/04/10(水))" in message
    assert "unrecognised.txt" in message


def test_unrecognised_line_mid_file_is_an_error_naming_it():
    with pytest.raises(InputError) as caught:
        read(FIXTURES / "bad_lines.txt")
    assert caught.value.location == "line 3"
    assert "unrecognised line 'これは何の行？'" in str(caught.value)


def test_permissive_mode_skips_bad_lines_with_reasons():
    batch = load("bad_lines.txt", permissive=True)
    assert [summary(r) for r in batch.messages] == [
        (datetime(2024, 4, 10, 9, 0), "山田", "text", "おはよう"),
        (datetime(2024, 4, 10, 9, 2), "ゆい", "text", "おはよう"),
    ]
    assert [r.source_order for r in batch.messages] == [0, 1]
    assert [r.location for r in batch.rejected] == ["line 3", "line 4", "line 7", "line 8"]
    reasons = [r.reason for r in batch.rejected]
    assert reasons[0].startswith("unrecognised line 'これは何の行？'")
    assert reasons[1].startswith("invalid time in line '25:00\\tゆい\\tありえない時刻'")
    assert reasons[2].startswith("invalid date in date line '2024/02/30(金)'")
    assert reasons[3].startswith("message line '10:00\\t山田\\t日付が不正' has no valid date line before it")
    assert batch.records_read == 6


def test_message_before_any_date_line_is_an_error():
    with pytest.raises(InputError) as caught:
        read(FIXTURES / "before_date.txt")
    assert caught.value.location == "line 3"
    assert "'09:00\\t山田\\t日付がない' has no valid date line before it" in str(caught.value)


def test_message_before_any_date_line_is_skipped_in_permissive_mode():
    batch = load("before_date.txt", permissive=True)
    assert [summary(r) for r in batch.messages] == [(datetime(2024, 4, 10, 9, 1), "山田", "text", "日付あり")]
    assert [r.location for r in batch.rejected] == ["line 3"]


def test_truncated_quoted_message_names_the_line_where_the_quote_opened():
    with pytest.raises(InputError) as caught:
        read(FIXTURES / "truncated.txt")
    assert caught.value.location == "line 3"
    assert "unterminated quoted message" in str(caught.value)


def test_truncated_quoted_message_in_permissive_mode():
    batch = load("truncated.txt", permissive=True)
    assert [summary(r) for r in batch.messages] == [(datetime(2024, 4, 10, 9, 0), "山田", "text", "一行目")]
    assert [r.location for r in batch.rejected] == ["line 3", "line 4"]
    assert batch.rejected[0].reason.startswith("unterminated quoted message")
    assert batch.records_read == 3
