"""``pmrag cohort PARAMS``: every participant's study as one Dask task, then the pooled tables.

Each participant's study params are written to its run folder (``participants/<id>/study.yaml``) and the task
builds that study there (:func:`run_participant`): the ordinary stage graph, keyed and cached as for any
study, so a rerun recomputes nothing that is cached, and a task that starts again after its worker died (Dask
moves it to another worker) finds what the dead one had finished.  By default only the stages the pooled
tables read are computed, with what they need (``cohort.stages: pooled``; ``all``: every stage), and no notebook is
executed (``cohort.notebooks: false``): the cohort computes stages and tables only.  With ``cohort.notebooks: true``
each participant is a ``pmrag study`` (its numbered notebooks executed in its run folder) and, once the pooled
tables are written, the pooled-analysis notebooks (``notebooks/cohort/``, :func:`cohort_notebooks`) are executed
into ``<cohort run>/notebooks/``.  They live apart from the numbered notebooks, so ``pmrag study`` on one study
never runs them.

The tasks run on a :class:`~dask.distributed.LocalCluster` of one single-threaded worker process per core (the
stages are CPU-bound Python; processes, not threads) or on the scheduler ``cohort.scheduler`` names (a cluster
started by dask-jobqueue on SLURM or PBS, say, whose workers see the same files).  A participant whose task
fails is run ``cohort.retries`` more times, then reported in one line (participant and error) while the others
go on; the pooled tables rest on the participants that finished, and say how many.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pmrag.cohort.params import TABLES_DIR, Cohort, load_cohort, write_locomo_inputs, write_study
from pmrag.cohort.tables import SCORE_COLUMNS, cohort_tables
from pmrag.core.cohort_params import ExecutionSection
from pmrag.core.errors import PmragError
from pmrag.core.params import BootstrapSection
from pmrag.core.text import clip, one_line
from pmrag.present.artifacts import FULL_DIR, write_csv
from pmrag.study.facade import STAND_IN_COLUMN
from pmrag.study.runfolder import claim_run_folder

TABLE_PREFIX = "cohort_"
PARTICIPANTS_TABLE = "cohort_participants"
POOLED_STAGES = ("metrics", "sweep", "hybrids")
COHORT_NOTEBOOKS = "cohort"   # the pooled-analysis notebooks' folder, in the base study's notebooks folder   # what the pooled tables read (and, upstream, what these need)


class CohortFailed(PmragError):
    """No participant of the cohort finished: there is nothing to pool (each failure was reported)."""

    exit_code = 1


@dataclass(frozen=True)
class ParticipantResult:
    """What a participant's task sends back: its per-question scores (:func:`study_scores`), its sweep (every
    pairing × β per question), its pairings in order, its bootstrap settings and what its tables say of its
    summaries (:meth:`pmrag.study.facade.Study.summarizer_note`: None when an LLM wrote them)."""

    scores: pd.DataFrame
    sweep: pd.DataFrame
    pairings: tuple[tuple[str, str], ...]
    bootstrap: BootstrapSection
    summarizer_note: str | None = None


@dataclass
class CohortRun:
    """What a cohort run did: the tables written, each finished participant's seconds, each failed one's error."""

    tables: dict[str, Path] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    dashboard: str | None = None
    notebooks: dict[str, Path] = field(default_factory=dict)


def run_cohort(path, *, client=None, progress: bool = True) -> CohortRun:
    """Run every participant's study of the cohort file ``path`` on Dask and write the pooled tables to
    ``outputs/<cohort run>/tables/``.

    Parameters
    ----------
    path : the cohort params file (:func:`pmrag.cohort.params.load_cohort` validates it and every participant's
        study params before anything runs).
    client : a connected :class:`dask.distributed.Client` to use instead of the one ``cohort.scheduler`` names
        or a new LocalCluster.
    progress : print the dashboard link and one line per participant as it finishes (stderr).

    Returns
    -------
    :class:`CohortRun`; :class:`CohortFailed` when no participant finished.
    """
    cohort = load_cohort(path)
    claim_run_folder(cohort.run_dir, how_to_force="give the cohort another 'run'")
    cohort = write_locomo_inputs(cohort)
    files = {p.id: str(_written_study(cohort, p)) for p in cohort.participants}
    run = CohortRun()
    section = cohort.params.cohort
    with cohort_client(section, len(files), client) as active:
        run.dashboard = dashboard_link(active)
        _say(progress, f"[cohort] {len(files)} participants of {cohort.params.run}; dask dashboard: "
                       f"{run.dashboard or 'not served by this scheduler'}")
        results = _gather(active, files, section, run, progress)
    if not results:
        raise CohortFailed(f"{cohort.path}: no participant finished ({len(run.failed)} failed); nothing to pool")
    tables = pooled_tables(results)
    tables["participants"] = participants_table(cohort, run, [result.scores for result in results])
    notes = list(dict.fromkeys(r.summarizer_note for r in results if r.summarizer_note))
    folder = cohort.run_dir / TABLES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob(f"{TABLE_PREFIX}*.csv"), *(folder / FULL_DIR).glob(f"{TABLE_PREFIX}*.csv")]:
        stale.unlink()   # a table this run does not write is not left from an older one
    for name, frame in tables.items():
        if notes:   # tables made with the offline stand-in say so in every row, as a study's do
            frame = frame.assign(**{STAND_IN_COLUMN: "; ".join(notes)})
        target = folder / f"{TABLE_PREFIX}{name}.csv"
        run.tables[name] = write_csv(target, frame)   # rounded, and its full-precision twin under full/
    if section.notebooks:
        run.notebooks = execute_cohort_notebooks(cohort, progress)
    return run


def cohort_notebooks(cohort: Cohort) -> list[Path]:
    """The pooled-analysis notebooks: ``NN_name.ipynb`` in the ``cohort`` folder of the base study's notebooks
    folder (``notebooks/cohort/``), apart from the numbered notebooks so that ``pmrag study`` never runs them."""
    from pmrag.study.runner import numbered_notebooks

    return numbered_notebooks(Path(cohort.base.notebooks_dir) / COHORT_NOTEBOOKS)


def execute_cohort_notebooks(cohort: Cohort, progress: bool = False) -> dict[str, Path]:
    """Execute each pooled-analysis notebook (:func:`cohort_notebooks`) with the cohort file as its ``params_path``
    into ``<cohort run>/notebooks/``, after the tables it reads are written; every run executes them again (they
    read tables and draw, in seconds).  A failed one stops the run with its cell and error (the executed copy kept)."""
    from pmrag.study.notebooks import NOTEBOOKS_DIR, execute_notebook
    from pmrag.study.runner import NotebookFailed

    executed = {}
    for notebook in cohort_notebooks(cohort):
        _say(progress, f"[cohort notebook] {notebook.name}")
        result = execute_notebook(notebook, cohort.run_dir / NOTEBOOKS_DIR / notebook.name, cohort.path)
        if "error" in result:
            error = result["error"]
            raise NotebookFailed(f"cohort notebook {notebook.name} failed in cell {error['cell_index']} (execution count "
                                 f"{error['exec_count']}): {error['ename']}: {error['evalue']} — executed copy: "
                                 f"{result['notebook']}")
        executed[notebook.stem] = Path(result["notebook"])
    return executed


def pooled_tables(results: list[ParticipantResult]) -> dict[str, pd.DataFrame]:
    """The pooled tables of the finished participants (:func:`pmrag.cohort.tables.cohort_tables`, bootstrap settings
    of the first participant's study), and the selection scored leave-one-participant-out when two or more
    finished (:func:`pmrag.cohort.selection.leave_one_participant_out`)."""
    from pmrag.cohort.selection import leave_one_participant_out

    first = results[0]
    tables = cohort_tables(pd.concat([r.scores for r in results], ignore_index=True), first.bootstrap)
    if len(results) > 1:
        own = {r.scores["participant"].iloc[0]: r.scores.loc[r.scores["selected"], "method"].iloc[0] for r in results}
        sweeps = pd.concat([r.sweep.assign(participant=r.scores["participant"].iloc[0]) for r in results],
                           ignore_index=True)
        tables["selection"] = leave_one_participant_out(sweeps, own, first.pairings)
    return tables


def _written_study(cohort: Cohort, participant) -> Path:
    """The participant's study params in its run folder (claimed first; rewritten only when they changed)."""
    claim_run_folder(cohort.participant_dir(participant.id), how_to_force="give the cohort another 'run'")
    target = cohort.study_file(participant.id)
    fresh = write_study(participant, target.with_suffix(".new"))
    if target.is_file() and target.read_bytes() == fresh.read_bytes():
        fresh.unlink()
    else:
        fresh.replace(target)
    return target


@contextmanager
def cohort_client(section: ExecutionSection, n_participants: int, client=None) -> Iterator:
    """The Dask client the participants run on: ``client`` as given, a client of ``section.scheduler``, or a new
    LocalCluster of ``section.n_workers`` (default: one per core, at most one per participant) single-threaded
    worker processes, closed on leaving."""
    if client is not None:
        yield client
        return
    from dask.distributed import Client

    if section.scheduler:
        with Client(section.scheduler) as connected:
            yield connected
        return
    workers = section.n_workers or max(1, min(os.cpu_count() or 1, n_participants))
    with local_cluster(workers) as cluster, Client(cluster) as local:
        yield local


def local_cluster(n_workers: int):
    """A LocalCluster of ``n_workers`` single-threaded worker processes that may start processes of their own (a
    task run with ``in_process=False`` parses files in helper processes; Dask's workers are daemonic by default,
    which forbids that)."""
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.worker.daemon": False}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True)


def dashboard_link(client) -> str | None:
    """The Dask dashboard's address; None when the scheduler serves none (one started with its dashboard off)."""
    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # noqa: BLE001 — a scheduler that cannot say: no link
        return None
    return client.dashboard_link if "dashboard" in services else None


def _gather(client, files: dict[str, str], section: ExecutionSection, run: CohortRun, progress: bool) -> list:
    """Submit one task per participant (``section.retries`` retries each) and collect their results as they
    finish, in the participants' order; a failed one is booked in ``run.failed`` and reported."""
    from dask.distributed import as_completed

    started = time.monotonic()
    token = uuid.uuid4().hex[:8]   # a rerun on the same client submits new tasks, never reuses a finished one
    futures = {client.submit(run_participant, file, section.notebooks, section.stages, retries=section.retries,
                             key=f"participant-{pid}-{token}", pure=False): pid for pid, file in files.items()}
    results = {}
    for future in as_completed(futures):
        pid = futures[future]
        if future.status == "finished":
            results[pid] = future.result()
            run.seconds[pid] = time.monotonic() - started
            _say(progress, f"[done] participant {pid} ({run.seconds[pid]:.1f} s)")
        else:
            run.failed[pid] = failure_line(future.exception())
            print(f"participant {pid} failed: {run.failed[pid]}", file=sys.stderr, flush=True)
    return [results[pid] for pid in files if pid in results]


def failure_line(exc: BaseException) -> str:
    """One line for a participant's error: pmrag's own message (which names the file and key, never message
    text) or Dask's for a worker that died; anything else by its type only (its text may quote the data)."""
    if isinstance(exc, ParticipantFailed):
        return str(exc)
    if isinstance(exc, PmragError) or type(exc).__name__ == "KilledWorker":
        return f"{type(exc).__name__}: {clip(one_line(str(exc)), 300)}"
    return f"{type(exc).__name__} (its text is not shown: it may quote the data)"


class ParticipantFailed(PmragError):
    """A participant's study failed; its message is :func:`failure_line`'s (Dask logs it on the worker)."""


def run_participant(study_file: str, notebooks: bool = False, stages: str = "pooled", *,
                    in_process: bool = True) -> ParticipantResult:
    """The Dask task: compute one participant's study under its run folder's lock (``stages``: ``pooled``, the
    :data:`POOLED_STAGES` and what they need, or ``all``; ``notebooks``: execute the notebooks too, as ``pmrag
    study`` does), and return its :class:`ParticipantResult`.  Any error is raised again as a
    :class:`ParticipantFailed` whose text is :func:`failure_line`'s: what Dask logs and sends back never quotes
    the data.

    ``in_process`` (the cohort's choice): ingest, chunking and tokenization start no helper process
    (:func:`pmrag.core.parallel.in_this_process`; the same rows and counts).  A Dask worker starts processes with
    ``spawn``, each importing pmrag again, which cost about 4 s of a demo participant's 6; and the cohort keeps
    every core busy already.  ``False``: as ``pmrag study`` runs alone."""
    from pmrag.core.parallel import in_this_process

    try:
        with in_this_process() if in_process else nullcontext():
            return _run_participant(study_file, notebooks, stages)
    except Exception as exc:  # noqa: BLE001 — every error leaves the worker in one safe line
        raise ParticipantFailed(failure_line(exc)) from None


def _run_participant(study_file: str, notebooks: bool, stages: str) -> ParticipantResult:
    from pmrag.study.facade import Study
    from pmrag.study.params import load_params
    from pmrag.study.runner import run_folder_lock, run_study

    if notebooks:
        run_study(study_file, progress=False)
    params = load_params(study_file)
    with run_folder_lock(params.run_dir):
        study = Study(params)
        try:
            if stages == "all":
                study.build(progress=False)
            for name in POOLED_STAGES:
                study.engine.get(name, retry=True)
            pairings = tuple((str(a), str(b)) for a, b in study.params.hybrid.selection_pairing_ids())
            return ParticipantResult(study_scores(study), study.sweep(), pairings, study.params.bootstrap,
                                     study.summarizer_note())
        finally:
            study.store.dispose()


def study_scores(study) -> pd.DataFrame:
    """A study's per-question Recall/MRR/nDCG@5 of its single retrievers (in its order) and of its selected hybrid
    (``selected`` true), with its run name as ``participant``: the rows :mod:`pmrag.cohort.tables` pools."""
    singles = [str(rid) for rid in study.retrievers()]
    selected = str(study.hybrids().selected)
    frame = study.per_question()
    frame = frame[frame["retriever"].isin([*singles, selected])].drop_duplicates(["retriever", "question_id"])
    order = {name: position for position, name in enumerate([*singles, selected])}
    frame = frame.iloc[frame["retriever"].map(order).argsort(kind="stable")]
    frame = frame.rename(columns={"retriever": "method"}).assign(participant=study.params.run,
                                                                 selected=frame["retriever"].eq(selected).to_numpy())
    return frame[list(SCORE_COLUMNS)].reset_index(drop=True)


def participants_table(cohort: Cohort, run: CohortRun, scores: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per participant: finished or failed (and the error), its evaluated questions and its selected
    hybrid."""
    found = {frame["participant"].iloc[0]: frame for frame in scores}
    rows = []
    for participant in cohort.participants:
        frame = found.get(participant.id)
        rows.append({"participant": participant.id, "status": "finished" if frame is not None else "failed",
                     "error": run.failed.get(participant.id, ""),
                     "n_questions": frame["question_id"].nunique() if frame is not None else 0,
                     "selected_hybrid": frame.loc[frame["selected"], "method"].iloc[0] if frame is not None else ""})
    table = pd.DataFrame(rows)
    return table.assign(n_participants=1)


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)
