"""LoCoMo (``locomo10.json``): a JSON list of samples, each one conversation source.

Per sample: ``sample_id``; ``conversation`` with ``speaker_a``, ``speaker_b``, ``session_<n>`` (a list of
turns ``{speaker, dia_id, text[, img_url, blip_caption]}``) and ``session_<n>_date_time``
(``"1:47 pm on 18 May, 2023"``); ``qa`` entries ``{question, answer | adversarial_answer, evidence, category}``.

* The source name is the ``sample_id``; turns keep their order, each session's turns one second apart
  from the session's date-time; ``source_order`` counts turns across the sample's sessions in order.
* A turn's ``dia_id`` is kept as ``native_id``.  A shared image is kept in the text as
  ``[image: <blip_caption>]`` after the turn's words (the caption is what a text retriever can see).
* A question with evidence becomes a question whose evidence turns are primary (relevance 2).  A question
  without evidence cannot be scored and is reported, not stored.
* Its type names its ``category`` as LoCoMo's evaluation reads it (:data:`LOCOMO_CATEGORIES`): 1 ``multi-hop``,
  2 ``temporal``, 3 ``open-domain``, 4 ``single-hop``, 5 ``adversarial``.  LoCoMo's code never spells the
  names out: ``task_eval/evaluation_stats.py`` prints the categories in the order 4, 1, 2, 3, 5, the order of
  the paper's result columns (single-hop, multi-hop, temporal, open-domain, adversarial), and
  ``task_eval/evaluation.py`` scores 1 by multi-answer F1 (answers split at commas) and 5 by whether the
  output says "not mentioned".  Any other value is ``category_<value>`` (a string ``"1"`` too: types are not
  converted) and a missing one ``category_unknown``.
* Evidence ids (``"D<session>:<turn>"``; an entry may hold several, split at ``;``, ``,`` and spaces) are
  resolved within the sample.  The public file has ids that name no turn as written; each is reported as an
  ``evidence`` note at its question's location (:class:`~pmrag.core.records.Rejected`, ``kind="evidence"``,
  ``action`` ``normalised`` or ``dropped``; ``pmrag ingest`` prints it and the store keeps it in
  ``rejections``), in strict mode too: it is never an error.

  - **normalised**: an id with one obvious reading, leading zeros (``D30:05`` → ``D30:5``) or a colon after
    the ``D`` (``D:11:26`` → ``D11:26``), when exactly one turn of the sample has that reading
    (:func:`dia_id_reading`); the question's evidence is that turn.
  - **dropped**: an id that names no turn (``D10:19`` where session 10 has 18 turns, a bare ``D``), whose
    reading two turns share, or that names a turn rejected in permissive mode.  The question keeps its
    other evidence; a question whose every id is dropped has no evidence left and is reported like a
    question without evidence, not stored.
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
from pmrag.core.records import DEFAULT_TYPE, Evidence, MessageRecord, QuestionRecord, Rejected, SourceBatch
from pmrag.core.text import one_line, shown
from pmrag.ingest._common import Problems, load_json

LOCOMO_CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo's ``category`` integers and the question types they are stored as (see the module docstring)."""

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"D:?0{0,8}([0-9]{1,9}):0{0,8}([0-9]{1,9})")   # bounded: a reading is short enough to show
_QUOTED = 3   # ids quoted in one reason; the rest are counted


def parse_session_datetime(value: str) -> datetime:
    """``"1:47 pm on 18 May, 2023"`` → ``datetime(2023, 5, 18, 13, 47)``."""
    return datetime.strptime(one_line(value), "%I:%M %p on %d %B, %Y")


def question_type(category) -> str:
    """The stored type of a LoCoMo ``category``: its name in :data:`LOCOMO_CATEGORIES`, else ``category_<value>``
    (``category_unknown`` when it is missing)."""
    if category is None:
        return "category_unknown"
    if type(category) is int and category in LOCOMO_CATEGORIES:
        return LOCOMO_CATEGORIES[category]
    return f"category_{category}"


def dia_id_reading(dia_id: str) -> str | None:
    """The reading ``D<session>:<turn>`` of a dialogue id, without leading zeros and without a colon after
    the ``D`` (``"D30:05"`` → ``"D30:5"``, ``"D:11:26"`` → ``"D11:26"``); None when it has no such reading
    (``"D"``, ``"D1126"``, ``"D1:2:3"``)."""
    match = _DIA_ID.fullmatch(dia_id)
    return None if match is None else f"D{int(match[1])}:{int(match[2])}"


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


def _read_turns(batch: SourceBatch, problems: Problems, sample_id: str, conversation: dict, where: str
                ) -> tuple[dict[str, str], set[str]]:
    """Append the sample's turns to the batch; return ``dia_id -> message_id`` and the dia_ids of the turns
    rejected (permissive mode)."""
    by_dia_id: dict[str, str] = {}
    rejected: set[str] = set()
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
                f"date-time {shown(conversation[date_key])} does not parse; expected like '1:47 pm on 18 May, 2023'",
            ) from None
        for position, turn in enumerate(turns):
            batch.records_read += 1
            order = source_order
            source_order += 1
            location = f"{session_where}[{position}]"
            if not isinstance(turn, dict) or not turn.get("speaker") or not isinstance(turn.get("text", ""), str):
                problems.report(location, "expected a turn object with 'speaker', 'dia_id' and 'text'")
                rejected.add(_dia_id_of(turn))
                continue
            wrong = _not_strings(turn, ("speaker", "dia_id", "blip_caption"))
            if wrong:
                problems.report(location, wrong)
                rejected.add(_dia_id_of(turn))
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
    rejected.discard(None)
    return by_dia_id, rejected


def _dia_id_of(turn) -> str | None:
    """The ``dia_id`` of a turn that may be malformed (None when it has no string one)."""
    dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
    return dia_id if type(dia_id) is str else None


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


class _SampleTurns:
    """The turns of one sample that evidence ids can name: by ``dia_id``, and by reading (:func:`dia_id_reading`)."""

    def __init__(self, sample_id: str, by_dia_id: dict[str, str], rejected: set[str]):
        self.sample_id = sample_id
        self.by_dia_id = by_dia_id
        self.readings: dict[str, list[str]] = {}
        for dia_id in by_dia_id:
            reading = dia_id_reading(dia_id)
            if reading is not None:
                self.readings.setdefault(reading, []).append(dia_id)
        self.rejected = rejected | ({dia_id_reading(d) for d in rejected} - {None})   # as written and as read

    def resolve(self, dia_id: str) -> tuple[str | None, str]:
        """``(turn's dia_id, why)``: the turn ``dia_id`` names, itself or its one reading; or None and why it
        names none (the end of a sentence that starts with the id)."""
        if dia_id in self.by_dia_id:
            return dia_id, ""
        reading = dia_id_reading(dia_id)
        candidates = self.readings.get(reading, []) if reading is not None else []
        if len(candidates) == 1:
            return candidates[0], ""
        sample = shown(self.sample_id)
        if candidates:
            return None, f"reads as {reading}, as do {_quoted(candidates)} of sample {sample}"
        if dia_id in self.rejected or reading in self.rejected:
            return None, f"names a turn of sample {sample} that was rejected"
        return None, f"names no turn of sample {sample}"


def _evidence_turns(batch: SourceBatch, turns: _SampleTurns, dia_ids: list[str], location: str) -> list[str]:
    """The dia_ids of the turns ``dia_ids`` name, in order, each once; every id not found as written is noted
    in ``batch.rejected`` as normalised or dropped.  A question left without evidence is rejected here too."""
    found: list[str] = []
    dropped: dict[str, list[str]] = {}   # why -> ids
    for dia_id in dict.fromkeys(dia_ids):
        turn, why = turns.resolve(dia_id)
        if turn is None:
            dropped.setdefault(why, []).append(dia_id)
            batch.rejected.append(Rejected(location, f"{shown(dia_id)} dropped: {why}", "evidence", "dropped"))
            continue
        if turn != dia_id:
            batch.rejected.append(Rejected(location, f"{shown(dia_id)} normalised to {turn}", "evidence", "normalised"))
        found.append(turn)
    if not found:
        whys = [f"its evidence {_quoted(ids)} {why}" for why, ids in dropped.items()]
        reason = "; ".join(whys[:_QUOTED]) + (f"; and {len(whys) - _QUOTED} more reasons" if len(whys) > _QUOTED else "")
        batch.rejected.append(Rejected(location, f"question has no evidence left, so it cannot be scored: {reason}",
                                       kind="question"))
    return list(dict.fromkeys(found))


def _quoted(ids: list[str]) -> str:
    """``'D1:4', 'D'`` (the first :data:`_QUOTED` ids, each shortened; the rest counted)."""
    text = ", ".join(shown(i) for i in ids[:_QUOTED])
    return text + (f" and {len(ids) - _QUOTED} more" if len(ids) > _QUOTED else "")


def _read_questions(batch: SourceBatch, problems: Problems, turns: _SampleTurns, qa: list, where: str):
    for index, item in enumerate(qa):
        batch.questions_read += 1
        location = f"{where}.qa[{index}]"
        problem = _question_problem(item)
        if problem:
            problems.report(location, problem, kind="question")
            continue
        evidence = item.get("evidence") or []
        dia_ids = [d for entry in evidence for d in _EVIDENCE_SPLIT.split(str(entry)) if d]
        if not dia_ids:
            batch.rejected.append(Rejected(location, "question has no evidence, so it cannot be scored", kind="question"))
            continue
        found = _evidence_turns(batch, turns, dia_ids, location)
        if not found:
            continue
        answer = item.get("answer", item.get("adversarial_answer"))
        batch.questions.append(
            QuestionRecord(
                question_id=f"{turns.sample_id}:q{index:03d}",
                text=item["question"],
                type=question_type(item.get("category")),
                evidence=tuple(Evidence(relevance=2, message_id=turns.by_dia_id[d]) for d in found),
                answer=None if answer is None else str(answer),
                source=turns.sample_id,
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
        by_dia_id, rejected = _read_turns(batch, problems, sample_id, sample["conversation"], where)
        qa = sample.get("qa") or []
        if not isinstance(qa, list):
            raise InputError(path, f"{where}.qa", f"expected a list of questions, got {type(qa).__name__}")
        _read_questions(batch, problems, _SampleTurns(sample_id, by_dia_id, rejected), qa, where)
    return batch
