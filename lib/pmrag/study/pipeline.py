"""A study's stage graph: every stage of :mod:`pmrag.study.stages` resolved for its params (one per item where a
stage is made per representation, retriever or notebook), keys that hold no location, and a drawing of it."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pmrag.core.params import StudyParams, unkeyed_keys
from pmrag.study import stages
from pmrag.study.declare import Stage, resolve_stage
from pmrag.study.notebooks import notebook
from pmrag.study.items import stage_items
from pmrag.study.params import PATH_KEYS

PACKAGE_ROOT = Path(stages.__file__).resolve().parents[1]


def build_stages(params: StudyParams, notebooks: list[Path] = ()) -> list[Stage]:
    """Every stage of a study with these params, each after what it needs; the notebook stages (one per
    ``notebooks`` file) follow the stages they read (:data:`pmrag.study.notebooks.NOTEBOOK_READS`)."""
    items = stage_items(params, list(notebooks))
    families = {name: tuple("" if item == "" else str(item) for item in values) for name, values in items.items()}
    param_json = relocatable_params(params)
    built: dict = {}
    for name, values in items.items():
        function = notebook if name == "notebook" else getattr(stages, name)
        for item in values:
            resolved = resolve_stage(function, params, families, item=item if item != "" else None,
                                     param_json=param_json, built=built)
            built[resolved.key] = resolved
    return list(built.values())


def relocatable_params(params: StudyParams) -> Callable[[str], Any]:
    """A params value at a dotted key as JSON, as it enters a stage's key: a path is written relative to the
    params file's folder (a study moved with its data keeps its keys; the file's content is keyed apart), and a
    key that can never change a result (:func:`~pmrag.core.params.unkeyed_keys`: how many model calls run at
    once, how fast they start) is left out, so a whole section keys without it."""
    tree = params.model_dump(mode="json")
    for dotted in unkeyed_keys():
        *parents, last = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        del node[last]
    base = params.path.parent if params.path is not None else None
    for dotted in PATH_KEYS:
        *parents, last = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        node[last] = _relative(node[last], base)

    def value(dotted: str):
        node = tree
        for part in dotted.split("."):
            node = node[part]
        return copy.deepcopy(node)

    return value


def _relative(value, base: Path | None):
    if isinstance(value, list):
        return [_relative(v, base) for v in value]
    if isinstance(value, str) and base is not None and os.path.isabs(value):
        return Path(os.path.relpath(value, base)).as_posix()
    return value


def file_label(params: StudyParams) -> Callable[[Path], str]:
    """How a stage's key names an input file (its content is keyed beside the name): inside the package as
    ``pmrag/…``, else relative to the params file's folder."""
    base = params.path.parent if params.path is not None else None

    def label(path: Path) -> str:
        resolved = Path(path).resolve()
        if resolved.is_relative_to(PACKAGE_ROOT):
            return (Path("pmrag") / resolved.relative_to(PACKAGE_ROOT)).as_posix()
        return Path(os.path.relpath(resolved, base)).as_posix() if base is not None else resolved.name

    return label


def stage_edges(built: list[Stage]) -> list[tuple[str, str]]:
    """``(upstream, stage)`` for every declared need."""
    return [(str(need), str(stage.key)) for stage in built for need in stage.needs]
