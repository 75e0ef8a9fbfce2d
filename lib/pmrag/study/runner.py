"""``pmrag study``: compute every stage (with progress bars), then execute the numbered notebooks in order with
papermill into ``outputs/<run>/``; the notebooks read the cached stage results.  ``pmrag status``: each stage
as cached / stale (why) / missing, computing nothing."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.study.params import load_params
from pmrag.study.stages import NOTEBOOKS_DIR, execute_notebook

NOTEBOOK_NAME = re.compile(r"^(\d+)_.+\.ipynb$")


class NotebookFailed(PmragError):
    """A notebook raised: names the notebook, the cell and the error."""

    exit_code = 1


@dataclass
class StudyRun:
    """What one ``pmrag study`` did: the executed notebooks and where the time went."""

    notebooks: list[Path] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)      # computed in the runner, by stage
    notebook_seconds: dict[str, float] = field(default_factory=dict)   # executed ones, kernel start included


def numbered_notebooks(folder: Path) -> list[Path]:
    """``NN_name.ipynb`` files of ``folder``, in numeric order (none when the folder does not exist)."""
    if not Path(folder).is_dir():
        return []
    found = [p for p in Path(folder).iterdir() if NOTEBOOK_NAME.match(p.name)]
    return sorted(found, key=lambda p: (int(NOTEBOOK_NAME.match(p.name).group(1)), p.name))


def stage_log(run_dir: Path, since: float = 0.0) -> list[dict]:
    """The engine's log lines (``stage_log.jsonl``) written at or after ``since`` (epoch seconds)."""
    from pmrag.study.engine import LOG_FILE

    path = Path(run_dir) / LOG_FILE
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if line["at"] >= since]


def default_jobs() -> int:
    """Notebooks executed at once: one more than the cores (a kernel waits while it starts), at most four.

    Measured on the 2-core machine (benchmarks/bench_study.py, clean demo run): 2 at a time 45–47 s, 3 at a
    time 40 s, 6 at a time 40 s.
    """
    return max(1, min((os.cpu_count() or 1) + 1, 4))


def run_study(params_path, *, progress: bool = True, fresh: bool = False, jobs: int | None = None,
              kernel_name: str = "python3") -> StudyRun:
    """Compute the stages, execute every numbered notebook whose executed copy is not current (``jobs`` at a
    time) with ``params_path`` as its parameter, write ``environment.json`` and the run README.

    A notebook is current while its file, the params, the package's code and every stage are unchanged; it is
    then not executed again.  Raises :class:`NotebookFailed` naming the first notebook (in numeric order) and
    cell that failed; the partly executed notebook is kept under ``outputs/<run>/notebooks/`` for inspection.
    """
    from pmrag.present.report import write_run_readme
    from pmrag.study.facade import Study
    from pmrag.study.provenance import summary_lines, write_environment

    params = load_params(params_path)
    notebooks = numbered_notebooks(params.notebooks_dir)
    if not notebooks:
        raise PmragError(f"{params.path}: key 'notebooks_dir': no numbered notebooks (NN_name.ipynb) in {params.notebooks_dir}")
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    run = StudyRun()
    study = Study(params, notebooks)
    if fresh:
        study.forget()
    started = time.time()
    _say(progress, f"[stages] {len(study.computed_stages)} stages of run {params.run}")
    study.build(progress=progress)
    for line in stage_log(params.run_dir, started):
        if line["action"] == "computed":
            run.stage_seconds[line["stage"]] = line["seconds"]
    write_environment(params.run_dir, params, {n: study.engine.key(n) for n in study.computed_stages})
    out_dir = params.run_dir / NOTEBOOKS_DIR
    stale = [nb for nb in notebooks if not study.engine.is_current(f"notebook:{nb.stem}")]
    for nb in notebooks:
        if nb not in stale:
            _say(progress, f"[cached] {nb.name}")
    failures = {}
    if jobs == 1 or len(stale) <= 1:
        for number, notebook in enumerate(stale, start=1):
            _say(progress, f"[{number}/{len(stale)}] {notebook.name}")
            result = execute_notebook(notebook, out_dir / notebook.name, params.path, kernel_name=kernel_name,
                                      progress=progress)
            if not _record(study, run, notebook, result, failures):
                break
    else:
        # threads suffice: each notebook runs in its own kernel process, the thread only drives it
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(execute_notebook, nb, out_dir / nb.name, params.path, kernel_name=kernel_name): nb
                       for nb in stale}
            _say(progress, f"[notebooks] executing {len(stale)}, {jobs} at a time")
            for future in as_completed(futures):
                notebook = futures[future]
                if not _record(study, run, notebook, future.result(), failures):
                    for other in futures:
                        other.cancel()
                else:
                    _say(progress, f"[done] {notebook.name} ({run.notebook_seconds[notebook.name]:.1f} s)")
    if failures:
        first = min(failures, key=lambda nb: notebooks.index(nb))
        error, target = failures[first]
        raise NotebookFailed(
            f"notebook {first.name} failed in cell {error['cell_index']} (execution count {error['exec_count']}): "
            f"{error['ename']}: {error['evalue']} — executed copy: {target}")
    run.notebooks = [out_dir / nb.name for nb in notebooks]
    title = f"Study run `{params.run}`: {params.description or params.path.name}"
    readme = write_run_readme(params.run_dir, title, run.notebooks, summary_lines(params.run_dir))
    _say(progress, f"summary: {readme}")
    return run


def _record(study, run: StudyRun, notebook: Path, result: dict, failures: dict) -> bool:
    """Book one notebook's result; False when it failed."""
    if "error" in result:
        failures[notebook] = (result["error"], result["notebook"])
        return False
    run.notebook_seconds[notebook.name] = result["seconds"]
    study.engine.finish(f"notebook:{notebook.stem}", result, result["seconds"])
    return True


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def status_lines(params_path) -> list[str]:
    """``pmrag status``: one line per stage (name, state, reason), computing nothing."""
    from pmrag.study.facade import Study

    params = load_params(params_path)
    study = Study(params, numbered_notebooks(params.notebooks_dir))
    rows = study.status()
    width = max(len(r.name) for r in rows)
    counts = defaultdict(int)
    lines = []
    for row in rows:
        counts[row.state] += 1
        lines.append(f"{row.name:<{width}}  {row.state:<10}  {row.reason}".rstrip())
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    return [f"run {study.params.run} ({study.run_dir}): {summary}", *lines]
