"""Pluggable source adapters.  Each turns one file into a :class:`~pmrag.records.SourceBatch`.

Adapter signature: ``read(path: Path, *, permissive: bool = False, options: DatasetSection) -> SourceBatch``; the
adapters read ``options.unknown_time_offset``, the choice the paper leaves open: a message without a time is
placed at its date 00:00:00 plus N seconds, N being its ``date_order`` (position within the date; default)
or its file-wide ``source_order``.  The paper says "source_order seconds"; counted file-wide, that would push
an untimed message of a busy file hours or days past its own date, so the default counts within the date,
which is the paper's rule whenever source_order restarts per date.
In strict mode (the default) malformed input raises :class:`~pmrag.errors.InputError` naming the file
and the line or key; in permissive mode the bad record is added to ``batch.rejected`` and skipped.

:func:`stream_source` hands a file's messages on one at a time: a LINE ``.txt`` export (which can be
hundreds of megabytes) is parsed as it is read (:data:`STREAMED_FORMATS`); the JSON formats, small by
nature, are parsed whole and their messages handed out of the batch.  A batch with nothing to store
(``batch.empty``: an empty file, a header without messages, ``{}``) is not an error; callers warn about it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from pmrag.core.errors import InputError
from pmrag.core.params import DatasetSection
from pmrag.core.records import MessageRecord, SourceBatch


Adapter = Callable[..., SourceBatch]

FORMATS = ("line-json", "line-txt", "locomo", "questions-json")

STREAMED_FORMATS = ("line-txt",)
"""Formats parsed as they are read (:func:`stream_source`); the others are read whole."""


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
    """Read one file with the adapter for ``fmt`` (``auto`` detects it) and check its counts reconcile.

    Every message is held in ``batch.messages``; to store a large file use :func:`stream_source`.
    """
    path, fmt = _resolve(path, fmt)
    batch = get_adapter(fmt)(path, permissive=permissive, options=options or DatasetSection())
    batch.check_reconciled()
    return batch


def stream_source(path, fmt: str = "auto", *, permissive: bool = False, options: DatasetSection | None = None
                  ) -> tuple[SourceBatch, Iterator[MessageRecord]]:
    """One file's batch and its messages, one at a time; the batch holds none of them.

    The batch's counts, rejections and dialect are complete, and checked to reconcile, once the iterator is
    exhausted (``batch.streamed_messages`` counts the messages it handed on).  A format in
    :data:`STREAMED_FORMATS` is parsed as the iterator advances (memory does not grow with the file); the
    others are parsed here, whole.
    """
    path, fmt = _resolve(path, fmt)
    options = options or DatasetSection()
    if fmt in STREAMED_FORMATS:
        from pmrag.ingest.line_txt import stream

        batch, records = stream(path, permissive=permissive, options=options)
    else:
        batch = get_adapter(fmt)(path, permissive=permissive, options=options)
        records, batch.messages = iter(batch.messages), []
    return batch, _counted(batch, records)


def _resolve(path, fmt: str) -> tuple[Path, str]:
    """The path of an existing file and its format (``auto`` detected)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "file not found")
    return path, detect_format(path) if fmt == "auto" else fmt


def _counted(batch: SourceBatch, records: Iterator[MessageRecord]) -> Iterator[MessageRecord]:
    """``records``, counted into ``batch.streamed_messages``; the batch's counts are checked at the end."""
    for record in records:
        batch.streamed_messages += 1
        yield record
    batch.check_reconciled()
