"""LINE ``.txt`` exports written carelessly or with hostile intent: strict decoding, CR-only
line endings, files with nothing to store, and lines long enough to expose a backtracking pattern."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.ingest import line_txt, read_source, stream_source
from pmrag.ingest.line_txt import read

FIXTURES = Path(__file__).parents[1] / "fixtures"
LINE_TXT = FIXTURES / "line_txt"

CHAT = (
    "[LINE] 山田とのトーク履歴\n保存日時：2024/04/10 20:15\n\n"
    "2024/04/10(水)\n"
    "09:00\t山田\tおはよう\n"
    "09:01\tゆい\t今日は駅で集合ね\n"
    '09:02\t山田\t"了解\n七時に行く"\n'
    "09:03\tゆい\tまたね\n"
)
PRIVATE = ("山田", "ゆい", "おはよう", "駅で集合", "了解", "またね")


def summaries(batch):
    return [(r.location, r.occurred_at, r.sender, r.type, r.text) for r in batch.messages]


def write_bytes(folder: Path, data: bytes, name: str = "chat.txt") -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


# --- decoding -------------------------------------------------------------------------------------


# Every character here is E3 81 A1..BF in UTF-8, which cp932 also decodes (a kanji, then a half-width kana):
# with one invalid byte, the whole file used to be decoded as cp932 without a word.
EN_CHAT = ("[LINE] Chat history with Taro\nSaved on: 2024/04/10 20:15\n\n2024/04/10(Wed)\n"
           "09:00\tTaro\tちなみに\n09:01\tEmma\tほのぼのね\n09:02\tTaro\tok\n")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize(("chat", "word", "line"), [(EN_CHAT, "ほ", 6), (CHAT, "今日", 6)])
def test_one_invalid_byte_in_a_utf8_file_stops_naming_its_byte_offset_and_line(tmp_path, newline, chat, word, line):
    """It used to be decoded whole as cp932: mojibake stored, exit 0 (or, when cp932 failed too, an error
    naming a cp932 offset and no line)."""
    data = chat.replace("\n", newline).encode("utf-8")
    offset = data.index(word.encode("utf-8"))   # the word's first character, whose last byte is replaced
    path = write_bytes(tmp_path, data[: offset + 2] + b"\xff" + data[offset + 3 :])
    with pytest.raises(InputError) as caught:
        read(path)
    error = caught.value
    assert error.location == f"line {line}"
    assert f"it reads as UTF-8, but byte {offset} (line {line}) begins a sequence that is not valid UTF-8" in error.reason
    assert "dataset.encoding" in error.reason and "--encoding" in error.reason
    assert not any(text in str(error) for text in (*PRIVATE, "Taro", "Emma", "ちなみに"))


def test_the_offset_is_exact_when_the_bad_byte_follows_a_block_boundary(tmp_path, monkeypatch):
    monkeypatch.setattr(line_txt, "_BLOCK_BYTES", 7)   # many blocks, characters cut between them
    data = CHAT.encode("utf-8")
    offset = data.rindex("また".encode("utf-8")) + 1
    path = write_bytes(tmp_path, data[:offset] + b"\x41" + data[offset + 1 :])   # an ASCII byte inside ま
    with pytest.raises(InputError) as caught:
        read(path)
    assert caught.value.location == "line 9"
    assert f"byte {offset - 1} (line 9) begins a sequence" in caught.value.reason   # ま's lead byte, cut off


def test_a_real_cp932_file_is_still_read_as_cp932(tmp_path):
    path = write_bytes(tmp_path, CHAT.replace("\n", "\r\n").encode("cp932"))
    batch = read(path)
    assert batch.encoding == "cp932"
    assert [r.text for r in batch.messages] == ["おはよう", "今日は駅で集合ね", "了解\n七時に行く", "またね"]


def test_cp932_whose_first_character_happens_to_be_valid_utf8_is_cp932(tmp_path):
    """凜と in cp932 is EA A3 82 C6: its first three bytes are a valid UTF-8 character, so a rule that looks
    at the first non-ASCII character alone would call the file UTF-8 and then stop on its next byte."""
    text = CHAT.replace("山田とのトーク履歴", "凜とのトーク履歴").replace("山田", "凜")
    raw = text.encode("cp932")
    assert raw[raw.index(b"\xea"):][:3].decode("utf-8")
    batch = read(write_bytes(tmp_path, raw))
    assert batch.encoding == "cp932"
    assert batch.dialect == "ja tab-separated; chat 凜"
    assert [r.sender for r in batch.messages] == ["凜", "ゆい", "凜", "ゆい"]


def test_an_undecodable_cp932_file_names_the_byte_and_line(tmp_path):
    data = CHAT.encode("cp932")
    offset = data.index("駅".encode("cp932"))
    path = write_bytes(tmp_path, data[:offset] + b"\x81\x20" + data[offset + 2 :])   # 0x81 needs a trail byte
    with pytest.raises(InputError) as caught:
        read(path)
    assert caught.value.location == "line 6"
    assert f"it reads as cp932, but byte {offset} (line 6) begins a sequence that is not valid cp932" in caught.value.reason


def test_forced_encodings_decode_strictly_with_that_codec(tmp_path):
    utf8 = write_bytes(tmp_path, CHAT.encode("utf-8"), "utf8.txt")
    cp932 = write_bytes(tmp_path, CHAT.encode("cp932"), "cp932.txt")
    bom = write_bytes(tmp_path, b"\xef\xbb\xbf" + CHAT.encode("utf-8"), "bom.txt")
    expected = summaries(read(utf8))

    as_cp932 = read(cp932, options=DatasetSection(encoding="cp932"))
    assert (as_cp932.encoding, summaries(as_cp932)) == ("cp932", expected)
    assert read_source(utf8, options=DatasetSection(encoding="utf-8")).encoding == "utf-8"
    assert read_source(bom, options=DatasetSection(encoding="utf-8")).encoding == "utf-8-sig"   # BOM accepted

    with pytest.raises(InputError) as caught:
        read(cp932, options=DatasetSection(encoding="utf-8"))
    assert caught.value.location == "line 1"
    assert caught.value.reason.startswith("cannot decode the file as utf-8: byte 7 (line 1) begins a sequence "
                                          "that is not valid UTF-8")

    with pytest.raises(InputError) as caught:   # forced means forced: no detection, no fallback
        read(utf8, options=DatasetSection(encoding="cp932"))
    assert caught.value.reason.startswith("cannot decode the file as cp932: byte 23 (line 1) begins a sequence")


def test_an_ascii_file_is_utf8(tmp_path):
    path = write_bytes(tmp_path, b"2024/04/10(Wed)\n09:00\tTaro\thi\n")
    assert read(path).encoding == "utf-8"


# --- line endings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["ja_tab.txt", "ja_space.txt", "en_tab.txt"])
def test_cr_only_and_mixed_line_endings_split_like_lf(tmp_path, fixture):
    """CR-only files used to give 0 messages: the whole file became the header title."""
    text = (LINE_TXT / fixture).read_text(encoding="utf-8")
    expected = summaries(read(LINE_TXT / fixture))
    lines = text.split("\n")
    endings = [("\n", "\r\n", "\r")[i % 3] for i in range(len(lines) - 1)]
    endings = [  # a CR before an empty line's LF would make one CRLF: there, write CRLF
        "\r\n" if end == "\r" and lines[i + 1] == "" else end for i, end in enumerate(endings)]
    mixed = "".join(line + end for line, end in zip(lines, endings)) + lines[-1]
    for variant in (text.replace("\n", "\r"), text.replace("\n", "\r\n"), mixed):
        batch = read(write_bytes(tmp_path, variant.encode("utf-8")))
        assert summaries(batch) == expected and len(expected) >= 10
        assert batch.dialect == read(LINE_TXT / fixture).dialect


def test_crlf_cut_between_two_blocks_is_one_line_break(tmp_path, monkeypatch):
    data = CHAT.replace("\n", "\r\n").encode("utf-8")
    monkeypatch.setattr(line_txt, "_BLOCK_BYTES", data.index(b"\r\n09:00") + 1)   # the block ends on \r
    assert summaries(read(write_bytes(tmp_path, data))) == summaries(read(write_bytes(tmp_path, CHAT.encode(), "lf.txt")))


# --- files with nothing to store ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["empty.txt", "header_only.txt"])
def test_a_file_without_messages_is_flagged_empty(name):
    assert read(LINE_TXT / name).empty
    batch, records = stream_source(LINE_TXT / name)
    assert list(records) == [] and batch.empty


def test_empty_means_nothing_kept_whatever_the_format(tmp_path):
    assert not read(LINE_TXT / "ja_tab.txt").empty
    assert read(LINE_TXT / "bad_lines.txt", permissive=True).empty is False
    only_bad = write_bytes(tmp_path, "これは何の行？\n".encode("utf-8"), "only_bad.txt")
    assert read(only_bad, permissive=True).empty   # every line rejected: nothing stored
    (tmp_path / "none.json").write_text("{}", encoding="utf-8")
    assert read_source(tmp_path / "none.json").empty
    assert not read_source(FIXTURES / "questions" / "family_questions.json", "questions-json").empty


# --- linear time on long lines --------------------------------------------------------------------

_OLD_NOTICE_RE = re.compile(
    r"^(?:\S+?が(?:グループに参加しました|グループを退会しました|退出しました|メッセージの送信を取り消しました"
    r"|.+を招待しました|.+を退会させました)。?"
    r"|.+ (?:joined the group|left the group|unsent a message)\.?"
    r"|☎\uFE0F?\s*(?:不在着信|Missed call).*)$"
)
"""The notice pattern before linear-time matching (quadratic on ``'がを' * n``): the reference for what a notice is."""


def test_notices_are_recognised_exactly_as_the_old_pattern_did():
    tokens = ["が", "を", "を招待しました", "を退会させました", "グループに参加しました", "グループを退会しました",
              "退出しました", "メッセージの送信を取り消しました", " ", "\u3000", "\t", "。", ".", "Taro", "ゆい", "x",
              "joined the group", "left the group", "unsent a message", "☎", "\ufe0f", "不在着信", "Missed call",
              "が ", " .", "\x85"]
    rng = random.Random(11)
    samples = ["".join(rng.choice(tokens) for _ in range(rng.randint(0, 7))) for _ in range(100_000)]
    samples += ["ゆいがKen Satoを招待しました", "Taro joined the group.", "☎ 不在着信", "ゆいが退出しました。",
                "私がケンを招待しました", "Ken Sato joined the group"]
    differing = [s for s in samples if line_txt._is_notice(s) != bool(_OLD_NOTICE_RE.match(s))]
    assert differing == []
    assert sum(map(line_txt._is_notice, samples)) > 1000   # the samples do exercise notices


_LONG_LINES = {
    # name: (file text with {long} where the ~1 MB run goes, the run)
    "space notice-like": ("2024.04.10 水曜日\n20:15 {long}\n", "がを" * 175_000),
    "space sender and text": ("2024.04.10 水曜日\n20:15 山田 {long}\n", "a " * 500_000),
    "space invitation": ("2024.04.10 水曜日\n20:15 ゆいが{long}を招待しました\n", "が " * 500_000),
    "tab text": ("2024/04/10(水)\n20:15\t山田\t{long}\n", "がを" * 175_000),
    "tab quoted": ('2024/04/10(水)\n20:15\t山田\t"{long}\n"\n', '""' * 500_000),
    "tab placeholder": ("2024/04/10(水)\n20:15\t山田\t[{long}\n", "x" * 1_000_000),
    "header": ("[LINE] {long}x\n2024/04/10(水)\n20:15\t山田\thi\n", " " * 1_000_000),
    "japanese title": ("[LINE] {long}トーク履歴\n2024/04/10(水)\n20:15\t山田\thi\n", "の" * 350_000),
    "date line": ("2024/04/10(水){long}x\n", " " * 1_000_000),
}

_TIMING_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from pmrag.ingest.line_txt import read
    seconds = {}
    for name, path in json.loads(sys.argv[1]).items():
        started = time.perf_counter()
        batch = read(path, permissive=True)
        seconds[name] = [time.perf_counter() - started, batch.records_read,
                         max((len(r.reason) for r in batch.rejected), default=0)]
    print(json.dumps(seconds))
""")


@pytest.mark.integration
def test_a_one_megabyte_line_parses_in_linear_time_in_both_dialects(tmp_path):
    """'がを' * 80,000 took 63 s in the space dialect (a quadratic pattern); 1 MB lines of every shape are
    parsed here in a child process, so that a regression fails on its timeout instead of hanging the suite."""
    paths = {}
    for index, (name, (template, run)) in enumerate(_LONG_LINES.items()):
        paths[name] = str(write_bytes(tmp_path, template.format(long=run).encode("utf-8"), f"long{index}.txt"))
    assert all(Path(p).stat().st_size >= 1_000_000 for p in paths.values())
    done = subprocess.run([sys.executable, "-c", _TIMING_SCRIPT, json.dumps(paths)], capture_output=True,
                          text=True, timeout=120, check=True)
    results = json.loads(done.stdout)
    slow = {name: seconds for name, (seconds, _, _) in results.items() if seconds >= 3.0}
    assert slow == {}
    assert all(read_count == 1 for _, read_count, _ in results.values())   # one message (or one rejected line)
    assert max(longest for _, _, longest in results.values()) < 300      # reasons quote a bounded excerpt


@pytest.mark.integration
def test_many_unclosed_quotes_are_linear_not_one_scan_to_the_end_each(tmp_path):
    """Each unclosed quote used to be looked up to the end of the file again: about a minute for these."""
    lines = ['20:00\t山田\t"開いたまま'] * 30_000
    path = write_bytes(tmp_path, ("2024/04/10(水)\n" + "\n".join(lines) + "\n").encode("utf-8"))
    done = subprocess.run(
        [sys.executable, "-c", "import sys, time; from pmrag.ingest.line_txt import read; t = time.perf_counter(); "
         "b = read(sys.argv[1], permissive=True); print(time.perf_counter() - t, len(b.rejected))", str(path)],
        capture_output=True, text=True, timeout=120, check=True)
    seconds, rejected = done.stdout.split()
    assert int(rejected) == 30_000 and float(seconds) < 10.0


def test_quoted_messages_read_the_same_past_the_lookahead_limit(tmp_path, monkeypatch):
    """Past the limit the parser checks the whole file for a closing line instead of holding what it read:
    the messages and rejections are the same as without a limit."""
    long_quote = '2024/04/10(水)\n09:00\t山田\t"一行目\n' + "".join(f"{i}行目\n" for i in range(2, 60)) + '最後"\n'
    unclosed = '2024/04/10(水)\n09:00\t山田\t"閉じない\n' + "".join(f"09:{i:02d}\tゆい\t返事{i}\n" for i in range(1, 40))
    cases = {
        "long.txt": long_quote,
        "unclosed.txt": unclosed,
        "unclosed_then_closed.txt": unclosed + '10:00\t山田\t"また\n開く"\n',
        "truncated.txt": (LINE_TXT / "truncated.txt").read_text(encoding="utf-8"),
    }
    paths = {name: write_bytes(tmp_path, text.encode("utf-8"), name) for name, text in cases.items()}
    unlimited = {name: read(path, permissive=True) for name, path in paths.items()}
    monkeypatch.setattr(line_txt, "_LOOKAHEAD_CHARS", 20)
    for name, path in paths.items():
        limited = read(path, permissive=True)
        assert summaries(limited) == summaries(unlimited[name]), name
        assert limited.rejected == unlimited[name].rejected, name
    assert len(unlimited["long.txt"].messages[0].text.split("\n")) == 60
    assert len(unlimited["unclosed_then_closed.txt"].messages) == 1   # closed, as before, by the very last line
    assert len(unlimited["unclosed.txt"].rejected) == 1 and len(unlimited["unclosed.txt"].messages) == 39
