"""Trying other params values from a notebook: ``overrides``, dotted keys set over the params file's values.

A notebook's ``parameters`` cell holds ``params_path`` and ``overrides = {}``; papermill injects either
(``-p overrides '{"hybrid.beta_step": 0.1}'`` arrives as text, parsed here as YAML, of which JSON is a part).
The overrides are checked by the params schema itself (:func:`pmrag.study.params.load_params`): an unknown key or
a bad value is a one-line :class:`~pmrag.core.errors.ParamsError` naming the dotted key.

**Where results under overrides go.** Never into the study's run folder as if they were the YAML's: a study
under overrides has a run folder of its own beside it, ``<run>-overrides-<8 hex>`` (:func:`overrides_run`, named
by the overrides' content, so the same overrides find their results again).  It is seeded once with the study's
stage cache (:func:`seed_run_folder`: the store and the cached stages, whose keys hold no location), so only the
stages the overrides change are recomputed; tables and figures a notebook saves go to that folder too.  The
study's own run folder, notebooks and README are left as they were: a change becomes the study's when it is
written in the params file and ``pmrag study`` is run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sqlite3
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from pmrag.core.errors import ParamsError
from pmrag.core.names import StageKey
from pmrag.core.params import StudyParams
from pmrag.core.text import clip, shown
from pmrag.study.declare import params_at
from pmrag.study.engine import STAGE_DIR, StageStatus
from pmrag.study.params import FOLDER_KEYS, _ParamsLoader
from pmrag.study.runfolder import STORE_FILE

OVERRIDES_ORIGIN = "overrides"
LOCATION_KEYS = ("run", *FOLDER_KEYS)   # where a study reads and writes: the params file's to say, never overridden
RUN_SUFFIX = "-overrides-"


def parse_overrides(overrides) -> dict[str, Any]:
    """``overrides`` as ``{dotted key: value}``: a mapping, or its YAML / JSON text (papermill's ``-p``); a value
    that is a mapping under a key naming a section is spread into that section's keys (``{"hybrid":
    {"beta_step": 0.1}}`` is ``{"hybrid.beta_step": 0.1}``).  None, ``""`` and ``{}`` are no overrides."""
    if overrides is None or overrides == "":
        return {}
    if isinstance(overrides, str):
        loader = _ParamsLoader(overrides)
        try:
            overrides = loader.get_single_data()
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or exc
            raise ParamsError(f"{OVERRIDES_ORIGIN}: not a mapping of dotted keys ({clip(problem, 100)}), "
                              f"e.g. {{\"hybrid.beta_step\": 0.1}}") from None
        finally:
            loader.dispose()
        if overrides is None:
            return {}
    if not isinstance(overrides, Mapping):
        raise ParamsError(f"{OVERRIDES_ORIGIN}: expected a mapping of dotted keys such as "
                          f"{{\"hybrid.beta_step\": 0.1}}, got {shown(overrides)}")
    flat: dict[str, Any] = {}
    for dotted, value in overrides.items():
        if not isinstance(dotted, str) or not dotted:
            raise ParamsError(f"{OVERRIDES_ORIGIN}: keys are dotted params keys such as 'hybrid.beta_step', "
                              f"got {shown(dotted)}")
        if isinstance(value, Mapping) and value and _section(dotted) is not None:
            flat.update(parse_overrides({f"{dotted}.{k}": v for k, v in value.items()}))
        else:
            flat[dotted] = value
    return flat


def _model_of(annotation) -> type[BaseModel] | None:
    """The section class a field holds (through ``Annotated`` and ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _schema_path(parts: Sequence[str]) -> list[type[BaseModel] | None]:
    """The schema along ``parts``: for each part that is a field, the section it leads into (None: it holds a
    value); it stops at the first part that is not a field, or that comes after a value."""
    found: list[type[BaseModel] | None] = []
    model: type[BaseModel] | None = StudyParams
    for part in parts:
        if model is None or part not in model.model_fields:
            break
        model = _model_of(model.model_fields[part].annotation)
        found.append(model)
    return found


def _section(dotted: str) -> type[BaseModel] | None:
    """The section a dotted key names, None when it names a value (or nothing)."""
    parts = dotted.split(".")
    path = _schema_path(parts)
    return path[-1] if len(path) == len(parts) else None


def _check_key(dotted: str) -> None:
    """A ParamsError unless ``dotted`` names a params key that overrides may set."""
    parts = dotted.split(".")
    if parts[0] in LOCATION_KEYS:
        raise ParamsError(f"{OVERRIDES_ORIGIN}: key '{clip(dotted)}': where a study reads and writes is the params "
                          "file's to say; overrides change what is computed")
    path = _schema_path(parts)
    if len(path) == len(parts):
        return
    if path and path[-1] is None:
        raise ParamsError(f"{OVERRIDES_ORIGIN}: unknown key '{clip(dotted)}' ('{'.'.join(parts[:len(path)])}' "
                          "holds a value, not keys)")
    raise ParamsError(f"{OVERRIDES_ORIGIN}: unknown key '{clip(dotted)}'")


def apply_overrides(raw: Mapping, overrides) -> dict:
    """A copy of a params file's mapping (:func:`pmrag.study.params.read_yaml`) with each override set.

    Keys are checked against the schema here (an unknown key, or one naming where the study reads and writes,
    is refused); values are the schema's to check when the result is validated (``load_params(path,
    overrides)``).  ``raw`` is not changed.

    Parameters
    ----------
    raw : the params file's mapping.
    overrides : ``{dotted key: value}``, or its YAML / JSON text (:func:`parse_overrides`).

    Returns
    -------
    dict
    """
    changed = copy.deepcopy(dict(raw))
    for dotted, value in parse_overrides(overrides).items():
        _check_key(dotted)
        *sections, last = dotted.split(".")
        node = changed
        for part in sections:
            child = node.get(part)
            if not isinstance(child, dict):   # absent, or null in the file: the section's defaults
                child = node[part] = {}
            node = child
        node[last] = value
    return changed


def overrides_run(run: str, overrides: Mapping[str, Any]) -> str:
    """The run name of a study under ``overrides``: ``<run>-overrides-<8 hex>``, the hex a digest of the
    overrides (their keys sorted), so the same overrides always name the same folder."""
    text = json.dumps(dict(sorted(overrides.items())), sort_keys=True, ensure_ascii=False, default=str)
    return f"{run}{RUN_SUFFIX}{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def seeded_parts() -> tuple[str, ...]:
    """What :func:`seed_run_folder` copies: the store, the cached stages and the files stages write."""
    from pmrag.study.stages import GOLD_DIR, QRELS_FILE, RUNS_DIR, SYNTHETIC_DIR, VECTORS_DIR

    return (STORE_FILE, STAGE_DIR, SYNTHETIC_DIR, VECTORS_DIR, RUNS_DIR, QRELS_FILE, GOLD_DIR)


def seed_run_folder(source: Path, target: Path) -> bool:
    """Copy a run folder's stage cache (:func:`seeded_parts`) into ``target`` when ``target`` has no store yet,
    so a study there finds every stage the overrides leave unchanged current; True when it copied.  The store is
    copied with SQLite's backup (a consistent copy even while another process writes it); nothing in ``source``
    is changed, and nothing of its tables, figures, notebooks or README is copied."""
    source, target = Path(source), Path(target)
    if (target / STORE_FILE).exists() or not (source / STORE_FILE).is_file():
        return False
    target.mkdir(parents=True, exist_ok=True)
    for part in seeded_parts():
        origin, copy = source / part, target / part
        if part == STORE_FILE:
            src, dst = sqlite3.connect(origin), sqlite3.connect(copy)
            try:
                src.backup(dst)
            finally:
                src.close()
                dst.close()
        elif origin.is_dir():
            shutil.copytree(origin, copy, dirs_exist_ok=True)
        elif origin.is_file():
            shutil.copy2(origin, copy)
    return True


def changed_values(base: StudyParams, overridden: StudyParams, overrides: Mapping[str, Any]) -> list[str]:
    """``key = value (the file: value)`` for each override, values as the schema holds them."""
    lines = []
    for dotted in overrides:
        before, after = _plain(params_at(base, dotted)), _plain(params_at(overridden, dotted))
        lines.append(f"{dotted} = {after} " + (f"(the file: {before})" if before != after else "(as in the file)"))
    return lines


def _plain(value) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump()
    return clip(json.dumps(value, ensure_ascii=False, default=str), 60)


def notebooks_after(notebooks: Sequence[Path], this: str, stale: Sequence[str] | None = None) -> list[str]:
    """The stems of the numbered notebooks that come after ``this`` (a stem or its number), in order; with
    ``stale`` (stages not current, written ``name`` or ``name:item``), only those that read one of them
    (:data:`~pmrag.study.notebooks.NOTEBOOK_READS`; a notebook not declared there reads every stage)."""
    from pmrag.study.notebooks import NOTEBOOK_READS

    number = int(this.split("_")[0])
    later = [p.stem for p in notebooks if int(p.stem.split("_")[0]) > number]
    if stale is None:
        return later
    keys = [StageKey.of(name) for name in stale]

    def reads_stale(stem: str) -> bool:
        declared = NOTEBOOK_READS.get(stem)
        return declared is None or any(k.name in declared or str(k) in declared for k in keys)

    return [stem for stem in later if reads_stale(stem)]


def overrides_note(params: StudyParams, base: StudyParams | None, overrides: Mapping[str, Any],
                   statuses: Sequence[StageStatus], later: Sequence[str]) -> str:
    """What a notebook prints under its parameters: one short line without overrides; with them, what they
    change, where the results go, the stages they make stale and why (the words of ``pmrag status``), and what
    is not refreshed (``later``) with how to make the change the study's.

    Parameters
    ----------
    params : the params in force (the overridden ones, run folder included).
    base : the params file's own, or None without overrides.
    overrides : the parsed overrides (:func:`parse_overrides`).
    statuses : the study's stage statuses under ``params`` (:meth:`pmrag.study.engine.Engine.status`).
    later : the stems of the study's notebooks after this one that read a stage not current
        (:func:`notebooks_after`).
    """
    file = params.path.name if params.path is not None else "the params"
    if not overrides or base is None:
        return f'params: {file}, no overrides (set overrides = {{"hybrid.beta_step": 0.1}} above to try a value)'
    outputs = Path(params.outputs_dir).name
    lines = [f"params: {file} with overrides {'; '.join(changed_values(base, params, overrides))}",
             f"results under these overrides go to {outputs}/{params.run}/, a run folder of their own; the study's "
             f"{outputs}/{base.run}/ stays the params file's"]
    stale = [s for s in statuses if s.state != "cached"]
    if stale:
        lines.append("stages not current under these overrides (recomputed when this notebook reads them):")
        lines += [f"  {s.name}: {s.reason}" for s in stale]
    else:
        lines.append("every stage is current under these overrides: nothing is recomputed")
    numbers = [stem.split("_")[0] for stem in later]
    shown_later = (f"notebooks {', '.join(numbers)} and " if len(numbers) > 1 else
                   f"notebook {numbers[0]} and " if numbers else "")
    command = f"params/{file}" if params.path is not None and params.path.parent.name == "params" else file
    lines.append(f"not refreshed: the study's {shown_later}its run README still show {file}'s values; to make "
                 f"this change the study's, set it in {file} and run `pmrag study {command}` (stages are cached: "
                 f"only the stale ones are recomputed; `pmrag status {command}` lists them and why)")
    return "\n".join(lines)
