"""Stable identifiers (paper §3.2): truncated SHA-1 digests.

* message ID = SHA-1 of the source name, the message's ``source_order`` and its content
  (occurred_at as ``YYYY-MM-DD HH:MM:SS``, sender, type, text);
* chunk ID = SHA-1 of the source name, the chunk's within-source index and its message-ID sequence.

The paper does not give the truncation length or the field separator; we keep 16 hex digits
(64 bits: a collision among 10^6 messages has probability ~3e-8) and join fields with U+001F
(unit separator), which cannot occur in a LINE message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

ID_HEX_DIGITS = 16
_SEP = "\x1f"


def _digest(*parts: object) -> str:
    joined = _SEP.join(str(p) for p in parts)
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()[:ID_HEX_DIGITS]


def message_id(source: str, source_order: int, occurred_at: datetime, sender: str, type_: str, text: str) -> str:
    """Message ID from the source name, ``source_order`` and the message content."""
    return message_id_from_text(source, source_order, timestamp_text(occurred_at), sender, type_, text)


def message_id_from_text(source: str, source_order: int, occurred_text: str, sender: str, type_: str, text: str) -> str:
    """:func:`message_id` with ``occurred_at`` already rendered by :func:`timestamp_text`."""
    joined = f"{source}{_SEP}{source_order}{_SEP}{occurred_text}{_SEP}{sender}{_SEP}{type_}{_SEP}{text}"
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()[:ID_HEX_DIGITS]


def timestamp_text(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (whole seconds: every adapter produces them).  ``isoformat(" ")`` is ``str`` of a
    datetime without its detour through ``__str__``: half the time, once per message."""
    if value.microsecond:
        raise ValueError(f"timestamps are whole seconds; got {value!r}")
    return value.isoformat(" ")


def chunk_id(source: str, chunk_index: int, message_ids: Sequence[str]) -> str:
    """Chunk ID from the source name, the within-source chunk index and the message-ID sequence."""
    return _digest(source, chunk_index, ",".join(message_ids))
