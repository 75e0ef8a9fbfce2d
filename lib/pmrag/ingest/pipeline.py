"""Ingest many files: parse file i+1 in a worker process while this process stores file i.

Parsing (JSON, records, message IDs) and SQLite inserts each take about half of ingest time at the paper's
scale, so on two cores they overlap.  The worker sends back plain row tuples instead of record objects,
which is what makes the hand-over cheap.  Results are stored in input order, so the store is the same as
with a sequential loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from pmrag.ingest import IngestOptions, read_source
from pmrag.records import SourceBatch


def read_rows(path, fmt: str, permissive: bool, options: IngestOptions) -> tuple[SourceBatch, list[tuple]]:
    """Read one file and turn its messages into store rows; the returned batch keeps no message records."""
    from pmrag.store import message_rows

    batch = read_source(path, fmt, permissive=permissive, options=options)
    rows = message_rows(batch)
    batch.messages = []
    return batch, rows


def read_all(jobs: Sequence[tuple[Path, str]], *, permissive: bool = False, options: IngestOptions | None = None,
             parallel: bool = True) -> Iterator[tuple[SourceBatch, list[tuple]]]:
    """``(batch, rows)`` for each ``(path, format)`` job, in order; parsed one file ahead in a worker."""
    options = options or IngestOptions()
    if not parallel or len(jobs) < 2:
        for path, fmt in jobs:
            yield read_rows(path, fmt, permissive, options)
        return
    with ProcessPoolExecutor(max_workers=1) as pool:
        pending = [pool.submit(read_rows, path, fmt, permissive, options) for path, fmt in jobs]
        for future in pending:
            yield future.result()
