"""One LLM step: prompts from files, the shared client, pacing and retries, reply validation, provenance, resume.

Every model call of pmrag (chunk summaries, paper §3.3; TOBUGraph's semantic, interest and relevance calls, paper
002 §2.2–2.4; query decomposition) is made by :func:`run_step`, so pacing, retries, the failure policy,
provenance and resume are written once.  A step is data (:class:`LLMStep`): its name, its two prompt files, the
check of a reply, what one item is called, what its report counts as dropped and what a stop raises.

* **Prompts** (:func:`load_step_prompts`): a step's system prompt and user template, two text files of a prompt
  set (``ja`` or ``en`` under ``represent/prompts/``, or a folder of the user's own,
  :func:`~pmrag.represent.representations.prompt_dir`), each without a leading byte-order mark or trailing
  whitespace; the input follows the user template after a blank line (:meth:`Prompts.render_input`).
* **The client** (:class:`ResponsesClient`): the official ``openai`` client on the Responses API with ``model``,
  ``instructions`` = the system prompt, ``input`` = the user template, a blank line and the input, and
  ``max_output_tokens``; temperature, top_p and seed are not sent, as in the paper.  The timeout is the params',
  the SDK's own retries are off (``max_retries=0``) so that every attempt is ours and recorded.  Private by
  default (:mod:`pmrag.represent.privacy`): a server that is not on this machine needs ``allow_remote: true``
  (refused before a client exists); no proxy, ``SSL_CERT_FILE`` or ``.netrc`` is read from the environment, only
  the params' ``proxy``, and only for a remote server; the key comes from ``OPENAI_API_KEY`` alone.
* **Redaction** (:func:`pmrag.represent.privacy.redact`, the one redaction of pmrag): a server may echo the key or
  the ``Authorization`` header it was sent, so every reply is redacted as it arrives, before anything is checked,
  stored, returned or shown: its text and the model it reports (:func:`redacted`, in :func:`call_item`, for
  whatever client a step runs; :class:`ResponsesClient` redacts its own replies too), every error text, a stored
  output a rerun resumes from (a row written before redaction existed), the provenance and the report line.  The
  step's check reads the redacted text, so a key can never become part of a summary, an interest label or a
  sub-query.  A new step run by :func:`run_step` gets all of it without a line of its own.
* **Pacing and retries** (:class:`CallPolicy`, the params' ``summarizer`` section): ``interval_s`` before every
  call but the first; a retryable error (429, 5xx, timeout, connection error) retried up to ``max_retries``
  times after a capped exponential backoff (``backoff_initial_s`` doubling up to ``backoff_max_s``: 0.5 s to
  8 s, the SDK's own), shortened by up to ``backoff_jitter`` by a share fixed by the item and the attempt, or after
  the refusal's Retry-After when it sent one; then ``failure_policy``: ``stop_on_first_error`` (the paper's)
  records the item as an error and raises the step's :class:`StepStopped`, ``retry`` records it and goes on.
* **Concurrency** (:mod:`pmrag.represent.calls`): ``summarizer.concurrency`` calls in flight at once (1, the
  paper's, runs them one after the other in the caller's thread), halved while the server refuses (429, 5xx) and
  raised again as calls succeed; a refusal's Retry-After holds every new call; ``requests_per_minute`` spaces the
  starts.  Each row is committed in the caller's thread as its call returns, and what an item stores never depends
  on the order in which calls return, so a study stores the same tables at any concurrency.
* **Validation**: the step's ``validate`` turns a reply's text into the step's output, or raises a
  non-retryable :class:`CallError` whose one-line message names the item and the key, never the reply's text
  (:func:`reply_object` reads a reply that must be one JSON object).
* **Provenance and resume** (a store: :class:`ExtractionStore`, table ``graph_extractions``, for the JSON
  steps; :class:`SummaryStore`, tables ``summaries`` and ``summary_runs``, for the summaries): one row per call
  (the item's last outcome: status, output or error, requested and reported model, SDK version, the input's
  length and SHA-256, tokens, latency of the last attempt, attempts, run), committed as its call returns, so a
  killed run loses at most the items in flight.  A rerun takes the items with an ``ok`` row from the store
  (which rows count is the store's rule) and calls the model for the others, error rows included.
* **Report** (:class:`StepReport`): what a run did, as one line without any text or key; while it runs,
  :class:`StepProgress` (items done of all, rate, ETA, calls in flight, waiting on a Retry-After or the budget)
  for a progress display.

Concurrency and rate-limit handling belong to :class:`CallPolicy`, :func:`run_step` and
:mod:`pmrag.represent.calls` (which the ``openai`` embedder's batches go through too); no other module makes an LLM
call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
import uuid
from collections import Counter
from contextlib import closing, contextmanager
from contextvars import ContextVar
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import Engine, insert, select, update

from pmrag.core.errors import PmragError
from pmrag.core.interrupts import deferred_interrupt
from pmrag.core.params import SummarizerSection
from pmrag.core.store import bulk_insert, graph_extractions, summaries, summary_runs
from pmrag.represent import privacy
from pmrag.represent.calls import Limiter, retry_after_s, retry_pause, run_bounded

MAX_ERROR_CHARS = 2000


class CallError(Exception):
    """One failed call: the client's (an HTTP status, a timeout, a malformed response) or the step's check of
    the reply.  ``retryable``: 429, 5xx, timeout or connection error; ``status``: the HTTP status of a refusal;
    ``retry_after``: the seconds it asked to wait (:func:`~pmrag.represent.calls.retry_after_s`)."""

    def __init__(self, message: str, retryable: bool, *, status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.retryable, self.status, self.retry_after = retryable, status, retry_after

    @property
    def refused(self) -> bool:
        """Whether the server refused the call (429 or 5xx): the concurrency is lowered while it does."""
        return self.status is not None and (self.status == 429 or self.status >= 500)


# --------------------------------------------------------------------------------------------- prompts

class Prompts(NamedTuple):
    """A step's system prompt and user template."""

    system: str
    user_template: str

    def render_input(self, text: str) -> str:
        """The user message: the template, a blank line, then the input text."""
        return f"{self.user_template}\n\n{text}"

    def sha256(self) -> dict[str, str]:
        return {
            "system": hashlib.sha256(self.system.encode("utf-8")).hexdigest(),
            "user_template": hashlib.sha256(self.user_template.encode("utf-8")).hexdigest(),
        }


def load_step_prompts(prompts: str | Path, files: Mapping[str, tuple[str, str]], what: str = "prompts",
                      error: type[Exception] = PmragError) -> dict[str, Prompts]:
    """``{step: Prompts}`` of each step's ``(system file, user file)`` in a prompt set.

    Parameters
    ----------
    prompts : the set, ``ja``, ``en`` or a folder.
    files : step name → the two file names without ``.txt``.
    what, error : a missing or empty file is ``error`` naming ``what``, the file and the set.

    Each text is read without a leading byte-order mark and trailing whitespace (the user template's closing
    blank line: :meth:`Prompts.render_input` puts it back before the input).
    """
    from pmrag.represent.representations import read_prompt

    out = {}
    for step, names in files.items():
        texts = []
        for name in names:
            try:
                text = read_prompt(prompts, name).lstrip("\ufeff").rstrip()
            except FileNotFoundError as exc:
                raise error(f"{what}: {exc}") from None
            if not text:
                raise error(f"{what}: {name}.txt of prompt set {prompts!r} is empty")
            texts.append(text)
        out[step] = Prompts(*texts)
    return out


# --------------------------------------------------------------------------------------------- the client

@dataclass(frozen=True)
class Reply:
    """What one call returned: its text, the model the response reports, and the tokens it reports."""

    text: str
    response_model: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None


def redacted(reply: Reply, secrets: Iterable[str] = ()) -> Reply:
    """``reply`` with its text and reported model redacted (:func:`pmrag.represent.privacy.redact`: the key of the
    environment, ``secrets`` and any credential header value)."""
    return dataclasses.replace(reply, text=privacy.redact(reply.text, secrets),
                               response_model=privacy.redact(reply.response_model, secrets))


def client_secrets(client) -> tuple[str, ...]:
    """The secrets a client names besides the environment's key (its ``secrets``; none for an offline one)."""
    return tuple(getattr(client, "secrets", ()))


def public_url(url: str) -> str:
    """``url`` without any user:password part, query or fragment (it is stored in provenance)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def error_text(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """``<type>: <message>`` of a client error, redacted (:func:`pmrag.represent.privacy.redact`), then cut to
    :data:`MAX_ERROR_CHARS`: redacted before the cut, which could leave a piece of a key too short to match (its
    first ``2 * MAX_ERROR_CHARS`` characters, so that a huge error body costs no time)."""
    text = privacy.redact(f"{type(exc).__name__}: {exc}"[: 2 * MAX_ERROR_CHARS], secrets)
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + "…"
    return text


class Client(Protocol):
    """What :func:`run_step` calls: a backend that turns one input text into a :class:`Reply`."""

    backend: str
    requested_model: str
    sdk_version: str | None
    calls_api: bool           # False: an offline stand-in, neither paced nor counted as a call
    # optional: ``secrets``, what the client sends besides the environment's key (redacted from every reply);
    # ``pure`` (a stand-in): its reply is a function of the text alone and it pickles, so its calls may run in
    # worker processes (:data:`STAND_IN_PARALLEL_CHARS`)

    def call(self, text: str) -> Reply: ...

    def provenance(self) -> dict: ...


class ResponsesClient:
    """The one way pmrag calls a model (module docstring): the Responses API through the official client, one
    attempt per :meth:`call`.

    Parameters
    ----------
    settings : the ``summarizer`` section (model, base_url, timeout_s, max_output_tokens).
    prompts : the step's system prompt and user template.
    sender : what the remote guard names (``"the openai graph extractor would send chat text to …"``).
    allow_remote, proxy : the study's permission and named proxy (:mod:`pmrag.represent.privacy`).

    ``secrets``: the key it sends (``OPENAI_API_KEY``; none for a loopback server's placeholder), redacted from
    its replies, errors and provenance.
    """

    backend = "openai"
    calls_api = True

    def __init__(self, settings: SummarizerSection, prompts: Prompts, *, sender: str = "the openai summarizer",
                 allow_remote: bool = False, proxy: str | None = None):
        import openai

        self.settings = settings
        self.prompts = prompts
        self.base_url = privacy.resolve_base_url(settings.base_url)
        privacy.require_remote_allowed(sender, self.base_url, allow_remote, setting="allow_remote")
        self._openai = openai
        self.sdk_version = openai.__version__
        self.requested_model = settings.model
        http_client = privacy.http_client(self.base_url, allow_remote=allow_remote, proxy=proxy,
                                          timeout_s=settings.timeout_s)
        self.secrets = privacy.secrets()     # the key it sends, unless that is a loopback server's placeholder
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=privacy.api_key_for(self.base_url), timeout=settings.timeout_s,
            max_retries=0, http_client=http_client,
        )

    def provenance(self) -> dict:
        """The base URL (without any user:password) and both prompts' SHA-256, redacted."""
        return privacy.redact_value({"base_url": public_url(self.base_url), "prompt_sha256": self.prompts.sha256()},
                                    self.secrets)

    def call(self, text: str) -> Reply:
        """One request for ``text`` (the input after the user template); a failure is a :class:`CallError`."""
        openai = self._openai
        try:
            response = self.client.responses.create(
                model=self.settings.model,
                instructions=self.prompts.system,
                input=self.prompts.render_input(text),
                max_output_tokens=self.settings.max_output_tokens,
            )
        except openai.APIStatusError as exc:   # RateLimitError (429) included
            raise CallError(error_text(exc, self.secrets), retryable=exc.status_code == 429 or exc.status_code >= 500,
                            status=exc.status_code, retry_after=retry_after_s(exc.response.headers)) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise CallError(error_text(exc, self.secrets), retryable=True) from exc
        except (openai.APIResponseValidationError, ValueError) as exc:  # includes json.JSONDecodeError
            raise CallError("malformed response: " + error_text(exc, self.secrets), retryable=False) from exc
        return redacted(self._reply(response), self.secrets)

    def _reply(self, response) -> Reply:
        from openai.types.responses import Response

        if not isinstance(response, Response):
            raise CallError(f"malformed response: expected a Response object, got {type(response).__name__}",
                            retryable=False)
        try:
            text = response.output_text
        except (AttributeError, TypeError) as exc:
            raise CallError("malformed response: " + error_text(exc, self.secrets), retryable=False) from exc
        if not isinstance(text, str) or not text.strip():
            detail = (f"status={getattr(response, 'status', None)!r}, "
                      f"incomplete_details={getattr(response, 'incomplete_details', None)!r}")
            raise CallError(privacy.redact(f"empty output_text ({detail})", self.secrets), retryable=False)
        usage = getattr(response, "usage", None)

        def tokens(name):
            value = getattr(usage, name, None)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        model = response.model if isinstance(response.model, str) else None
        return Reply(text=text, response_model=model, input_tokens=tokens("input_tokens"),
                     output_tokens=tokens("output_tokens"))


# --------------------------------------------------------------------------------------------- replies

def reply_object(text: str, what: str) -> dict:
    """A reply as one JSON object (one surrounding Markdown code fence allowed); otherwise a non-retryable
    :class:`CallError` naming ``what`` and the parser's position, never the reply's text."""
    body = text.strip()
    fence = re.fullmatch(r"```[A-Za-z]*\s*\n(.*?)\n?\s*```", body, flags=re.DOTALL)
    if fence:
        body = fence.group(1)
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise CallError(f"{what}: the reply is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                        retryable=False) from None
    if not isinstance(value, dict):
        raise CallError(f"{what}: the reply is JSON but not an object ({type(value).__name__})", retryable=False)
    return value


def require_keys(reply: dict, names: Sequence[str], what: str) -> None:
    """A non-retryable :class:`CallError` naming ``what`` and the first of ``names`` missing from ``reply``."""
    for name in names:
        if name not in reply:
            raise CallError(f"{what}: key {name!r} is missing", retryable=False)


# --------------------------------------------------------------------------------------------- steps

@dataclass(frozen=True)
class StepItem:
    """One call's worth of work: the item's id (unique in a run, the store's key), the input sent after the user
    template, and what the step's check needs besides the reply (a batch's memory ids, a question's labels)."""

    item_id: str
    text: str
    context: Any = None


class StepStopped(PmragError):
    """``stop_on_first_error``: a call failed; its row is recorded and the run is stopped.  ``report`` is what
    the run did up to the stop (:class:`StepReport`)."""

    def __init__(self, step: LLMStep, item_id: str, error: str, run_id: str, n_ok: int):
        self.step, self.item_id, self.error, self.run_id, self.n_ok = step.name, item_id, error, run_id, n_ok
        self.report: StepReport | None = None
        super().__init__(self.describe(step.noun))

    what = "{step}"      # how the message names the step ({step}: its name in the store)
    item_noun = True     # the item named with the step's noun ("batch b1"), or by its id alone

    def describe(self, noun: str) -> str:
        item = f"{noun} {self.item_id}" if self.item_noun else self.item_id
        return (f"{self.what.format(step=self.step)} stopped at {item} (run {self.run_id}, {self.n_ok} ok in this run): "
                f"{self.error}; rerun to resume (calls already ok are not made again), or set "
                f"'summarizer.failure_policy: retry'")


@dataclass(frozen=True)
class LLMStep:
    """An LLM step as data.

    ``name``: the step in the store (``graph_extractions.step``) and the report; ``title``: how report lines and
    progress bars name it; ``prompt_files``: its system and user prompt files (without ``.txt``);
    ``validate(reply text, item)``: the checked output, or ``(output, dropped)`` when the check drops parts of
    the reply (counted), or a non-retryable :class:`CallError`; ``noun``: one item, in messages; ``dropped``:
    the report's words after the number of dropped parts (``None``: the step drops nothing); ``stopped``: the
    :class:`StepStopped` a stop raises.
    """

    name: str
    title: str
    prompt_files: tuple[str, str]
    validate: Callable[[str, StepItem], Any]
    noun: str = "item"
    dropped: str | None = None
    stopped: type[StepStopped] = StepStopped


@dataclass(frozen=True)
class StepReport:
    """What one run of a step did.  ``seen == skipped + ok + error``; ``skipped_mismatched``: skipped items
    whose stored row another model or another input made (kept by the summaries' rule); ``dropped_ids``: parts
    of replies the check dropped (stored rows included)."""

    step: str
    title: str
    run_id: str
    backend: str
    requested_model: str
    status: str               # done | stopped
    seen: int
    skipped: int              # already ok in the store
    ok: int
    error: int
    calls: int                # API calls made (attempts, all items)
    started_at: str
    finished_at: str
    skipped_mismatched: int = 0
    dropped_ids: int = 0
    dropped_words: str | None = None

    def line(self) -> str:
        """One line: run, backend/model, status and counts; never a text or a key (redacted)."""
        text = (f"{self.title} run {self.run_id} ({self.backend}/{self.requested_model}): {self.status}; "
                f"seen {self.seen}, skipped {self.skipped} already ok, ok {self.ok}, error {self.error}, "
                f"calls {self.calls}")
        if self.dropped_words is not None:
            text += f"; {self.dropped_ids} {self.dropped_words}"
        if self.skipped_mismatched:
            text += f"; {self.skipped_mismatched} skipped rows came from another model or input"
        return privacy.redact(text)


@dataclass(frozen=True)
class StepResult:
    """The outputs of a run by item id (this run's ok calls and the stored rows it resumed) and its report."""

    outputs: dict[str, Any]
    report: StepReport


class CallPolicy:
    """How calls are paced, retried and bounded, and what a failed call does: the ``summarizer`` section's
    ``interval_s``, ``max_retries``, backoff (and ``backoff_jitter``), ``failure_policy``, ``concurrency`` and
    ``requests_per_minute`` (module docstring; :mod:`pmrag.represent.calls`).  One per backend and run: the steps of
    one extractor share it, so the first call of its second step waits the interval too.  ``sleep`` waits and
    ``clock`` tells the time (inject a recorder in tests)."""

    def __init__(self, settings: SummarizerSection, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.settings, self.sleep = settings, sleep
        self.limiter = Limiter(settings.concurrency, settings.requests_per_minute, sleep=sleep, clock=clock)
        self.calls = 0
        self._lock = threading.Lock()

    def before(self, attempt: int, item_id: str = "", error: CallError | None = None) -> None:
        """Wait before an item's ``attempt`` (0: its first): nothing before the first call of all, then the
        interval before an item's first attempt and the backoff (:meth:`retry_wait`) before a retry; longer while
        a refusal's Retry-After holds the calls or the budget spaces them."""
        with self._lock:
            first = not self.calls
            self.calls += 1
        if attempt:
            pause = self.retry_wait(attempt, item_id, error)
        else:
            pause = 0.0 if first else self.settings.interval_s
        self.limiter.wait(pause)

    def retry_wait(self, attempt: int, item_id: str = "", error: CallError | None = None) -> float:
        """The pause before ``attempt`` (≥ 1) of an item after ``error``: the Retry-After it asked for, else the
        backoff (``backoff_initial_s · 2^(attempt − 1)``, capped) shortened by its jitter share
        (:func:`~pmrag.represent.calls.jitter_fraction` of the item and attempt)."""
        return retry_pause(self.settings.backoff_s(attempt - 1), self.settings.backoff_jitter, item_id, attempt,
                           None if error is None else error.retry_after)

    def retries(self, error: CallError, attempts: int) -> bool:
        """Whether a call that failed with ``error`` after ``attempts`` attempts is tried again."""
        return error.retryable and attempts <= self.settings.max_retries

    @property
    def stops(self) -> bool:
        """Whether a failed item stops the run (``stop_on_first_error``)."""
        return self.settings.failure_policy == "stop_on_first_error"


@dataclass(frozen=True)
class Outcome:
    """One item's call after its retries: the last attempt's reply (``None`` if the client failed), the checked
    output and dropped count, the error (``None``: ok), the attempts and the last attempt's latency."""

    reply: Reply | None
    output: Any
    dropped: int | None
    error: CallError | None
    attempts: int
    latency_s: float


def call_item(step: LLMStep, item: StepItem, client: Client, policy: CallPolicy) -> Outcome:
    """Call ``client`` for one item and check the reply, retrying as ``policy`` says (a refusal lowers the calls
    in flight, a success raises them: :class:`~pmrag.represent.calls.Limiter`).  The reply is redacted
    (:func:`redacted`) before the check reads it, so the output is made from the redacted text."""
    secrets = client_secrets(client)
    limiter = policy.limiter
    attempts = 0
    error = None
    while True:
        if client.calls_api:
            policy.before(attempts, item.item_id, error)
        attempts += 1
        reply = output = dropped = error = None
        started_round = limiter.round
        start = time.perf_counter()
        try:
            reply = redacted(client.call(item.text), secrets)
            checked = step.validate(reply.text, item)
            output, dropped = checked if isinstance(checked, tuple) else (checked, None)
        except CallError as exc:
            output, error = None, exc
        latency = time.perf_counter() - start
        if client.calls_api:
            if error is not None and error.refused:
                limiter.refused(error.retry_after, started_round)
            elif reply is not None:
                limiter.succeeded()
        if error is None or not policy.retries(error, attempts):
            return Outcome(reply, output, dropped, error, attempts, latency)


@dataclass(frozen=True)
class StepProgress:
    """Where a run of a step stands, for a progress display: items done of ``total`` (resumed ones included;
    ``None``: unknown), those that needed a call and how many are left, ok and failed calls, the calls' rate
    (calls a second since the run started), the estimated seconds left (``None``: unknown), the calls allowed in
    flight now, and why calls wait now (``None``, ``"retry-after"``: the server asked, ``"budget"``:
    ``requests_per_minute``).  Holds no text."""

    title: str
    done: int
    total: int | None
    called: int
    ok: int
    error: int
    rate_per_s: float | None
    eta_s: float | None
    concurrency: int
    waiting: str | None

    def line(self) -> str:
        """``<title>: 12/40 (ok 11, error 1), 3.2/s, ETA 9 s, 8 in flight[, waiting: retry-after]``."""
        total = "?" if self.total is None else str(self.total)
        text = f"{self.title}: {self.done}/{total} (ok {self.ok}, error {self.error})"
        if self.rate_per_s is not None:
            text += f", {self.rate_per_s:.1f}/s"
        if self.eta_s is not None:
            text += f", ETA {self.eta_s:.0f} s"
        text += f", {self.concurrency} in flight"
        return text + (f", waiting: {self.waiting}" if self.waiting else "")


_PROGRESS: ContextVar[Callable[[StepProgress], None] | None] = ContextVar("step_progress", default=None)


@contextmanager
def reporting_progress(listener: Callable[[StepProgress], None]) -> Iterator[None]:
    """Within the block, every :func:`run_step` given no ``on_progress`` of its own reports to ``listener`` (the
    command line prints it; a stage cannot hand it down through its key-free runtime otherwise)."""
    token = _PROGRESS.set(listener)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


STAND_IN_COMMIT = 1000
"""Rows an offline stand-in's run commits at a time (a model call's row is committed as it returns)."""

STAND_IN_WORKERS = 2
STAND_IN_PARALLEL_CHARS = 2_000_000
"""A pure stand-in (``pure``: the extractive summarizer) runs its calls in :data:`STAND_IN_WORKERS` worker processes,
:data:`STAND_IN_COMMIT` items a call, when the texts it is to call for hold this many characters: at the paper's
scale (``params/scale.yaml``: 18,783 chunks, 12.8 M characters) the summaries' calls took 3.6 s instead of 5.5 s
on two cores.  Below it (the demo: 1,249 chunks, 0.4 M characters), starting the workers costs about what they
save."""


def run_step(step: LLMStep, items: Iterable[StepItem], *, client: Client, store: StepStore, policy: CallPolicy,
             run_id: str | None = None, total: int | None = None, progress: bool = False,
             on_progress: Callable[[StepProgress], None] | None = None) -> StepResult:
    """Run ``step`` over ``items``: resume from ``store``, call ``client`` for the rest, one committed row each.

    Parameters
    ----------
    step : what is asked and how replies are checked (:class:`LLMStep`).
    items : the items, ids unique; their order is the order in which calls start.
    client : the backend (:class:`ResponsesClient`, or an offline stand-in with ``calls_api = False``).
    store : where rows are committed and resumed from (:class:`ExtractionStore`, :class:`SummaryStore`).
    policy : pacing, retries, concurrency and failure policy (:class:`CallPolicy`).
    run_id : the run's id in the rows (default: a new one); total : the item count for the progress bar when
    ``items`` has no length; progress : show a progress bar; on_progress : called with a :class:`StepProgress`
    after each item (in this thread; default: for a client that calls an API, the listener of
    :func:`reporting_progress`, if any).

    Returns
    -------
    StepResult: the outputs by item id, in the items' order, and the :class:`StepReport`.  Raises
    ``step.stopped`` (its ``report`` set) under ``stop_on_first_error`` when an item fails: no call starts after
    it, the calls in flight are recorded, and the first failed item in the items' order is named.

    Up to ``settings.concurrency`` calls are in flight (:func:`~pmrag.represent.calls.run_bounded`); each row is
    committed in this thread as its call returns, so a killed run loses only the calls in flight, and what an item
    stores does not depend on the order in which calls return.  An offline stand-in (``calls_api`` false) runs
    one item at a time, or a pure one's many items in worker processes (:data:`STAND_IN_PARALLEL_CHARS`), and its
    rows are committed :data:`STAND_IN_COMMIT` at a time, in the items' order (and when the run ends or stops): a
    killed run loses at most that many items that cost nothing to redo, and a paper-scale corpus is not slowed by
    one transaction per chunk.

    Nothing it stores, returns or raises holds the API key or a credential header value: replies are redacted
    before they are checked (:func:`call_item`), errors before they are recorded, stored outputs before they are
    resumed, the report line as it is written (module docstring, **Redaction**).
    """
    from tqdm.auto import tqdm

    run = StepRun(step, run_id or uuid.uuid4().hex, client, policy.settings, _now())
    secrets = client_secrets(client)
    done = store.begin(run)
    found_outputs: dict[str, Any] = {}
    order: list[str] = []
    counts: Counter[str] = Counter()
    failed: list[tuple[int, str, str]] = []   # (position, item id, error) of failed items
    status = "stopped"   # until the loop ends normally
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    bar = tqdm(total=total, desc=f"{step.title} ({client.backend})", unit=step.noun, disable=not progress)
    limiter = policy.limiter if client.calls_api else Limiter(1)
    started = time.monotonic()
    on_progress = on_progress or (_PROGRESS.get() if client.calls_api else None)   # a stand-in's are not calls

    def report_progress() -> None:
        waiting = limiter.waiting()
        if not bar.disable:   # tqdm formats a postfix even for a hidden bar: 0.5 s of 22,329 cached summaries
            bar.set_postfix(ok=counts["ok"], error=counts["error"], in_flight=limiter.limit,
                            **({"waiting": waiting.reason} if waiting else {}), refresh=False)
        if on_progress is None:
            return
        called = counts["ok"] + counts["error"]
        finished = counts["skipped"] + called
        elapsed = time.monotonic() - started
        rate = called / elapsed if called and elapsed > 0 else None
        left = None if total is None else total - finished
        on_progress(StepProgress(step.title, finished, total, called, counts["ok"], counts["error"], rate,
                                 None if rate is None or left is None else left / rate, limiter.limit,
                                 waiting.reason if waiting else None))

    def to_call() -> Iterator[tuple[int, StepItem, str]]:
        """The items that need a call, in order; the others are resumed from the store on the way."""
        for position, item in enumerate(items):
            order.append(item.item_id)
            counts["seen"] += 1
            digest = input_sha256(item.text)
            found = done.get(item.item_id)
            if found is not None and found.resumes(digest, store.keeps_changed_input):
                counts["skipped"] += 1
                counts["skipped_mismatched"] += found.other_maker or found.input_sha256 != digest
                counts["dropped"] += found.dropped or 0
                found_outputs[item.item_id] = store.output(privacy.redact(found.stored, secrets))
                bar.update(1)
                report_progress()
                continue
            yield position, item, digest

    def call(job: tuple[int, StepItem, str]) -> Outcome:
        return call_item(step, job[1], client, policy)

    unsaved: list[Call] = []

    def save() -> None:
        if unsaved:
            with deferred_interrupt():   # a batch is committed whole, never left holding the write lock
                store.record(run, unsaved, counts)
                unsaved.clear()

    def record(job: tuple[int, StepItem, str], outcome: Outcome) -> bool:
        position, item, digest = job
        counts["calls"] += outcome.attempts if client.calls_api else 0
        counts["ok" if outcome.error is None else "error"] += 1
        counts["dropped"] += outcome.dropped or 0
        call = Call(item.item_id, len(item.text), digest, outcome,
                    None if outcome.error is None else privacy.redact(str(outcome.error), secrets))
        unsaved.append(call)
        if client.calls_api or len(unsaved) >= STAND_IN_COMMIT:
            save()   # a call's row is committed as it returns; a stand-in's, a batch at a time
        bar.update(1)
        report_progress()
        if outcome.error is None:
            found_outputs[item.item_id] = outcome.output
            return False
        failed.append((position, item.item_id, call.error))
        return policy.stops

    try:
        pure = getattr(client, "pure", False) and not client.calls_api
        jobs = list(to_call()) if pure else to_call()   # a pure stand-in's are listed first: how much is to call
        if pure and sum(len(job[1].text) for job in jobs) >= STAND_IN_PARALLEL_CHARS:
            with closing(stand_in_outcomes(step, client, policy.settings, [job[1] for job in jobs])) as outcomes:
                for job, outcome in zip(jobs, outcomes):
                    if record(job, outcome):
                        break
        else:
            run_bounded(jobs, call, limiter, record)
        if not (failed and policy.stops):
            status = "done"
    finally:
        save()
        bar.close()
        report = StepReport(
            step=step.name, title=step.title, run_id=run.run_id, backend=client.backend,
            requested_model=client.requested_model, status=status, seen=counts["seen"], skipped=counts["skipped"],
            ok=counts["ok"], error=counts["error"], calls=counts["calls"], started_at=run.started_at,
            finished_at=_now(), skipped_mismatched=counts["skipped_mismatched"], dropped_ids=counts["dropped"],
            dropped_words=step.dropped)
        store.finish(run, report)
    if failed and policy.stops:
        _, item_id, error = min(failed)
        stopped = step.stopped(step, item_id, error, run.run_id, counts["ok"])
        stopped.report = report
        raise stopped
    outputs = {item_id: found_outputs[item_id] for item_id in order if item_id in found_outputs}
    return StepResult(outputs, report)


def stand_in_outcomes(step: LLMStep, client: Client, settings: SummarizerSection, items: Sequence[StepItem]
                      ) -> Iterator[Outcome]:
    """:func:`call_item` of each item in turn for a pure stand-in, computed in :data:`STAND_IN_WORKERS` worker
    processes (:func:`~pmrag.core.parallel.ordered_map`), :data:`STAND_IN_COMMIT` items a call; yielded in the
    items' order, so what is stored is what the calls in this process would store."""
    from pmrag.core.parallel import ordered_map

    blocks = [(step, client, settings, items[start:start + STAND_IN_COMMIT])
              for start in range(0, len(items), STAND_IN_COMMIT)]
    for outcomes in ordered_map(_call_block, blocks, STAND_IN_WORKERS):
        yield from outcomes


def _call_block(step: LLMStep, client: Client, settings: SummarizerSection, items: Sequence[StepItem]
                ) -> list[Outcome]:
    """:func:`call_item` of each item, in a worker process (a stand-in calls no API: its policy paces nothing)."""
    policy = CallPolicy(settings)
    return [call_item(step, item, client, policy) for item in items]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def input_sha256(text: str) -> str:
    """The SHA-256 of an item's input as its store records it (UTF-8, hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------- stores

@dataclass(frozen=True)
class StepRun:
    """One run of a step, as its rows record it: the step, the run id, the client, the settings, the start."""

    step: LLMStep
    run_id: str
    client: Client
    settings: SummarizerSection
    started_at: str


@dataclass(frozen=True)
class Done:
    """An item's ``ok`` row: its output as stored, the SHA-256 of the input that made it, its dropped count,
    and whether another backend or model made it."""

    stored: Any
    input_sha256: str
    dropped: int | None = None
    other_maker: bool = False

    def resumes(self, digest: str, keeps_changed_input: bool = False) -> bool:
        """Whether this row stands for an item whose input now has the SHA-256 ``digest`` (:func:`input_sha256`):
        the same input, or any input when the store keeps a row whose input changed (``keeps_changed_input``: the
        summaries' rule)."""
        return keeps_changed_input or self.input_sha256 == digest


@dataclass(frozen=True)
class Call:
    """One item's call as a store records it: the input's length and SHA-256, the outcome, the error text
    (redacted; ``None``: ok)."""

    item_id: str
    input_chars: int
    input_sha256: str
    outcome: Outcome
    error: str | None

    @property
    def status(self) -> str:
        return "ok" if self.error is None else "error"

    def tokens(self) -> dict[str, int | None]:
        reply = self.outcome.reply
        return {"input_tokens": reply.input_tokens if reply else None,
                "output_tokens": reply.output_tokens if reply else None}


class StepStore(Protocol):
    """Where a step's calls are recorded and resumed from."""

    keeps_changed_input: bool    # an ok row is reused even when it was made from another input (counted)

    def begin(self, run: StepRun) -> Mapping[str, Done]: ...

    def output(self, stored) -> Any: ...

    def record(self, run: StepRun, calls: Sequence[Call], counts: Mapping[str, int]) -> None:
        """Commit ``calls``' rows in one transaction (``counts``: the run's counts after the last of them)."""

    def finish(self, run: StepRun, report: StepReport) -> None: ...


class ExtractionStore:
    """Table ``graph_extractions``: one row per step and item, the item's last outcome, the output as JSON.

    An item is resumed from an ``ok`` row of the same step, requested model, both prompts' SHA-256 (the client's
    ``prompts``) and input SHA-256; any other item is called (no row, an error row, another input, model or
    prompt: its old row stays until the item is called)."""

    keeps_changed_input = False

    def __init__(self, engine: Engine):
        self.engine = engine

    def begin(self, run: StepRun) -> dict[str, Done]:
        return self.done(run.step.name, run.client.requested_model, run.client.prompts)

    def done(self, step: str, requested_model: str, prompts: Prompts) -> dict[str, Done]:
        """The ``ok`` rows a run of ``step`` with this model and prompts resumes from, by item id (reads only)."""
        system_sha, user_sha = prompts.sha256().values()
        c = graph_extractions.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.item_id, c.input_sha256, c.output, c.dropped_ids).where(
                c.step == step, c.status == "ok", c.requested_model == requested_model,
                c.system_sha256 == system_sha, c.user_sha256 == user_sha)).all()
        return {row.item_id: Done(row.output, row.input_sha256, row.dropped_ids) for row in rows}

    def output(self, stored: str):
        return json.loads(stored)

    def record(self, run: StepRun, calls: Sequence[Call], counts: Mapping[str, int]) -> None:
        system_sha, user_sha = run.client.prompts.sha256().values()
        rows = [{
            "step": run.step.name, "item_id": call.item_id, "status": call.status,
            "requested_model": run.client.requested_model,
            "response_model": call.outcome.reply.response_model if call.outcome.reply else None,
            "sdk_version": run.client.sdk_version, "system_sha256": system_sha, "user_sha256": user_sha,
            "input_chars": call.input_chars, "input_sha256": call.input_sha256,
            "output": None if call.error else json.dumps(call.outcome.output, ensure_ascii=False, sort_keys=True),
            "error": call.error, "dropped_ids": call.outcome.dropped, **call.tokens(),
            "latency_s": call.outcome.latency_s, "attempts": call.outcome.attempts, "run_id": run.run_id,
            "created_at": _now(),
        } for call in calls]
        with self.engine.begin() as conn:
            conn.execute(insert(graph_extractions).prefix_with("OR REPLACE"), rows)

    def finish(self, run: StepRun, report: StepReport) -> None:
        pass


class SummaryStore:
    """Tables ``summaries`` (one row per chunk, its last outcome) and ``summary_runs`` (one row per run: the
    params, never the API key; SDK version, start and finish, counts, status ``running | done | stopped``).

    A chunk with an ``ok`` row is not summarized again, whichever backend or model made it from whichever input;
    such rows are counted (``skipped_mismatched``)."""

    keeps_changed_input = True

    def __init__(self, engine: Engine):
        self.engine = engine

    def begin(self, run: StepRun) -> dict[str, Done]:
        client, params = run.client, run.settings
        run_params = {**params.model_dump(mode="json"), **client.provenance()}
        if params.base_url:  # never a user:password part, whichever backend ran
            run_params["base_url"] = public_url(params.base_url)
        with self.engine.begin() as conn:
            conn.execute(insert(summary_runs), [{
                "run_id": run.run_id, "backend": client.backend,
                "params": privacy.redact(json.dumps(run_params, sort_keys=True, ensure_ascii=False),
                                         client_secrets(client)),
                "sdk_version": client.sdk_version, "started_at": run.started_at, "finished_at": None,
                "n_ok": 0, "n_error": 0, "status": "running",
            }])
            rows = conn.execute(select(summaries.c.chunk_id, summaries.c.backend, summaries.c.requested_model,
                                       summaries.c.input_sha256, summaries.c.summary)
                                .where(summaries.c.status == "ok")).all()
        return {row.chunk_id: Done(row.summary, row.input_sha256,
                                   other_maker=(row.backend, row.requested_model) != (client.backend,
                                                                                      client.requested_model))
                for row in rows}

    def output(self, stored: str) -> str:
        return stored

    def record(self, run: StepRun, calls: Sequence[Call], counts: Mapping[str, int]) -> None:
        client = run.client
        rows = []   # in the table's column order, for the driver's executemany (bulk_insert)
        for call in calls:
            reply, tokens = call.outcome.reply, call.tokens()
            rows.append((call.item_id, client.backend, client.requested_model, reply.response_model if reply else None,
                         client.sdk_version, call.input_chars, call.input_sha256,
                         None if call.error else call.outcome.output, call.status, call.error, tokens["input_tokens"],
                         tokens["output_tokens"], call.outcome.latency_s, call.outcome.attempts, run.run_id))
        with self.engine.begin() as conn:
            bulk_insert(conn, summaries, rows, prefix="OR REPLACE")
            conn.execute(update(summary_runs).where(summary_runs.c.run_id == run.run_id)
                         .values(n_ok=counts["ok"], n_error=counts["error"]))

    def finish(self, run: StepRun, report: StepReport) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(summary_runs).where(summary_runs.c.run_id == run.run_id).values(
                finished_at=report.finished_at, n_ok=report.ok, n_error=report.error, status=report.status))
