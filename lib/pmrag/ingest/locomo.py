"""LoCoMo (``locomo10.json``): a JSON list of samples, each one conversation source.

Per sample: ``sample_id``; ``conversation`` with ``speaker_a``, ``speaker_b``, ``session_<n>`` (a list of
turns ``{speaker, dia_id, text[, img_url, blip_caption]}``) and ``session_<n>_date_time``
(``"1:47 pm on 18 May, 2023"``); ``qa`` entries ``{question, answer | adversarial_answer, evidence, category}``.

* The source name is the ``sample_id``; turns keep their order, each session's turns one second apart
  from the session's date-time; ``source_order`` counts turns across the sample's sessions in order.
* A turn's ``dia_id`` is kept as ``native_id``.  A shared image is kept in the text as
  ``[image: <blip_caption>]`` after the turn's words (the caption is what a text retriever can see).
* A question with evidence becomes a question whose evidence turns are primary (relevance 2); its type
  is ``category_<n>``.  A question without evidence cannot be scored and is reported, not stored.
* ``sample_id``, ``speaker``, ``dia_id`` and ``blip_caption`` must be strings and ``category`` an integer
  or a string: any other value (a number where a string is expected, a list) is refused, never converted.
  ``answer`` is kept as text whatever its JSON type (LoCoMo has numeric answers).
* ``[]`` (no samples) is a valid file with 0 messages: the batch is empty, not an error.  The top level
  must be a list (``{}`` is refused: it is another format).  Parsing is strict JSON
  (see :func:`pmrag.ingest._common.load_json`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.ingest._common import Problems, load_json, short
from pmrag.core.records import DEFAULT_TYPE, Evidence, MessageRecord, QuestionRecord, Rejected, SourceBatch

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


def parse_session_datetime(value: str) -> datetime:
    """``"1:47 pm on 18 May, 2023"`` → ``datetime(2023, 5, 18, 13, 47)``."""
    return datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y")


def _sessions(conversation: dict) -> list[tuple[int, list]]:
    found = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.match(key)
        if match:
            found.append((int(match.group(1)), turns))
    return sorted(found, key=lambda item: item[0])


def _not_strings(item: dict, keys: tuple[str, ...]) -> str | None:
    """Why ``item`` is refused when one of ``keys`` is present but not a string (None when all are fine)."""
    for key in keys:
        value = item.get(key)
        if value is not None and type(value) is not str:
            return f"'{key}' must be a string, got {type(value).__name__}"
    return None


def _turn_text(turn: dict) -> str:
    text = turn.get("text") or ""
    caption = turn.get("blip_caption")
    if not caption:
        return text
    return f"{text} [image: {caption}]" if text else f"[image: {caption}]"


def _read_turns(batch: SourceBatch, problems: Problems, sample_id: str, conversation: dict, where: str) -> dict:
    """Append the sample's turns to the batch; return ``dia_id -> message_id``."""
    by_dia_id: dict[str, str] = {}
    source_order = 0
    for number, turns in _sessions(conversation):
        date_key = f"session_{number}_date_time"
        session_where = f"{where}.conversation.session_{number}"
        if not isinstance(turns, list):
            raise InputError(batch.path, session_where, f"expected a list of turns, got {type(turns).__name__}")
        try:
            started = parse_session_datetime(conversation[date_key])
        except KeyError:
            raise InputError(batch.path, f"{where}.conversation", f"missing key {date_key!r}") from None
        except (ValueError, TypeError, AttributeError):
            raise InputError(
                batch.path, f"{where}.conversation.{date_key}",
                f"date-time {short(conversation[date_key])} does not parse; expected like '1:47 pm on 18 May, 2023'",
            ) from None
        for position, turn in enumerate(turns):
            batch.records_read += 1
            order = source_order
            source_order += 1
            location = f"{session_where}[{position}]"
            if not isinstance(turn, dict) or not turn.get("speaker") or not isinstance(turn.get("text", ""), str):
                problems.report(location, "expected a turn object with 'speaker', 'dia_id' and 'text'")
                continue
            wrong = _not_strings(turn, ("speaker", "dia_id", "blip_caption"))
            if wrong:
                problems.report(location, wrong)
                continue
            record = MessageRecord(
                source=sample_id,
                source_order=order,
                occurred_at=started + timedelta(seconds=position),
                sender=turn["speaker"],
                type=DEFAULT_TYPE,
                text=_turn_text(turn),
                date_order=position,
                native_id=turn.get("dia_id"),
                location=location,
            )
            batch.messages.append(record)
            if record.native_id:
                by_dia_id[record.native_id] = record.message_id
    return by_dia_id


def _question_problem(item) -> str | None:
    """Why a ``qa`` entry is refused before its evidence is looked up (None when its fields are well-typed)."""
    if not isinstance(item, dict) or not isinstance(item.get("question"), str):
        return "expected a question object with a 'question' string"
    evidence = item.get("evidence") or []
    if not isinstance(evidence, list):
        return f"'evidence' must be a list, got {type(evidence).__name__}"
    category = item.get("category")
    if category is not None and type(category) not in (int, str):
        return f"'category' must be an integer or a string, got {type(category).__name__}"
    return None


def _read_questions(batch: SourceBatch, problems: Problems, sample_id: str, qa: list, by_dia_id: dict, where: str):
    for index, item in enumerate(qa):
        batch.questions_read += 1
        location = f"{where}.qa[{index}]"
        problem = _question_problem(item)
        if problem:
            problems.report(location, problem, kind="question")
            continue
        category = item.get("category")
        evidence = item.get("evidence") or []
        dia_ids = [d for entry in evidence for d in _EVIDENCE_SPLIT.split(str(entry)) if d]
        if not dia_ids:
            batch.rejected.append(Rejected(location, "question has no evidence, so it cannot be scored", kind="question"))
            continue
        unknown = [d for d in dia_ids if d not in by_dia_id]
        if unknown:
            problems.report(location, f"evidence {short(', '.join(unknown))} names no turn of sample {short(sample_id)}",
                            kind="question")
            continue
        answer = item.get("answer", item.get("adversarial_answer"))
        batch.questions.append(
            QuestionRecord(
                question_id=f"{sample_id}:q{index:03d}",
                text=item["question"],
                type=f"category_{'unknown' if category is None else category}",
                evidence=tuple(Evidence(relevance=2, message_id=by_dia_id[d]) for d in dict.fromkeys(dia_ids)),
                answer=None if answer is None else str(answer),
                source=sample_id,
            )
        )


def read(path: Path, *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    path = Path(path)
    batch = SourceBatch(path=str(path), format="locomo", encoding="utf-8", dialect="LoCoMo samples")
    problems = Problems(batch, permissive)
    data = load_json(path)
    if not isinstance(data, list):
        raise InputError(path, "top level", f"expected a JSON list of samples, got a {type(data).__name__}")
    for index, sample in enumerate(data):
        where = f"[{index}]"
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise InputError(path, where, "expected a sample object with 'sample_id' and a 'conversation' object")
        sample_id = sample.get("sample_id") or f"sample_{index}"
        if type(sample_id) is not str:
            raise InputError(path, f"{where}.sample_id", f"expected a string, got {type(sample_id).__name__}")
        by_dia_id = _read_turns(batch, problems, sample_id, sample["conversation"], where)
        qa = sample.get("qa") or []
        if not isinstance(qa, list):
            raise InputError(path, f"{where}.qa", f"expected a list of questions, got {type(qa).__name__}")
        _read_questions(batch, problems, sample_id, qa, by_dia_id, where)
    return batch
