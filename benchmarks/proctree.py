"""The process tree under a pid, read from /proc (Linux): what the memory benchmarks sum their sizes over."""

from __future__ import annotations

from pathlib import Path


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
