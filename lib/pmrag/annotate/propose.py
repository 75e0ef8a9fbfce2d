"""Question candidates proposed by a model from the ingested messages (000 §4.2).

The paper's LLM read the chat history and proposed 108 candidate questions, each with a type and candidate
evidence (timestamps, speakers, excerpts); none was taken as gold directly.  This module is that step, through
the one way pmrag calls a model (:mod:`pmrag.represent.llm`):

* **Batches** (:func:`message_batches`): the store's messages by source, time and position in the file, cut into
  batches of at most ``candidates.batch_chars`` characters, each message counted as the JSON object it is sent
  as (``{"time", "speaker", "text"}``, time ``YYYY-MM-DD HH:MM``, the date alone when the export gave none).  A
  batch never spans two sources; a message longer than a batch goes alone, its text cut to fit.  A batch's id
  is ``batch_`` + 16 hex digits of the SHA-256 of its messages as sent, so the same messages are the same batch
  in every run.
* **The call** (:data:`PROPOSAL`, one per batch): prompts ``question_candidates_{system,user}.txt`` of
  ``representations.prompts`` (ours, written from §4.2; the paper publishes none).  The input after the user
  template: ``{"types": [...], "max_questions": n, "messages": [...]}`` as JSON.  Model, server and output cap
  are the ``candidates`` section's (null: the summarizer's); timeout, pacing, retries and failure policy the
  ``summarizer`` section's; a server off this machine needs ``allow_remote: true`` (refused before anything is
  sent; a loopback server never needs it).
* **The reply** (:func:`validate_proposal_reply`): one JSON object ``{"questions": [{"question", "type",
  "evidence": [{"time", "speaker", "excerpt"}]}]}`` (a Markdown code fence allowed).  Not JSON, a missing or
  unknown key, a value of the wrong kind, a type not in ``candidates.types`` or a time that is not one
  (``YYYY-MM-DD``: the whole day, ``YYYY-MM-DD HH:MM[:SS]``) is a failed, not retried, call whose one-line error
  names the batch and the key, never the reply's text.  Dropped and counted instead: a question past
  ``max_questions``, a question repeated in the reply (compared case-folded, whitespace as one space), an
  evidence entry with no time, speaker or excerpt, or repeated within its question.
* **Provenance and resume**: one row of ``graph_extractions`` per batch, step ``question_candidates``
  (:func:`~pmrag.represent.llm.run_step`: status, the validated reply, requested and reported model, both
  prompts' SHA-256, the input's SHA-256, tokens, attempts, run; never the API key).  A rerun calls the model only
  for batches without an ``ok`` row under the same model, prompts and input.
* **Candidates**: every ok batch's questions are stored by
  :func:`~pmrag.annotate.candidates.store_candidates` with origin ``model``, ``model`` = the model the response
  reported, ``prompt_sha256`` = :func:`prompt_sha256` and ``batch`` = the batch id; their evidence becomes hints
  (time, speaker, excerpt as the phrase).  A candidate's id is a hash of its origin and text, so a rerun stores
  nothing twice (the report reconciles: read = stored + already present + rejected).  Under
  ``stop_on_first_error`` the batches that succeeded before the stop are stored before :class:`ProposalStopped`
  is raised.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from sqlalchemy import Engine, select

from pmrag.annotate.candidates import Candidate, CandidateReport, Hint, hint_time, store_candidates
from pmrag.core.errors import PmragError
from pmrag.core.params import CandidatesSection, SummarizerSection
from pmrag.core.store import graph_extractions, stored_messages
from pmrag.core.text import one_line, shown
from pmrag.represent import privacy
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, Prompts, ResponsesClient,
                                 StepItem, StepReport, StepStopped, load_step_prompts, reply_object, run_step)

QUESTION_KEYS = ("question", "type", "evidence")
EVIDENCE_KEYS = ("time", "speaker", "excerpt")
TIME_FORMAT = "%Y-%m-%d %H:%M"


class ProposalError(PmragError):
    """The proposal step cannot run as asked (no message to read, a prompt file missing, ...)."""


class ProposalStopped(StepStopped):
    """``stop_on_first_error``: a proposal call failed; its row is recorded and the run is stopped."""

    what = "question proposal"


# --------------------------------------------------------------------------------------------- batches

@dataclass(frozen=True)
class MessageBatch:
    """Messages of one source sent in one call: their id (a hash of the messages as sent), the source, how many
    messages, how many had their text cut to fit, and the messages as sent (a JSON list)."""

    batch_id: str
    source: str
    n_messages: int
    n_cut: int
    messages_json: str

    def input(self, types: Sequence[str], max_questions: int) -> str:
        """What follows the user template: ``{"types": [...], "max_questions": n, "messages": [...]}``."""
        head = json.dumps({"types": list(types), "max_questions": int(max_questions)}, ensure_ascii=False)
        return f'{head[:-1]}, "messages": {self.messages_json}}}'


def message_object(occurred_at, time_unknown: bool, sender: str, text: str) -> dict:
    """One message as sent: its time (``YYYY-MM-DD HH:MM``, the date alone when unknown), speaker and text."""
    when = pd.Timestamp(occurred_at)
    return {"time": when.strftime("%Y-%m-%d") if time_unknown else when.strftime(TIME_FORMAT),
            "speaker": str(sender), "text": str(text)}


def _encoded(message: dict) -> str:
    return json.dumps(message, ensure_ascii=False)


def _fit(message: dict, batch_chars: int) -> tuple[str, bool]:
    """The message as sent and whether its text was cut so that it fits in ``batch_chars`` characters."""
    encoded = _encoded(message)
    if len(encoded) <= batch_chars:
        return encoded, False
    text = message["text"]
    low, high = 0, len(text)            # the longest prefix that fits (escapes make a character cost more than one)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encoded({**message, "text": text[:middle]})) <= batch_chars:
            low = middle
        else:
            high = middle - 1
    return _encoded({**message, "text": text[:low]}), True


def message_batches(messages: pd.DataFrame, batch_chars: int) -> list[MessageBatch]:
    """The messages (columns ``source, occurred_at, time_unknown, sender, text``, in the order given: by source,
    time and position) cut into batches of at most ``batch_chars`` characters, never across two sources (module
    docstring).  The characters of a batch are its messages' JSON objects and the ``", "`` between them."""
    if batch_chars < 1:
        raise ProposalError(f"candidates.batch_chars must be ≥ 1, got {batch_chars!r}")
    batches: list[MessageBatch] = []
    for source, group in messages.groupby("source", sort=False):
        pending: list[str] = []
        size = cut = 0
        for row in group.itertuples(index=False):
            encoded, was_cut = _fit(message_object(row.occurred_at, bool(row.time_unknown), row.sender, row.text),
                                    batch_chars)
            if pending and size + 2 + len(encoded) > batch_chars:
                batches.append(_batch(str(source), pending, cut))
                pending, size, cut = [], 0, 0
            size += len(encoded) + (2 if pending else 0)
            pending.append(encoded)
            cut += was_cut
        if pending:
            batches.append(_batch(str(source), pending, cut))
    return batches


def _batch(source: str, encoded: list[str], cut: int) -> MessageBatch:
    body = "[" + ", ".join(encoded) + "]"
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    return MessageBatch(f"batch_{digest}", source, len(encoded), cut, body)


# --------------------------------------------------------------------------------------------- replies

def validate_proposal_reply(text: str, batch_id: str, types: Sequence[str], max_questions: int) -> tuple[dict, int]:
    """A reply read by the module docstring's rules: ``({"questions": [{"text", "type", "hints": [{"time_from",
    "time_to", "speaker", "excerpt"}]}]}, dropped)``, times as ``YYYY-MM-DD HH:MM:SS``.  Raises a non-retryable
    :class:`~pmrag.represent.llm.CallError` naming the batch and the key, never the reply's text."""
    what = f"batch {batch_id}"
    reply = reply_object(text, what)

    def fail(key: str, problem: str):
        raise CallError(f"{what}: key '{key}' {problem}", retryable=False)

    if "questions" not in reply:
        fail("questions", "is missing")
    extra = [k for k in reply if k != "questions"]
    if extra:
        raise CallError(f"{what}: key {shown(extra[0])} is unknown; the reply's one key is 'questions'",
                        retryable=False)
    if not isinstance(reply["questions"], list):
        fail("questions", "must be a list")
    kept, seen, dropped = [], set(), 0
    for i, entry in enumerate(reply["questions"]):
        key = f"questions[{i}]"
        question, hints, hints_dropped = _question(entry, key, types, fail)
        norm = question["text"].casefold()
        if norm in seen or len(kept) >= max_questions:
            dropped += 1
            continue
        seen.add(norm)
        dropped += hints_dropped
        kept.append({**question, "hints": hints})
    return {"questions": kept}, dropped


def _question(entry, key: str, types: Sequence[str], fail) -> tuple[dict, list[dict], int]:
    if not isinstance(entry, dict):
        fail(key, "must be an object with keys question, type, evidence")
    unknown = [k for k in entry if k not in QUESTION_KEYS]
    if unknown:
        fail(f"{key}.{_key_shown(unknown[0])}", "is unknown; a question's keys are question, type, evidence")
    for needed in QUESTION_KEYS:
        if needed not in entry:
            fail(f"{key}.{needed}", "is missing")
    if not isinstance(entry["question"], str) or not one_line(entry["question"]):
        fail(f"{key}.question", "must be a non-empty string")
    if entry["type"] not in types:
        fail(f"{key}.type", f"must be one of candidates.types ({', '.join(types)})")
    if not isinstance(entry["evidence"], list):
        fail(f"{key}.evidence", "must be a list")
    hints, dropped = [], 0
    for j, item in enumerate(entry["evidence"]):
        hint = _evidence(item, f"{key}.evidence[{j}]", fail)
        if hint is None or hint in hints:
            dropped += 1
        else:
            hints.append(hint)
    return {"text": one_line(entry["question"]), "type": entry["type"]}, hints, dropped


def _evidence(item, key: str, fail) -> dict | None:
    if not isinstance(item, dict):
        fail(key, "must be an object with keys time, speaker, excerpt")
    unknown = [k for k in item if k not in EVIDENCE_KEYS]
    if unknown:
        fail(f"{key}.{_key_shown(unknown[0])}", "is unknown; an evidence entry's keys are time, speaker, excerpt")
    values = {}
    for name in EVIDENCE_KEYS:
        value = item.get(name)
        if value is not None and not isinstance(value, str):
            fail(f"{key}.{name}", "must be a string or null")
        values[name] = (value.strip() if name == "excerpt" else one_line(value)) if value else None
    time_from = time_to = None
    if values["time"]:
        try:
            time_from, time_to = hint_time(values["time"], f"{key}.time", whole_day=True)
        except ValueError:
            fail(f"{key}.time", "must be YYYY-MM-DD, YYYY-MM-DD HH:MM or YYYY-MM-DD HH:MM:SS")
    if time_from is None and not values["speaker"] and not values["excerpt"]:
        return None
    return {"time_from": _iso(time_from), "time_to": _iso(time_to), "speaker": values["speaker"] or None,
            "excerpt": values["excerpt"] or None}


def _key_shown(name: str) -> str:
    """A key the model wrote, safe to quote in an error (short, on one line, without quotes)."""
    return shown(name).strip("'\"")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _check_reply(text: str, item: StepItem) -> tuple[dict, int]:
    types, max_questions = item.context
    return validate_proposal_reply(text, item.item_id, types, max_questions)


PROPOSAL = LLMStep("question_candidates", "question proposal", ("question_candidates_system",
                                                                "question_candidates_user"), _check_reply,
                   noun="batch", dropped="proposals dropped (questions past max_questions or repeated, evidence "
                                          "repeated or without a time, speaker or excerpt)", stopped=ProposalStopped)
"""One call per message batch (the item's context: the types and the cap), its questions out."""
STEP = PROPOSAL.name


def load_proposal_prompts(prompts: str = "ja") -> Prompts:
    """``Prompts(system, user_template)`` of ``question_candidates_{system,user}.txt`` in a set (``ja``, ``en`` or
    a folder); a missing or empty file is a :class:`ProposalError`."""
    return load_step_prompts(prompts, {STEP: PROPOSAL.prompt_files}, "question proposal prompts",
                             ProposalError)[STEP]


def prompt_sha256(prompts: Prompts) -> str:
    """One hash of both prompts (a candidate's ``prompt_sha256``): SHA-256 of the system prompt, a NUL character
    and the user template."""
    return hashlib.sha256(f"{prompts.system}\x00{prompts.user_template}".encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------- the run

@dataclass(frozen=True)
class Proposal:
    """What a proposal run did: the batches (all of them, and those sent or resumed), the calls' report, the
    candidates' reconciliation, and what made them (never the API key)."""

    n_batches: int
    n_selected: int
    report: StepReport
    candidates: CandidateReport
    provenance: dict

    def lines(self) -> list[str]:
        """Batches and calls (made, resumed, failed), the step's report line, the candidates' reconciliation."""
        r = self.report
        return [f"batches: {self.n_selected} of {self.n_batches}; called {r.ok + r.error} (ok {r.ok}, failed "
                f"{r.error}), resumed {r.skipped}, API calls {r.calls}", r.line(), self.candidates.line()]


def propose_candidates(engine: Engine, section: CandidatesSection, *, summarizer: SummarizerSection,
                       prompts: str = "ja", allow_remote: bool = False, proxy: str | None = None,
                       limit: int | None = None, progress: bool = False,
                       sleep: Callable[[float], None] = time.sleep) -> Proposal:
    """Propose question candidates from the store's messages and store them (module docstring).

    Parameters
    ----------
    engine : the store: its messages are read, its ``graph_extractions`` rows record and resume the calls, its
        ``question_candidates`` / ``candidate_hints`` receive the proposals.
    section : the ``candidates`` params (model, server, output cap, batch size, questions per batch, types).
    summarizer : the ``summarizer`` params (the model and server when ``section`` names none; timeout, pacing,
        retries and failure policy).
    prompts : the prompt set (``representations.prompts``: ``ja``, ``en`` or a folder).
    allow_remote, proxy : the study's permission and named proxy (:mod:`pmrag.represent.privacy`).
    limit : the first ``limit`` batches only (in source, time order); ``None``: all.
    progress : a progress bar; sleep : the pause between calls and retries (injectable for tests).

    Raises :class:`ProposalStopped` under ``stop_on_first_error`` (after storing the batches that succeeded),
    ``RemoteNotAllowed`` for a server off this machine without ``allow_remote``.
    """
    llm = section.llm(summarizer)
    prompt = load_proposal_prompts(prompts)
    client = ResponsesClient(llm, prompt, sender="the openai question proposer", allow_remote=allow_remote,
                             proxy=proxy)
    batches, chosen = proposal_batches(engine, section, limit)
    items = proposal_items(chosen, section)
    stopped: ProposalStopped | None = None
    try:
        result = run_step(PROPOSAL, items, client=client, store=ExtractionStore(engine),
                          policy=CallPolicy(llm, sleep), progress=progress)
        report = result.report
    except ProposalStopped as exc:
        stopped, report = exc, exc.report
    found = proposed_candidates(engine, items, client, prompt)
    stored = store_candidates(engine, found, f"proposed by {llm.model}")
    if stopped is not None:
        raise stopped
    settings = llm.model_dump(mode="json", include={
        "model", "timeout_s", "interval_s", "max_output_tokens", "failure_policy", "max_retries",
        "backoff_initial_s", "backoff_max_s"})
    provenance = {"backend": "openai", "model": llm.model, "base_url": client.provenance()["base_url"],
                  "llm": settings, "batch_chars": section.batch_chars,
                  "questions_per_batch": section.questions_per_batch, "types": list(section.types),
                  "prompt_sha256": prompt_sha256(prompt), "sdk_version": client.sdk_version,
                  "messages_cut": sum(b.n_cut for b in chosen), "calls": report.line()}
    return Proposal(len(batches), len(chosen), report, stored, privacy.redact_value(provenance, client.secrets))


def proposal_batches(engine: Engine, section: CandidatesSection,
                     limit: int | None = None) -> tuple[list[MessageBatch], list[MessageBatch]]:
    """Every message batch of the store (:func:`message_batches`) and the ones a run sends: the first ``limit``
    (``None``: all).  Raises :class:`ProposalError` for a bad ``limit`` or a store without messages."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ProposalError(f"--limit: an integer ≥ 1, got {limit!r}")
    messages = stored_messages(engine)
    if messages.empty:
        raise ProposalError("the store holds no message to propose questions from; ingest the history first")
    batches = message_batches(messages, section.batch_chars)
    return batches, batches[:limit] if limit is not None else batches


def proposal_items(batches: Sequence[MessageBatch], section: CandidatesSection) -> list[StepItem]:
    """One call's item per batch: its id, its input as sent after the user template, and what the reply's
    check needs (the types and the most questions)."""
    return [StepItem(b.batch_id, b.input(section.types, section.questions_per_batch),
                     (tuple(section.types), section.questions_per_batch)) for b in batches]


def proposed_candidates(engine: Engine, items: Sequence[StepItem], client: ResponsesClient,
                        prompt: Prompts) -> list[Candidate]:
    """The candidates of every item with an ``ok`` row made by this model and these prompts from this input, in
    item order; ``model`` is what the response reported (the requested model when it reported none)."""
    system_sha, user_sha = prompt.sha256().values()
    digest = {item.item_id: hashlib.sha256(item.text.encode("utf-8")).hexdigest() for item in items}
    c = graph_extractions.c
    with engine.connect() as conn:
        rows = {row.item_id: row for row in conn.execute(select(
            c.item_id, c.input_sha256, c.output, c.response_model).where(
            c.step == STEP, c.status == "ok", c.requested_model == client.requested_model,
            c.system_sha256 == system_sha, c.user_sha256 == user_sha, c.item_id.in_(list(digest))))}
    sha = prompt_sha256(prompt)
    out = []
    for item in items:
        row = rows.get(item.item_id)
        if row is None or row.input_sha256 != digest[item.item_id]:
            continue
        model = privacy.redact(row.response_model or client.requested_model, client.secrets)
        for question in json.loads(privacy.redact(row.output, client.secrets))["questions"]:
            hints = tuple(Hint(_parsed(h["time_from"]), _parsed(h["time_to"]), h["speaker"], h["excerpt"])
                          for h in question["hints"])
            out.append(Candidate(question["text"], question["type"], "model", item.item_id, hints, model, sha))
    return out


def _parsed(value: str | None) -> datetime | None:
    return None if value is None else datetime.strptime(value, "%Y-%m-%d %H:%M:%S")
