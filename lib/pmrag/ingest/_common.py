"""Small helpers shared by the adapters."""

from __future__ import annotations

import json
from datetime import date, datetime, time
from pathlib import Path

from pmrag.errors import InputError
from pmrag.records import Rejected, SourceBatch


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
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def parse_iso_date(value: str) -> date:
    """``YYYY-MM-DD`` (``YYYY/MM/DD`` is accepted too)."""
    return datetime.strptime(value.replace("/", "-"), "%Y-%m-%d").date()


def parse_clock(value: str) -> time:
    """``HH:MM`` or ``HH:MM:SS``, 24-hour."""
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            return datetime.strptime(value.strip(), fmt).time()
        except ValueError:
            continue
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
