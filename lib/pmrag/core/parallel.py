"""An ordered, bounded process-pool map: the helper behind ingest and chunking on two cores; and the switch that
keeps them in this process (:func:`in_this_process`).

Worker processes pay off where a new process is cheap (a forked one starts in milliseconds) and the work is large.
Inside a Dask worker neither holds: the worker was started with ``spawn``, so every helper process it starts
imports pmrag again (about 2 s each), which costs more than a small study's whole ingest; and the cohort already
keeps every core busy with one participant per worker.  The cohort's task therefore runs its study
:func:`in_this_process`; the rows, their order and the counts are those of the process-pool path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice

_IN_THIS_PROCESS: ContextVar[bool] = ContextVar("pmrag_in_this_process", default=False)


@contextmanager
def in_this_process() -> Iterator[None]:
    """Within the block (in this thread), ingest, chunking and tokenization start no worker process: every
    ``workers`` setting counts as 0 (:func:`worker_processes`).  Same results, no process start-up."""
    token = _IN_THIS_PROCESS.set(True)
    try:
        yield
    finally:
        _IN_THIS_PROCESS.reset(token)


def worker_processes(workers: int) -> int:
    """The worker processes to start for a ``workers`` setting: ``workers``, or 0 inside :func:`in_this_process`."""
    return 0 if _IN_THIS_PROCESS.get() else workers


def ignore_interrupts() -> None:
    """Worker processes ignore Ctrl-C: the parent handles it (one line, exit 130) and ends them."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def ordered_map(function: Callable, calls: Sequence[tuple], workers: int) -> Iterator:
    """``function(*args)`` for each ``args`` in ``calls``, yielded in input order.

    With ``workers`` ≥ 1 and more than one call, the calls run in that many worker processes, and at
    most ``workers + 1`` results are in flight or waiting, so a slow consumer never holds every result in
    memory at once.  Otherwise (or :func:`in_this_process`) they run here, one at a time.
    """
    workers = worker_processes(workers)
    if workers < 1 or len(calls) < 2:
        for args in calls:
            yield function(*args)
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(calls)), initializer=ignore_interrupts) as pool:
        remaining = iter(calls)
        pending = deque(pool.submit(function, *args) for args in islice(remaining, workers + 1))
        while pending:
            result = pending.popleft().result()
            for args in remaining:
                pending.append(pool.submit(function, *args))
                break
            yield result
