"""Bounded concurrent model calls: how many run at once, how fast they start, and what a refusal does.

Every model call of pmrag starts through a :class:`Limiter` (the LLM steps through
:class:`~pmrag.represent.llm.CallPolicy`, the ``openai`` embedder's batches through
:func:`~pmrag.represent.embed.embed_with_cache`) and is run by :func:`run_bounded`:

* **Concurrency** (a section's ``concurrency``, default 1: the paper's one call at a time): at most that many calls
  in flight, each in a daemon thread of its own (the ``openai`` client is thread-safe; an interrupted run exits at
  once).  At 1 no thread is started: the calls run one after the other in the caller's thread, as they always did.
* **AIMD**: a refusal (HTTP 429 or 5xx) halves the number of calls allowed in flight (at least 1; once per round:
  the refusals of calls started before the last decrease do not decrease it again); after as many successes in a
  row as are allowed, one more is allowed, up to ``concurrency``.  The server's refusals set the pace, not ours.
* **Retry-After** (:func:`retry_after_s`): a refusal's ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP
  date) holds every new call until that time, at most :data:`RETRY_AFTER_MAX_S` (the ``openai`` SDK's limit).
* **Budget** (a section's ``requests_per_minute``, default none): call starts are spaced ``60 / requests_per_minute``
  seconds apart, whichever thread makes them (no burst).
* **Results**: :func:`run_bounded` hands each call's result to the caller's thread as it arrives, so the caller
  commits it there (SQLite is written from one thread); a killed run loses only the calls in flight.  What is
  stored for an item never depends on the order in which calls return: each item's row is its own.

None of this can change a reply, so none of it enters a stage's key (the params declare these keys unkeyed,
:func:`pmrag.core.params.unkeyed_keys`).  Waits go through an injectable ``sleep`` and ``clock`` (tests record them).
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

RETRY_AFTER_MAX_S = 60.0
"""The longest Retry-After honoured (the ``openai`` SDK's rule: a longer or unreadable one falls back to the
backoff)."""

Job = TypeVar("Job")


def retry_after_s(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """The wait a refusal asks for, in seconds: ``retry-after-ms`` (milliseconds), else ``Retry-After`` as seconds
    or as an HTTP date (relative to ``now``, default the current UTC time); ``None`` when absent, unreadable,
    negative, not finite or beyond :data:`RETRY_AFTER_MAX_S`."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    seconds = None
    if "retry-after-ms" in lowered:
        seconds = _number(lowered["retry-after-ms"])
        seconds = None if seconds is None else seconds / 1000
    if seconds is None and "retry-after" in lowered:
        text = lowered["retry-after"].strip()
        seconds = _number(text)
        if seconds is None:
            try:
                when = parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
                seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
                seconds = max(seconds, 0.0)
    if seconds is None or not 0 <= seconds <= RETRY_AFTER_MAX_S:
        return None
    return seconds


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def jitter_fraction(item_id: str, attempt: int) -> float:
    """A number in [0, 1) fixed by the item and the attempt (SHA-256): the jitter of that retry's backoff, the same
    in every run and whichever thread makes it."""
    digest = hashlib.sha256(f"{item_id}\x1f{attempt}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def retry_pause(backoff_s: float, jitter: float, item_id: str, attempt: int, retry_after: float | None = None) -> float:
    """The pause before retry ``attempt`` (≥ 1) of an item: the refusal's ``retry_after`` when it gave one, else
    ``backoff_s`` shortened by ``jitter`` × :func:`jitter_fraction` of the item and attempt (exactly ``backoff_s``
    when ``jitter`` is 0)."""
    if retry_after is not None:
        return retry_after
    return backoff_s * (1 - jitter * jitter_fraction(item_id, attempt)) if jitter else backoff_s


class RateBudget:
    """``per_minute`` call starts a minute at most: each start is granted the first moment that is ``60 / per_minute``
    seconds after the previous grant (no burst)."""

    def __init__(self, per_minute: float):
        self.spacing = 60.0 / per_minute
        self._next: float | None = None
        self._lock = threading.Lock()

    def reserve(self, ready_at: float) -> float:
        """The start granted to a call ready at ``ready_at`` (clock seconds)."""
        with self._lock:
            start = ready_at if self._next is None else max(ready_at, self._next)
            self._next = start + self.spacing
            return start


@dataclass(frozen=True)
class Waiting:
    """Why calls wait now: until ``until`` (clock seconds) on a refusal's Retry-After or the budget."""

    reason: str            # "retry-after" | "budget"
    until: float


class Limiter:
    """How many calls may be in flight (AIMD below ``concurrency``), when the next may start (a refusal's
    Retry-After, the ``requests_per_minute`` budget), and the waits (module docstring).  Thread-safe."""

    def __init__(self, concurrency: int = 1, requests_per_minute: float | None = None, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer ≥ 1, got {concurrency!r}")
        self.maximum = self.limit = concurrency
        self.budget = RateBudget(requests_per_minute) if requests_per_minute else None
        self.sleep, self.clock = sleep, clock
        self.round = 0                   # decreases so far: a refusal from an older round does not decrease again
        self.refusals = 0
        self.lowest = concurrency
        self._successes = 0
        self._hold_until = float("-inf")
        self._waiting: Waiting | None = None
        self._lock = threading.Lock()

    def wait(self, pause: float = 0.0) -> float:
        """Sleep ``pause`` seconds, or longer when a refusal's Retry-After or the budget says so; returns the wait."""
        now = self.clock()
        waited, reason = pause, None
        with self._lock:
            if self._hold_until > now + waited:
                waited, reason = self._hold_until - now, "retry-after"
        if self.budget is not None:
            start = self.budget.reserve(now + waited)
            if start > now + waited:
                waited, reason = start - now, "budget"
        if waited > 0:
            if reason is not None:
                self._waiting = Waiting(reason, now + waited)
            self.sleep(waited)
        return waited

    def refused(self, retry_after: float | None, started_round: int) -> None:
        """A call started in ``started_round`` was refused (429, 5xx): hold new calls for ``retry_after`` seconds,
        and halve the calls allowed in flight unless that happened since the call started."""
        with self._lock:
            self.refusals += 1
            self._successes = 0
            if retry_after is not None:
                self._hold_until = max(self._hold_until, self.clock() + retry_after)
            if started_round == self.round and self.limit > 1:
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self.round += 1

    def succeeded(self) -> None:
        """A call returned: after ``limit`` successes in a row, one more call may be in flight (up to the maximum)."""
        with self._lock:
            self._successes += 1
            if self.limit < self.maximum and self._successes >= self.limit:
                self.limit += 1
                self._successes = 0

    def waiting(self) -> Waiting | None:
        """Why calls wait now (``None``: they do not)."""
        found = self._waiting
        return found if found is not None and found.until > self.clock() else None


_END = object()


def run_bounded(jobs: Iterable[Job], call: Callable[[Job], Any], limiter: Limiter,
                done: Callable[[Job, Any], bool | None]) -> None:
    """``call(job)`` for every job, at most ``limiter.limit`` at once, started in the jobs' order.

    ``done(job, result)`` runs in this thread as each call returns; when it returns true no further job starts,
    and the calls in flight are still handed to ``done``.  ``jobs`` is read lazily, in this thread, only when a
    call may start.  An exception of ``call`` is raised here (the calls in flight are not waited for).  With
    ``limiter.maximum`` 1 every call runs in this thread.  Each other call runs in a daemon thread of its own, so
    an interrupted run (Ctrl-C) exits at once: it loses the calls in flight, never what ``done`` committed.
    """
    if limiter.maximum == 1:
        for job in jobs:
            if done(job, call(job)):
                return
        return
    pending = iter(jobs)
    returned: queue.SimpleQueue = queue.SimpleQueue()
    in_flight, stopping = 0, False

    def run(job: Job) -> None:
        try:
            returned.put((job, True, call(job)))
        except BaseException as exc:   # handed to the caller's thread, raised there
            returned.put((job, False, exc))

    while True:
        while not stopping and in_flight < limiter.limit:
            job = next(pending, _END)
            if job is _END:
                stopping = True
                break
            threading.Thread(target=run, args=(job,), name="pmrag-call", daemon=True).start()
            in_flight += 1
        if not in_flight:
            return
        job, ok, value = returned.get()
        in_flight -= 1
        if not ok:
            raise value
        if done(job, value):
            stopping = True
