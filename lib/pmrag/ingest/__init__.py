"""Pluggable source adapters.  Each turns one file into a :class:`~pmrag.records.SourceBatch`.

Adapter signature: ``read(path: Path, *, permissive: bool = False, options: DatasetSection) -> SourceBatch``; the
adapters read ``options.unknown_time_offset``, the choice the paper leaves open: a message without a time is
placed at its date 00:00:00 plus N seconds, N being its ``date_order`` (position within the date; default)
or its file-wide ``source_order``.  The paper says "source_order seconds"; counted file-wide, that would push
an untimed message of a busy file hours or days past its own date, so the default counts within the date,
which is the paper's rule whenever source_order restarts per date.
In strict mode (the default) malformed input raises :class:`~pmrag.errors.InputError` naming the file
and the line or key; in permissive mode the bad record is added to ``batch.rejected`` and skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import SourceBatch


Adapter = Callable[..., SourceBatch]

FORMATS = ("line-json", "line-txt", "locomo", "questions-json")


def get_adapter(fmt: str) -> Adapter:
    if fmt == "line-json":
        from pmrag.ingest.line_json import read
    elif fmt == "line-txt":
        from pmrag.ingest.line_txt import read
    elif fmt == "locomo":
        from pmrag.ingest.locomo import read
    elif fmt == "questions-json":
        from pmrag.ingest.questions_json import read
    else:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)} or 'auto'")
    return read


def detect_format(path: Path) -> str:
    """Guess the format from the file name and its first bytes."""
    path = Path(path)
    if path.suffix.lower() == ".txt":
        return "line-txt"
    if path.suffix.lower() != ".json":
        raise InputError(path, None, "cannot tell the format from the extension; expected .json or .txt (or pass --format)")
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
    if head.startswith(b"["):
        return "locomo"
    if head.startswith(b"{") and b'"questions"' in head[:200]:
        return "questions-json"
    if head.startswith(b"{"):
        return "line-json"
    raise InputError(path, "line 1", "expected a JSON object (LINE JSON export) or a JSON list (LoCoMo)")


def read_source(path, fmt: str = "auto", *, permissive: bool = False, options: DatasetSection | None = None) -> SourceBatch:
    """Read one file with the adapter for ``fmt`` (``auto`` detects it) and check its counts reconcile."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "file not found")
    fmt = detect_format(path) if fmt == "auto" else fmt
    batch = get_adapter(fmt)(path, permissive=permissive, options=options or DatasetSection())
    batch.check_reconciled()
    return batch
