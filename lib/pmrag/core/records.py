"""The records every ingest adapter yields, whatever the source format.

An adapter reads one file and returns a :class:`SourceBatch`: the messages it stored, the questions
it found (LoCoMo, question files), and every record it could not take, with the reason.  Its counts
reconcile: ``records_read == kept_messages + len(rejected)``.  A streaming read (LINE ``.txt``) hands its
messages on as it parses instead of holding them in ``messages``; it counts them in ``streamed_messages``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from pmrag.core.ids import message_id_from_text, timestamp_text

SYSTEM_SENDER = "SYSTEM"
DEFAULT_TYPE = "text"


@dataclass(frozen=True, init=False)
class MessageRecord:
    """One message as stored.

    ``occurred_at`` is naive local time as the export recorded it (Japan time for LINE; the store
    keeps no offset, as in the paper).  ``source_order`` is the 0-based position of the record in
    its source file; ``date_order`` its position within its date (the paper's JSON groups by date).
    ``location`` says where in the file it came from (``line 12`` or ``key '2024-04-10'[3]``).
    ``message_id`` and ``occurred_text`` (``occurred_at`` as the store writes it) are derived.
    """

    source: str
    source_order: int
    occurred_at: datetime
    sender: str
    type: str
    text: str
    time_unknown: bool = False
    date_order: int = 0
    native_id: str | None = None
    location: str | None = None
    message_id: str = field(init=False, repr=False, compare=False)
    occurred_text: str = field(init=False, repr=False, compare=False)

    def __init__(self, source: str, source_order: int, occurred_at: datetime, sender: str, type: str, text: str,
                 time_unknown: bool = False, date_order: int = 0, native_id: str | None = None,
                 location: str | None = None):
        # Frozen, and written once here into the instance's dict: the generated frozen __init__ set each of the
        # twelve fields through object.__setattr__, 5 µs more a message (2 s of CPU over the paper's 358,896).
        occurred_text = timestamp_text(occurred_at)
        self.__dict__.update(
            source=source, source_order=source_order, occurred_at=occurred_at, sender=sender, type=type, text=text,
            time_unknown=time_unknown, date_order=date_order, native_id=native_id, location=location,
            message_id=message_id_from_text(source, source_order, occurred_text, sender, type, text),
            occurred_text=occurred_text)


@dataclass(frozen=True)
class Evidence:
    """Message-level evidence for a question: relevance 2 = primary, 1 = supporting.

    Either ``message_id`` is given, or ``source`` + ``source_order`` (resolved at store time).
    """

    relevance: int
    message_id: str | None = None
    source: str | None = None
    source_order: int | None = None


@dataclass(frozen=True)
class QuestionRecord:
    question_id: str
    text: str
    type: str
    evidence: tuple[Evidence, ...]
    answer: str | None = None
    source: str | None = None
    tags: tuple[tuple[str, str], ...] = ()   # (name, value) pairs sorted by name: how the question was made


def tags_json(tags: tuple[tuple[str, str], ...]) -> str | None:
    """A question's tags as stored (``questions.tags``): a JSON object with sorted keys, or None for none."""
    return json.dumps(dict(sorted(tags)), ensure_ascii=False, sort_keys=True) if tags else None


@dataclass(frozen=True)
class Rejected:
    """A record that was read but not stored as it was, with where it was and why.

    ``kind`` is ``"message"`` or ``"question"`` for a record left out (``action`` ``"rejected"``), or
    ``"evidence"`` for one evidence id of a question that was kept or left out on its own: ``action``
    ``"normalised"`` (an id with one obvious reading, stored as that reading) or ``"dropped"`` (an id that
    names no turn; the question keeps its other evidence).  Evidence notes are not records: they take no
    part in the counts that reconcile.
    """

    location: str
    reason: str
    kind: str = "message"  # "message", "question" or "evidence"
    action: str = "rejected"  # "rejected"; for kind "evidence": "normalised" or "dropped"


@dataclass
class SourceBatch:
    """What one adapter produced from one file (one file may hold several sources: LoCoMo)."""

    path: str
    format: str
    encoding: str = "utf-8"
    dialect: str = ""
    messages: list[MessageRecord] = field(default_factory=list)
    questions: list[QuestionRecord] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    records_read: int = 0
    questions_read: int = 0
    streamed_messages: int = 0  # messages kept but handed on as they were read, not held in ``messages``

    @property
    def kept_messages(self) -> int:
        """Messages kept (not rejected), whether held in ``messages`` or streamed."""
        return len(self.messages) + self.streamed_messages

    @property
    def empty(self) -> bool:
        """True when the file gave nothing to store: no message and no question kept (an empty file, a header
        without messages, ``{}``, ``[]``, or every record rejected).  Callers warn about such a file instead
        of reporting it like any other; for a streamed batch, valid once its rows have been read."""
        return self.kept_messages == 0 and not self.questions

    def check_reconciled(self) -> None:
        """Raise if any record read was neither kept nor reported: nothing is lost silently."""
        rejected_messages = sum(r.kind == "message" for r in self.rejected)
        rejected_questions = sum(r.kind == "question" for r in self.rejected)
        if self.records_read != self.kept_messages + rejected_messages:
            raise AssertionError(
                f"{self.path}: read {self.records_read} records but kept {self.kept_messages} "
                f"and rejected {rejected_messages}"
            )
        if self.questions_read != len(self.questions) + rejected_questions:
            raise AssertionError(
                f"{self.path}: read {self.questions_read} questions but kept {len(self.questions)} "
                f"and rejected {rejected_questions}"
            )
