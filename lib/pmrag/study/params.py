"""Loading a params file: YAML → :class:`~pmrag.core.params.StudyParams`, validated once, paths resolved.

Every relative path is resolved against the folder that holds the params file.  Anything wrong (YAML
syntax, a duplicate key, an unknown key, a wrong type, NaN, a value out of range, an unknown retriever, a
pairing that names a retriever the study does not run, a missing input file, a component file that cannot be
imported) is a :class:`~pmrag.core.errors.ParamsError` whose one-line message names the file and the dotted key.
The study's own component files (``retrieval.plugins``) are imported before the retriever names are checked.

A params file is small, plain YAML, and is read defensively: a file over :data:`MAX_PARAMS_BYTES` is refused
before it is parsed, and so are anchors and aliases (``&name`` / ``*name``: a params file has no use for them,
and a few lines of them expand to gigabytes, the "billion laughs"), nesting deeper than :data:`MAX_DEPTH`
levels and integers too long for Python to convert.  Messages quote values shortened
(:func:`~pmrag.core.text.shown`), so an error stays one short line whatever the file holds.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from pmrag.core.errors import ParamsError
from pmrag.core.params import RetrievalSection, StudyParams
from pmrag.core.text import clip, shown

SHIPPED_PROMPT_SETS = ("ja", "en")
PATH_KEYS = ("dataset.inputs", "dataset.questions", "representations.prompts", "bm25.tokenizer_spec",
             "retrieval.plugins")
"""Keys whose values are paths (resolved against the params file's folder; a shipped prompt set is a name)."""
FOLDER_KEYS = ("outputs_dir", "notebooks_dir", "cache_dir")
"""Where a study's outputs, notebooks and caches are: locations, never part of what a result is."""
MAX_PARAMS_BYTES = 1 << 20   # 1 MiB; the demo's params file is about 3 KB
MAX_DEPTH = 20               # mapping/list levels; a params file uses 3

class _Refused(yaml.YAMLError):
    """YAML a params file may not use: ``line`` (1-based) and what was found."""

    def __init__(self, line: int, problem: str):
        super().__init__(problem)
        self.line = line
        self.problem = problem


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing anchors, aliases, deep nesting and integers beyond Python's digit limit.

    The checks sit in the composer, before any alias is expanded or any node constructed."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(line, "YAML anchors and aliases (&name, *name) are not allowed in a params file; "
                                 "write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(line, f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:   # beyond sys.get_int_max_str_digits(); no params value needs such a number
            raise _Refused(node.start_mark.line + 1, "an integer too long to convert") from None


_ParamsLoader.add_constructor("tag:yaml.org,2002:int", _ParamsLoader.construct_yaml_int)


def _refuse_duplicates(node, origin: str, prefix: str = "") -> None:
    """A mapping with the same key twice is refused, naming the dotted key and both lines (PyYAML would keep the
    last one silently)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}" if isinstance(key_node, yaml.ScalarNode) else f"{prefix}?"
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ParamsError(f"{origin}: duplicate key '{clip(key)}' on lines {seen[key]} and {line}")
            seen[key] = line
            _refuse_duplicates(value_node, origin, f"{key}.")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicates(item, origin, f"{prefix.removesuffix('.')}[{index}].")


def _read_text(path: Path) -> str:
    """The file's text: refused over :data:`MAX_PARAMS_BYTES` (never read whole) or when not UTF-8."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_PARAMS_BYTES + 1)
    if len(data) > MAX_PARAMS_BYTES:
        raise ParamsError(f"{path}: larger than {MAX_PARAMS_BYTES:,} bytes; a params file is a few kilobytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ParamsError(f"{path}, line {line}: not valid UTF-8 (byte {exc.start}); save the params file as UTF-8") from None


def read_yaml(path: Path) -> dict:
    """The params file as a mapping; a YAML error names the line, a duplicate key the dotted key and both lines."""
    text = _read_text(path)
    loader = None
    try:
        loader = _ParamsLoader(text)   # checks every character at once: a control character raises here
        node = loader.get_single_node()
        _refuse_duplicates(node, str(path))
        raw = (loader.construct_document(node) if node is not None else None) or {}
    except _Refused as exc:
        raise ParamsError(f"{path}, line {exc.line}: {exc.problem}") from None
    except yaml.reader.ReaderError as exc:   # a control character: PyYAML gives its position, not its line
        line = text.count("\n", 0, exc.position) + 1
        raise ParamsError(f"{path}, line {line}: not valid YAML (character #x{exc.character:04x} is not allowed)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: not valid YAML ({clip(getattr(exc, 'problem', None) or exc, 160)})") from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: the top level must be a mapping of keys, got {type(raw).__name__}")
    return raw


def import_plugins(raw: dict, base: Path, origin: str) -> tuple[str, ...]:
    """Import the component files ``retrieval.plugins`` names (:func:`pmrag.retrieve.registry.import_plugin`), so
    the retrievers they register are known when the names are checked; their resolved paths.  A malformed list, a
    missing file or one that fails to import is a ParamsError naming the key."""
    from pmrag.retrieve.registry import PluginError, import_plugin

    section = raw.get("retrieval")
    listed = section.get("plugins") if isinstance(section, dict) else None
    if listed is None:
        return ()
    try:   # the key alone: its own errors first
        plugins = RetrievalSection.model_validate({"plugins": listed}).plugins
    except ValidationError as exc:
        raise ParamsError(one_line(exc, origin, within=("retrieval",))) from None
    paths = tuple(_existing(base, item, "file", origin, f"retrieval.plugins[{index}]")
                  for index, item in enumerate(plugins))
    for index, path in enumerate(paths):
        try:
            import_plugin(Path(path))
        except PluginError as exc:
            raise ParamsError(f"{origin}: key 'retrieval.plugins[{index}]': {clip(plugins[index], 100)}: {exc}") from None
    return paths


def component_context() -> dict:
    """What the schema checks against beyond its own declarations: the registered retriever methods and their
    variants, which side of a hybrid a retriever is on (``hybrid.pairings: auto``), and the demo generator's
    fewest messages for a question count (``dataset.synthetic.n_messages``)."""
    from pmrag.retrieve.registry import RETRIEVERS
    from pmrag.retrieve.retrievers import side_of

    return {"methods": set(RETRIEVERS.names()),
            "variants": {name: set(RETRIEVERS.get(name).variants()) for name in RETRIEVERS.names()},
            "retriever_side": side_of, "synthetic_min_messages": demo_min_messages}


def rule_pairing_count(params: StudyParams, rule: str) -> int:
    """How many pairings ``hybrid.pairings: <rule>`` (auto, all) would sweep over the study's retrievers; 0 when the
    rule finds none (a study of BM25 retrievers alone has no lexical × dense pair)."""
    from pmrag.core.params import rule_pairings
    from pmrag.retrieve.retrievers import side_of

    try:
        return len(rule_pairings(rule, params.retrieval.retrievers, side_of))
    except ValueError:
        return 0


def demo_min_messages(n_questions: int, seed: int) -> int:
    """:func:`pmrag.demo.min_messages`, the demo imported only when a params file sets its sizes (0.1 s)."""
    from pmrag.demo import min_messages

    return min_messages(n_questions, seed)


def one_line(error: ValidationError, origin: str, within: tuple[str, ...] = ()) -> str:
    """The first validation error as ``<file>: key 'a.b[0]': <what was expected>, got <value>``; the value, the
    key and the message are shortened (:func:`~pmrag.core.text.shown`, :func:`~pmrag.core.text.clip`), never quoted
    whole.  ``within``: the keys of the section that was validated (``("retrieval",)``)."""
    first = error.errors(include_url=False)[0]
    dotted = ""
    for part in (*within, *first["loc"]):
        dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else str(part))
    message = first["msg"].removeprefix("Value error, ")
    if not dotted:   # a check across sections names its key first: "hybrid.pairings[0]: ..."
        named = re.match(r"([a-z_]+(?:\.[a-z_]+)*(?:\[\d+\])?): (.*)", message)
        if named:
            dotted, message = named.groups()
    dotted = clip(dotted)   # a key can be as long as the file; the message stays one short line
    if first["type"] == "extra_forbidden":
        return f"{origin}: unknown key '{dotted}'"
    if first["type"] == "missing":
        return f"{origin}: missing key '{dotted}'"
    where = f"key '{dotted}'" if dotted else "params"
    value = first.get("input")
    got = "" if first["type"].startswith("value_error") or isinstance(value, dict) else f", got {shown(value)}"
    return f"{origin}: {where}: {clip(message, 200)}{got}"


def _resolve(base: Path, value: str, origin: str, dotted: str) -> str:
    """``value`` as an absolute path (relative to ``base``, ``~`` expanded); an unusable path is a ParamsError."""
    try:
        return str((base / Path(value).expanduser()).resolve())
    except (RuntimeError, OSError, ValueError) as exc:   # ~nosuchuser, a NUL byte, a name too long
        raise ParamsError(f"{origin}: key '{dotted}': not a usable path ({clip(exc, 100)}), got {shown(value)}") from None


def _exists(path: str, kind: str) -> bool:
    """Whether ``path`` is an existing file (``kind="file"``) or folder; False also when it cannot be examined."""
    try:
        return Path(path).is_file() if kind == "file" else Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _existing(base: Path, value: str, kind: str, origin: str, dotted: str) -> str:
    """``value`` resolved (:func:`_resolve`); it must be an existing file (``kind="file"``) or folder."""
    path = _resolve(base, value, origin, dotted)
    if not _exists(path, kind):
        raise ParamsError(f"{origin}: key '{dotted}': {kind} not found: {clip(path, 200)}")
    return path


def _questions_source(base: Path, value: str, origin: str) -> str:
    """A questions file, resolved; or judgments in a store, ``store:PATH#ANNOTATOR``
    (:func:`pmrag.annotate.export.parse_store_source`), checked and kept as written (PATH relative to the
    params file: a key holds no location)."""
    from pmrag.annotate.export import STORE_PREFIX, parse_store_source

    if not value.startswith(STORE_PREFIX):
        return _existing(base, value, "file", origin, "dataset.questions")
    try:
        path, _ = parse_store_source(value, base)
    except ValueError as exc:
        raise ParamsError(f"{origin}: key 'dataset.questions': {exc}") from None
    if not _exists(str(path), "file"):
        raise ParamsError(f"{origin}: key 'dataset.questions': store not found: {clip(path, 200)}")
    return value


def _require_creatable_folder(path: str, origin: str, dotted: str) -> None:
    """``path`` must be a folder or creatable as one: its nearest existing ancestor must be a folder.
    (Otherwise the first stage to write there would fail with a traceback, long after loading.)"""
    for folder in (Path(path), *Path(path).parents):
        if os.path.isdir(folder):
            return
        if os.path.lexists(folder):
            raise ParamsError(f"{origin}: key '{dotted}': {clip(folder, 200)} exists and is not a folder")


def load_params(path, overrides=None) -> StudyParams:
    """Read, validate and resolve a params YAML file (see the module docstring).

    ``overrides``: dotted keys set over the file's values (:func:`pmrag.study.overrides.apply_overrides`), checked
    by the same schema once the file alone has passed; their errors name the key and start ``overrides:``."""
    return load_params_with(path, overrides)[1]


def load_params_with(path, overrides=None) -> tuple[StudyParams, StudyParams]:
    """The params file's own values and those with ``overrides`` set over them (the same object without
    overrides), from one read of the file (:func:`load_params`)."""
    path = Path(path)
    if not _exists(str(path), "file"):
        raise ParamsError(f"params file not found: {clip(path, 200)}")
    raw = read_yaml(path)
    if not overrides:
        own = _resolved(raw, path, str(path))
        return own, own
    from pmrag.study.overrides import OVERRIDES_ORIGIN, apply_overrides

    changed = apply_overrides(raw, overrides)   # the overrides' keys first, then the file alone, then both
    return _resolved(raw, path, str(path)), _resolved(changed, path, OVERRIDES_ORIGIN)


def _resolved(raw: dict, path: Path, origin: str) -> StudyParams:
    """A params file's mapping validated and its paths resolved; errors start with ``origin``."""
    base = path.resolve().parent
    plugins = import_plugins(raw, base, origin)
    try:
        params = StudyParams.model_validate(raw, context=component_context())
    except ValidationError as exc:
        raise ParamsError(one_line(exc, origin)) from None
    dataset = params.dataset
    inputs = tuple(_existing(base, item, "file", origin, f"dataset.inputs[{index}]")
                   for index, item in enumerate(dataset.inputs))
    questions = dataset.questions and _questions_source(base, dataset.questions, origin)
    prompts = params.representations.prompts
    if prompts not in SHIPPED_PROMPT_SETS:
        prompts = _existing(base, prompts, "folder", origin, "representations.prompts")
    spec = params.bm25.tokenizer_spec and _existing(base, params.bm25.tokenizer_spec, "file", origin,
                                                    "bm25.tokenizer_spec")
    folders = {name: _resolve(base, getattr(params, name), origin, name) for name in FOLDER_KEYS}
    for name in ("outputs_dir", "cache_dir"):   # written to; a missing notebooks_dir is the runner's to report
        _require_creatable_folder(folders[name], origin, name)
    resolved = params.model_copy(update={
        **folders,
        "dataset": dataset.model_copy(update={"inputs": inputs, "questions": questions}),
        "representations": params.representations.model_copy(update={"prompts": prompts}),
        "bm25": params.bm25.model_copy(update={"tokenizer_spec": spec}),
        "retrieval": params.retrieval.model_copy(update={"plugins": plugins}),
    })
    resolved._source = path.resolve()
    _not_its_own_store(resolved, origin)
    return resolved


def _not_its_own_store(params: StudyParams, origin: str) -> None:
    """Judgments read from a store (``store:``) come from another run's: the study's own store is what its
    ingest writes, so its gold would change under it."""
    from pmrag.annotate.export import STORE_PREFIX, parse_store_source
    from pmrag.study.runfolder import STORE_FILE

    source = params.dataset.questions
    if source and source.startswith(STORE_PREFIX):
        path, _ = parse_store_source(source, params.path.parent)
        if Path(path).resolve() == (params.run_dir / STORE_FILE).resolve():
            raise ParamsError(f"{origin}: key 'dataset.questions': names this study's own store; judgments are read "
                              "from another run's store (the run where they were graded)")
