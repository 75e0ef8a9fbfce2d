"""An ordered, bounded process-pool map: the helper behind ingest, chunking, tokenizing and the extractive summaries
on two cores; and the switch that keeps them in this process (:func:`in_this_process`).

Worker processes pay off where a new process is cheap (a forked one starts in milliseconds) and the work is large.
Inside a Dask worker neither holds: the worker was started with ``spawn``, so every helper process it starts
imports pmrag again (about 2 s each), which costs more than a small study's whole ingest; and the cohort already
keeps every core busy with one participant per worker.  The cohort's task therefore runs its study
:func:`in_this_process`; the rows, their order and the counts are those of the process-pool path.

Workers are forked only from a process that runs a single thread; beside other threads a fork server starts them
(:func:`process_context`).
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice

from pmrag.core.interrupts import ignore_interrupts

# What the worker functions need, imported once by the fork server (not again by every worker it forks).
WORKER_MODULES = ("pmrag.ingest.pipeline", "pmrag.chunking.store", "pmrag.retrieve.lexical",
                  "pmrag.represent.summarize")

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


def process_context():
    """How worker processes are started: forked from this process while it runs one thread; otherwise by the fork
    server (``forkserver``, or ``spawn`` where the platform has none).

    A fork copies the locks that other threads hold at that moment, held forever in the child, and a child that
    needs one never returns (Python 3.12 warns of it; 3.14 made the fork server the default).  Threads run beside
    the stages when the study executes notebooks while its stages are computed, in a Jupyter kernel, and beside a
    Dask client.  The fork server is one single-threaded process per session that imports :data:`WORKER_MODULES`
    once; each worker is forked from it, ready, without importing them again."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(WORKER_MODULES))
        return context
    return multiprocessing.get_context("spawn")


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
    with ProcessPoolExecutor(max_workers=min(workers, len(calls)), mp_context=process_context(),
                             initializer=ignore_interrupts) as pool:
        remaining = iter(calls)
        pending = deque(pool.submit(function, *args) for args in islice(remaining, workers + 1))
        while pending:
            result = pending.popleft().result()
            for args in remaining:
                pending.append(pool.submit(function, *args))
                break
            yield result
