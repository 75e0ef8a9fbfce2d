"""The process tree under a pid, read from /proc (Linux): what the memory benchmarks sum their sizes over."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

PSS_SHARE = 0.1
"""The most of one CPU the memory samples may take: reading a process's PSS walks its page tables in the kernel, 55–75
ms for the tree of a paper-scale study; sampled every 50 ms (each sample taking 90–220 ms of wall time), it took a
quarter to two fifths of one of the two CPUs a study was being timed on (py-spy: 48 s of a 145 s run)."""


def pause_after_sample(sample_cpu_s: float, interval: float = 0.0) -> float:
    """Seconds to wait after a memory sample that took ``sample_cpu_s`` of the sampler's CPU: at least ``interval``,
    and ``sample_cpu_s · (1/PSS_SHARE − 1)`` at least, so that sampling takes at most :data:`PSS_SHARE` of one CPU
    (a peak shorter than the pause can be missed)."""
    return max(interval, sample_cpu_s * (1 / PSS_SHARE - 1))


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant still running (a child that exits while it is read is skipped)."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                pass
    return pids


def pss_kb(pid: int) -> int:
    """The proportional set size of ``pid`` in KiB (``Pss`` of /proc/<pid>/smaps_rollup: shared pages divided among
    the processes that map them, so a tree's sizes add up); 0 for a process that is gone."""
    return rss_pss_kb(pid)[1]


def rss_pss_kb(pid: int) -> tuple[int, int]:
    """``(Rss, Pss)`` of ``pid`` in KiB (/proc/<pid>/smaps_rollup; :func:`pss_kb`); ``(0, 0)`` for a process that is
    gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


class TreeMemory:
    """Peak over time of the summed RSS and PSS of a process (default: this one) and all its descendants, sampled
    in a thread every ``interval`` seconds at most, and no more often than :func:`pause_after_sample` allows: the
    samples otherwise took CPU from the work being timed (one comparison, minutes apart on a drifting machine: an
    ingest's best pass 14.0 s sampled every 20 ms, 12.8 s throttled, 10.0 s unsampled).  A context manager:
    sampling from entry to exit."""

    def __init__(self, pid: int | None = None, interval: float = 0.02):
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.peak_rss_kb = self.peak_pss_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            used = time.thread_time()
            sizes = [rss_pss_kb(p) for p in process_tree(self.pid)]
            self.peak_rss_kb = max(self.peak_rss_kb, sum(rss for rss, _ in sizes))
            self.peak_pss_kb = max(self.peak_pss_kb, sum(pss for _, pss in sizes))
            self._stop.wait(pause_after_sample(time.thread_time() - used, self.interval))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def cpu_seconds(pid: int) -> float | None:
    """User + system seconds ``pid`` has run so far (``utime`` + ``stime`` of /proc/<pid>/stat, its own, not its
    children's); None for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
