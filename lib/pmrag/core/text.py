"""Text in messages: a value quoted shortened, a text clipped to one line, whitespace runs as one space.

Every error names what it refuses without growing with it: a 5,000-digit integer, a key as long as its file or
a chat message is quoted by :func:`shown` (its ``repr``, about 60 characters) or :func:`clip` (the text itself on
one line, cut at a limit).  :func:`one_line` is not a shortener but the rule that puts a question or a model's
sub-query on one line before it is sent or compared.
"""

from __future__ import annotations

import reprlib

SHOWN_CHARS = 60
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = SHOWN_CHARS
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 4
_SHOWN.maxlevel = 2
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def shown(value) -> str:
    """``repr(value)`` cut to about 60 characters (nested containers to 4 items, 2 levels): safe to quote
    whatever the input holds.  An integer beyond 200 bits is named by its size (``repr`` itself refuses
    integers beyond 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<integer of {value.bit_length()} bits>"
    return _SHOWN.repr(value)


def clip(text, limit: int = 80) -> str:
    """``str(text)`` on one line (line breaks escaped as ``\\n``, ``\\u2028`` …), cut to ``limit`` characters
    followed by an ellipsis when longer: for keys, paths and parser messages, quoted without ``repr``'s quotes."""
    text = str(text)[:limit + 1].translate(_LINE_BREAKS)
    return text if len(text) <= limit else f"{text[:limit]}…"


def one_line(text: str) -> str:
    """``text`` with every whitespace run (line breaks included) as one space, stripped."""
    return " ".join(text.split())
