"""How a stage declares itself: the ``@stage`` decorator, the markers a signature uses, and the resolved
:class:`Stage` the engine keys and runs.

A stage is a function; its parameters say what it reads (:func:`resolve_stage` reads them):

==========================================  =============================================================
parameter                                   receives (and what enters the key)
==========================================  =============================================================
``chunks: Chunked``                         the result of the stage named ``chunks`` (its key)
``x: Annotated[dict, Each("runs", ...)]``   ``{item: result}`` of stage ``runs`` over a list of items
``x: SomeSection``                          the params section of that type (the whole section)
``x: Annotated[SomeSection, Keys(...)]``    the section; only the named keys enter the key
``x: Annotated[T, Derived(f, *keys)]``      ``f(params)``; the named keys enter the key
``x: Annotated[StudyParams, Restricted(f)]``  the params restricted to the keys ``f`` names (a component's)
``x: Annotated[dict, Upstreams(f)]``        ``{StageKey: result}`` of the stages ``f`` names (a component's)
``x: Annotated[tuple, Reads(f)]``           the keys of the stages ``f`` names, read outside the stage (a
                                            notebook's kernel): their keys and every params key they key on
``runtime: Runtime``                        the store, run folder, cache folder, permissions: never keyed
the decorator's ``item`` parameter          the stage's item (a representation, a retriever, a notebook)
==========================================  =============================================================

A parameter that matches none of these is an error when the graph is built, so a stage cannot read something
its key misses.  ``f`` above is a function of ``(params, item)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from sqlalchemy import Engine as SqlEngine

from pmrag.core.errors import PmragError
from pmrag.core.names import StageKey
from pmrag.core.params import Section, StudyParams, unkeyed_keys
from pmrag.study.closure import function_code, is_orchestration, module_closure
from pmrag.study.params import FOLDER_KEYS


class DeclarationError(PmragError):
    """A stage's signature names something that is neither a stage, a params section nor a marker."""


# ------------------------------------------------------------------------------------------- what a stage sees

@dataclass
class Runtime:
    """What a stage may use that cannot change its result, so never enters a key: where to write (the store,
    the run folder), the content-addressed cache folder (entries keyed by model and exact text), where the
    notebooks are (their content is keyed) and the params file (the notebooks' parameter), the permission and the route to call remote models, progress bars,
    and whether the stage resumes its own interrupted run."""

    store: SqlEngine
    run_dir: Path
    cache_dir: Path
    notebooks_dir: Path | None = None
    params_path: Path | None = None
    allow_remote: bool = False
    proxy: str | None = None
    progress: bool = False
    resuming: bool = False

    def resumed(self, resuming: bool) -> Runtime:
        return dataclasses.replace(self, resuming=resuming)

    def path(self, *parts: str) -> Path:
        """A path under the run folder, its parent folder created."""
        target = Path(self.run_dir).joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def relative(self, path: Path | str) -> str:
        """``path`` relative to the run folder (what stage results record: a moved run folder stays valid)."""
        return Path(path).resolve().relative_to(Path(self.run_dir).resolve()).as_posix()


# ------------------------------------------------------------------------------------------- markers

ParamsFunction = Callable[[StudyParams, Any], Iterable[str]]


@dataclass(frozen=True)
class Each:
    """``{item: result}`` of stage ``name`` for every item of ``items(params)`` (in that order)."""

    name: str
    items: Callable[[StudyParams], Iterable[Any]]


@dataclass(frozen=True)
class Keys:
    """Only these keys of the section (relative to it) enter the key; ``keys`` may be one function of
    ``(params, item)`` giving them (keys that depend on a chosen backend)."""

    keys: tuple[str | ParamsFunction, ...]

    def __init__(self, *keys: str | ParamsFunction):
        object.__setattr__(self, "keys", keys)

    def names(self, params: StudyParams, item) -> tuple[str, ...]:
        found = []
        for key in self.keys:
            found += [key] if isinstance(key, str) else list(key(params, item))
        return tuple(found)


@dataclass(frozen=True)
class Derived:
    """A value computed from the params (``function(params)``); ``keys`` (dotted) are what it reads."""

    function: Callable[[StudyParams], Any]
    keys: tuple[str, ...]

    def __init__(self, function: Callable[[StudyParams], Any], *keys: str):
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "keys", keys)


@dataclass(frozen=True)
class Restricted:
    """The params restricted to the dotted keys ``keys(params, item)`` (a component's sections): reading any other
    section is an error; the runtime's ``cache_dir`` is readable and unkeyed."""

    keys: ParamsFunction


@dataclass(frozen=True)
class Reads:
    """The stages ``stages(params, item)`` names, read by something the stage runs outside this process (a
    notebook's kernel reads them through :class:`~pmrag.study.facade.Study`): the stage follows them and keys on
    their keys (a stage with an ``identity``: on its result's) and on every params key they, and the stages they
    read, key on, so a reason to recompute names the params key; the parameter receives their keys.  A name
    without an item (``"runs"``) means every item of that stage the study has, none when it has none;
    ``name:item`` means that one.  With ``unread_params``, also every params key no stage of the study keys on
    (what only the reader shows, e.g. a caption's setting), but the folders and the keys that never change a
    result."""

    stages: Callable[[StudyParams, Any], Iterable[str]]
    unread_params: bool = False


@dataclass(frozen=True)
class Upstreams:
    """``{StageKey: result}`` of the stages ``keys(params, item)`` names (a component's upstream stages)."""

    keys: Callable[[StudyParams, Any], Iterable[StageKey]]


class ParamsView:
    """``params`` restricted to declared dotted keys: reading a section (or key) that was not declared raises,
    instead of being a silent read the key would miss.  A declared key gives access to its whole section
    object, which the pipeline's functions take."""

    def __init__(self, params: StudyParams, declared: tuple[str, ...], stage: str, cache_dir: Path | None = None):
        self._params, self._declared, self._stage, self.cache_dir = params, declared, stage, cache_dir

    def __getattr__(self, name: str):
        if not any(d == name or d.startswith(name + ".") for d in self._declared):
            raise DeclarationError(f"stage {self._stage} reads params.{name} without declaring it")
        return getattr(self._params, name)


# ------------------------------------------------------------------------------------------- @stage

@dataclass(frozen=True)
class StageSpec:
    """What ``@stage`` attaches to a stage function besides its signature (each callable takes
    ``(params, item)``): its description, the name of the parameter that receives the item, the components it
    uses (their classes' modules enter the key), the files (by content) and packages (by version) they read,
    whole packages it may run, the store data its result reflects (``reads_store``: a write there since makes it
    stale), the run-folder files its result names (``outputs(value, item)``: a result whose files are gone is
    recomputed), resumption, and what dependents key on."""

    description: str | Callable
    item: str | None = None
    components: Callable | None = None
    files: Callable | None = None
    packages: Callable | None = None
    whole_packages: tuple[str, ...] = ()
    reads_store: tuple[str, ...] = ()   # store revisions (core.store.revisions) its result reflects
    outputs: Callable[[Any, Any], Iterable[str]] = lambda value, item: ()
    resumable: bool = False
    finished: Callable[[Any], bool] | None = None      # False: a result worth keeping, with parts to retry
    identity: Callable[[Any], str] | None = None       # what dependents key on instead of the stage's key


def stage(description: str | Callable, **spec) -> Callable[[Callable], Callable]:
    """Mark a function as a stage (see :class:`StageSpec` for the keywords)."""
    def mark(function: Callable) -> Callable:
        function.__stage__ = StageSpec(description, **spec)
        return function
    return mark


def spec_of(function: Callable) -> StageSpec:
    try:
        return function.__stage__
    except AttributeError:
        raise DeclarationError(f"{function.__qualname__} is not a stage (decorate it with @stage)") from None


# ------------------------------------------------------------------------------------------- a resolved stage

@dataclass(frozen=True)
class Stage:
    """One stage of one study's graph: its function, how each parameter is filled, and every part of its key."""

    key: StageKey
    function: Callable
    bindings: Mapping[str, Callable[[Mapping[StageKey, Any], Runtime], Any]]
    needs: tuple[StageKey, ...]
    params: Mapping[str, Any]           # dotted key → its value as JSON (paths relative to the params file)
    code_digest: str
    modules: tuple[str, ...]
    files: tuple[Path, ...] = ()
    packages: tuple[str, ...] = ()
    outputs: Callable[[Any], Iterable[str]] = field(default=lambda value: ())
    resumable: bool = False
    finished: Callable[[Any], bool] | None = None
    identity: Callable[[Any], str] | None = None
    description: str = ""
    reads_store: tuple[str, ...] = ()

    def run(self, inputs: Mapping[StageKey, Any], runtime: Runtime):
        return self.function(**{name: bind(inputs, runtime) for name, bind in self.bindings.items()})


def _section_paths(model: type[Section] = StudyParams, prefix: str = "") -> dict[type, str]:
    found = {}
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, Section):
            found[info.annotation] = prefix + name
            found.update(_section_paths(info.annotation, f"{prefix}{name}."))
    return found


@cache
def section_path(kind: type) -> str | None:
    """``EmbeddingSection`` → ``embedding``; ``SyntheticSection`` → ``dataset.synthetic``; None for another type."""
    return _section_paths().get(kind)


def params_at(params: StudyParams, dotted: str):
    value = params
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _strip_optional(hint) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) < len(typing.get_args(hint)):
            return (members[0] if len(members) == 1 else hint), True
    return hint, False


@dataclass
class _Declared:
    needs: list[StageKey] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    bindings: dict[str, Callable] = field(default_factory=dict)


def resolve_stage(function: Callable, params: StudyParams, families: Mapping[str, Iterable[str]], *,
                  item=None, param_json: Callable[[str], Any], built: Mapping[StageKey, Stage] | None = None) -> Stage:
    """``function`` resolved for one study: each parameter bound, every part of the key collected.

    ``families`` maps each stage name of this study's graph to the items it exists for (``""`` for a stage
    made once); ``param_json(dotted)`` is a params value as it enters a key (relocatable); ``built`` are the
    stages resolved before it (a :class:`Reads` parameter keys on what they key on).
    """
    spec = spec_of(function)
    key = StageKey(function.__name__, "" if item is None else str(item))
    declared = _Declared()
    hints = typing.get_type_hints(function, include_extras=True)
    for name, parameter in inspect.signature(function).parameters.items():
        hint = hints.get(name, parameter.annotation)
        declared.bindings[name] = _bind(key, name, hint, params, item, spec, families, declared, built or {})
    needs = declared.needs
    sources, found, value_modules = function_code(function)
    call = lambda f: tuple(f(params, item)) if f else ()   # noqa: E731
    modules = {*found, *(component.__module__ for component in call(spec.components))}
    modules = {*module_closure(modules), *(m for m in value_modules if not is_orchestration(m)),
               *(f"{package}.**" for package in spec.whole_packages)}
    description = spec.description(params, item) if callable(spec.description) else spec.description
    return Stage(
        key=key, function=function, bindings=declared.bindings, needs=tuple(dict.fromkeys(needs)),
        params={p: param_json(p) for p in dict.fromkeys(declared.params)},
        code_digest=hashlib.sha256("\0".join(sources).encode("utf-8")).hexdigest(), modules=tuple(sorted(modules)),
        files=tuple(Path(f) for f in call(spec.files)), packages=tuple(dict.fromkeys(call(spec.packages))),
        outputs=lambda value: spec.outputs(value, item), resumable=spec.resumable, finished=spec.finished,
        identity=spec.identity, description=description, reads_store=spec.reads_store)


def _bind(key: StageKey, name: str, hint, params: StudyParams, item, spec: StageSpec,
          families: Mapping[str, Iterable[str]], declared: _Declared, built: Mapping[StageKey, Stage]) -> Callable:
    """How parameter ``name`` of stage ``key`` is filled (recording what it adds to the key)."""
    marker = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, _MARKERS)), None)
    base, optional = _strip_optional(typing.get_args(hint)[0] if marker is not None else hint)
    if isinstance(marker, Reads):
        targets = read_stages(key, marker.stages(params, item), families)
        for target in targets:
            _upstream(key, name, target, False, families, declared)
        declared.params += keyed_params(targets, built)
        if marker.unread_params:
            declared.params += unread_params(built.values())
        return lambda inputs, runtime: targets
    if isinstance(marker, Each):
        items = list(marker.items(params))
        targets = [StageKey(marker.name, str(i)) for i in items]
        for target in targets:
            _upstream(key, name, target, False, families, declared)
        return lambda inputs, runtime: {i: inputs[t] for i, t in zip(items, targets)}
    if isinstance(marker, Upstreams):
        targets = list(marker.keys(params, item))
        for target in targets:
            _upstream(key, name, target, False, families, declared)
        return lambda inputs, runtime: {t: inputs[t] for t in targets}
    if isinstance(marker, Derived):
        declared.params += marker.keys
        value = marker.function(params)
        return lambda inputs, runtime: value
    if isinstance(marker, Restricted):
        keys = tuple(marker.keys(params, item))
        declared.params += keys
        return lambda inputs, runtime: ParamsView(params, keys, str(key), runtime.cache_dir)
    if base is Runtime:
        return lambda inputs, runtime: runtime
    if name == spec.item:
        return lambda inputs, runtime: item
    path = section_path(base) if isinstance(base, type) else None
    if path is not None:
        keys = marker.names(params, item) if isinstance(marker, Keys) else ("",)
        declared.params += [f"{path}.{k}" if k else path for k in keys]
        value = params_at(params, path)
        return lambda inputs, runtime: value
    if name in families:
        return _upstream(key, name, StageKey(name), optional, families, declared)
    raise DeclarationError(f"stage {key}: parameter {name!r} names no stage, params section or marker")


def _upstream(key: StageKey, name: str, target: StageKey, optional: bool, families, declared: _Declared) -> Callable:
    if target.item not in set(families.get(target.name, ())):
        if optional:
            return lambda inputs, runtime: None
        raise DeclarationError(f"stage {key}: parameter {name!r} reads stage {target}, which this study does not have")
    declared.needs.append(target)
    return lambda inputs, runtime: inputs[target]


def read_stages(key: StageKey, names: Iterable[str], families: Mapping[str, Iterable[str]]) -> tuple[StageKey, ...]:
    """The stages ``names`` means in this study (:class:`Reads`: a bare name is every item of that stage); a name
    that is no stage of any study is a :class:`DeclarationError` naming the reader."""
    found: list[StageKey] = []
    for written in names:
        wanted = StageKey.of(written)
        if wanted.name not in families:
            raise DeclarationError(f"stage {key} reads stage {written!r}, which is no stage of a study "
                                   f"(stages: {', '.join(families)})")
        items = tuple(families[wanted.name])
        found += ([StageKey(wanted.name, i) for i in items] if not wanted.item
                  else [wanted] if wanted.item in items else [])
    return tuple(dict.fromkeys(found))


def keyed_params(targets: Iterable[StageKey], built: Mapping[StageKey, Stage]) -> list[str]:
    """The params keys ``targets`` and every stage they read (transitively) key on, each once, in reading order."""
    keys: dict[str, None] = {}
    seen: set[StageKey] = set()
    pending = list(targets)
    while pending:
        current = pending.pop(0)
        if current in seen or current not in built:
            continue
        seen.add(current)
        keys.update(dict.fromkeys(built[current].params))
        pending += built[current].needs
    return list(keys)


def unread_params(stages: Iterable[Stage]) -> list[str]:
    """The dotted params keys (sections' keys, not sections) that none of ``stages`` keys on, but the folders and
    the keys that never change a result (:func:`~pmrag.core.params.unkeyed_keys`).  The keys of a stage the study
    does not have (``answers.*`` while the answer step is off, ``hybrid.multi_*`` while ``hybrid.multi`` lists
    nothing) are among them: a notebook may read them to say the stage is off, so turning it on re-executes it."""
    keyed = {dotted for stage in stages for dotted in stage.params}
    skipped = {*FOLDER_KEYS, *unkeyed_keys()}

    def covered(dotted: str) -> bool:
        parts = dotted.split(".")
        return any(".".join(parts[:n]) in keyed for n in range(1, len(parts) + 1))

    return [dotted for dotted in _leaf_keys(StudyParams) if dotted not in skipped and not covered(dotted)]


def _leaf_keys(model: type[Section], prefix: str = "") -> list[str]:
    found = []
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, Section):
            found += _leaf_keys(info.annotation, f"{prefix}{name}.")
        else:
            found.append(prefix + name)
    return found


_MARKERS = (Each, Keys, Derived, Restricted, Upstreams, Reads)
