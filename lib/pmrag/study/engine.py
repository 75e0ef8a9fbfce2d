"""The stage engine: declared stages, complete cache keys, a persistent cache and an in-process memo.

A :class:`Stage` declares everything its result depends on: the upstream stages it reads (``needs``), the
params it reads (dotted paths such as ``bm25.k1`` or whole sections such as ``chunking``), the source
modules of the code it runs (``modules``: a module, or a package meaning every ``.py`` under it; its own
``compute`` function is always included), its input files (``files``: content, not names alone) and the
packages whose version can change its output (``packages``, e.g. the embedding model's).  Its **key** is the
SHA-256 of all of them, with each upstream stage contributing its own key, so a change anywhere recomputes
exactly the stages that depend on it, and nothing else.

What keeps the declaration honest: a stage's ``compute`` reads upstream results only through
``ctx.get(name)``, which refuses a stage it did not declare, and params only through ``ctx.params``, which
refuses a section it did not declare.  The params check is per section: a stage that declares only some keys
of a section (``embedding.model`` but not ``embedding.batch_size``) leaves out, on purpose, the keys that
cannot change its result (batch sizes, timeouts, pacing), and gets the section object itself, which the
pipeline's functions take.

Results are pickled under ``<run>/stages/`` with their key; the ``stages`` table of the store records each
stage's key and its manifest (the parts of the key), which is how :meth:`Engine.status` explains, without
computing anything, why a stage is stale.  Input files are fingerprinted by content with a size + mtime fast
path (``file_fingerprints`` table): an unchanged file is hashed once.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import pickle
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine as SqlEngine, delete, insert, select

from pmrag.core import store
from pmrag.core.store import file_fingerprints
from pmrag.core.errors import PmragError

ENGINE_VERSION = 1
_NONE = object()  # "no usable result" (None is a result a stage may return)  # bump when the manifest's form changes: every key changes with it
STAGE_DIR = "stages"
LOG_FILE = "stage_log.jsonl"

class StageError(PmragError):
    """A stage declaration is inconsistent (an undeclared read, an unknown stage)."""


@dataclass(frozen=True)
class Stage:
    """One declared stage (see the module docstring)."""

    name: str
    compute: Callable[[Context], Any]
    needs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    outputs: Callable[[Any], Iterable[Path]] = field(default=lambda value: ())
    resumable: bool = False
    finished: Callable[[Any], bool] | None = None     # False: a result worth using, with parts to retry
    identity: Callable[[Any], str] | None = None      # what dependents key on instead of this stage's key
    description: str = ""


# ------------------------------------------------------------------------------------------- digests

_MODULE_DIGESTS: dict[str, str] = {}


def module_digest(name: str) -> str:
    """SHA-256 of a module's source, or of every ``.py`` file under a package (by relative path and content).

    Computed once per process: the code a process runs is the code it imported.
    """
    if name not in _MODULE_DIGESTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise StageError(f"stage declares module {name!r}, which cannot be found")
        digest = hashlib.sha256()
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            for path in sorted(root.rglob("*.py")):
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        else:
            digest.update(Path(spec.origin).read_bytes())
        _MODULE_DIGESTS[name] = digest.hexdigest()
    return _MODULE_DIGESTS[name]


_FUNCTION_DIGESTS: dict[object, str] = {}
_PACKAGE_VERSIONS: dict[str, str] = {}
_FILE_DIGESTS: dict[str, tuple[int, int, str]] = {}


def function_digest(function: Callable) -> str:
    """SHA-256 of a function's own source (a stage's adapter), so editing one adapter leaves the others cached.

    Once per process, like :func:`module_digest`: the code a process runs is the code it imported.
    """
    code = function.__code__
    if code not in _FUNCTION_DIGESTS:
        _FUNCTION_DIGESTS[code] = hashlib.sha256(inspect.getsource(function).encode("utf-8")).hexdigest()
    return _FUNCTION_DIGESTS[code]


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


def _jsonable(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def params_value(params, dotted: str):
    """The value at a dotted params path, as JSON (sections as mappings)."""
    value = params
    for part in dotted.split("."):
        value = getattr(value, part)
    return _jsonable(value)


def digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------- params view

class ParamsView:
    """``params`` restricted to what a stage declared: a section it did not name is an error, not a silent
    read that the cache key would miss."""

    DERIVED = {
        "metric_ks": ("retrieval.ks", "analysis.failure_k", "analysis.recovery_ks"),
        "run_dir": (), "path": (),
        # cannot change a result: a permission, the route to a remote API, and a content-addressed cache (keyed
        # by model and exact text)
        "allow_remote": (), "proxy": (), "cache_dir": (),
    }

    def __init__(self, params, declared: tuple[str, ...], stage: str):
        self._params, self._declared, self._stage = params, declared, stage

    def _covered(self, path: str) -> bool:
        return any(path == d or path.startswith(d + ".") or d.startswith(path + ".") for d in self._declared)

    def __getattr__(self, name: str):
        if name in self.DERIVED:
            missing = [p for p in self.DERIVED[name] if not self._covered(p)]
            if missing:
                raise StageError(f"stage {self._stage} uses params.{name}() without declaring {', '.join(missing)}")
        elif not self._covered(name):
            raise StageError(f"stage {self._stage} reads params.{name} without declaring it")
        return getattr(self._params, name)


# ------------------------------------------------------------------------------------------- context

class Context:
    """What a stage's ``compute`` sees: its declared upstream results, its declared params, the run folder,
    the store, and whether it resumes its own interrupted run (``resuming``)."""

    def __init__(self, engine: Engine, stage: Stage, resuming: bool):
        self._engine, self.stage, self.resuming = engine, stage, resuming
        self.params = ParamsView(engine.params, stage.params, stage.name)
        self.store = engine.store
        self.run_dir = engine.run_dir
        self.progress = engine.progress

    def get(self, name: str):
        if name not in self.stage.needs:
            raise StageError(f"stage {self.stage.name} reads stage {name} without declaring it in needs")
        return self._engine.get(name)

    def path(self, *parts: str) -> Path:
        target = self.run_dir.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target


# ------------------------------------------------------------------------------------------- engine

@dataclass(frozen=True)
class StageStatus:
    name: str
    state: str          # cached | stale | incomplete | partial | missing
    reason: str


class Engine:
    """Keys, the persistent cache and the memo for one study's stage graph."""

    def __init__(self, stages: Iterable[Stage], params, store_engine: SqlEngine, run_dir: Path):
        self.stages = {s.name: s for s in stages}
        self.params, self.store, self.run_dir = params, store_engine, Path(run_dir)
        self.memo: dict[str, tuple[str, Any]] = {}
        self.progress = False
        for stage in self.stages.values():
            unknown = [n for n in stage.needs if n not in self.stages]
            if unknown:
                raise StageError(f"stage {stage.name} needs unknown stage(s) {', '.join(unknown)}")

    # -- keys --------------------------------------------------------------------------------------
    def manifest(self, name: str, _keys: dict[str, str] | None = None) -> dict:
        """Everything ``name``'s key is made of (upstream stages by their keys)."""
        keys = {} if _keys is None else _keys
        stage = self._stage(name)
        return {
            "engine": ENGINE_VERSION,
            "stage": name,
            "code": function_digest(stage.compute),
            "needs": {n: self._upstream(n, keys) for n in stage.needs},
            "params": {p: params_value(self.params, p) for p in stage.params},
            "modules": {m: module_digest(m) for m in stage.modules},
            "files": {str(f): file_digest(self.store, f) for f in stage.files},
            "packages": {p: package_version(p) for p in stage.packages},
        }

    def key(self, name: str, _keys: dict[str, str] | None = None) -> str:
        keys = {} if _keys is None else _keys
        if name not in keys:
            keys[name] = digest(self.manifest(name, keys))
        return keys[name]

    def _upstream(self, name: str, keys: dict[str, str]) -> str:
        """What a dependent keys on: the upstream's key, or for a stage with an ``identity`` (a resumable stage
        whose retries can change its result under the same key) the identity of the result it recorded."""
        key = self.key(name, keys)
        if self._stage(name).identity is None:
            return key
        record = self.record(name)
        if record is not None and record["key"] == key and record.get("complete") and record.get("identity"):
            return record["identity"]
        return key

    def keys(self) -> dict[str, str]:
        keys: dict[str, str] = {}
        for name in self.stages:
            self.key(name, keys)
        return keys

    # -- records -----------------------------------------------------------------------------------
    def record(self, name: str) -> dict | None:
        with self.store.connect() as conn:
            row = conn.execute(select(store.stages.c.key, store.stages.c.info).where(store.stages.c.name == name)).first()
        return None if row is None else {"key": row.key, **json.loads(row.info)}

    def _write_record(self, name: str, key: str, info: dict) -> None:
        with self.store.begin() as conn:
            conn.execute(insert(store.stages).prefix_with("OR REPLACE"),
                         [{"name": name, "key": key, "info": json.dumps(info, sort_keys=True, ensure_ascii=False)}])

    def _pickle_path(self, name: str) -> Path:
        return self.run_dir / STAGE_DIR / (name.replace(":", "__") + ".pkl")

    def _load(self, name: str, key: str):
        try:
            with open(self._pickle_path(name), "rb") as fh:
                stored_key, value = pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
            return None, False
        return value, stored_key == key

    def _save(self, name: str, key: str, value) -> None:
        path = self._pickle_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump((key, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)

    def _outputs_present(self, stage: Stage, value) -> bool:
        return all(Path(p).exists() for p in stage.outputs(value))

    def forget(self) -> None:
        """Drop every stage record and cached result of this run (``pmrag study --fresh``)."""
        with self.store.begin() as conn:
            conn.execute(delete(store.stages))
        for path in (self.run_dir / STAGE_DIR).glob("*.pkl"):
            path.unlink()
        self.memo.clear()

    # -- results -----------------------------------------------------------------------------------
    def get(self, name: str, *, retry: bool = False):
        """The stage's result: from the memo, else the cache, else computed (upstream first), each checked by key.

        ``retry`` recomputes a stage whose cached result has parts to retry (``Stage.finished`` said so: e.g.
        summaries that failed under ``failure_policy: retry``); the runner asks for that, notebooks do not.
        """
        key = self.key(name)
        stage = self._stage(name)
        cached = self._cached(stage, key, retry)
        if cached is not _NONE:
            return cached
        for upstream in stage.needs:
            self.get(upstream, retry=retry)
        key = self.key(name)  # again: an upstream with an identity keys its dependents on its new result
        cached = self._cached(stage, key, retry)  # ... which may be one this stage already has
        if cached is not _NONE:
            return cached
        return self._compute(stage, key)

    def _cached(self, stage: Stage, key: str, retry: bool):
        """The memoised or cached result under ``key``, else ``_NONE``."""
        name = stage.name
        record = self.record(name)
        wants_retry = retry and record is not None and record.get("retry")
        if wants_retry:
            return _NONE
        if name in self.memo and self.memo[name][0] == key:
            return self.memo[name][1]
        if record is not None and record["key"] == key and record.get("complete"):
            started = time.perf_counter()
            value, valid = self._load(name, key)
            if valid and self._outputs_present(stage, value):
                self._log(name, "loaded", key, time.perf_counter() - started)
                self.memo[name] = (key, value)
                return value
        return _NONE

    def _compute(self, stage: Stage, key: str):
        record = self.record(stage.name)
        resuming = bool(stage.resumable and record is not None and record["key"] == key)
        if stage.resumable:
            self._write_record(stage.name, key, {"manifest": self.manifest(stage.name), "complete": False})
        started = time.perf_counter()
        value = stage.compute(Context(self, stage, resuming))
        self.finish(stage.name, value, time.perf_counter() - started)
        return value

    def _info(self, stage: Stage, manifest: dict, value, seconds: float) -> dict:
        return {"manifest": manifest, "complete": True, "seconds": round(seconds, 3),
                "retry": bool(stage.finished is not None and not stage.finished(value)),
                "identity": stage.identity(value) if stage.identity is not None else None}

    def is_current(self, name: str) -> bool:
        """Whether ``name``'s cached result matches its key today (without loading it into the memo)."""
        key = self.key(name)
        record = self.record(name)
        if record is None or record["key"] != key or not record.get("complete"):
            return False
        value, valid = self._load(name, key)
        return valid and self._outputs_present(self._stage(name), value)

    def finish(self, name: str, value, seconds: float) -> None:
        """Record ``value`` as ``name``'s result under its current key (for a stage computed elsewhere, e.g. a
        notebook executed by the runner's worker threads)."""
        manifest = self.manifest(name, {})
        key = digest(manifest)
        self._save(name, key, value)
        self._write_record(name, key, self._info(self._stage(name), manifest, value, seconds))
        self._log(name, "computed", key, seconds)
        self.memo[name] = (key, value)

    def _log(self, name: str, action: str, key: str, seconds: float) -> None:
        line = json.dumps({"pid": os.getpid(), "stage": name, "action": action, "key": key[:16],
                           "seconds": round(seconds, 4), "at": time.time()})
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / LOG_FILE, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def _stage(self, name: str) -> Stage:
        try:
            return self.stages[name]
        except KeyError:
            raise StageError(f"unknown stage {name!r} (stages: {', '.join(self.stages)})") from None

    # -- status ------------------------------------------------------------------------------------
    def status(self) -> list[StageStatus]:
        """Each stage as cached / stale (with the reason) / incomplete / missing, computing nothing."""
        keys: dict[str, str] = {}
        rows = []
        for name, stage in self.stages.items():
            key = self.key(name, keys)
            record = self.record(name)
            if record is None:
                rows.append(StageStatus(name, "missing", "never computed"))
            elif record["key"] != key:
                reason = (explain(record["manifest"], self.manifest(name, keys)) if record.get("manifest")
                          else "recorded by an older pmrag, without a manifest")
                rows.append(StageStatus(name, "stale", reason))
            elif not record.get("complete"):
                rows.append(StageStatus(name, "incomplete", "interrupted; the next run resumes it"))
            elif record.get("retry"):
                rows.append(StageStatus(name, "partial", "finished with parts to retry; `pmrag study` retries them"))
            elif not self._pickle_path(name).is_file():
                rows.append(StageStatus(name, "missing", f"cached result {self._pickle_path(name).name} is gone"))
            else:
                rows.append(StageStatus(name, "cached", ""))
        return rows


def _short(value, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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
    return [f"param {path}: {_short(before)} → {_short(after)}"]
