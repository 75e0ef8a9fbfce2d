"""The process tree under a pid, read from /proc (Linux): what the memory benchmarks sum their sizes over."""

from __future__ import annotations

import os
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
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float | None:
    """User + system seconds ``pid`` has run so far (``utime`` + ``stime`` of /proc/<pid>/stat, its own, not its
    children's); None for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
