"""An ordered, bounded process-pool map: the helper behind ingest and chunking on two cores."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import islice


def ignore_interrupts() -> None:
    """Worker processes ignore Ctrl-C: the parent handles it (one line, exit 130) and ends them."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def ordered_map(function: Callable, calls: Sequence[tuple], workers: int) -> Iterator:
    """``function(*args)`` for each ``args`` in ``calls``, yielded in input order.

    With ``workers`` ≥ 1 and more than one call, the calls run in that many worker processes, and at
    most ``workers + 1`` results are in flight or waiting, so a slow consumer never holds every result in
    memory at once.  Otherwise they run here, one at a time.
    """
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
