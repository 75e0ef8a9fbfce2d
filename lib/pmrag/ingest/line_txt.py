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

The conversation (the ``source`` of every message) is the chat's name from the header (``山田`` of
``[LINE] 山田とのトーク履歴``, ``Taro`` of ``[LINE] Chat history with Taro``), so two exports of one chat under
different file names are one conversation and merge (:class:`pmrag.ingest.store.MergeKeys`); a file without
a header is named by its file name.

Which dialect a file uses is decided by its first message line.  Lines end with LF, CRLF or a lone CR
(old Mac exports), mixed freely.

Decoding (``dataset.encoding``): ``utf-8`` and ``cp932`` force that codec, strictly (``utf-8`` accepts a BOM);
``auto`` (the default) reads a file that starts with a UTF-8 BOM, or holds no byte above 0x7F, as UTF-8.
Otherwise it looks at the 4,096 bytes that start at the file's first non-ASCII byte: the file is UTF-8
unless, in those bytes, invalid UTF-8 sequences outnumber valid multi-byte UTF-8 characters, in which case it
is cp932 (older Windows exports: cp932 text is almost never valid UTF-8, two characters running).  Decoding
is then strict: a file that is UTF-8 but for some bytes stops at the first of them with an
:class:`~pmrag.errors.InputError` naming its byte offset and line, never falling back to mojibake.

The file is read as a stream (:func:`stream`): decoded and parsed a block at a time, each message handed
on as soon as it is complete, so memory does not grow with the file.  The only look-ahead is a quoted
message of the tab dialect, which is read up to its closing quote; a quote that no line after it closes
is found out without holding the rest of the file (:func:`_quoted_lines`).  Every pattern applied to a line
takes time linear in its length (a notice is recognised by suffix tests, not a backtracking pattern).
"""

from __future__ import annotations

import codecs
import io
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import DEFAULT_TYPE, SYSTEM_SENDER, MessageRecord, Rejected, SourceBatch
from pmrag.core.text import shown

FORMAT = "line-txt"

TAB = "tab"
SPACE = "space"
_SEPARATOR_NAMES = {TAB: "tab-separated", SPACE: "space-separated (newer export)", None: "(no messages)"}

_EXPECTED = (
    "expected a date line (e.g. 2024/04/10(水)), a message line (time<TAB>sender<TAB>text) or a header"
)
_EXPECTED_DATE = "expected a date line (e.g. 2024/04/10(水)) first"

_HEADER_PREFIX = "[LINE]"
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

_JA_NOTICE_EVENTS = ("グループに参加しました", "グループを退会しました", "退出しました",
                     "メッセージの送信を取り消しました")
"""Japanese notices ``<actor>が<event>`` (optionally ending in ``。``): ``ゆいがグループに参加しました``."""

_JA_NOTICE_ACTIONS = ("を招待しました", "を退会させました")
"""Japanese notices ``<actor>が<someone><action>`` (optionally ending in ``。``):
``ゆいがKen Satoを招待しました``."""

_EN_NOTICE_EVENTS = ("joined the group", "left the group", "unsent a message")
"""English notices ``<someone> <event>`` (optionally ending in ``.``): ``Taro joined the group.``."""

_NOTICE_ENDINGS = ("ました", "ました。", "group", "group.", "message", "message.")
"""How every notice above ends: a text that ends otherwise is no notice (the common case, tested first)."""

_MISSED_CALL_RE = re.compile(r"☎\uFE0F?\s*(?:不在着信|Missed call)")
"""Missed-call notice without a sender: ``☎ 不在着信``, ``☎ Missed call``."""

_WHITESPACE_RE = re.compile(r"\s")
"""What ``\\s`` matched in the notice pattern these tests replace (Unicode whitespace)."""

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

_BLOCK_BYTES = 1 << 20
"""Bytes decoded at a time."""

_DETECT_BYTES = 4096
"""Bytes, from the first non-ASCII one, that ``auto`` looks at to tell UTF-8 from cp932."""

_NON_ASCII_BYTE_RE = re.compile(rb"[\x80-\xff]")

_LOOKAHEAD_CHARS = 1_000_000
"""Characters a quoted message may span before the parser checks, by a pass over the whole file, whether any
line closes it at all (LINE caps a message at 10,000 characters)."""


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
    source: str = ""                     # the source name every message of the file gets
    day: date | None = None
    separator: str | None = None
    title: str | None = None
    language: str | None = None
    in_header: bool = True
    pending: _Pending | None = None
    per_date: dict[date, int] = field(default_factory=dict)
    emitted: int = 0                    # messages kept so far: the next one's source_order
    out: list[MessageRecord] = field(default_factory=list)   # messages completed by the current line
    no_closing_after: int | None = None  # no line after this one closes a quote (None: not known yet)
    requested_encoding: str = "auto"


class _Lines:
    """The numbered lines of a file, read as they are needed; lines read ahead can be put back."""

    def __init__(self, lines: Iterator[str]):
        self._lines = lines
        self._next_number = 1
        self._put_back: deque[tuple[int, str]] = deque()

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> tuple[int, str]:
        if self._put_back:
            return self._put_back.popleft()
        line = next(self._lines)
        number = self._next_number
        self._next_number += 1
        return number, line

    def put_back(self, numbered: list[tuple[int, str]]) -> None:
        """Make ``numbered`` (lines read ahead, in order) the next lines read."""
        self._put_back.extendleft(reversed(numbered))


def read(path: Path, *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    """Read one LINE ``.txt`` export into a :class:`~pmrag.records.SourceBatch`, its messages in ``messages``.

    Strict mode raises :class:`~pmrag.errors.InputError` at the first line that matches no rule;
    permissive mode records it in ``batch.rejected`` and goes on.  Of ``options`` only ``encoding`` applies:
    every message of this format has a time.  For a large file use :func:`stream`.
    """
    batch, records = stream(path, permissive=permissive, options=options)
    batch.messages = list(records)
    return batch


def stream(path: Path, *, permissive: bool = False, options: DatasetSection | None = None
           ) -> tuple[SourceBatch, Iterator[MessageRecord]]:
    """The file's batch and its messages, parsed while they are read; the batch holds no messages, and its
    counts, rejections and dialect are complete once the iterator is exhausted.

    The encoding is chosen here, from ``options.encoding``; a byte that does not decode is an
    :class:`~pmrag.errors.InputError` when the iterator reaches it.
    """
    path = Path(path)
    requested = (options or DatasetSection()).encoding
    encoding = _choose_encoding(path, requested)
    batch = SourceBatch(path=str(path), format=FORMAT, encoding=encoding)
    state = _State(path, permissive, batch, source=path.stem, requested_encoding=requested)
    return batch, _records(state, _Lines(_decoded_lines(path, encoding, requested)))


def _records(state: _State, lines: _Lines) -> Iterator[MessageRecord]:
    """Walk the lines, handing on each message once it is complete; set the dialect at the end."""
    for line_no, line in lines:
        _step(state, lines, line_no, line)
        if state.out:
            yield from state.out
            state.out.clear()
    _flush(state)
    yield from state.out
    state.out.clear()
    state.batch.dialect = _describe(state)


# --- decoding -------------------------------------------------------------------------------------


def _choose_encoding(path: Path, requested: str) -> str:
    """The codec that reads ``path``: ``utf-8-sig`` (a BOM), ``utf-8`` or ``cp932`` (module docstring)."""
    with open(path, "rb") as fh:
        has_bom = fh.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8
    if has_bom and requested != "cp932":
        return "utf-8-sig"
    if requested != "auto":
        return requested
    window = _first_non_ascii_window(path)
    return "cp932" if window and _looks_like_cp932(window) else "utf-8"


def _first_non_ascii_window(path: Path) -> bytes:
    """Up to :data:`_DETECT_BYTES` bytes from the first byte above 0x7F (empty for an ASCII file)."""
    offset = 0
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK_BYTES):
            if not block.isascii():
                fh.seek(offset + _NON_ASCII_BYTE_RE.search(block).start())
                return fh.read(_DETECT_BYTES)
            offset += len(block)
    return b""


def _looks_like_cp932(window: bytes) -> bool:
    """True when invalid UTF-8 sequences outnumber valid multi-byte UTF-8 characters in ``window`` (a
    character cut off at its end counts as neither)."""
    genuine_replacements = window.count("\ufffd".encode())
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(window, final=False)
    replaced = text.count("\ufffd") - genuine_replacements
    multibyte = sum(1 for char in text if char > "\x7f") - replaced
    return replaced > multibyte


def _decoded_lines(path: Path, encoding: str, requested: str) -> Iterator[str]:
    """The file's lines, decoded strictly a block at a time, without their LF / CRLF / CR endings (other
    control characters stay in the text); a final line break adds no empty line."""
    decoder = codecs.getincrementaldecoder("utf-8" if encoding == "utf-8-sig" else encoding)()
    newlines = io.IncrementalNewlineDecoder(None, translate=True)
    unfinished: list[str] = []   # the start of a line whose end is not read yet
    with open(path, "rb") as fh:
        offset = fh.seek(len(codecs.BOM_UTF8)) if encoding == "utf-8-sig" else 0
        while True:
            block = fh.read(_BLOCK_BYTES)
            held = len(decoder.getstate()[0])   # bytes of a character cut by the previous block
            try:
                text = newlines.decode(decoder.decode(block, final=not block), final=not block)
            except UnicodeDecodeError as err:
                at = offset - held + err.start
                raise _decode_error(path, encoding, requested, at, err.reason) from None
            if "\n" in text:
                lines = text.split("\n")
                lines[0] = "".join(unfinished) + lines[0]
                unfinished = [lines.pop()]
                yield from lines
            elif text:
                unfinished.append(text)
            if not block:
                break
            offset += len(block)
    last = "".join(unfinished)
    if last:
        yield last


def _decode_error(path: Path, encoding: str, requested: str, offset: int, why: str) -> InputError:
    """The error for a byte that does not decode: its offset and line, and what to do (no file text in it)."""
    codec = "UTF-8" if encoding.startswith("utf-8") else encoding
    line = _line_number_at(path, offset)
    where = f"byte {offset} (line {line}) begins a sequence that is not valid {codec} ({why})"
    if requested == "auto":
        reason = (f"cannot decode the file as utf-8 or cp932: it reads as {codec}, but {where}; fix that byte, "
                  f"or set dataset.encoding (pmrag ingest --encoding) to the file's encoding")
    else:
        reason = (f"cannot decode the file as {encoding}: {where}; set dataset.encoding "
                  f"(pmrag ingest --encoding) to the file's encoding")
    return InputError(path, f"line {line}", reason)


def _line_number_at(path: Path, offset: int) -> int:
    """The line holding byte ``offset`` (LF, CRLF and CR end a line; neither codec uses 0x0A or 0x0D in a
    character)."""
    breaks, after_cr, remaining = 0, False, offset
    with open(path, "rb") as fh:
        while remaining > 0 and (block := fh.read(min(_BLOCK_BYTES, remaining))):
            remaining -= len(block)
            breaks += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            breaks -= after_cr and block.startswith(b"\n")
            after_cr = block.endswith(b"\r")
    return breaks + 1


# --- parsing --------------------------------------------------------------------------------------


def _step(state: _State, lines: _Lines, line_no: int, line: str) -> None:
    """Handle one line (a quoted message reads the lines it spans from ``lines``)."""
    if not line or line.isspace():
        _blank(state)
        return
    if state.in_header and _header(state, line):
        return
    parsed_day = _parse_date(line)
    if parsed_day is not None:
        _start_day(state, parsed_day, line, line_no)
        return
    match = _TIME_RE.match(line)
    separator = _separator_after(line, match)
    if separator is not None and state.separator in (None, separator):
        _message(state, lines, line_no, line, match, separator)
        return
    if state.separator == SPACE and state.pending is not None:
        _continue(state.pending, line)
        return
    _reject(state, line_no, f"unrecognised line {shown(line)}; {_EXPECTED}")


def _blank(state: _State) -> None:
    """A blank line ends a day; inside a space-dialect message it may also be part of the text."""
    if state.pending is not None:
        state.pending.blank_run += 1


def _header(state: _State, line: str) -> bool:
    """Take a header line (title or save time) and note the chat title and the language."""
    if line.startswith(_HEADER_PREFIX):
        state.title, state.language = _title_and_language(line[len(_HEADER_PREFIX):].strip())
        if state.title and state.emitted == 0:   # the chat, not the file, names the conversation
            state.source = state.title
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
                return f"invalid date in date line {shown(line)}; expected a real calendar day"
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


def _message(state: _State, lines: _Lines, line_no: int, line: str, match: re.Match, separator: str) -> None:
    """Handle a timed message line."""
    _flush(state)
    clock = _clock(match)
    if clock is None:
        _reject(state, line_no, f"invalid time in line {shown(line)}; expected HH:MM (00:00-23:59) or H:MM AM/PM")
        return
    if state.day is None:
        _reject(state, line_no, f"message line {shown(line)} has no valid date line before it; {_EXPECTED_DATE}")
        return
    state.separator = separator
    state.in_header = False
    occurred_at = datetime.combine(state.day, clock)
    rest = line[match.end() + 1 :]
    if separator == SPACE:
        sender, text = _split_space(rest)
        state.pending = _Pending(line_no, occurred_at, sender, [text])
        return
    _tab_message(state, lines, line_no, occurred_at, rest)


def _split_space(rest: str) -> tuple[str, str]:
    """Sender and text of a space-dialect line; a notice (or a lone word) has no sender."""
    if _is_notice(rest) or " " not in rest:
        return SYSTEM_SENDER, rest
    sender, text = rest.split(" ", 1)
    return sender, text


def _is_notice(rest: str) -> bool:
    """True for a notice without a sender (join, leave, invite, unsend, missed call), in either language."""
    if rest.startswith("☎") and _MISSED_CALL_RE.match(rest) is not None:
        return True
    return rest.endswith(_NOTICE_ENDINGS) and (_is_ja_notice(rest) or _is_en_notice(rest))


def _is_ja_notice(rest: str) -> bool:
    """``<actor>が<event>`` or ``<actor>が<someone><action>``, optionally ending in ``。``: the actor is a
    non-empty run without whitespace, someone is non-empty (any ``が`` may be the one after the actor)."""
    body = rest.removesuffix("。")
    for event in _JA_NOTICE_EVENTS:
        actor = body.removesuffix("が" + event)
        if len(actor) < len(body) and actor and _WHITESPACE_RE.search(actor) is None:
            return True
    for action in _JA_NOTICE_ACTIONS:
        head = body.removesuffix(action)   # <actor>が<someone>
        if len(head) < len(body):
            space = _WHITESPACE_RE.search(head)
            last_ga = min(space.start() if space else len(head), len(head) - 2)   # actor before, someone after
            if last_ga >= 1 and head.find("が", 1, last_ga + 1) != -1:
                return True
    return False


def _is_en_notice(rest: str) -> bool:
    """``<someone> <event>``, optionally ending in ``.``, someone non-empty."""
    body = rest.removesuffix(".")
    return any(body.endswith(" " + event) and len(body) > len(event) + 1 for event in _EN_NOTICE_EVENTS)


def _tab_message(state: _State, lines: _Lines, line_no: int, occurred_at: datetime, rest: str) -> None:
    """Handle a tab-dialect message, gathering a quoted multi-line text from the lines after it."""
    columns = rest.split("\t", 1)
    if len(columns) == 1:
        _emit(state, line_no, occurred_at, SYSTEM_SENDER, rest)
        return
    sender, text = columns
    if not _opens_quote(text):
        _emit(state, line_no, occurred_at, sender, text)
        return
    following = _quoted_lines(state, lines, line_no)
    if following is None:
        _reject(state, line_no, f"unterminated quoted message: the quote opened on line {line_no} is never closed")
        return
    body = [text[1:], *following]
    body[-1] = body[-1][:-1]
    _emit(state, line_no, occurred_at, sender, "\n".join(part.replace('""', '"') for part in body))


def _opens_quote(text: str) -> bool:
    """True if ``text`` opens a quoted multi-line message: a leading quote that this line never closes.

    Every later quote on the line must be doubled; a text such as ``"hi"`` or ``"Yes" she said`` is a
    one-line message kept as written.
    """
    return text.startswith('"') and '"' not in text[1:].replace('""', "")


def _closes_quote(line: str) -> bool:
    """True if ``line`` ends a quoted message: it ends with an odd run of quotes."""
    return (len(line) - len(line.rstrip('"'))) % 2 == 1


def _quoted_lines(state: _State, lines: _Lines, line_no: int) -> list[str] | None:
    """The lines after the quote opened on ``line_no``, up to the one that closes it; None if no line does.

    The lines are read ahead from ``lines``; when none closes the quote they are put back, to be read as
    ordinary lines.  Past :data:`_LOOKAHEAD_CHARS` one pass over the file finds the last line that can close
    a quote, so a quote that is never closed costs neither the rest of the file in memory nor, for every
    later unclosed quote, another read to the end (a quote opened after that line is known to stay open).
    """
    if state.no_closing_after is not None and line_no >= state.no_closing_after:
        return None
    taken: list[tuple[int, str]] = []
    chars = 0
    for numbered in lines:
        taken.append(numbered)
        if _closes_quote(numbered[1]):
            return [line for _, line in taken]
        chars += len(numbered[1]) + 1
        if chars > _LOOKAHEAD_CHARS and state.no_closing_after is None:
            state.no_closing_after = _last_closing_line(state)
            if state.no_closing_after <= line_no:
                break
    else:
        state.no_closing_after = line_no
    lines.put_back(taken)
    return None


def _last_closing_line(state: _State) -> int:
    """The number of the file's last line that ends with an odd run of quotes (0 if none)."""
    last = 0
    for number, line in enumerate(_decoded_lines(state.path, state.batch.encoding, state.requested_encoding), 1):
        if _closes_quote(line):
            last = number
    return last


def _continue(pending: _Pending, line: str) -> None:
    """Append a continuation line (and any blank lines before it) to a space-dialect message."""
    pending.lines.extend([""] * pending.blank_run)
    pending.lines.append(line)
    pending.blank_run = 0


def _flush(state: _State) -> None:
    """Hand on the space-dialect message that is still collecting lines, if any."""
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
    """Hand on one message with its file-wide and within-date positions."""
    day = occurred_at.date()
    date_order = state.per_date.get(day, 0)
    state.per_date[day] = date_order + 1
    state.out.append(
        MessageRecord(
            source=state.source,
            source_order=state.emitted,
            occurred_at=occurred_at,
            sender=sender,
            type=_message_type(sender, text),
            text=text,
            time_unknown=False,
            date_order=date_order,
            location=f"line {line_no}",
        )
    )
    state.emitted += 1
    state.batch.records_read += 1


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
