"""The cohort params schema: many participants, each one ordinary study made from a base study's params.

A cohort file names a base study (a params file, relative to the cohort file), overrides applied to every
participant, and the participants: a list (each with its own inputs, questions and overrides) or a LoCoMo
file whose conversations become participants.  Validation is as strict as the study's
(:mod:`pmrag.core.params`): unknown keys, wrong types and NaN are refused, and every error names its key.
Paths stay strings here; :mod:`pmrag.cohort.params` resolves them against the cohort file's folder and
validates each participant's study params in full before anything runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import model_validator

from pmrag.core.params import Lax, Section, key

PARTICIPANT_ID = r"^[A-Za-z0-9_-]+$"   # a participant's id names its run folder (participants/<id>/)


class ParticipantEntry(Section):
    """One participant: their own exports and questions, and overrides of the base study's keys."""

    id: str = key(..., "the participant's id: their run folder is participants/<id>/", pattern=PARTICIPANT_ID)
    inputs: Annotated[tuple[str, ...], Lax] = key(
        (), "the participant's files to ingest, relative to the cohort file (empty: the base study's dataset, "
            "e.g. the synthetic demo with the overrides' seed and sizes)")
    questions: str | None = key(None, "the participant's questions file, relative to the cohort file")
    overrides: dict[str, Any] = key({}, "keys of the base study replaced for this participant (nested sections "
                                        "merged key by key; a list replaces the list)")


class ExecutionSection(Section):
    """Where and how the participants' studies run (Dask)."""

    scheduler: str | None = key(None, "address of a running Dask scheduler (tcp://host:8786, e.g. one dask-jobqueue "
                                      "started on SLURM/PBS); null: a LocalCluster on this machine")
    n_workers: int | None = key(None, "LocalCluster worker processes (one thread each: the stages are CPU-bound "
                                      "Python); null: one per core, at most one per participant", ge=1)
    retries: int = key(1, "times a failed participant is run again before it is reported as failed", ge=0)
    stages: Literal["pooled", "all"] = key(
        "pooled", "stages computed per participant: pooled, those the pooled tables read (per-question metrics, the "
                  "sweep, the selected hybrids) and what they need; all, every stage of the study (its statistics, "
                  "graph, failures), as pmrag study computes them")
    notebooks: bool = key(False, "also execute the numbered notebooks for every participant (pmrag study: every "
                                 "stage) and the pooled-analysis notebooks (notebooks/cohort/) into the cohort's run "
                                 "folder; false: the cohort computes stages and tables only")


class CohortParams(Section):
    """A whole cohort file."""

    run: str = key(..., "cohort run name: outputs go to <outputs_dir>/<run>/", pattern=r"^[A-Za-z0-9_-]+$")
    description: str = key("", "one line describing the cohort")
    outputs_dir: str | None = key(None, "where the cohort's run folder is created (null: the base study's)")
    study: str = key(..., "the base study's params file, relative to the cohort file")
    overrides: dict[str, Any] = key({}, "keys of the base study replaced for every participant")
    participants: Annotated[tuple[ParticipantEntry, ...], Lax] = key(
        (), "the participants, each {id, inputs, questions, overrides}")
    locomo: str | None = key(None, "a LoCoMo file: each conversation (sample) becomes a participant, its "
                                   "sample_id the participant's id")
    cohort: ExecutionSection = ExecutionSection()

    @model_validator(mode="after")
    def _who(self):
        if bool(self.participants) == bool(self.locomo):
            raise ValueError("participants: give either a list of participants or 'locomo: FILE', not both or neither")
        seen: set[str] = set()
        for index, entry in enumerate(self.participants):
            if entry.id in seen:
                raise ValueError(f"participants: the id {entry.id} is given twice (participants[{index}])")
            seen.add(entry.id)
        return self
