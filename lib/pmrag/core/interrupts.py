"""How Ctrl-C (SIGINT) is handled where the default would do harm: ignored by worker processes
(:func:`ignore_interrupts`) and while the runner stops its notebooks (:func:`sigint_ignored`), held off while a commit
is written (:func:`deferred_interrupt`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def ignore_interrupts() -> None:
    """Worker processes ignore Ctrl-C: the parent handles it (one line, exit 130) and ends them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored for the duration (only the main thread can change signal handling)."""
    with _sigint_handled_by(signal.SIG_IGN):
        yield


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """A Ctrl-C (SIGINT) that arrives during the block is raised as :class:`KeyboardInterrupt` when the block ends.

    Raised in the middle of a commit, the interrupt could leave the transaction open on a connection that the
    traceback still holds, with SQLite's write lock taken. The ``finally`` that then commits what was done waited
    for that lock for the store's whole busy timeout (an hour). This was seen with Ctrl-C during the paper-scale
    summaries, whose batch commits take much of the time of the process that records them. Only the main thread
    receives signals, so elsewhere the block runs as it is. So does a process whose SIGINT handler is not
    Python's default (one that ignores it, or a handler of its own)."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    received: list[int] = []
    with _sigint_handled_by(lambda signum, _frame: received.append(signum)):
        yield
    if received:
        raise KeyboardInterrupt


@contextmanager
def _sigint_handled_by(handler) -> Iterator[None]:
    """SIGINT handled by ``handler`` for the block, the previous handling restored after it; in a thread other
    than the main one (which alone may change it) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
