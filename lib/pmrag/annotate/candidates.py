"""Question candidates (000 §4.2): questions to grade, each with its origin, status and evidence hints.

The paper had a model propose candidate questions with candidate evidence (timestamps, speakers, excerpts);
none was accepted as gold directly.  Here a candidate is typed by the researcher in a CSV or YAML file (origin
``typed``, batch = the file's name) or proposed by a model (origin ``model``: the ``model``,
``prompt_sha256`` and ``batch`` columns of ``question_candidates`` are that backend's provenance; a model
backend builds :class:`Candidate` values with ``origin="model"`` and stores them with
:func:`store_candidates`, like a typed file).

A typed file lists questions with a ``text``, a ``type`` (named_entity / contextual / aggregate, or the
dataset's own) and optional evidence hints, each a time or a time range, a speaker and a phrase:

* YAML: a list of entries (or ``{questions: [...]}``); an entry's hints are ``hints: [{time | time_from +
  time_to, speaker, phrase}, ...]``, or those keys on the entry itself for one hint;
* CSV (UTF-8, a header row): columns ``text, type`` and optional ``time, time_from, time_to, speaker,
  phrase``; one hint per row, and rows with the same text and type are one question with several hints.

Times are ``YYYY-MM-DD`` (the whole day), ``YYYY-MM-DD HH:MM`` or ``YYYY-MM-DD HH:MM:SS``, the chat's local
time as messages are stored (a UTC offset YAML reads with a timestamp is dropped, the clock time kept).
A candidate's id is a hash of its origin and text, so reading the same file again stores nothing twice
(:class:`CandidateReport` reconciles: read = stored + already present + merged + rejected); a model's question
proposed again from another message batch with new evidence has those hints merged into it, each hint keeping
the batch it came from.  A question typed in the question-entry widget is checked by the same rules and
messages as a file's entry (:func:`typed_candidate`).
A candidate's status moves from ``proposed`` to ``accepted``, ``edited`` (the edited text is graded and
exported; the type can be changed with it) or ``dropped`` (with a reason) — :func:`accept_candidate`,
:func:`edit_candidate`, :func:`drop_candidate`.  Errors name the file, the line or entry and the key, never the text.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

import pandas as pd
import yaml
from sqlalchemy import Engine, select

from pmrag.core.errors import InputError, PmragError
from pmrag.core.store import candidate_hints, question_candidates, sql_datetime
from pmrag.core.text import shown

ORIGINS = ("typed", "model")
STATUSES = ("proposed", "accepted", "edited", "dropped")
GRADED_STATUSES = ("accepted", "edited")         # candidates that become questions to pool, grade and export
HINT_KEYS = ("time", "time_from", "time_to", "speaker", "phrase")
TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")


@dataclass(frozen=True)
class Hint:
    """One piece of candidate evidence: a time (``time_to`` None) or a range, a speaker, a phrase."""

    time_from: datetime | None = None
    time_to: datetime | None = None
    speaker: str | None = None
    phrase: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A question candidate as read or proposed, before it is stored."""

    text: str
    type: str
    origin: str = "typed"
    batch: str | None = None
    hints: tuple[Hint, ...] = ()
    model: str | None = None
    prompt_sha256: str | None = None

    @property
    def candidate_id(self) -> str:
        return candidate_id(self.origin, self.text)


@dataclass
class CandidateFile:
    """What one typed file held: its candidates, and the entries rejected (``location``, ``reason``)."""

    path: str
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    read: int = 0


@dataclass(frozen=True)
class CandidateReport:
    """Reconciliation of one file's or one proposal run's candidates:
    ``read == stored + already_present + merged + rejected`` (``merged``: a model's proposal repeated from
    another batch whose new hints joined the stored candidate, :func:`store_candidates`)."""

    batch: str
    read: int
    stored: int
    already_present: int
    rejected: int
    problems: tuple[tuple[str, str], ...] = ()
    merged: int = 0

    def line(self) -> str:
        """One line of the counts; ``merged`` is named only when some were."""
        merged = f", merged {self.merged}" if self.merged else ""
        return (f"{self.batch}: questions read {self.read}, stored {self.stored}, "
                f"already present {self.already_present}{merged}, rejected {self.rejected}")


def candidate_id(origin: str, text: str) -> str:
    """``cand_`` + the first 16 hex digits of SHA-256 over origin and text: stable across reads and stores."""
    return "cand_" + hashlib.sha256(f"{origin}\x1f{text}".encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------- reading

def read_typed_questions(path, *, permissive: bool = False) -> CandidateFile:
    """The questions of a typed CSV or YAML file (by suffix: ``.csv``; ``.yaml`` / ``.yml``).

    Parameters
    ----------
    path : the file; its name (never its folder) is the candidates' ``batch``.
    permissive : record a malformed entry in ``rejected`` and go on (default: stop with an
        :class:`~pmrag.core.errors.InputError` naming the file, the line or entry and the key).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".yaml", ".yml"):
        raise InputError(path, None, "a typed-questions file must be .csv, .yaml or .yml")
    if not path.is_file():
        raise InputError(path, None, "no such file")
    entries = _csv_entries(path) if suffix == ".csv" else _yaml_entries(path)
    result = CandidateFile(str(path))
    grouped: dict[tuple[str, str], list] = {}
    for location, entry in entries:
        result.read += 1
        try:
            text, type_, hints = _entry(entry)
        except ValueError as exc:
            if not permissive:
                raise InputError(path, location, str(exc)) from None
            result.rejected.append((location, str(exc)))
            continue
        if (text, type_) in grouped:          # another row of the same question: one more hint
            result.read -= 1
            grouped[(text, type_)].extend(hints)
        else:
            grouped[(text, type_)] = list(hints)
    texts = [text for text, _ in grouped]
    for (text, type_), hints in grouped.items():
        if texts.count(text) > 1:
            problem = ("questions", f"one text is given with {texts.count(text)} types; give each question one type")
            if not permissive:
                raise InputError(path, *problem)
            result.rejected.append(problem)
            continue
        result.candidates.append(Candidate(text, type_, "typed", path.name, tuple(dict.fromkeys(hints))))
    return result


def _csv_entries(path: Path) -> list[tuple[str, dict]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            unknown = [name for name in header if name not in ("text", "type", *HINT_KEYS)]
            if unknown:
                raise InputError(path, "line 1", f"unknown column {shown(unknown[0])}; columns are text, type, "
                                                  f"{', '.join(HINT_KEYS)}")
            for needed in ("text", "type"):
                if needed not in header:
                    raise InputError(path, "line 1", f"missing column {needed!r}")
            rows = []
            for row in reader:
                if None in row:
                    raise InputError(path, f"line {reader.line_num}", "more fields than columns")
                rows.append((f"line {reader.line_num}", {k: v for k, v in row.items() if v not in (None, "")}))
            return rows
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "not valid UTF-8; save the file as UTF-8") from None
    except csv.Error as exc:
        raise InputError(path, None, f"not a valid CSV file ({exc})") from None


def _yaml_entries(path: Path) -> list[tuple[str, dict]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "not valid UTF-8; save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(path, f"line {mark.line + 1}" if mark else None, "not valid YAML") from None
    if isinstance(data, dict) and set(data) == {"questions"}:
        data = data["questions"]
    if data is None:
        data = []
    if not isinstance(data, list):
        raise InputError(path, "top level", "expected a list of questions (or a mapping with a 'questions' list)")
    return [(f"entry {index}", entry) for index, entry in enumerate(data)]


def typed_candidate(entry, batch: str) -> Candidate:
    """One typed question (origin ``typed``) from a mapping of a typed file's keys (``text``, ``type``, and
    ``hints`` or one hint's keys), by the file reader's rules; a :class:`ValueError` with the reader's one-line
    message (naming the key, never the text) otherwise.  The question-entry widget validates with it."""
    text, type_, hints = _entry(entry)
    return Candidate(text, type_, "typed", batch, tuple(dict.fromkeys(hints)))


def candidates_of_questions(questions: pd.DataFrame, batch: str) -> dict[str, Candidate]:
    """A dataset's questions (``question_id, text, type``) as typed candidates of ``batch``, by question id (a
    question whose text an earlier one already has is left out: one text is one candidate)."""
    out: dict[str, Candidate] = {}
    seen: set[str] = set()
    for question_id, text, type_ in questions[["question_id", "text", "type"]].itertuples(index=False):
        candidate = typed_candidate({"text": text, "type": type_}, batch)
        if candidate.text not in seen:
            seen.add(candidate.text)
            out[str(question_id)] = candidate
    return out


def _entry(entry) -> tuple[str, str, tuple[Hint, ...]]:
    if not isinstance(entry, dict):
        raise ValueError("expected a mapping with keys text, type and optional hints")
    unknown = [key for key in entry if key not in ("text", "type", "hints", *HINT_KEYS)]
    if unknown:
        raise ValueError(f"key {shown(unknown[0])}: unknown; keys are text, type, hints, {', '.join(HINT_KEYS)}")
    for key in ("text", "type"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ValueError(f"key '{key}': expected a non-empty string")
    if "hints" in entry and any(key in entry for key in HINT_KEYS):
        raise ValueError("key 'hints': give hints either as a 'hints' list or as keys of the entry, not both")
    raw = entry.get("hints", [{k: entry[k] for k in HINT_KEYS if k in entry}] if any(k in entry for k in HINT_KEYS)
                    else [])
    if not isinstance(raw, list):
        raise ValueError("key 'hints': expected a list of mappings")
    hints = tuple(_hint(item, f"hints[{i}]." if "hints" in entry else "") for i, item in enumerate(raw))
    return entry["text"].strip(), entry["type"].strip(), hints


def _hint(item, prefix: str) -> Hint:
    if not isinstance(item, dict):
        raise ValueError(f"key '{prefix.rstrip('.') or 'hints'}': expected a mapping")
    unknown = [key for key in item if key not in HINT_KEYS]
    if unknown:
        raise ValueError(f"key '{prefix}{unknown[0]}': unknown; a hint's keys are {', '.join(HINT_KEYS)}")
    if "time" in item and ("time_from" in item or "time_to" in item):
        raise ValueError(f"key '{prefix}time': give a time or a range (time_from, time_to), not both")
    if ("time_from" in item) != ("time_to" in item):
        raise ValueError(f"key '{prefix}time_from': a range needs both time_from and time_to")
    time_from = time_to = None
    if "time" in item:
        time_from, time_to = hint_time(item["time"], f"{prefix}time", whole_day=True)
    elif "time_from" in item:
        time_from = hint_time(item["time_from"], f"{prefix}time_from")[0]
        end, day_end = hint_time(item["time_to"], f"{prefix}time_to", whole_day=True)
        time_to = day_end or end
        if time_to < time_from:
            raise ValueError(f"key '{prefix}time_to': the range ends before it starts")
    speaker, phrase = (_text(item.get(key), f"{prefix}{key}") for key in ("speaker", "phrase"))
    if time_from is None and speaker is None and phrase is None:
        raise ValueError(f"key '{prefix.rstrip('.') or 'hints'}': an empty hint; give a time, a speaker or a phrase")
    return Hint(time_from, time_to, speaker, phrase)


def _text(value, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"key '{key}': expected a non-empty string")
    return value.strip()


def hint_time(value, key: str, whole_day: bool = False) -> tuple[datetime, datetime | None]:
    """A time (and None), or a bare date as the whole day (its first and last second) when ``whole_day``."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None, microsecond=0), None
    if isinstance(value, date):
        day = datetime.combine(value, time())
        return day, (day + timedelta(days=1, seconds=-1)) if whole_day else None
    if isinstance(value, str):
        text = value.strip()
        try:
            day = datetime.strptime(text, "%Y-%m-%d")
            return day, (day + timedelta(days=1, seconds=-1)) if whole_day else None
        except ValueError:
            pass
        for fmt in TIME_FORMATS:
            try:
                return datetime.strptime(text, fmt), None
            except ValueError:
                continue
    raise ValueError(f"key '{key}': expected YYYY-MM-DD, YYYY-MM-DD HH:MM or YYYY-MM-DD HH:MM:SS")


# ------------------------------------------------------------------------------------------- storing

def store_candidates(engine: Engine, candidates: list[Candidate], batch: str,
                     rejected: list[tuple[str, str]] = (), read: int | None = None) -> CandidateReport:
    """Store candidates not stored yet (status ``proposed``) with their hints, in one transaction; each hint
    keeps the batch that gave it (``candidate_hints.batch``).

    A candidate whose id is stored with the same type and hints is already present (a model's proposal also
    when its hints are among the stored ones).  A model's proposal repeated from another message batch with the same type and new hints is
    merged: its new hints are appended after the stored ones (each with its own batch; a hint already stored
    is not stored twice) and the candidate's status, edits and grades are kept.  Any other repeat (another
    type; a typed file's question with other hints; other hints from the same batch) is rejected and left as
    it was (change it with the status functions).
    """
    stored = present = merged = 0
    problems = list(rejected)
    now = sql_datetime(datetime.now().replace(microsecond=0))
    with engine.begin() as conn:
        for candidate in candidates:
            cid, origin_batch = candidate.candidate_id, candidate.batch or batch
            found = conn.execute(select(question_candidates.c.type, question_candidates.c.batch).where(
                question_candidates.c.candidate_id == cid)).first()
            if found is not None:
                known, model = _stored_hints(conn, cid), candidate.origin == "model"
                new = [h for h in dict.fromkeys(candidate.hints) if h not in known]
                if found.type == candidate.type and (known == list(candidate.hints) or (model and not new)):
                    present += 1
                elif found.type == candidate.type and model and origin_batch != found.batch:
                    _insert_hints(conn, cid, new, origin_batch, start=len(known))
                    merged += 1
                else:
                    problems.append((cid, "already stored with another type or other hints; it was left as it was"))
                continue
            conn.execute(question_candidates.insert().values(
                candidate_id=cid, text=candidate.text, type=candidate.type, origin=candidate.origin,
                model=candidate.model, prompt_sha256=candidate.prompt_sha256, batch=origin_batch,
                status="proposed", created_at=now))
            _insert_hints(conn, cid, list(candidate.hints), origin_batch)
            stored += 1
    n_read = len(candidates) + len(rejected) if read is None else read
    return CandidateReport(batch, n_read, stored, present, n_read - stored - present - merged, tuple(problems),
                           merged)


def _insert_hints(conn, cid: str, hints: list[Hint], batch: str, start: int = 0) -> None:
    if hints:
        conn.execute(candidate_hints.insert(), [
            {"candidate_id": cid, "hint": start + i, "time_from": h.time_from, "time_to": h.time_to,
             "speaker": h.speaker, "excerpt": h.phrase, "batch": batch} for i, h in enumerate(hints)])


def _stored_hints(conn, cid: str) -> list[Hint]:
    rows = conn.execute(select(candidate_hints).where(candidate_hints.c.candidate_id == cid)
                        .order_by(candidate_hints.c.hint)).all()
    return [Hint(r.time_from, r.time_to, r.speaker, r.excerpt) for r in rows]


def add_typed_questions(engine: Engine, path, *, permissive: bool = False) -> CandidateReport:
    """Read a typed-questions file (:func:`read_typed_questions`) and store its candidates
    (:func:`store_candidates`); reading the same file again stores nothing twice."""
    found = read_typed_questions(path, permissive=permissive)
    return store_candidates(engine, found.candidates, Path(path).name, found.rejected, found.read)


# ------------------------------------------------------------------------------------------- status

def accept_candidate(engine: Engine, candidate: str) -> None:
    """Accept a candidate as it is: it is pooled, graded and exported with its own text."""
    _set_status(engine, candidate, status="accepted", edited_text=None, reason=None)


def edit_candidate(engine: Engine, candidate: str, text: str, *, type: str | None = None) -> None:
    """Accept a candidate with another wording: ``text`` is what is graded and exported (the id and the
    proposed ``text`` stay); ``type`` (when given) replaces its type."""
    if not isinstance(text, str) or not text.strip():
        raise PmragError(f"candidate {candidate}: the edited text must be a non-empty string")
    if type is not None and (not isinstance(type, str) or not type.strip()):
        raise PmragError(f"candidate {candidate}: the edited type must be a non-empty string")
    changed = {"type": type.strip()} if type is not None else {}
    _set_status(engine, candidate, status="edited", edited_text=text.strip(), reason=None, **changed)


def drop_candidate(engine: Engine, candidate: str, reason: str) -> None:
    """Drop a candidate, saying why (it is never pooled or exported; its row and hints stay)."""
    if not isinstance(reason, str) or not reason.strip():
        raise PmragError(f"candidate {candidate}: dropping needs a reason (a non-empty string)")
    _set_status(engine, candidate, status="dropped", edited_text=None, reason=reason.strip())


def _set_status(engine: Engine, candidate: str, **values) -> None:
    with engine.begin() as conn:
        updated = conn.execute(question_candidates.update().where(
            question_candidates.c.candidate_id == candidate).values(**values)).rowcount
    if not updated:
        raise PmragError(f"no question candidate {shown(candidate)} in the store")


def read_candidates(engine: Engine, statuses=STATUSES) -> pd.DataFrame:
    """Stored candidates of the given statuses, by id, with ``question`` = the text graded (edited or own)."""
    with engine.connect() as conn:
        frame = pd.read_sql(select(question_candidates).where(question_candidates.c.status.in_(list(statuses)))
                            .order_by(question_candidates.c.candidate_id), conn)
    return frame.assign(question=frame["edited_text"].where(frame["edited_text"].notna(), frame["text"]))


def read_hints(engine: Engine, candidates=None) -> pd.DataFrame:
    """Stored hints (``candidate_id, hint, time_from, time_to, speaker, excerpt``), of ``candidates`` when given."""
    query = select(candidate_hints).order_by(candidate_hints.c.candidate_id, candidate_hints.c.hint)
    if candidates is not None:
        query = query.where(candidate_hints.c.candidate_id.in_(list(candidates)))
    with engine.connect() as conn:
        return pd.read_sql(query, conn, parse_dates=["time_from", "time_to"])
