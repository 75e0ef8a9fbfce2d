"""The paper's JSON format (§3.2): one UTF-8 file per conversation source.

``{"2024-04-10": [{"time": "20:15", "sender": "A", "type": "text", "text": "..."}, ...], ...}``

Rules, as the paper states them:

* ``source_order`` is the record's position in the file (document order across all dates);
* times are naive Japanese local time; a missing time becomes the date at 00:00:00 plus N seconds and is
  flagged ``time_unknown`` (N: see :mod:`pmrag.ingest`);
* a missing sender becomes ``SYSTEM``, a missing type ``text``; a missing text is kept as ``""``;
* no deduplication, no exclusion of media or system events, empty texts retained.

"Missing" means the key is absent, ``null`` or an empty string; any other non-string value of ``time``,
``sender``, ``type`` or ``text`` (a number, a list) is refused, never converted.  ``{}`` (no dates) is a valid
file with 0 messages: the batch is empty, not an error.  The top level must be an object (``[]`` is refused:
it is another format).  Parsing is strict JSON (see :func:`pmrag.ingest._common.load_json`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import DEFAULT_TYPE, SYSTEM_SENDER, MessageRecord, SourceBatch
from pmrag.core.text import shown
from pmrag.ingest._common import Problems, load_json, parse_clock, parse_iso_date


def _missing(value) -> bool:
    return value is None or value == ""


def _string_field(msg: dict, key: str):
    value = msg.get(key)
    if value is None or type(value) is str:
        return value
    raise ValueError(f"'{key}' must be a string, got {type(value).__name__}")


def read(path: Path, *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    options = options or DatasetSection()
    path = Path(path)
    batch = SourceBatch(path=str(path), format="line-json", encoding="utf-8", dialect="paper JSON (date → messages)")
    problems = Problems(batch, permissive)
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "top level", f"expected a JSON object keyed by date, got a {type(data).__name__}")
    source = path.stem
    source_order = 0
    for date_key, day in data.items():
        shown_key = shown(date_key)   # a key is quoted in every location: bounded, whatever its length
        if not isinstance(day, list):
            batch.records_read += 1
            problems.report(f"key {shown_key}", f"expected a list of messages, got {type(day).__name__}")
            continue
        try:
            day_date = parse_iso_date(date_key)
        except ValueError:
            day_date = None
            if not day and not permissive:
                raise InputError(path, f"key {shown_key}", f"date key {shown_key} is not a date (expected YYYY-MM-DD)") from None
        for date_order, msg in enumerate(day):
            location = f"key {shown_key}[{date_order}]"
            batch.records_read += 1
            order = source_order
            source_order += 1
            if day_date is None:
                problems.report(location, f"date key {shown_key} is not a date (expected YYYY-MM-DD)")
                continue
            if not isinstance(msg, dict):
                problems.report(location, f"expected a message object, got {type(msg).__name__}")
                continue
            try:
                raw_time, sender, type_, text = msg.get("time"), msg.get("sender"), msg.get("type"), msg.get("text")
                if not ((raw_time is None or type(raw_time) is str) and (sender is None or type(sender) is str)
                        and (type_ is None or type(type_) is str) and (text is None or type(text) is str)):
                    for key in ("time", "sender", "type", "text"):
                        _string_field(msg, key)
                time_unknown = _missing(raw_time)
                if time_unknown:
                    offset = date_order if options.unknown_time_offset == "date_order" else order
                    occurred_at = datetime.combine(day_date, datetime.min.time()) + timedelta(seconds=offset)
                else:
                    occurred_at = datetime.combine(day_date, parse_clock(raw_time))
            except ValueError as exc:
                problems.report(location, str(exc))
                continue
            batch.messages.append(
                MessageRecord(
                    source=source,
                    source_order=order,
                    occurred_at=occurred_at,
                    sender=SYSTEM_SENDER if _missing(sender) else sender,
                    type=DEFAULT_TYPE if _missing(type_) else type_,
                    text=text or "",
                    time_unknown=time_unknown,
                    date_order=date_order,
                    location=location,
                )
            )
    return batch
