"""Adapter for LINE's own ``.txt`` chat export (format ``line-txt``).

An export is an optional header, then days: a date line followed by message lines, days separated
by blank lines::

    [LINE] 山田とのトーク履歴          <- or "[LINE] Chat history with Taro"
    保存日時：2024/04/10 20:15         <- or "Saved on: 2024/04/10 20:15"

    2024/04/10(水)
    20:15<TAB>山田<TAB>こんにちは
    20:16<TAB>山田<TAB>"二行の
    メッセージ"
    20:17<TAB>ゆいがグループに参加しました。

Two message dialects exist.  The *tab* dialect separates time, sender and text with tabs and wraps a
multi-line message in double quotes (``""`` inside stands for one quote); a line with only two
columns is a notice without a sender (join, leave, unsend, missed call) and is stored as
:data:`~pmrag.records.SYSTEM_SENDER`.  The newer Japanese *space* dialect writes ``time sender text``
separated by single spaces, and the untimed lines that follow a message continue it.  In the space
dialect the sender is the token after the time, so a sender name that contains a space cannot be told
apart from the start of its text; a continuation line that itself looks like a date line or starts
with a time begins a new day or a new message.

Which dialect a file uses is decided by its first message line.  The file is decoded as UTF-8 (with
or without a BOM) or, failing that, as cp932 (older Windows exports).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import DEFAULT_TYPE, SYSTEM_SENDER, MessageRecord, Rejected, SourceBatch

FORMAT = "line-txt"

TAB = "tab"
SPACE = "space"
_SEPARATOR_NAMES = {TAB: "tab-separated", SPACE: "space-separated (newer export)", None: "(no messages)"}

_EXPECTED = (
    "expected a date line (e.g. 2024/04/10(水)), a message line (time<TAB>sender<TAB>text) or a header"
)
_EXPECTED_DATE = "expected a date line (e.g. 2024/04/10(水)) first"

_HEADER_RE = re.compile(r"^\[LINE\]\s*(?P<rest>.*?)\s*$")
"""Header title line, both languages: ``[LINE] Chat history with Taro`` / ``[LINE] 山田とのトーク履歴``."""

_TITLE_EN_RE = re.compile(r"^Chat history (?:with|in) (?P<title>.+)$")
"""English header title: ``Chat history with Taro`` (one-to-one) or ``Chat history in Team`` (group)."""

_TITLE_JA_RE = re.compile(r"^(?P<title>.+?)(?:との|の)?トーク履歴$")
"""Japanese header title: ``山田とのトーク履歴`` (one-to-one) or ``グループ名のトーク履歴`` (group)."""

_SAVED_RE = re.compile(r"^(?P<label>Saved on|保存日時)\s*[:：]")
"""Header save-time line: ``Saved on: 2024/04/10 20:15`` / ``保存日時：2024/04/10 20:15``."""

_JA_WEEKDAY = r"[月火水木金土日](?:曜日|曜)?"
_EN_WEEKDAY = (
    r"(?i:mon(?:day)?|tue(?:s|sday)?|wed(?:nesday)?|thu(?:r|rs|rsday)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?)"
)
_WEEKDAY = rf"(?P<weekday>{_JA_WEEKDAY}|{_EN_WEEKDAY})"

_DATE_SLASH_PAREN_RE = re.compile(
    rf"^(?P<y>\d{{4}})/(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})\s*[(（]{_WEEKDAY}[)）]\s*$"
)
"""Date line of the common exports, both languages: ``2024/04/10(水)`` and ``2024/04/10(Wed)``."""

_DATE_SLASH_SPACE_RE = re.compile(rf"^(?P<y>\d{{4}})/(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})\s+{_WEEKDAY}\s*$")
"""Date line of older exports with the weekday after a space: ``2015/12/25 Fri``."""

_DATE_US_RE = re.compile(rf"^{_WEEKDAY},\s*(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})/(?P<y>\d{{4}})\s*$")
"""Date line of US-locale exports, month first: ``Wed, 04/10/2024``."""

_DATE_DOTTED_RE = re.compile(rf"^(?P<y>\d{{4}})\.(?P<m>\d{{1,2}})\.(?P<d>\d{{1,2}})\s+{_WEEKDAY}\s*$")
"""Date line of newer Japanese exports: ``2024.04.10 水曜日``."""

_DATE_PATTERNS = (_DATE_SLASH_PAREN_RE, _DATE_SLASH_SPACE_RE, _DATE_US_RE, _DATE_DOTTED_RE)

_TIME_RE = re.compile(
    r"^(?:(?P<ja_half>午前|午後) ?)?(?P<h>\d{1,2}):(?P<mi>\d{2})(?: ?(?P<en_half>[AaPp][Mm]))?(?=[\t ]|$)"
)
"""Time at the start of a message line, every dialect: ``20:15``, ``8:15AM``, ``10:00 PM``, ``午後8:15``."""

_NOTICE_RE = re.compile(
    r"^(?:\S+?が(?:グループに参加しました|グループを退会しました|退出しました|メッセージの送信を取り消しました"
    r"|.+を招待しました|.+を退会させました)。?"
    r"|.+ (?:joined the group|left the group|unsent a message)\.?"
    r"|☎\uFE0F?\s*(?:不在着信|Missed call).*)$"
)
"""Notice without a sender in the space dialect whose text contains a space (a notice without one is
recognised by that alone): ``ゆいがKen Satoを招待しました``, ``Taro joined the group.``, ``☎ 不在着信``."""

_CALL_RE = re.compile(
    r"^☎\uFE0F?\s*(?:通話時間|不在着信|通話をキャンセルしました|キャンセル|応答なし"
    r"|Call time|Missed call|Canceled call|Cancelled call|No answer)"
)
"""Call record with a sender: ``☎ 通話時間 1:23``, ``☎ Call time 1:23``, ``☎ 不在着信``, ``☎ Canceled call``."""

_PLACEHOLDER_RE = re.compile(r"^\[(?P<label>[^\]\n]+)\](?=\s|$)")
"""Media placeholder, optionally followed by a remark (album or file name): ``[スタンプ]``, ``[Photo]``."""

_PLACEHOLDER_TYPES = {
    "スタンプ": "sticker",
    "sticker": "sticker",
    "写真": "photo",
    "photo": "photo",
    "動画": "video",
    "video": "video",
    "ファイル": "file",
    "file": "file",
    "ボイスメッセージ": "audio",
    "voice message": "audio",
    "アルバム": "album",
    "album": "album",
    "位置情報": "location",
    "location": "location",
    "連絡先": "contact",
    "contact": "contact",
}


@dataclass
class _Pending:
    """A space-dialect message still collecting its continuation lines."""

    line_no: int
    occurred_at: datetime
    sender: str
    lines: list[str]
    blank_run: int = 0


@dataclass
class _State:
    """Where the parser stands while it walks the file."""

    path: Path
    permissive: bool
    batch: SourceBatch
    day: date | None = None
    separator: str | None = None
    title: str | None = None
    language: str | None = None
    in_header: bool = True
    pending: _Pending | None = None
    per_date: dict[date, int] = field(default_factory=dict)


def read(path: Path, *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    """Read one LINE ``.txt`` export into a :class:`~pmrag.records.SourceBatch`.

    Strict mode raises :class:`~pmrag.errors.InputError` at the first line that matches no rule;
    permissive mode records it in ``batch.rejected`` and goes on.  ``options`` is accepted for the
    adapter signature; every message of this format has a time, so none of its choices apply.
    """
    path = Path(path)
    text, encoding = _decode(path)
    state = _State(path, permissive, SourceBatch(path=str(path), format=FORMAT, encoding=encoding))
    lines = _split_lines(text)
    index = 0
    while index < len(lines):
        index = _step(state, lines, index)
    _flush(state)
    state.batch.dialect = _describe(state)
    return state.batch


def _decode(path: Path) -> tuple[str, str]:
    """The file's text and the encoding that decoded it: ``utf-8-sig``, ``utf-8`` or ``cp932``."""
    data = path.read_bytes()
    candidates = ("utf-8-sig",) if data.startswith(codecs.BOM_UTF8) else ("utf-8", "cp932")
    for encoding in candidates:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError as err:
            failure = err
    reason = f"cannot decode the file as {' or '.join(candidates)}: {failure.reason} at byte {failure.start}"
    raise InputError(path, None, reason)


def _split_lines(text: str) -> list[str]:
    """Lines without their ``\\n`` / ``\\r\\n`` endings (other control characters stay in the text)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _step(state: _State, lines: list[str], index: int) -> int:
    """Handle ``lines[index]`` and return the index of the next line to handle."""
    line = lines[index]
    line_no = index + 1
    if not line.strip():
        _blank(state)
        return index + 1
    if state.in_header and _header(state, line):
        return index + 1
    parsed_day = _parse_date(line)
    if parsed_day is not None:
        _start_day(state, parsed_day, line, line_no)
        return index + 1
    match = _TIME_RE.match(line)
    separator = _separator_after(line, match)
    if separator is not None and state.separator in (None, separator):
        return _message(state, lines, index, match, separator)
    if state.separator == SPACE and state.pending is not None:
        _continue(state.pending, line)
        return index + 1
    _reject(state, line_no, f"unrecognised line {line!r}; {_EXPECTED}")
    return index + 1


def _blank(state: _State) -> None:
    """A blank line ends a day; inside a space-dialect message it may also be part of the text."""
    if state.pending is not None:
        state.pending.blank_run += 1


def _header(state: _State, line: str) -> bool:
    """Take a header line (title or save time) and note the chat title and the language."""
    title_match = _HEADER_RE.match(line)
    if title_match is not None:
        state.title, state.language = _title_and_language(title_match["rest"])
        return True
    saved_match = _SAVED_RE.match(line)
    if saved_match is not None:
        state.language = state.language or ("ja" if saved_match["label"] == "保存日時" else "en")
        return True
    return False


def _title_and_language(rest: str) -> tuple[str, str | None]:
    """Chat title and language of a header title line (``rest`` is what follows ``[LINE]``)."""
    english = _TITLE_EN_RE.match(rest)
    if english is not None:
        return english["title"], "en"
    japanese = _TITLE_JA_RE.match(rest)
    if japanese is not None:
        return japanese["title"], "ja"
    return rest, None


def _parse_date(line: str) -> date | str | None:
    """The date of a date line, an error reason if it names no real day, or None if it is no date line."""
    for pattern in _DATE_PATTERNS:
        match = pattern.match(line)
        if match is not None:
            try:
                return date(int(match["y"]), int(match["m"]), int(match["d"]))
            except ValueError:
                return f"invalid date in date line {line!r}; expected a real calendar day"
    return None


def _start_day(state: _State, parsed_day: date | str, line: str, line_no: int) -> None:
    """Begin the day of a date line; a date line that names no real day leaves the messages after it
    without a date (rejected in turn in permissive mode) rather than filing them under the day before."""
    _flush(state)
    state.in_header = False
    state.day = None if isinstance(parsed_day, str) else parsed_day
    if state.day is None:
        _reject(state, line_no, parsed_day)
        return
    state.language = state.language or _weekday_language(line)


def _weekday_language(line: str) -> str:
    """``ja`` when the date line names the weekday in Japanese, else ``en``."""
    return "ja" if re.search(_JA_WEEKDAY, line) else "en"


def _separator_after(line: str, match: re.Match | None) -> str | None:
    """``tab`` or ``space``: what follows the leading time of a message line (None: no message line)."""
    if match is None or match.end() >= len(line):
        return None
    return {"\t": TAB, " ": SPACE}.get(line[match.end()])


def _clock(match: re.Match) -> time | None:
    """The time of day a time match names, or None if it names none (``25:00``, ``13:00 PM``)."""
    hour, minute = int(match["h"]), int(match["mi"])
    half = (match["en_half"] or "").upper() or {"午前": "AM", "午後": "PM"}.get(match["ja_half"] or "")
    if minute > 59:
        return None
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "PM" else 0)
    elif hour > 23:
        return None
    return time(hour, minute)


def _message(state: _State, lines: list[str], index: int, match: re.Match, separator: str) -> int:
    """Handle a timed message line; return the index of the next line to handle."""
    line = lines[index]
    line_no = index + 1
    _flush(state)
    clock = _clock(match)
    if clock is None:
        _reject(state, line_no, f"invalid time in line {line!r}; expected HH:MM (00:00-23:59) or H:MM AM/PM")
        return index + 1
    if state.day is None:
        _reject(state, line_no, f"message line {line!r} has no valid date line before it; {_EXPECTED_DATE}")
        return index + 1
    state.separator = separator
    state.in_header = False
    occurred_at = datetime.combine(state.day, clock)
    rest = line[match.end() + 1 :]
    if separator == SPACE:
        sender, text = _split_space(rest)
        state.pending = _Pending(line_no, occurred_at, sender, [text])
        return index + 1
    return _tab_message(state, lines, index, occurred_at, rest)


def _split_space(rest: str) -> tuple[str, str]:
    """Sender and text of a space-dialect line; a notice (or a lone word) has no sender."""
    if _NOTICE_RE.match(rest) or " " not in rest:
        return SYSTEM_SENDER, rest
    sender, text = rest.split(" ", 1)
    return sender, text


def _tab_message(state: _State, lines: list[str], index: int, occurred_at: datetime, rest: str) -> int:
    """Handle a tab-dialect message, gathering a quoted multi-line text; return the next index."""
    line_no = index + 1
    columns = rest.split("\t", 1)
    if len(columns) == 1:
        _emit(state, line_no, occurred_at, SYSTEM_SENDER, rest)
        return index + 1
    sender, text = columns
    if not _opens_quote(text):
        _emit(state, line_no, occurred_at, sender, text)
        return index + 1
    closing = _closing_line(lines, index + 1)
    if closing is None:
        reason = f"unterminated quoted message: the quote opened on line {line_no} is never closed"
        _reject(state, line_no, reason)
        return index + 1
    body = [text[1:], *lines[index + 1 : closing + 1]]
    body[-1] = body[-1][:-1]
    _emit(state, line_no, occurred_at, sender, "\n".join(part.replace('""', '"') for part in body))
    return closing + 1


def _opens_quote(text: str) -> bool:
    """True if ``text`` opens a quoted multi-line message: a leading quote that this line never closes.

    Every later quote on the line must be doubled; a text such as ``"hi"`` or ``"Yes" she said`` is a
    one-line message kept as written.
    """
    return re.fullmatch(r'"(?:[^"]|"")*', text) is not None


def _closing_line(lines: list[str], start: int) -> int | None:
    """Index of the first line from ``start`` that ends the quote (an odd run of trailing quotes)."""
    for index in range(start, len(lines)):
        line = lines[index]
        if (len(line) - len(line.rstrip('"'))) % 2 == 1:
            return index
    return None


def _continue(pending: _Pending, line: str) -> None:
    """Append a continuation line (and any blank lines before it) to a space-dialect message."""
    pending.lines.extend([""] * pending.blank_run)
    pending.lines.append(line)
    pending.blank_run = 0


def _flush(state: _State) -> None:
    """Store the space-dialect message that is still collecting lines, if any."""
    pending, state.pending = state.pending, None
    if pending is not None:
        _emit(state, pending.line_no, pending.occurred_at, pending.sender, "\n".join(pending.lines))


def _message_type(sender: str, text: str) -> str:
    """``system`` for notices, ``call`` for call records, a media type for placeholders, else ``text``."""
    if sender == SYSTEM_SENDER:
        return "system"
    if _CALL_RE.match(text):
        return "call"
    placeholder = _PLACEHOLDER_RE.match(text)
    if placeholder is not None:
        return _PLACEHOLDER_TYPES.get(placeholder["label"].lower(), DEFAULT_TYPE)
    return DEFAULT_TYPE


def _emit(state: _State, line_no: int, occurred_at: datetime, sender: str, text: str) -> None:
    """Store one message with its file-wide and within-date positions."""
    day = occurred_at.date()
    date_order = state.per_date.get(day, 0)
    state.per_date[day] = date_order + 1
    batch = state.batch
    batch.messages.append(
        MessageRecord(
            source=state.path.stem,
            source_order=len(batch.messages),
            occurred_at=occurred_at,
            sender=sender,
            type=_message_type(sender, text),
            text=text,
            time_unknown=False,
            date_order=date_order,
            location=f"line {line_no}",
        )
    )
    batch.records_read += 1


def _reject(state: _State, line_no: int, reason: str) -> None:
    """Raise for a bad line, or in permissive mode record it as one rejected record and go on."""
    if not state.permissive:
        raise InputError(state.path, f"line {line_no}", reason)
    state.batch.rejected.append(Rejected(location=f"line {line_no}", reason=reason))
    state.batch.records_read += 1


def _describe(state: _State) -> str:
    """Short description of the dialect, e.g. ``ja tab-separated; chat 山田``."""
    parts = [state.language, _SEPARATOR_NAMES[state.separator]]
    description = " ".join(part for part in parts if part)
    return f"{description}; chat {state.title}" if state.title else description
