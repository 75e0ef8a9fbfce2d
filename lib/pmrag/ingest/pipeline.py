"""Ingest many files: worker processes parse the next files while this process stores the current one.

Parsing (JSON, records, message IDs) takes about twice as long as the SQLite inserts at the paper's
scale, so two parsing workers keep the storing process busy on a two-core machine.  Workers send back
plain row tuples instead of record objects, which is what makes the hand-over cheap.  Results are stored
in input order, so the store is the same as with a sequential loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from pmrag.core.parallel import ordered_map
from pmrag.core.params import DatasetSection
from pmrag.ingest import read_source
from pmrag.core.records import SourceBatch


def read_rows(path, fmt: str, permissive: bool, options: DatasetSection) -> tuple[SourceBatch, list[tuple]]:
    """Read one file and turn its messages into store rows; the returned batch keeps no message records."""
    from pmrag.ingest.store import message_rows

    batch = read_source(path, fmt, permissive=permissive, options=options)
    rows = message_rows(batch)
    batch.messages = []
    return batch, rows


def read_all(jobs: Sequence[tuple[Path, str]], *, permissive: bool = False, options: DatasetSection | None = None,
             workers: int = 2) -> Iterator[tuple[SourceBatch, list[tuple]]]:
    """``(batch, rows)`` for each ``(path, format)`` job, in input order, parsed ahead in ``workers`` processes.

    ``workers=0`` parses in this process, one file at a time.
    """
    options = options or DatasetSection()
    yield from ordered_map(read_rows, [(path, fmt, permissive, options) for path, fmt in jobs], workers)
