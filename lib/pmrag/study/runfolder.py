"""Run folders are pmrag's alone: ``outputs/<run>/`` is marked when pmrag makes it, and a folder holding files
pmrag did not write is refused instead of having its README.md, environment.json and qrels.trec replaced.

The mark is a small file, :data:`MARKER_FILE`, holding the run folder's format and the pmrag version that made it
(JSON).  It names no location (no path, no run name, no host), so a run folder copied or moved elsewhere, or
renamed, is still recognised, and the copy's stages stay current (:mod:`pmrag.study.engine`'s keys hold no
location either).  A folder is taken as pmrag's when it

* carries the marker (whatever the marker holds, unless it says a newer format: a marker being written by a
  second ``pmrag study`` starting at the same moment is still empty);
* is missing or empty, or holds only pmrag's lock file (it is created and marked);
* holds a ``study.sqlite`` stamped with pmrag's SQLite application ID (:data:`pmrag.core.store.APPLICATION_ID`):
  a run folder made before the marker existed (it is marked).

Anything else is refused (:class:`ForeignRunFolder`, one line naming the folder and the fix) unless the caller
forces it: ``pmrag study --force``, ``Study.from_params(..., force=True)``.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.core.store import APPLICATION_ID

MARKER_FILE = ".pmrag-run"
LOCK_FILE = ".lock"            # held by the running ``pmrag study`` (pmrag.study.runner.run_folder_lock)
RUN_FOLDER_FORMAT = 1          # bump when a run folder's layout changes in a way an older pmrag cannot read
STORE_FILE = "study.sqlite"    # the study's store, in its run folder
SQLITE_HEADER = b"SQLite format 3\x00"
APPLICATION_ID_OFFSET = 68     # where SQLite's file header keeps ``PRAGMA application_id`` (4 bytes, big-endian)
STUDY_FORCE = "run `pmrag study --force` to write into it anyway"   # the fix a refusal ends with, by default


class ForeignRunFolder(PmragError):
    """A run folder that pmrag did not make (or a newer pmrag did): refused before anything is written in it."""


def run_folder_kind(run_dir: Path) -> str:
    """What ``run_dir`` is, reading only: ``missing``, ``empty``, ``marked`` (it carries :data:`MARKER_FILE`),
    ``old`` (no marker, but a ``study.sqlite`` stamped by pmrag) or ``foreign``.  A path that exists and is
    not a folder is a :class:`ForeignRunFolder`.  The marker is the first file pmrag writes in a run folder, so
    a folder holding files but no marker, seen in one listing, is never one that a pmrag starting at the same
    moment is making."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return "missing"
    if not run_dir.is_dir():
        raise ForeignRunFolder(f"{run_dir}: the run folder's path is a file, not a folder; set another 'run' or "
                               "'outputs_dir' in the params")
    names = {entry.name for entry in run_dir.iterdir()}   # one listing: a marker written meanwhile is in it or not
    if MARKER_FILE in names:
        return "marked"
    if not names - {LOCK_FILE}:
        return "empty"
    return "old" if stamped_store(run_dir / STORE_FILE) else "foreign"


def stamped_store(path: Path) -> bool:
    """Whether ``path`` is a SQLite file stamped with pmrag's application ID, read from its header alone (the
    file is opened for reading only: no journal or lock file is created beside it)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(APPLICATION_ID_OFFSET + 4)
    except OSError:
        return False
    return (header.startswith(SQLITE_HEADER) and len(header) == APPLICATION_ID_OFFSET + 4
            and int.from_bytes(header[APPLICATION_ID_OFFSET:], "big") == APPLICATION_ID)


def check_run_folder(run_dir: Path, *, force: bool = False, how_to_force: str = STUDY_FORCE) -> str:
    """:func:`run_folder_kind` of ``run_dir``, writing nothing; :class:`ForeignRunFolder` for a folder pmrag did
    not make (unless ``force``) or one a newer pmrag made.  ``how_to_force`` ends the refusal's fix."""
    kind = run_folder_kind(run_dir)
    if kind == "foreign" and not force:
        raise ForeignRunFolder(
            f"{run_dir}: this folder holds files that pmrag did not write (it has no {MARKER_FILE} marker), and a "
            f"study would replace some; set another 'run' or 'outputs_dir' in the params, or {how_to_force}")
    if kind == "marked":
        made = marker_format(Path(run_dir) / MARKER_FILE)
        if made is not None and made > RUN_FOLDER_FORMAT:
            raise ForeignRunFolder(f"{run_dir}: made by a newer pmrag (run folder format {made}; this one writes "
                                   f"format {RUN_FOLDER_FORMAT}); upgrade pmrag, or set another 'run' in the params")
    return kind


def claim_run_folder(run_dir: Path, *, force: bool = False, how_to_force: str = STUDY_FORCE) -> Path:
    """Make ``run_dir`` a pmrag run folder: created when missing, marked when missing, empty or made by an older
    pmrag (or foreign and ``force``); :class:`ForeignRunFolder` otherwise (:func:`check_run_folder`), with
    nothing written.  Returns ``run_dir``.  Two processes claiming one folder at once both succeed."""
    run_dir = Path(run_dir)
    if check_run_folder(run_dir, force=force, how_to_force=how_to_force) != "marked":
        run_dir.mkdir(parents=True, exist_ok=True)
        write_marker(run_dir)
    return run_dir


def marker_text() -> str:
    """What :data:`MARKER_FILE` holds: the run folder's format and the pmrag that made it, and nothing that
    names a place."""
    try:
        version = importlib.metadata.version("pmrag")
    except importlib.metadata.PackageNotFoundError:   # run from a source tree that was not installed
        version = "unknown"
    return json.dumps({"format": RUN_FOLDER_FORMAT, "made_by": f"pmrag {version}"}) + "\n"


def write_marker(run_dir: Path) -> None:
    """Create ``run_dir/`` :data:`MARKER_FILE` unless it exists (created exclusively: an existing one is never
    rewritten)."""
    try:
        with open(Path(run_dir) / MARKER_FILE, "x", encoding="utf-8") as handle:
            handle.write(marker_text())
    except FileExistsError:
        pass


def marker_format(path: Path) -> int | None:
    """The run folder format a marker states; None when it states none (empty, being written, unreadable)."""
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, int) and not isinstance(found, bool) else None
