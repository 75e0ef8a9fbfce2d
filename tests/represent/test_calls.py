"""The bounded call runner's pieces: Retry-After, the jitter, the budget, AIMD and run_bounded."""

import threading
import time
from datetime import datetime, timezone

import pytest

from pmrag.represent.calls import (RETRY_AFTER_MAX_S, Limiter, RateBudget, jitter_fraction, retry_after_s,
                                   retry_pause, run_bounded)


class FakeTime:
    """A clock that only the recorded sleeps move."""

    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self):
        return self.now


# ------------------------------------------------------------------------------------------ Retry-After

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("headers, seconds", [
    ({"Retry-After": "2"}, 2.0),
    ({"retry-after": "0.5"}, 0.5),
    ({"Retry-After-Ms": "1500", "Retry-After": "9"}, 1.5),          # the milliseconds win
    ({"retry-after-ms": "soon", "Retry-After": "3"}, 3.0),            # unreadable: the other one
    ({"Retry-After": "Tue, 01 Dec 2026 12:00:30 GMT"}, 30.0),         # an HTTP date
    ({"Retry-After": "Tue, 01 Dec 2026 11:59:00 GMT"}, 0.0),          # a date past: no wait
    ({"Retry-After": str(RETRY_AFTER_MAX_S + 1)}, None),              # longer than the SDK honours
    ({"Retry-After": "-1"}, None), ({"Retry-After": "nan"}, None), ({"Retry-After": "later"}, None),
    ({}, None), (None, None),
])
def test_retry_after_reads_seconds_milliseconds_and_http_dates(headers, seconds):
    assert retry_after_s(headers, now=NOW) == seconds


def test_the_jitter_is_fixed_by_item_and_attempt_and_spread_over_0_1():
    values = [jitter_fraction(f"item{i}", 1) for i in range(200)]
    assert all(0 <= v < 1 for v in values) and min(values) < 0.1 and max(values) > 0.9
    assert jitter_fraction("a", 1) == jitter_fraction("a", 1) != jitter_fraction("a", 2)


def test_a_retry_pauses_for_the_retry_after_else_the_backoff_less_its_jitter_share():
    assert retry_pause(4.0, 0.25, "a", 2, retry_after=0.3) == 0.3
    assert retry_pause(4.0, 0.0, "a", 2) == 4.0
    assert retry_pause(4.0, 0.25, "a", 2) == pytest.approx(4.0 * (1 - 0.25 * jitter_fraction("a", 2)), rel=1e-12)
    assert 3.0 < retry_pause(4.0, 0.25, "a", 2) <= 4.0


# ------------------------------------------------------------------------------------------ the limiter

def test_the_budget_spaces_call_starts_without_burst():
    budget = RateBudget(per_minute=120)                              # one start every 0.5 s
    assert [budget.reserve(10.0) for _ in range(3)] == [10.0, 10.5, 11.0]
    assert budget.reserve(20.0) == 20.0                               # idle long enough: at once


def test_the_limiter_waits_the_pause_then_the_budget():
    t = FakeTime()
    limiter = Limiter(2, requests_per_minute=60, sleep=t.sleep, clock=t.clock)
    assert [limiter.wait(0.25), limiter.wait(0.0), limiter.wait(0.25)] == [0.25, 1.0, 1.0]   # starts 1 s apart
    assert t.sleeps == [0.25, 1.0, 1.0] and t.now == 102.25


def test_a_refusal_halves_the_calls_in_flight_once_per_round_and_successes_raise_them():
    limiter = Limiter(8)
    limiter.refused(None, limiter.round)
    assert (limiter.limit, limiter.round) == (4, 1)
    limiter.refused(None, 0)                                          # started before the decrease: no second halving
    assert limiter.limit == 4
    limiter.refused(None, limiter.round)
    limiter.refused(None, limiter.round)
    limiter.refused(None, limiter.round)
    assert (limiter.limit, limiter.lowest, limiter.refusals) == (1, 1, 5)
    for _ in range(1 + 2 + 3):                                        # additive: limit successes for one more
        limiter.succeeded()
    assert limiter.limit == 4
    for _ in range(100):
        limiter.succeeded()
    assert limiter.limit == 8 == limiter.maximum                      # never above the setting


def test_a_retry_after_holds_every_new_call_and_is_reported_as_waiting():
    t = FakeTime()
    limiter = Limiter(4, sleep=t.sleep, clock=t.clock)
    limiter.refused(2.0, limiter.round)
    assert limiter.waiting() is None                                  # nobody waits yet
    limiter.wait(0.2)
    assert t.sleeps == [2.0]
    t.now -= 1                                                        # as seen while that wait lasts
    assert limiter.waiting().reason == "retry-after"
    t.now += 1
    assert limiter.waiting() is None
    limiter.wait(0.2)
    assert t.sleeps == [2.0, 0.2]


def test_the_limiter_refuses_a_concurrency_below_one():
    for value in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="concurrency must be an integer"):
            Limiter(value)


# ------------------------------------------------------------------------------------------ run_bounded

def test_run_bounded_starts_jobs_in_order_keeps_at_most_the_limit_in_flight_and_hands_results_here():
    lock, state = threading.Lock(), {"now": 0, "most": 0}
    started, handed = [], []
    caller = threading.get_ident()

    def call(job):
        with lock:
            started.append(job)
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.02 if job % 3 else 0.04)
        with lock:
            state["now"] -= 1
        return job * 10

    def done(job, result):
        assert threading.get_ident() == caller
        handed.append((job, result))

    run_bounded(range(12), call, Limiter(4), done)
    assert started[:4] == [0, 1, 2, 3] and sorted(started) == list(range(12))
    assert sorted(handed) == [(j, j * 10) for j in range(12)] and state["most"] == 4


def test_run_bounded_with_one_call_at_a_time_runs_in_this_thread():
    caller, seen = threading.get_ident(), []
    run_bounded([1, 2, 3], lambda job: seen.append(threading.get_ident() == caller) or job, Limiter(1),
                lambda job, result: job == 2)
    assert seen == [True, True]                                       # stopped after job 2


def test_run_bounded_stops_starting_jobs_once_done_says_stop_but_hands_the_calls_in_flight():
    started, handed = [], []

    def call(job):
        started.append(job)
        time.sleep(0.05 if job == 0 else 0.02)
        return job

    run_bounded(range(10), call, Limiter(3), lambda job, result: handed.append(job) or job == 1)
    assert sorted(started) == sorted(handed) and len(started) < 10 and 1 in handed


def test_run_bounded_raises_a_calls_exception_here():
    def call(job):
        if job == 2:
            raise RuntimeError("boom")
        return job

    with pytest.raises(RuntimeError, match="boom"):
        run_bounded(range(5), call, Limiter(2), lambda job, result: None)
