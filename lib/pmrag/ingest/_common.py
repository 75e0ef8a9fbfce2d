"""Small helpers shared by the adapters.

JSON is parsed by :func:`load_json`, strictly (RFC 8259): UTF-8 (a BOM is accepted), no duplicate keys, no
``NaN`` / ``Infinity`` / ``-Infinity`` literals (Python's ``json`` accepts them by default; no chat export
writes them, and a NaN that reached a table would compare unequal to itself), no number so large that it
becomes infinite as a float, no ``\\ud800``-style escape without its other half (it decodes to a string that
UTF-8 cannot encode).  Input that would break the parser itself (nesting deep enough to exhaust the
interpreter's stack, an integer longer than Python converts, 4,300 digits) is an :class:`InputError` naming
the line and column, like a syntax error.  Values quoted in messages are shortened with
:func:`~pmrag.core.text.shown`: an error never grows with the input.
"""

from __future__ import annotations

import json
import math
import re
import sys
from functools import lru_cache
from datetime import date, datetime, time
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.records import Rejected, SourceBatch
from pmrag.core.text import shown


# A JSON string (the unrolled loop keeps the match linear) — skipped when looking for a token outside strings.
_JSON_STRING = r'"(?:[^"\\]|\\.)*+"?'  # possessive, closing quote optional: an unclosed string is read once
_NESTING_REPORTED = 100   # the depth at which a refused file's nesting is located (a chat export has 3 to 5)


class _Refused(ValueError):
    """A value the parser met that strict JSON does not allow: ``what`` is said, ``pattern`` locates it."""

    def __init__(self, what: str, pattern: str):
        super().__init__(what)
        self.what = what
        self.pattern = pattern


def _refuse_constant(name: str):
    """``parse_constant``: ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON."""
    raise _Refused(f"{name} is not valid JSON (write null or a number)", re.escape(name))


def _finite_float(text: str) -> float:
    """``parse_float``: a number that overflows to infinity is refused (the value is ``float(text)`` otherwise)."""
    value = float(text)
    if math.isinf(value):
        raise _Refused("a number too large for a float (it would become infinity)",
                       r"(?<![0-9.eE+-])" + re.escape(text) + r"(?![0-9])")
    return value


def load_json(path: Path):
    """Parse a UTF-8 JSON file (a BOM is accepted), strictly (see the module docstring); a syntax error,
    truncation, refused value or parser limit is an :class:`InputError` naming its line and column."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "not valid UTF-8; expected a UTF-8 JSON file") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_refuse_constant,
                          parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON ({exc.msg}); is the file truncated?") from None
    except _DuplicateKey as exc:
        raise InputError(path, f"key {shown(exc.key)}", "duplicate key; the JSON parser would silently keep only the last one") from None
    except _Refused as exc:
        raise InputError(path, _where(text, exc.pattern), exc.what) from None
    except RecursionError:
        depth, position = _nesting(text)
        raise InputError(path, _line_column(text, position),
                         f"JSON nested {depth} levels deep, too deep to parse (a chat export needs a few); "
                         f"the nesting passes {_NESTING_REPORTED} levels here") from None
    except ValueError:   # the C parser's only other ValueError: an integer beyond the interpreter's digit limit
        limit = sys.get_int_max_str_digits()
        raise InputError(path, _where(text, rf"(?<![0-9])-?[0-9]{{{limit + 1},}}"),
                         f"an integer longer than {limit} digits; no field of a chat export needs one") from None
    if _SURROGATE_ESCAPE.search(text):   # rare: only then walk the parsed data
        where = _lone_surrogate(data)
        if where is not None:
            raise InputError(path, where, "a \\uD800-\\uDFFF escape without its other half (a damaged file): "
                                          "it is no character, and no text can hold it")
    return data


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(data) -> str | None:
    """Where the first string (value or key) holding a lone surrogate is, as ``key ['a'][0]['text']``; None if
    there is none.  ``json`` decodes an unpaired ``\\ud800`` escape into a str that UTF-8 cannot encode."""
    stack = [(data, ())]
    while stack:
        value, trail = stack.pop()
        if type(value) is str and not value.isascii() and _SURROGATE.search(value):
            return "key " + "".join(f"[{shown(step)}]" for step in trail) if trail else "top level"
        if type(value) is dict:
            for key in value:
                if not key.isascii() and _SURROGATE.search(key):
                    return "key " + "".join(f"[{shown(step)}]" for step in trail) + " (a key)"
            stack.extend((item, (*trail, key)) for key, item in reversed(value.items()))
        elif type(value) is list:
            stack.extend((item, (*trail, index)) for index, item in reversed(list(enumerate(value))))
    return None


def _where(text: str, pattern: str) -> str | None:
    """``line L, column C`` of the first match of ``pattern`` outside JSON strings (None if there is none)."""
    for match in re.finditer(f"{_JSON_STRING}|(?P<hit>{pattern})", text):
        if match.group("hit") is not None:
            return _line_column(text, match.start())
    return None


def _nesting(text: str) -> tuple[int, int]:
    """The deepest nesting of ``[``/``{`` outside strings, and where it first passes ``_NESTING_REPORTED``."""
    depth = deepest = 0
    position = 0
    for match in re.finditer(f"{_JSON_STRING}|[\\[\\]{{}}]", text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth == _NESTING_REPORTED + 1:
                position = match.start()
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest, position


def _line_column(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    return f"line {line}, column {position - text.rfind(chr(10), 0, position)}"


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list) -> dict:
    """``json`` keeps the last of repeated keys and drops the rest silently; refuse instead."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def parse_iso_date(value: str) -> date:
    """``YYYY-MM-DD`` (``YYYY/MM/DD`` is accepted too)."""
    return datetime.strptime(value.replace("/", "-"), "%Y-%m-%d").date()


_CLOCK = re.compile(r"\s*([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2}))?\s*")
_CLOCK_LONGEST = 32   # "HH:MM:SS" and generous surrounding whitespace; longer strings are not cached


def parse_clock(value: str) -> time:
    """``HH:MM`` or ``HH:MM:SS``, 24-hour (a regex, not strptime: strptime dominated ingest time at scale)."""
    if len(value) <= _CLOCK_LONGEST:
        return _parse_short_clock(value)
    raise ValueError(f"time {shown(value)} is not HH:MM or HH:MM:SS")


@lru_cache(maxsize=1 << 17)   # every HH:MM:SS of a day (86,400) fits
def _parse_short_clock(value: str) -> time:
    """:func:`parse_clock` for a string short enough to cache (the cache stays bounded whatever the input)."""
    match = _CLOCK.fullmatch(value)
    if match:
        hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
        if hour < 24 and minute < 60 and second < 60:
            return time(hour, minute, second)
    raise ValueError(f"time {value!r} is not HH:MM or HH:MM:SS")


class Problems:
    """Strict mode raises the first problem; permissive mode records it in the batch and goes on."""

    def __init__(self, batch: SourceBatch, permissive: bool):
        self.batch = batch
        self.permissive = permissive

    def report(self, location: str, reason: str, kind: str = "message") -> None:
        if not self.permissive:
            raise InputError(self.batch.path, location, reason)
        self.batch.rejected.append(Rejected(location=location, reason=reason, kind=kind))
