"""Loading a params file: YAML → :class:`~pmrag.core.params.StudyParams`, validated once, paths resolved.

Every relative path is resolved against the folder that holds the params file.  Anything wrong (YAML
syntax, a duplicate key, an unknown key, a wrong type, NaN, a value out of range, an unknown retriever, a
pairing that names a retriever the study does not run, a missing input file) is a
:class:`~pmrag.core.errors.ParamsError` whose one-line message names the file and the dotted key.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from pmrag.core.errors import ParamsError
from pmrag.core.params import StudyParams

SHIPPED_PROMPT_SETS = ("ja", "en")


def _refuse_duplicates(node, origin: str, prefix: str = "") -> None:
    """A mapping with the same key twice is refused, naming the dotted key and both lines (PyYAML would keep the
    last one silently)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}" if isinstance(key_node, yaml.ScalarNode) else f"{prefix}?"
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ParamsError(f"{origin}: duplicate key '{key}' on lines {seen[key]} and {line}")
            seen[key] = line
            _refuse_duplicates(value_node, origin, f"{key}.")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicates(item, origin, f"{prefix.removesuffix('.')}[{index}].")


def read_yaml(path: Path) -> dict:
    """The params file as a mapping; a YAML error names the line, a duplicate key the dotted key and both lines."""
    text = path.read_text(encoding="utf-8")
    try:
        _refuse_duplicates(yaml.compose(text, Loader=yaml.SafeLoader), str(path))
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: the top level must be a mapping of keys, got {type(raw).__name__}")
    return raw


def component_context() -> dict:
    """What the schema checks retriever names against: the registered methods and their variants."""
    from pmrag.retrieve.registry import RETRIEVERS

    return {"methods": set(RETRIEVERS.names()),
            "variants": {name: set(RETRIEVERS.get(name).variants()) for name in RETRIEVERS.names()}}


def one_line(error: ValidationError, origin: str) -> str:
    """The first validation error as ``<file>: key 'a.b[0]': <what was expected>, got <value>``."""
    first = error.errors(include_url=False)[0]
    dotted = ""
    for part in first["loc"]:
        dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else str(part))
    message = first["msg"].removeprefix("Value error, ")
    if not dotted:   # a check across sections names its key first: "hybrid.pairings[0]: ..."
        named = re.match(r"([a-z_]+(?:\.[a-z_]+)*(?:\[\d+\])?): (.*)", message)
        if named:
            dotted, message = named.groups()
    if first["type"] == "extra_forbidden":
        return f"{origin}: unknown key '{dotted}'"
    if first["type"] == "missing":
        return f"{origin}: missing key '{dotted}'"
    where = f"key '{dotted}'" if dotted else "params"
    shown = first.get("input")
    got = "" if first["type"].startswith("value_error") or isinstance(shown, dict) else f", got {shown!r}"
    return f"{origin}: {where}: {message}{got}"


def _resolve(base: Path, value: str) -> str:
    return str((base / Path(value).expanduser()).resolve())


def load_params(path) -> StudyParams:
    """Read, validate and resolve a params YAML file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"params file not found: {path}")
    origin = str(path)
    try:
        params = StudyParams.model_validate(read_yaml(path), context=component_context())
    except ValidationError as exc:
        raise ParamsError(one_line(exc, origin)) from None
    base = path.resolve().parent
    dataset = params.dataset
    inputs = []
    for index, item in enumerate(dataset.inputs):
        resolved = _resolve(base, item)
        if not Path(resolved).is_file():
            raise ParamsError(f"{origin}: key 'dataset.inputs[{index}]': file not found: {resolved}")
        inputs.append(resolved)
    questions = dataset.questions and _resolve(base, dataset.questions)
    if questions and not Path(questions).is_file():
        raise ParamsError(f"{origin}: key 'dataset.questions': file not found: {questions}")
    prompts = params.representations.prompts
    if prompts not in SHIPPED_PROMPT_SETS:
        prompts = _resolve(base, prompts)
        if not Path(prompts).is_dir():
            raise ParamsError(f"{origin}: key 'representations.prompts': folder not found: {prompts}")
    spec = params.bm25.tokenizer_spec and _resolve(base, params.bm25.tokenizer_spec)
    if spec and not Path(spec).is_file():
        raise ParamsError(f"{origin}: key 'bm25.tokenizer_spec': file not found: {spec}")
    resolved = params.model_copy(update={
        "outputs_dir": _resolve(base, params.outputs_dir), "notebooks_dir": _resolve(base, params.notebooks_dir),
        "cache_dir": _resolve(base, params.cache_dir),
        "dataset": dataset.model_copy(update={"inputs": tuple(inputs), "questions": questions}),
        "representations": params.representations.model_copy(update={"prompts": prompts}),
        "bm25": params.bm25.model_copy(update={"tokenizer_spec": spec}),
    })
    resolved._source = path.resolve()
    return resolved
