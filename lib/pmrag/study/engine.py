"""The stage engine: stages that declare themselves, complete cache keys, a persistent cache and an in-process memo.

A stage is a plain function whose signature says what it reads (Hamilton's idea; :mod:`pmrag.study.declare`
has the markers):

* a parameter named after a stage (``chunks: Chunked``) receives that stage's result, and
  ``Annotated[dict, Each("runs", ...)]`` receives a stage made per item for every item of a list;
* a parameter typed with a params section (``chunking: ChunkingSection``) receives the section, keyed whole;
  ``Annotated[Section, Keys(...)]`` keys only the keys that can change the result (not batch sizes, timeouts,
  pacing); ``Annotated[T, Derived(...)]`` receives a value computed from declared keys;
* ``runtime: Runtime`` receives what cannot change a result and is never keyed: the store to write to, the run
  folder, the content-addressed cache folder, the permission to call remote models, progress bars.

From the function the engine also reads its code (:mod:`pmrag.study.closure`: its source, the same-module
helpers it calls, the transitive closure of the package modules it reaches), and from the components it uses
(``@stage(components=...)``) their modules, input files and packages.  A stage's **key** is the SHA-256 of all
of it, each upstream contributing its own key, so a change anywhere recomputes exactly the stages that depend
on it.  Nothing in a key names a location: files are named relative to the params file (or inside the
package) and keyed by content, params paths likewise, the run folder and caches not at all, so a study copied
or moved elsewhere finds every stage current.

Results are pickled under ``<run>/stages/`` with their key, sealed by this user's key (:mod:`pmrag.study.sealed`:
a result from anyone else is never unpickled); the ``stages`` table of the store records each
stage's key and its manifest (the parts of the key), which is how :meth:`Engine.status` explains, without
computing anything, why a stage is stale.  Input files are fingerprinted by content with a size + mtime fast
path (``file_fingerprints`` table): an unchanged file is hashed once.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pickle
import sys
import threading
import time
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine as SqlEngine, delete, insert, select

from pmrag.core import store
from pmrag.core.errors import PmragError
from pmrag.core.store import file_fingerprints
from pmrag.core.text import clip
from pmrag.study.closure import module_path
from pmrag.core.names import StageKey
from pmrag.study.declare import Runtime, Stage
from pmrag.study.sealed import dump_sealed, sign, signed, unseal

ENGINE_VERSION = 2   # bump when the manifest's form changes: every key changes with it
_NONE = object()     # "no usable result" (None is a result a stage may return)
STAGE_DIR = "stages"
PARTIAL_SUFFIX = ".tmp"   # a result being written: ``<stem>.pkl.<pid>.tmp``, renamed to ``<stem>.pkl`` when whole
LOG_FILE = "stage_log.jsonl"


class StageError(PmragError):
    """A stage graph is inconsistent (an unknown stage, a parameter that names nothing)."""


# ------------------------------------------------------------------------------------------- digests

_MODULE_DIGESTS: dict[str, str] = {}
_PACKAGE_VERSIONS: dict[str, str] = {}
_FILE_DIGESTS: dict[str, tuple[int, int, str]] = {}
_WARNED: set[Path] = set()   # run folders whose results from elsewhere were reported in this process


def module_digest(name: str) -> str:
    """SHA-256 of a module's source (a package's ``__init__``), or, for ``<package>.**``, of every ``.py`` file
    under the package (by relative path and content).  Once per process: the code a process runs is the code it
    imported."""
    if name not in _MODULE_DIGESTS:
        whole = name.endswith(".**")
        try:
            origin = module_path(name.removesuffix(".**"))
        except ModuleNotFoundError:
            raise StageError(f"a stage depends on module {name!r}, which cannot be found") from None
        digest = hashlib.sha256()
        if whole:
            for path in sorted(origin.parent.rglob("*.py")):
                digest.update(path.relative_to(origin.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        else:
            digest.update(origin.read_bytes())
        _MODULE_DIGESTS[name] = digest.hexdigest()
    return _MODULE_DIGESTS[name]


def package_version(name: str) -> str:
    if name not in _PACKAGE_VERSIONS:
        try:
            _PACKAGE_VERSIONS[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            _PACKAGE_VERSIONS[name] = "not installed"
    return _PACKAGE_VERSIONS[name]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(engine: SqlEngine, path: Path) -> str:
    """Content SHA-256 of ``path`` (``missing`` if absent), rehashed only when its size or mtime changed."""
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return "missing"
    key = str(path.resolve())
    known = _FILE_DIGESTS.get(key)
    if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
        return known[2]
    with engine.connect() as conn:
        row = conn.execute(select(file_fingerprints).where(file_fingerprints.c.path == key)).first()
    if row is not None and row.size == stat.st_size and row.mtime_ns == stat.st_mtime_ns:
        sha = row.sha256
    else:
        sha = sha256_file(path)
        with engine.begin() as conn:
            conn.execute(insert(file_fingerprints).prefix_with("OR REPLACE"),
                         [{"path": key, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}])
    _FILE_DIGESTS[key] = (stat.st_size, stat.st_mtime_ns, sha)
    return sha


def digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------- engine

@dataclass
class _Walk:
    """What one :meth:`Engine.get` looked up (:meth:`Engine._one_walk`), filled when ``written`` records had been
    written: each stage's key, what its dependents key on, its record."""

    written: int
    keys: dict = field(default_factory=dict)
    upstream: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StageStatus:
    name: str
    state: str          # cached | stale | incomplete | partial | missing
    reason: str


class Engine:
    """Keys, the persistent cache and the memo for one study's stage graph (stages in dependency order)."""

    def __init__(self, stages: Iterable[Stage], runtime: Runtime, file_label):
        self.stages: dict[StageKey, Stage] = {s.key: s for s in stages}
        self.runtime = runtime
        self.store = runtime.store
        self.run_dir = Path(runtime.run_dir)
        self._file_label = file_label
        self.memo: dict[StageKey, tuple[str, Any]] = {}
        self._walk = threading.local()   # .current: this thread's _Walk during a get() (:meth:`_one_walk`)
        self._records_written = 0         # records written so far, by any thread (a walk filled before one restarts)
        self._written_lock = threading.Lock()
        self.retried: set[StageKey] = set()   # stages whose parts to retry were retried by this engine
        self.announce = None   # called with a stage's StageStatus (why it is not current) before it is computed
        self.guard = None      # called with each stage asked for from outside (a notebook's undeclared read raises)
        for stage in self.stages.values():
            unknown = [str(n) for n in stage.needs if n not in self.stages]
            if unknown:
                raise StageError(f"stage {stage.key} needs unknown stage(s) {', '.join(unknown)}")

    @property
    def progress(self) -> bool:
        return self.runtime.progress

    @progress.setter
    def progress(self, value: bool) -> None:
        self.runtime.progress = bool(value)

    def stage(self, key: StageKey | str) -> Stage:
        wanted = StageKey.of(key)
        try:
            return self.stages[wanted]
        except KeyError:
            raise StageError(f"unknown stage {str(wanted)!r} (stages: {', '.join(map(str, self.stages))})") from None

    # -- keys --------------------------------------------------------------------------------------
    def manifest(self, key: StageKey | str, _keys: dict[StageKey, str] | None = None) -> dict:
        """Everything a stage's key is made of (upstream stages by their keys)."""
        keys = {} if _keys is None else _keys
        stage = self.stage(key)
        return {
            "engine": ENGINE_VERSION,
            "stage": str(stage.key),
            "code": stage.code_digest,
            "needs": {str(n): self._upstream(n, keys) for n in stage.needs},
            "params": stage.params,
            "modules": {m: module_digest(m) for m in stage.modules},
            "files": {self._file_label(f): file_digest(self.store, f) for f in stage.files},
            "packages": {p: package_version(p) for p in stage.packages},
        }

    def key(self, key: StageKey | str, _keys: dict[StageKey, str] | None = None) -> str:
        walk = self._current_walk()
        keys = _keys if _keys is not None else walk.keys if walk is not None else {}
        wanted = StageKey.of(key)
        if wanted not in keys:
            keys[wanted] = digest(self.manifest(wanted, keys))
        return keys[wanted]

    def _upstream(self, key: StageKey, keys: dict[StageKey, str]) -> str:
        """What a dependent keys on: the upstream's key, or for a stage with an ``identity`` (a resumable stage
        whose retries can change its result under the same key) the identity of the result it recorded; for a
        stage whose result reflects the store's data, with the store's revisions today (a write there since makes
        the dependents stale too)."""
        walk = self._current_walk()
        kept = walk.upstream if walk is not None and keys is walk.keys else None   # the walk's own keys: kept with them
        if kept is not None and key in kept:
            return kept[key]
        own = self.key(key, keys)
        stage = self.stage(key)
        if stage.identity is not None:
            record = self.record(key)
            if (record is not None and record["key"] == own and record.get("complete") and record.get("identity")
                    and not foreign(key, record)):
                own = record["identity"]
        value = digest([own, self._revisions(stage)]) if stage.reads_store else own
        if kept is not None:
            kept[key] = value
        return value

    def _revisions(self, stage: Stage) -> dict[str, int]:
        """The store revisions a stage's result reflects, as they are now."""
        return {name: store.read_revision(self.store, name) for name in stage.reads_store}

    def _store_changed(self, stage: Stage, record: dict) -> str:
        """Why a recorded result no longer reflects the store ("" when it does)."""
        now = self._revisions(stage)
        then = record.get("store", {})
        changed = [f"{name} revision {then.get(name, 0)} → {now[name]}" for name in now if then.get(name) != now[name]]
        return ("the store's data changed since this stage ran (" + ", ".join(changed) + "; another pmrag ingest "
                "into it?)") if changed else ""

    def keys(self) -> dict[str, str]:
        keys: dict[StageKey, str] = {}
        return {str(name): self.key(name, keys) for name in self.stages}

    @contextmanager
    def _one_walk(self):
        """Within one :meth:`get` (its upstream stages included), each stage's key, what its dependents key on and
        its record are looked up once, until a record is written (a stage computed, in any thread): a stage with ten
        upstream stages, each with its own, walked the graph below it again for each, reading the same records and
        store revisions from SQLite every time.  Not kept between calls: a file or another process may change them."""
        if getattr(self._walk, "current", None) is not None:   # nested: the outer get's walk
            yield
            return
        self._walk.current = _Walk(self._records_written)
        try:
            yield
        finally:
            self._walk.current = None

    def _current_walk(self) -> _Walk | None:
        """This thread's walk (a new one when a record was written since it was begun), else None."""
        walk = getattr(self._walk, "current", None)
        if walk is not None and walk.written != self._records_written:
            walk = self._walk.current = _Walk(self._records_written)
        return walk

    # -- records -----------------------------------------------------------------------------------
    def record(self, key: StageKey | str) -> dict | None:
        """A stage's record as stored (read once per walk, :meth:`_one_walk`; callers do not change it)."""
        walk = self._current_walk()
        records = None if walk is None else walk.records
        if records is not None and str(key) in records:
            return records[str(key)]
        with self.store.connect() as conn:
            row = conn.execute(select(store.stages.c.key, store.stages.c.info)
                               .where(store.stages.c.name == str(key))).first()
        record = None if row is None else {"key": row.key, **json.loads(row.info)}
        if records is not None:
            records[str(key)] = record
        return record

    def _write_record(self, key: StageKey, own: str, info: dict) -> None:
        with self.store.begin() as conn:
            conn.execute(insert(store.stages).prefix_with("OR REPLACE"),
                         [{"name": str(key), "key": own, "info": json.dumps(info, sort_keys=True, ensure_ascii=False)}])
        self._record_written()

    def _record_written(self) -> None:
        """Count a record written (after it is committed): every walk looks its keys and records up again."""
        with self._written_lock:
            self._records_written += 1

    def _pickle_path(self, key: StageKey) -> Path:
        return self.run_dir / STAGE_DIR / (key.file_stem() + ".pkl")

    def _load(self, key: StageKey, own: str):
        """The cached result and whether it was stored under ``own``; never unpickled unless this user sealed it
        (:mod:`pmrag.study.sealed`): a result from elsewhere is reported once and recomputed."""
        path = self._pickle_path(key)
        try:
            payload = unseal(path.read_bytes())
        except OSError:
            return None, False
        if payload is None:
            self._warn_foreign(path)
            return None, False
        try:
            stored_key, value = pickle.loads(payload)
        except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
            return None, False
        return value, stored_key == own

    def _warn_foreign(self, path: Path) -> None:
        """One warning per run folder and process, naming the first result that was not this user's."""
        if self.run_dir not in _WARNED:
            _WARNED.add(self.run_dir)
            print(f"warning: {path.relative_to(self.run_dir.parent)} was not sealed by this user's pmrag (copied from "
                  "someone else, altered, or written before results were sealed): it is not loaded; it and any other "
                  "such result of this run are recomputed", file=sys.stderr)

    def _save(self, key: StageKey, own: str, value) -> None:
        path = self._pickle_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}{PARTIAL_SUFFIX}")
        try:
            with open(tmp, "wb") as fh:
                dump_sealed((own, value), fh)
            os.replace(tmp, path)
        except BaseException:   # a value that does not pickle, a full disk, Ctrl-C: no partial file left behind
            tmp.unlink(missing_ok=True)
            raise

    def remove_partial_results(self) -> list[Path]:
        """Remove the partial results that processes no longer running left in ``stages/`` (a result is written to
        ``<stem>.pkl.<pid>.tmp`` and then renamed; a process killed while writing leaves that file, as large as the
        result); a partial file whose process is still running is its write in progress and is kept.  Returns the
        files removed."""
        removed = []
        for path in (self.run_dir / STAGE_DIR).glob(f"*.pkl.*{PARTIAL_SUFFIX}"):
            pid = path.name[:-len(PARTIAL_SUFFIX)].rpartition(".")[2]
            if pid.isdigit() and int(pid) > 0 and not _process_running(int(pid)):
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def _outputs_present(self, stage: Stage, value) -> bool:
        return all((self.run_dir / p).exists() for p in stage.outputs(value))

    def forget(self) -> None:
        """Drop every stage record and cached result of this run (``pmrag study --fresh``)."""
        with self.store.begin() as conn:
            conn.execute(delete(store.stages))
        self._record_written()
        for path in (self.run_dir / STAGE_DIR).glob("*.pkl"):
            path.unlink()
        self.memo.clear()
        self.retried.clear()

    def release(self) -> None:
        """Drop the results held in memory; the cache on disk keeps them, and the next :meth:`get` loads one again
        (the runner frees them while notebook kernels, which load their own, run beside it)."""
        self.memo.clear()

    # -- results -----------------------------------------------------------------------------------
    def get(self, key: StageKey | str, *, retry: bool = False):
        """The stage's result: from the memo, else the cache, else computed (upstream first), each checked by key.

        ``retry`` recomputes a stage whose cached result has parts to retry (``finished`` said so: e.g.
        summaries that failed under ``failure_policy: retry``), once per engine: its dependents, asking with
        ``retry`` too, read that result instead of retrying again; the runner asks for that, notebooks do not.
        ``guard``, when set, is asked first (the stages read to compute this one are not asked about).
        """
        if self.guard is not None:
            self.guard(self.stage(key).key)
        with self._one_walk():
            return self._get(key, retry=retry)

    def _get(self, key: StageKey | str, *, retry: bool = False):
        stage = self.stage(key)
        own = self.key(stage.key)
        cached = self._cached(stage, own, retry)
        if cached is not _NONE:
            return cached
        inputs = {n: self._get(n, retry=retry) for n in stage.needs}
        own = self.key(stage.key)  # again: an upstream with an identity keys its dependents on its new result
        cached = self._cached(stage, own, retry)  # ... which may be one this stage already has
        if cached is not _NONE:
            return cached
        return self._compute(stage, own, inputs)

    def _cached(self, stage: Stage, own: str, retry: bool):
        """The memoised or cached result under ``own`` key, else ``_NONE``."""
        record = self.record(stage.key)
        if retry and record is not None and record.get("retry") and stage.key not in self.retried:
            return _NONE
        if stage.key in self.memo and self.memo[stage.key][0] == own:
            return self.memo[stage.key][1]
        if record is not None and record["key"] == own and foreign(stage.key, record):
            self._warn_foreign(self._pickle_path(stage.key))
        elif record is not None and record["key"] == own and record.get("complete") and \
                not self._store_changed(stage, record):
            started = time.perf_counter()
            value, valid = self._load(stage.key, own)
            if valid and self._outputs_present(stage, value):
                self._log(stage.key, "loaded", own, time.perf_counter() - started)
                self.memo[stage.key] = (own, value)
                return value
        return _NONE

    def _compute(self, stage: Stage, own: str, inputs: dict[StageKey, Any]):
        if self.announce is not None:
            self.announce(self.status_of(stage.key))
        record = self.record(stage.key)
        resuming = bool(stage.resumable and record is not None and record["key"] == own)
        if stage.resumable:
            self._write_record(stage.key, own, {"manifest": self.manifest(stage.key), "complete": False})
        started = time.perf_counter()
        self.retried.add(stage.key)
        value = stage.run(inputs, self.runtime.resumed(resuming))
        self.finish(stage.key, value, time.perf_counter() - started)
        return value

    def _info(self, stage: Stage, manifest: dict, value, seconds: float) -> dict:
        return {"manifest": manifest, "complete": True, "seconds": round(seconds, 3),
                "retry": bool(stage.finished is not None and not stage.finished(value)),
                "identity": stage.identity(value) if stage.identity is not None else None,
                "store": self._revisions(stage)}

    def is_current(self, key: StageKey | str) -> bool:
        """Whether a stage's cached result matches its key today (without loading it into the memo)."""
        return self.peek(key, memo=False)[0]

    def peek(self, key: StageKey | str, *, memo: bool = True) -> tuple[bool, Any]:
        """``(True, result)`` when a stage's cached result matches its key today (the memo's first, with
        ``memo``), else ``(False, None)``: nothing computed, memoised or logged (``pmrag status`` reads results
        this way)."""
        stage = self.stage(key)
        own = self.key(stage.key)
        if memo and stage.key in self.memo and self.memo[stage.key][0] == own:
            return True, self.memo[stage.key][1]
        record = self.record(stage.key)
        if (record is None or record["key"] != own or not record.get("complete") or foreign(stage.key, record)
                or self._store_changed(stage, record)):
            return False, None
        value, valid = self._load(stage.key, own)
        return (True, value) if valid and self._outputs_present(stage, value) else (False, None)

    def finish(self, key: StageKey | str, value, seconds: float) -> None:
        """Record ``value`` as a stage's result under its current key (for a stage computed elsewhere, e.g. a
        notebook executed by the runner's worker threads)."""
        stage = self.stage(key)
        manifest = self.manifest(stage.key, {})
        own = digest(manifest)
        self._save(stage.key, own, value)
        info = self._info(stage, manifest, value, seconds)
        self._write_record(stage.key, own, {**info, "signature": sign(_signed_text(stage.key, own, info))})
        self._log(stage.key, "computed", own, seconds)
        self.memo[stage.key] = (own, value)

    def _log(self, key: StageKey, action: str, own: str, seconds: float) -> None:
        line = json.dumps({"pid": os.getpid(), "stage": str(key), "action": action, "key": own[:16],
                           "seconds": round(seconds, 4), "at": time.time()})
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / LOG_FILE, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> list[StageStatus]:
        """Each stage as cached / stale (with the reason) / incomplete / missing, computing nothing."""
        keys: dict[StageKey, str] = {}
        return [self.status_of(key, keys) for key in self.stages]

    def status_of(self, key: StageKey | str, _keys: dict[StageKey, str] | None = None) -> StageStatus:
        """One stage's :class:`StageStatus`, in the words ``pmrag status`` prints, computing nothing."""
        keys = {} if _keys is None else _keys
        key = StageKey.of(key)
        name = str(key)
        own = self.key(key, keys)
        record = self.record(key)
        if record is None:
            return StageStatus(name, "missing", "never computed")
        if record["key"] != own:
            reason = (explain(record["manifest"], self.manifest(key, keys)) if record.get("manifest")
                      else "recorded by an older pmrag, without a manifest")
            return StageStatus(name, "stale", reason)
        if not record.get("complete"):
            return StageStatus(name, "incomplete", "interrupted; the next run resumes it")
        if why := foreign(key, record):
            return StageStatus(name, "stale", why)
        if changed := self._store_changed(self.stages[key], record):
            return StageStatus(name, "stale", changed)
        if record.get("retry"):
            return StageStatus(name, "partial", "finished with parts to retry; `pmrag study` retries them")
        if not self._pickle_path(key).is_file():
            return StageStatus(name, "missing", f"cached result {self._pickle_path(key).name} is gone")
        return StageStatus(name, "cached", "")


def _signed_text(key: StageKey, own: str, info: dict) -> str:
    """What a record's signature covers: the stage, its key and what dependents and checks read of it."""
    return json.dumps([str(key), own, info.get("identity"), info.get("store"), info.get("retry")], sort_keys=True)


def foreign(key: StageKey, record: dict) -> str:
    """Why a complete record was not signed by this user ("" when it was): a run folder of someone else's, an
    altered one, or one recorded before results were sealed."""
    if not record.get("complete") or signed(_signed_text(key, record["key"], record), record.get("signature")):
        return ""
    why = ("recorded by a pmrag that did not seal results yet" if "signature" not in record
           else "computed by another user's pmrag, or altered")
    return f"{why}: it is not loaded, the next run recomputes it (results are sealed per user: pmrag.study.sealed)"


def explain(old: dict, new: dict) -> str:
    """Why a stage's key changed, from its recorded and current manifests (params, code, files, upstream)."""
    reasons = []
    old_params, new_params = old.get("params", {}), new.get("params", {})
    for path in sorted(set(old_params) | set(new_params)):
        before, after = old_params.get(path), new_params.get(path)
        if before != after:
            reasons += _param_changes(path, before, after)
    if old.get("code") != new.get("code"):
        reasons.append("stage code changed")
    for kind, label in (("modules", "module"), ("files", "file"), ("packages", "package")):
        before, after = old.get(kind, {}), new.get(kind, {})
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                reasons.append(f"{label} {name} changed")
    for name in sorted(set(old.get("needs", {})) | set(new.get("needs", {}))):
        if old.get("needs", {}).get(name) != new.get("needs", {}).get(name):
            reasons.append(f"upstream {name}")
    if old.get("engine") != new.get("engine"):
        reasons.append("engine version changed")
    return "; ".join(reasons) or "key changed"


def _param_changes(path: str, before, after) -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        changes = []
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                changes += _param_changes(f"{path}.{key}", before.get(key), after.get(key))
        return changes
    return [f"param {path}: {_shown(before)} → {_shown(after)}"]


def _shown(value) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 59)


def _process_running(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0 checks without signalling; one of another user's exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):   # another user's; or no pid at all, so no file of ours: kept
        return True
    return True
