"""Ingest many files: worker processes parse the next files while this process stores the current one.

Parsing (JSON, records, message IDs) takes about twice as long as the SQLite inserts at the paper's
scale, so two parsing workers keep the storing process busy on a two-core machine.  Workers send back
plain row tuples instead of record objects, which is what makes the hand-over cheap.  Results are stored
in input order, so the store is the same as with a sequential loop.

Memory stays bounded whatever the size of a file: a LINE ``.txt`` export is parsed as it is read
(:func:`pmrag.ingest.stream_source`) and its rows cross over in chunks of :data:`ROWS_PER_CHUNK`, at most
:data:`QUEUED_CHUNKS` of them waiting per worker, so a worker that parses ahead blocks instead of filling
memory.  A file whose rows fit in one chunk (every JSON file: they are parsed whole; a small ``.txt``)
arrives whole, as a list.  A single file is parsed in this process, as its rows are stored.
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from queue import Empty

import numpy as np
import pandas as pd
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from pmrag.core.errors import InputError
from pmrag.core.interrupts import ignore_interrupts
from pmrag.core.memory import collection_paused
from pmrag.core.parallel import process_context, worker_processes
from pmrag.core.params import DatasetSection
from pmrag.core.records import SourceBatch
from pmrag.core import store
from pmrag.core.store import file_sha256
from pmrag.ingest import STREAMED_FORMATS, stream_source
from pmrag.ingest.store import Bind, StoreReport, already_ingested, keyed_rows, record_same_file, store_batch

ROWS_PER_CHUNK = 10_000
"""Rows handed over (and inserted) at a time, at most."""

CHARS_PER_CHUNK = 2_000_000
"""Message text characters per chunk, at most (a chunk of long messages holds fewer rows)."""

QUEUED_CHUNKS = 2
"""Chunks that may wait, per worker, for this process to store them."""

Rows = list[tuple] | Iterator[list[tuple]]
"""A file's message rows: a list when they came whole, else a one-pass iterator of chunks (lists of rows)."""


def ingest_files(bind: Bind, jobs: Sequence[tuple[Path, str]], *, permissive: bool = False,
                 options: DatasetSection | None = None, workers: int = 2) -> Iterator[tuple[SourceBatch, StoreReport]]:
    """Read and store each ``(path, format)`` job, in input order: ``(batch, report)`` once a file is stored.

    The path behind ``pmrag ingest`` and the study's ingest stage.  Each file is stored in one transaction of
    the engine ``bind``, or one savepoint of the connection ``bind``'s transaction (a file that fails to parse in
    strict mode stores nothing); ``batch.empty`` says it held nothing to store.
    With ``options.merge_exports`` (the default) a file whose content was ingested before under another name
    is not parsed again: it is recorded as one more name of that file, every message already present.
    """
    options = options or DatasetSection()
    seen: dict[str, str] = {}
    plan = []
    for path, fmt in jobs:
        sha = file_sha256(path)
        earlier = already_ingested(bind, sha) if options.merge_exports else None
        same = options.merge_exports and (sha in seen or (earlier is not None and earlier["path"] != str(path)))
        plan.append((path, sha, same))
        seen.setdefault(sha, str(path))
    parsed = read_all([(path, fmt) for (path, fmt), (_, _, same) in zip(jobs, plan) if not same],
                      permissive=permissive, options=options, workers=workers)
    for path, sha, same in plan:
        if same:
            earlier = already_ingested(bind, sha)
            report = record_same_file(bind, str(path), sha, earlier)
            batch = SourceBatch(path=str(path), format=report.format, encoding=report.encoding, dialect=report.dialect,
                                records_read=report.read, streamed_messages=report.already_present)
            yield batch, report
            continue
        batch, rows = next(parsed)
        yield batch, store_batch(bind, batch, sha, rows, merge=options.merge_exports)


@dataclasses.dataclass(frozen=True)
class Ingested:
    """A study's ingest: per input file what was read, stored, already present and rejected (``report``), and
    what the store then holds: the number of messages, the questions, their message-level evidence and the
    rejected records.  The messages themselves stay in the store (:func:`pmrag.core.store.stored_messages`):
    millions of them at scale, read by the few stages that need them, a column or two at a time."""

    report: pd.DataFrame
    n_messages: int
    questions: pd.DataFrame
    evidence: pd.DataFrame
    rejections: pd.DataFrame


def ingest_study(engine: Engine, files: Sequence[Path], questions: Path | None, dataset: DatasetSection,
                 display: Callable[[Path], str] = lambda path: path.name) -> Ingested:
    """Empty the store's ingested tables, ingest ``files`` (in ``dataset.format``) and the questions file, and
    read back what was stored.  A file with nothing to store gets a warning line on stderr; ``display`` names a
    file in the report (a path the study can move with: relative, never absolute).

    All in one transaction (each file a savepoint of it), so that the merge key's unique index can be made after
    the messages are inserted instead of taking each of millions of random keys as it comes (at 10× the paper's
    scale it made the inserts a third slower): the index is dropped, the chat files stored, and the index made again
    before the questions file is stored (its evidence is resolved against the messages the store keeps).  Made over
    rows that repeat no merge key, it leaves every file's counts as they would have been with the index in place (a
    message is ignored only for a message ID already stored, as then).  Where it cannot be made (two files share
    messages: overlapping exports of one chat), every message whose merge key an earlier-stored one holds is deleted
    and counted as already present in its file (:func:`_drop_repeated_keys`): what checking each message as it was
    inserted would have kept, as long as no message ID was met twice.  Where one was, the files are stored again
    with the index in place, each message checked as it is inserted.  A stopped ingest leaves the store as it was,
    index included."""
    chat_jobs = [(Path(path), dataset.format) for path in files]
    question_jobs = [(Path(questions), "questions-json")] if questions else []
    with engine.begin() as conn:
        _empty_ingested(conn)
        merge_index = _drop_merge_index(conn)
        reports, empty, last_rowids = _store_files(conn, chat_jobs, dataset, display)
        if merge_index is not None:
            try:
                with conn.begin_nested():
                    conn.exec_driver_sql(merge_index)
            except IntegrityError:   # merge keys repeated across files
                if any(report["already_present"] and not report["same_as"] for report in reports):
                    _empty_ingested(conn)   # a message ID met twice: stored again, each message checked as inserted
                    conn.exec_driver_sql(merge_index)
                    reports, empty, _ = _store_files(conn, chat_jobs, dataset, display)
                else:
                    reports = _drop_repeated_keys(conn, reports, last_rowids)
                    conn.exec_driver_sql(merge_index)
        question_reports, questions_empty, _ = _store_files(conn, question_jobs, dataset, display)
        reports, empty = reports + question_reports, empty + questions_empty
    for path in empty:
        print(f"warning: {path}: no message or question found; is it a chat export?", file=sys.stderr)
    return Ingested(pd.DataFrame(reports),
                    store.count_messages(engine),
                    store.read_table(engine, "questions", ("question_id",)),
                    store.read_table(engine, "question_evidence", ("question_id", "message_id")),
                    store.read_table(engine, "rejections", ("sha256", "location")))


MERGE_INDEX = "ix_messages_merge_key"
"""The unique index of the messages' merge keys (:class:`~pmrag.ingest.store.MergeKeys`)."""


def _drop_merge_index(conn) -> str | None:
    """Drop the messages' merge-key index; its SQL, or None where the store has none."""
    sql = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                               (MERGE_INDEX,)).scalar()
    if sql is not None:
        conn.exec_driver_sql(f'DROP INDEX "{MERGE_INDEX}"')
    return sql


def _empty_ingested(conn) -> None:
    for table in (store.messages, store.questions, store.question_evidence, store.files, store.rejections):
        conn.execute(table.delete())
    store.bump_revision(conn)


def _store_files(conn, jobs: list[tuple[Path, str]], dataset: DatasetSection, display: Callable[[Path], str]
                 ) -> tuple[list[dict], list[str], list[int]]:
    """The ingest reports of ``jobs`` stored through ``conn``, the batches that held nothing, and the largest
    message rowid once each file was stored (a file's new rows are the rowids above the previous file's)."""
    reports, empty, last_rowids = [], [], []
    for batch, report in ingest_files(conn, jobs, permissive=dataset.permissive, options=dataset):
        if batch.empty:
            empty.append(batch.path)
        row = dataclasses.asdict(report)
        row["path"] = display(Path(row["path"]))
        row["same_as"] = row["same_as"] and display(Path(row["same_as"]))
        reports.append(row)
        last_rowids.append(conn.exec_driver_sql(f"SELECT coalesce(max(rowid), 0) FROM {store.messages.name}").scalar())
    return reports, empty, last_rowids


def _drop_repeated_keys(conn, reports: list[dict], last_rowids: list[int]) -> list[dict]:
    """Delete every message whose merge key a message stored before it holds (each key keeps its first row by rowid,
    i.e. in the order the files and their rows were stored), and count each file's deleted messages as already
    present instead of stored.  With no message ID ignored while the files were stored, these are the rows and
    counts of storing them with the merge key's unique index in place: a message is ignored then exactly when an
    earlier one holds its key, and that earlier one was kept."""
    repeated = np.fromiter((rowid for (rowid,) in conn.exec_driver_sql(
        f"SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY merge_key ORDER BY rowid) AS nth "
        f"FROM {store.messages.name} WHERE merge_key IS NOT NULL) WHERE nth > 1 ORDER BY rowid")), dtype=np.int64)
    if len(repeated):
        conn.exec_driver_sql(f"DELETE FROM {store.messages.name} WHERE rowid = ?",
                             [(rowid,) for rowid in repeated.tolist()])
    per_file = np.diff(np.searchsorted(repeated, last_rowids, side="right"), prepend=0).tolist()
    return [{**report, "stored": report["stored"] - n, "already_present": report["already_present"] + n}
            for report, n in zip(reports, per_file)]


def relative_to(bases: Sequence[Path]) -> Callable[[Path], str]:
    """How a report names a file: relative to the first of ``bases`` that holds it (the run folder, the params
    file's project), else by its name alone: never an absolute path."""
    def name(path: Path) -> str:
        for base in bases:
            try:
                return str(Path(path).relative_to(base))
            except ValueError:
                continue
        return Path(path).name
    return name


def read_all(jobs: Sequence[tuple[Path, str]], *, permissive: bool = False, options: DatasetSection | None = None,
             workers: int = 2) -> Iterator[tuple[SourceBatch, Rows]]:
    """``(batch, rows)`` for each ``(path, format)`` job, in input order, for :func:`~pmrag.ingest.store.store_batch`.

    ``rows`` is a list when the file came whole (the batch is then complete); otherwise an iterator of row
    chunks, and the batch's counts, rejections and dialect are complete once it is exhausted.  Read each
    file's rows before the next file's (rows left unread are read and dropped when the loop moves on; a
    parse error among them is raised then).  With two files or more, ``workers`` processes parse ahead;
    one file, ``workers=0`` or :func:`~pmrag.core.parallel.in_this_process`, is parsed in this process as its
    rows are read.
    """
    options = options or DatasetSection()
    calls = [(path, fmt, permissive, options) for path, fmt in jobs]
    workers = worker_processes(workers)
    if workers < 1 or len(calls) < 2:
        for call in calls:
            batch, rows = read_rows(*call)
            yield batch, rows
            _drain(rows)
        return
    yield from _read_in_workers(calls, min(workers, len(calls)))


def read_rows(path, fmt: str, permissive: bool, options: DatasetSection) -> tuple[SourceBatch, Rows]:
    """Read one file as store rows: a list when they fit one chunk, else an iterator of chunks read as it goes."""
    batch, chunks = row_chunks(path, fmt, permissive, options)
    first, last = next(chunks)
    if last:
        return batch, first
    return batch, _rest_after(first, chunks)


def row_chunks(path, fmt: str, permissive: bool, options: DatasetSection
               ) -> tuple[SourceBatch, Iterator[tuple[list[tuple], bool]]]:
    """One file's store rows as ``(chunk, is_last)``, each chunk in message-ID order (inserts then walk the
    primary-key index in order); a file read whole is one chunk, so its rows go in exactly as a whole-file
    sort puts them.  There is always at least one chunk (empty for a file without messages).

    A file read whole is parsed with the cyclic garbage collector paused (:func:`~pmrag.core.memory.collection_paused`):
    its records and rows hold no cycle, and collections that walked them took about a fifth of the parse."""
    with collection_paused():   # a streamed file is only opened here: it is parsed as its chunks are read
        batch, records = stream_source(path, fmt, permissive=permissive, options=options)
        if batch.format not in STREAMED_FORMATS:
            return batch, iter([(sorted(keyed_rows(records, options.merge_exports)), True)])
    return batch, _sorted_chunks(keyed_rows(records, options.merge_exports))


def _sorted_chunks(rows: Iterator[tuple]) -> Iterator[tuple[list[tuple], bool]]:
    """``(chunk, is_last)`` of at most :data:`ROWS_PER_CHUNK` rows and about :data:`CHARS_PER_CHUNK` text
    characters, sorted; whether a chunk is the last is known by reading one row past it."""
    following = next(rows, None)
    while True:
        chunk, chars = [], 0
        while following is not None and len(chunk) < ROWS_PER_CHUNK and chars < CHARS_PER_CHUNK:
            chunk.append(following)
            chars += len(following[_TEXT])
            following = next(rows, None)
        chunk.sort()
        yield chunk, following is None
        del chunk   # the consumer holds the chunk; this generator keeps none while it builds the next
        if following is None:
            return


_TEXT = 8
"""Position of the message text in a row (:func:`~pmrag.ingest.store.message_row`)."""


def _rest_after(first: list[tuple], chunks: Iterator[tuple[list[tuple], bool]]) -> Iterator[list[tuple]]:
    """``first``, then the chunks that follow it, without their ``is_last`` flags."""
    pending = [first]
    del first
    yield pending.pop()
    for chunk, _ in chunks:
        yield chunk
        del chunk


def _drain(rows: Rows) -> None:
    """Read what is left of a one-pass ``rows`` iterator (nothing for a list)."""
    if not isinstance(rows, list):
        for _ in rows:
            pass


# --- worker processes -----------------------------------------------------------------------------


def _read_in_workers(calls: list[tuple], n_workers: int) -> Iterator[tuple[SourceBatch, Rows]]:
    """:func:`read_all` with ``n_workers`` processes; job ``i`` goes to worker ``i % n_workers``, which reads
    its jobs in order into its own bounded queue, so this process reads every queue in job order."""
    context = process_context()
    queues = [context.Queue(QUEUED_CHUNKS) for _ in range(n_workers)]
    processes = [
        context.Process(target=_work, args=(calls[w::n_workers], queues[w]), daemon=True, name=f"pmrag-ingest-{w}")
        for w in range(n_workers)
    ]
    for process in processes:
        process.start()
    try:
        for index, call in enumerate(calls):
            inbox = _Inbox(queues[index % n_workers], processes[index % n_workers], call[0])
            batch, rows = inbox.result()
            yield batch, rows
            _drain(rows)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join()
        for queue in queues:
            queue.close()
            queue.cancel_join_thread()


def _work(calls: list[tuple], queue) -> None:
    """Worker process: read each job and put its rows on ``queue``; stop at the first error, sent on too.

    Messages: ``("whole", batch, rows)``; or ``("start", batch, chunk)``, ``("rows", chunk)``...,
    ``("end", batch)``; or ``("input-error", path, location, reason)`` / ``("failed", traceback text)``.
    """
    ignore_interrupts()   # the parent process handles an interrupt and ends the workers
    for call in calls:
        try:
            batch, chunks = row_chunks(*call)
            for index, (chunk, last) in enumerate(chunks):
                if index == 0:
                    queue.put(("whole" if last else "start", batch, chunk))
                else:
                    queue.put(("rows", chunk))
                del chunk
            if index > 0:
                queue.put(("end", batch))
        except InputError as exc:   # sent as its parts: the exception itself does not survive pickling
            queue.put(("input-error", exc.path, exc.location, exc.reason))
            return
        except BaseException:
            queue.put(("failed", traceback.format_exc()))
            return


class _Inbox:
    """The messages one worker sends about one file, read in this process."""

    POLL_S = 1.0

    def __init__(self, queue, process, path):
        self.queue, self.process, self.path = queue, process, path

    def result(self) -> tuple[SourceBatch, Rows]:
        """``(batch, rows)`` of the file: whole, or a batch completed as the rows are read."""
        message = self._next()
        if message[0] == "whole":
            return message[1], message[2]
        if message[0] == "start":
            return message[1], self._rows(message[1], message[2])
        self._raise(message)

    def _rows(self, batch: SourceBatch, first: list[tuple]) -> Iterator[list[tuple]]:
        pending = [first]
        del first
        yield pending.pop()
        while (message := self._next())[0] == "rows":
            yield message[1]
            del message
        if message[0] != "end":
            self._raise(message)
        for each in dataclasses.fields(SourceBatch):   # the batch handed out already becomes the final one
            setattr(batch, each.name, getattr(message[1], each.name))

    def _next(self) -> tuple:
        """The next message, or an error if the worker ended without sending one (killed, out of memory)."""
        while True:
            try:
                return self.queue.get(timeout=self.POLL_S)
            except Empty:
                if not self.process.is_alive():
                    try:
                        return self.queue.get(timeout=self.POLL_S)   # sent just before it ended
                    except Empty:
                        raise RuntimeError(f"{self.path}: the worker process reading it ended without a result "
                                           f"(exit code {self.process.exitcode})") from None

    def _raise(self, message: tuple):
        if message[0] == "input-error":
            raise InputError(*message[1:])
        raise RuntimeError(f"{self.path}: reading it failed in a worker process:\n{message[1]}")
