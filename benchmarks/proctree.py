"""The process tree under a pid, read from /proc (Linux): what the memory benchmarks sum their sizes over."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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
