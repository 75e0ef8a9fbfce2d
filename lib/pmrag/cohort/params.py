"""Loading a cohort file: the schema (:class:`~pmrag.core.cohort_params.CohortParams`), the base study, and every
participant's study params, all validated before anything runs.

A participant's study params are the base study's file as written, with every path made absolute (against the
base file's folder), the cohort's ``overrides`` and then the participant's merged onto it (a mapping merges key
by key, any other value replaces; paths in overrides are relative to the cohort file), the participant's
``inputs`` and ``questions`` as its dataset (the synthetic demo switched off), ``run: <id>`` and
``outputs_dir: <cohort run>/participants``.  So each participant is one ordinary study in
``outputs/<cohort run>/participants/<id>/``, sharing the base study's ``cache_dir`` (an embedding computed for
one participant is never computed again for another).  Each is validated by the study's own loader
(:func:`pmrag.study.params.load_params`); an error names the cohort file, the participant and the key.

``locomo: FILE``: each sample (conversation) of a LoCoMo file is a participant named by its ``sample_id``; its
input is the sample alone, written to ``outputs/<cohort run>/inputs/<id>.json`` when the cohort runs
(:func:`write_locomo_inputs`).  That is per-conversation retrieval, the setting of the LoCoMo literature.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from pmrag.core.cohort_params import PARTICIPANT_ID, CohortParams
from pmrag.core.errors import InputError, ParamsError
from pmrag.core.params import StudyParams
from pmrag.core.text import clip, shown
from pmrag.study.params import FOLDER_KEYS, PATH_KEYS, load_params, one_line, read_yaml

PARTICIPANTS_DIR, INPUTS_DIR, TABLES_DIR = "participants", "inputs", "tables"
STUDY_FILE = "study.yaml"   # a participant's generated study params, in its run folder


@dataclass(frozen=True)
class Participant:
    """One participant: its id and its study params as a mapping (every path absolute), ready to write."""

    id: str
    study: dict


@dataclass(frozen=True)
class Cohort:
    """A loaded cohort: its params, file, run folder, base study and participants (in the file's order)."""

    params: CohortParams
    path: Path
    run_dir: Path
    base: StudyParams
    participants: tuple[Participant, ...]
    locomo: Path | None = None

    def participant_dir(self, participant_id: str) -> Path:
        """``<cohort run>/participants/<id>/``: the participant's study run folder."""
        return self.run_dir / PARTICIPANTS_DIR / participant_id

    def study_file(self, participant_id: str) -> Path:
        """Where the participant's generated study params are written (in its run folder)."""
        return self.participant_dir(participant_id) / STUDY_FILE


def load_cohort(path) -> Cohort:
    """Read and validate a cohort file, its base study and every participant's study params (see the module
    docstring); a :class:`~pmrag.core.errors.ParamsError` naming the file, the participant and the key otherwise.

    Parameters
    ----------
    path : the cohort YAML file.

    Returns
    -------
    :class:`Cohort`; nothing is written.
    """
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"cohort file not found: {clip(path, 200)}")
    origin = str(path)
    raw = read_yaml(path)
    try:
        params = CohortParams.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(one_line(exc, origin)) from None
    folder = path.resolve().parent
    base_path = _existing_file(folder, params.study, origin, "study")
    base = load_params(base_path)
    outputs = Path(base.outputs_dir) if params.outputs_dir is None else (folder / params.outputs_dir).resolve()
    run_dir = outputs / params.run
    common = _merged(_absolute_base(read_yaml(base_path), base), _absolute(params.overrides, folder))
    locomo = Path(_existing_file(folder, params.locomo, origin, "locomo")) if params.locomo else None
    if locomo is not None:
        entries = [(sample_id, (str(locomo),), None, {}) for sample_id in locomo_participants(locomo, origin)]
    else:
        entries = [(e.id, tuple(_existing_file(folder, f, origin, f"participants[{i}].inputs[{j}]")
                                for j, f in enumerate(e.inputs)),
                    e.questions and _existing_file(folder, e.questions, origin, f"participants[{i}].questions"),
                    _absolute(e.overrides, folder)) for i, e in enumerate(params.participants)]
    participants = tuple(Participant(pid, participant_study(common, pid, run_dir / PARTICIPANTS_DIR, inputs,
                                                            questions, overrides))
                         for pid, inputs, questions, overrides in entries)
    for participant in participants:
        check_participant(participant, origin)
    return Cohort(params, path.resolve(), run_dir, base, participants, locomo)


def participant_study(common: dict, participant_id: str, outputs_dir: Path, inputs: tuple[str, ...] = (),
                      questions: str | None = None, overrides: dict | None = None) -> dict:
    """One participant's study params: ``common`` (the base study with the cohort's overrides) merged with the
    participant's ``overrides``, its ``inputs`` and ``questions`` (absolute paths) as the dataset, ``run`` its id
    and ``outputs_dir`` the cohort's participants folder.  ``common`` is not modified."""
    study = _merged(common, overrides or {})
    if inputs:
        dataset = study.setdefault("dataset", {})
        dataset["inputs"] = list(inputs)
        dataset["questions"] = questions
        dataset["synthetic"] = {**dataset.get("synthetic", {}), "enabled": False}
    study["run"] = participant_id
    study["outputs_dir"] = str(outputs_dir)
    return study


def check_participant(participant: Participant, origin: str) -> StudyParams:
    """The participant's study params validated by the study's loader (written to a temporary file, every path
    in it absolute); a ParamsError names ``origin`` and the participant."""
    with tempfile.TemporaryDirectory(prefix="pmrag-cohort-") as folder:
        written = write_study(participant, Path(folder) / STUDY_FILE)
        try:
            return load_params(written)
        except ParamsError as exc:
            message = str(exc).removeprefix(str(written)).removeprefix(":").strip()
            raise ParamsError(f"{origin}: participant '{participant.id}': {message}") from None


def write_study(participant: Participant, target: Path) -> Path:
    """Write the participant's study params as YAML to ``target`` (folders created); returns ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (f"# {participant.id}'s study in a cohort: generated by pmrag cohort from the cohort file; edit that "
            "file, not this one\n" + yaml.safe_dump(participant.study, sort_keys=False, allow_unicode=True))
    target.write_text(text, encoding="utf-8")
    return target


def locomo_participants(path: Path, origin: str = "") -> list[str]:
    """The ``sample_id`` of every sample of a LoCoMo file, in file order: each names a participant, so it must
    be a string of letters, digits, ``_`` and ``-``, given once."""
    from pmrag.ingest._common import load_json

    try:
        data = load_json(path)
    except InputError as exc:
        raise ParamsError(f"{origin}: key 'locomo': {exc}") from None
    if not isinstance(data, list) or not data:
        raise ParamsError(f"{origin}: key 'locomo': {clip(path, 200)}: expected a non-empty list of LoCoMo samples")
    ids = []
    for index, sample in enumerate(data):
        sample_id = sample.get("sample_id") if isinstance(sample, dict) else None
        if not isinstance(sample_id, str) or not re.match(PARTICIPANT_ID, sample_id):
            raise ParamsError(f"{origin}: key 'locomo': {clip(path, 200)}: sample [{index}]: sample_id must be letters, "
                              f"digits, _ or - (it names the participant), got {shown(sample_id)}")
        if sample_id in ids:
            raise ParamsError(f"{origin}: key 'locomo': {clip(path, 200)}: sample_id {sample_id} is given twice")
        ids.append(sample_id)
    return ids


def write_locomo_inputs(cohort: Cohort) -> Cohort:
    """Each LoCoMo sample written alone to ``<cohort run>/inputs/<id>.json`` and made its participant's input;
    the cohort unchanged when it is not a LoCoMo cohort.  The source file is read, never modified."""
    if cohort.locomo is None:
        return cohort
    from pmrag.ingest._common import load_json

    folder = cohort.run_dir / INPUTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    samples = {sample["sample_id"]: sample for sample in load_json(cohort.locomo)}
    participants = []
    for participant in cohort.participants:
        target = folder / f"{participant.id}.json"
        text = json.dumps([samples[participant.id]], ensure_ascii=False)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:   # unchanged: its key stays
            target.write_text(text, encoding="utf-8")
        study = copy.deepcopy(participant.study)
        study["dataset"]["inputs"] = [str(target)]
        participants.append(Participant(participant.id, study))
    return Cohort(cohort.params, cohort.path, cohort.run_dir, cohort.base, tuple(participants), cohort.locomo)


# ------------------------------------------------------------------------------------------- paths and merging

def _existing_file(folder: Path, value: str, origin: str, dotted: str) -> str:
    path = (folder / Path(value).expanduser()).resolve()
    if not path.is_file():
        raise ParamsError(f"{origin}: key '{dotted}': file not found: {clip(path, 200)}")
    return str(path)


def _absolute_base(raw: dict, base: StudyParams) -> dict:
    """The base study's mapping with every path key it sets, and every folder key, replaced by the loader's
    resolved (absolute) value, so the participant's file may live anywhere."""
    resolved = base.model_dump(mode="json")
    tree = copy.deepcopy(raw)
    for dotted in (*PATH_KEYS, *FOLDER_KEYS):
        if dotted in FOLDER_KEYS or _get(tree, dotted) is not None:
            _set(tree, dotted, _get(resolved, dotted))
    return tree


def _absolute(overrides: dict, folder: Path) -> dict:
    """``overrides`` with its path keys resolved against ``folder`` (a shipped prompt set stays a name)."""
    from pmrag.study.params import SHIPPED_PROMPT_SETS

    tree = copy.deepcopy(overrides)
    for dotted in (*PATH_KEYS, *FOLDER_KEYS):
        value = _get(tree, dotted)
        if isinstance(value, str) and not value.startswith("store:") and value not in SHIPPED_PROMPT_SETS:
            _set(tree, dotted, str((folder / Path(value).expanduser()).resolve()))
        elif isinstance(value, list):
            _set(tree, dotted, [str((folder / Path(v).expanduser()).resolve()) if isinstance(v, str) else v
                                for v in value])
    return tree


def _merged(base: dict, overrides: dict) -> dict:
    """``overrides`` merged onto a copy of ``base``: mappings key by key, any other value replaces."""
    merged = copy.deepcopy(base)
    for name, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(name), dict):
            merged[name] = _merged(merged[name], value)
        else:
            merged[name] = copy.deepcopy(value)
    return merged


def _get(tree, dotted: str):
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(tree: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
