"""Small helpers shared by the adapters."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from datetime import date, datetime, time
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.records import Rejected, SourceBatch


def load_json(path: Path):
    """Parse a UTF-8 JSON file (a BOM is accepted); a syntax error or truncation names its line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "not valid UTF-8; expected a UTF-8 JSON file") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON ({exc.msg}); is the file truncated?") from None
    except _DuplicateKey as exc:
        raise InputError(path, f"key {exc.key!r}", "duplicate key; the JSON parser would silently keep only the last one") from None


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


@lru_cache(maxsize=None)
def parse_clock(value: str) -> time:
    """``HH:MM`` or ``HH:MM:SS``, 24-hour (a regex, not strptime: strptime dominated ingest time at scale)."""
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
