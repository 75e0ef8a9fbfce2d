"""Dates and times in the forms a user's question type or ID might carry them (§9.2: no timestamps in public).

Refused is **any plausible calendar date**, not only the chat's own dates: a date of the chat is personal, the
chat's dates are not all known to the check (a question may name the day of an event the messages only talk
about), and no wording of ours holds one.  Plausible means a real day of the calendar (``2/30`` is none) and,
for four-digit years, 1900–2099.  The forms (on the NFKC form of the value, so full-width digits count, case
ignored, camelCase read as separate words):

* year–month–day with ``-``, ``/``, ``.``, ``_`` or spaces: ``2024-4-10``, ``2024/04/10``, ``trip_2024_04_10``;
  day–month–year and month–day–year the same way: ``10.04.2024``, ``4/10/2024``; two-digit years only with
  ``/`` or ``-`` (``24/4/10``, ``10-4-24``), since ``1.2.10`` is more often a version than a date;
* eight digits read as YYYYMMDD, DDMMYYYY or MMDDYYYY, anywhere a digit does not continue them, optionally
  followed by a time: ``20240410``, ``since20240410``, ``202404102105``;
* a year and month: ``2024-04``, ``2024_4``, ``04/2024``, ``May 2024``, ``2024年``; a month and day:
  ``4/10``, ``April 10``, ``10 Apr``, ``10th of April``, ``apr10``, ``4月10日``, ``四月十日``; an era year
  (``令和6年``); Korean ``년``/``월`` like ``年``/``月``;
* a time: ``21:05``, ``9 : 30``, ``20時``.

Not refused: a bare year or month (``2024``, ``April``: ``May`` is also a name and a verb), six digits
(``240410``: more often a count or a code than a date), and numbers that only resemble parts of dates
(``0.2024``, ``17.6%``, ``[0.048, 0.184]``).  Only text is checked, never a float: the public tables' metric
columns are numbers.
"""

from __future__ import annotations

import datetime
import re
import unicodedata

_MONTH_NAMES = ("jan(?:uary)?", "feb(?:ruary)?", "mar(?:ch)?", "apr(?:il)?", "may", "june?", "july?",
                "aug(?:ust)?", "sep(?:t(?:ember)?)?", "oct(?:ober)?", "nov(?:ember)?", "dec(?:ember)?")
_MONTH = "(?<![a-z])(?:" + "|".join(f"(?P<m{i}>{name})" for i, name in enumerate(_MONTH_NAMES, 1)) + r")\.?(?![a-z])"
_GAP = r"[\s_\-./,']*"
_ORDINAL = "(?:st|nd|rd|th)?"

_TRIPLE = re.compile(r"(?<![\d.])(\d{1,4})(?:\s*([-/._])\s*|\s+)(\d{1,2})(?:\s*\2\s*|\s+)(\d{1,4})(?![\d])")
_EIGHT_DIGITS = re.compile(r"(?<!\d)(\d{8})(?:(?:[01]\d|2[0-3])[0-5]\d(?:[0-5]\d)?)?(?!\d)")
_YEAR_MONTH = re.compile(r"(?<![\d.])(?:(?:19|20)\d\d\s*[-/_]\s*(?:0?[1-9]|1[0-2])"
                         r"|(?:0?[1-9]|1[0-2])\s*[-/_]\s*(?:19|20)\d\d)(?![\d.])")
_DAY_MONTH = re.compile(r"(?<![\d.])(\d{1,2})\s*/\s*(\d{1,2})(?![\d.])")
_MONTH_DAY_NAMED = re.compile(_MONTH + _GAP + r"(\d{1,2})" + _ORDINAL + r"(?![\d])")
_DAY_MONTH_NAMED = re.compile(r"(?<![\d.])(\d{1,2})" + _ORDINAL + _GAP + r"(?:of" + _GAP + ")?" + _MONTH)
_MONTH_YEAR_NAMED = re.compile(_MONTH + _GAP + r"(?:19|20)\d\d(?!\d)")
_CJK_MONTH_DAY = re.compile(r"(?<!\d)(\d{1,2})\s*[月월]\s*(\d{1,2})(?!\d)")
_ALWAYS = re.compile(
    r"\d{4}\s*[年년]"                                             # 2024年
    r"|(?:令和|平成|昭和|大正)\s*(?:\d{1,2}|元)\s*年"                 # 令和6年
    r"|[一二三四五六七八九十]{1,3}\s*月\s*[一二三四五六七八九十]{1,3}\s*日"   # 四月十日
    r"|\d{1,2}\s*[時시]"                                           # 20時
    r"|(?<!\d)(?:[01]?\d|2[0-4])\s*:\s*[0-5]\d(?!\d)"               # 21:05
)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def looks_like_date(value: str) -> bool:
    """Whether ``value`` holds a date or a time in one of the forms of the module docstring."""
    text = _CAMEL.sub(" ", unicodedata.normalize("NFKC", value)).casefold()
    if _ALWAYS.search(text) or _YEAR_MONTH.search(text) or _MONTH_YEAR_NAMED.search(text):
        return True
    for match in _TRIPLE.finditer(text):
        if _triple_is_date(*match.groups()):
            return True
    for match in _EIGHT_DIGITS.finditer(text):
        digits = match.group(1)
        if any(_is_day(int(y), int(m), int(d), len(y)) for y, m, d in
               ((digits[:4], digits[4:6], digits[6:]), (digits[4:], digits[2:4], digits[:2]),
                (digits[4:], digits[:2], digits[2:4]))):
            return True
    for pattern in (_DAY_MONTH, _CJK_MONTH_DAY):
        for match in pattern.finditer(text):
            a, b = (int(g) for g in match.groups())
            if _is_day(2000, a, b, 4) or (pattern is _DAY_MONTH and _is_day(2000, b, a, 4)):
                return True
    for pattern in (_MONTH_DAY_NAMED, _DAY_MONTH_NAMED):
        for match in pattern.finditer(text):
            month = next(int(name[1:]) for name, found in match.groupdict().items() if found)
            day = next(g for g in match.groups() if g and g.isdigit())
            if _is_day(2000, month, int(day), 4):
                return True
    return False


def _triple_is_date(a: str, separator: str | None, b: str, c: str) -> bool:
    """Three numbers read as year–month–day, day–month–year or month–day–year."""
    two_digit_years = separator in ("/", "-")
    readings = []
    if len(a) == 4 or (len(a) == 2 and two_digit_years):
        readings.append((a, b, c))
    if len(a) <= 2 and (len(c) == 4 or (len(c) == 2 and two_digit_years)):
        readings += [(c, b, a), (c, a, b)]
    return any(_is_day(int(y), int(m), int(d), len(y)) for y, m, d in readings)


def _is_day(year: int, month: int, day: int, year_digits: int) -> bool:
    """A day of the calendar; a four-digit year in 1900–2099, a two-digit one read as 20YY."""
    if year_digits == 4 and not 1900 <= year <= 2099:
        return False
    if year_digits == 2:
        year += 2000
    elif year_digits != 4:
        return False
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True
