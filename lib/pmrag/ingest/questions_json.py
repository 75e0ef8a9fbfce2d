"""A question file for data the user brings (and for the embedded demo).

``{"questions": [{"question_id": "q001", "question": "...", "type": "contextual", "answer": "...",
"tags": {"cue": "exact"},
"evidence": [{"message_id": "…", "relevance": 2} | {"source": "family", "source_order": 12, "relevance": 1}]}]}``

Relevance 2 marks primary evidence (alone supports the answer or an explicit major part of it),
1 supporting evidence (paper §4.3).  ``answer`` is optional (kept as text whatever its JSON type).
``tags`` is optional (absent or null: none): an object of non-empty string names to string values saying how a question was made or
asked (the demo's ``cue``: ``exact``, ``paraphrase`` or ``mixed``); notebook 06 splits Table 9 by each tag.

Types are checked, never converted: ``question_id``, ``question``, ``type``, ``message_id`` and ``source`` are
strings, ``relevance`` the integer 1 or 2 (not ``2.0``, not ``true``), ``source_order`` a non-negative integer
below 2**63 (SQLite's integer range).  ``{}`` (no keys at all) is a question file with 0 questions: the batch is
empty, not an error; an object with other keys but no ``questions`` list is refused (a misspelt key must
not pass as "no questions").  Parsing is strict JSON (see :func:`pmrag.ingest._common.load_json`).
"""

from __future__ import annotations

from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import Evidence, QuestionRecord, SourceBatch
from pmrag.core.text import shown
from pmrag.ingest._common import Problems, load_json


_SQLITE_INTEGER_END = 2**63


def _evidence(item, where: str) -> Evidence:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    relevance = item.get("relevance")
    if type(relevance) is not int or relevance not in (1, 2):
        raise ValueError(f"{where}.relevance: expected 1 or 2, got {shown(relevance)}")
    if isinstance(item.get("message_id"), str):
        return Evidence(relevance=relevance, message_id=item["message_id"])
    source, order = item.get("source"), item.get("source_order")
    if isinstance(source, str) and type(order) is int and 0 <= order < _SQLITE_INTEGER_END:
        return Evidence(relevance=relevance, source=source, source_order=order)
    raise ValueError(f"{where}: expected 'message_id' or 'source' + 'source_order' (a non-negative integer below 2**63)")


def _question(item, where: str) -> QuestionRecord:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    for key in ("question_id", "question", "type"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise ValueError(f"{where}.{key}: expected a non-empty string")
    evidence = item.get("evidence")
    if not isinstance(evidence, list) or not evidence:
        raise ValueError(f"{where}.evidence: expected a non-empty list")
    answer = item.get("answer")
    return QuestionRecord(
        question_id=item["question_id"],
        text=item["question"],
        type=item["type"],
        evidence=tuple(_evidence(e, f"{where}.evidence[{i}]") for i, e in enumerate(evidence)),
        answer=None if answer is None else str(answer),
        tags=_tags({} if item.get("tags") is None else item["tags"], f"{where}.tags"),
    )


def _tags(tags, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(tags, dict):
        raise ValueError(f"{where}: expected an object of tag names to string values")
    for name, value in tags.items():
        if not name:
            raise ValueError(f"{where}: expected non-empty tag names")
        if not isinstance(value, str):
            raise ValueError(f"{where}[{shown(name)}]: expected a string, got {shown(value)}")
    return tuple(sorted(tags.items()))


def read(path: Path, *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    path = Path(path)
    batch = SourceBatch(path=str(path), format="questions-json", dialect="pmrag questions")
    problems = Problems(batch, permissive)
    data = load_json(path)
    if data == {}:
        return batch   # a question file with nothing in it: an empty batch, which the caller reports as such
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise InputError(path, "top level", "expected an object with a 'questions' list")
    seen: set[str] = set()
    for index, item in enumerate(data["questions"]):
        batch.questions_read += 1
        where = f"questions[{index}]"
        try:
            question = _question(item, where)
        except ValueError as exc:
            location, _, reason = str(exc).partition(": ")
            problems.report(f"key {location}", reason, kind="question")
            continue
        if question.question_id in seen:
            problems.report(f"key {where}.question_id", f"duplicate question_id {shown(question.question_id)}", kind="question")
            continue
        seen.add(question.question_id)
        batch.questions.append(question)
    return batch
