"""Ctrl-C held off while a commit is written (:func:`deferred_interrupt`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """A Ctrl-C (SIGINT) that arrives during the block is raised as :class:`KeyboardInterrupt` when the block ends.

    Raised in the middle of a commit, the interrupt could leave the transaction open on a connection that the
    traceback still holds, with SQLite's write lock taken. The ``finally`` that then commits what was done waited
    for that lock for the store's whole busy timeout (an hour). This was seen with Ctrl-C during the paper-scale
    summaries, whose batch commits take much of the time of the process that records them. Only the main thread
    receives signals, so elsewhere the block runs as it is. So does a process whose SIGINT handler is not
    Python's default (one that ignores it, or a handler of its own)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
