"""``pmrag study``: compute every stage (with progress bars) and execute the numbered notebooks with papermill
into ``outputs/<run>/``, each once the stages it reads are computed (:class:`NotebookQueue`); the notebooks read
the cached stage results.  ``pmrag status``: each stage
as cached / stale (why) / missing, computing nothing.

A run holds an exclusive lock on ``outputs/<run>/.lock`` from start to end: a second ``pmrag study`` on the same
run folder is refused at once with one line naming the first one's pid (:class:`RunInUse`) instead of both
writing the same stage results and notebooks.  The operating system drops the lock when the process ends,
however it ends, so a leftover lock file never blocks a later run.  Before the lock, the run folder is claimed
(:func:`~pmrag.study.runfolder.claim_run_folder`): a folder holding files pmrag did not write is refused unless
forced.  Ctrl-C stops the notebooks being executed (no new kernel starts, running ones are interrupted, then shut
down, and what they say while stopping is not shown) before the interrupt reaches the command line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.core.interrupts import sigint_ignored
from pmrag.core.memory import older_objects_frozen, return_freed_memory
from pmrag.core.names import StageKey
from pmrag.study.params import load_params
from pmrag.study.notebooks import NOTEBOOKS_DIR, execute_notebook, notebook_reads, notebook_value
from pmrag.study.runfolder import LOCK_FILE, STORE_FILE, check_run_folder, claim_run_folder

NOTEBOOK_NAME = re.compile(r"^(\d+)_.+\.ipynb$")
KERNEL_STOP_GRACE_S = 10.0          # after Ctrl-C: how long interrupted kernels get to stop before being killed
KERNEL_RESIGNAL_S = 3.0             # after Ctrl-C: SIGINT again to a kernel still running this long after the last


class NotebookFailed(PmragError):
    """A notebook raised: names the notebook, the cell and the error."""

    exit_code = 1


class RunInUse(PmragError):
    """Another ``pmrag study`` is running on the same run folder."""


class CallBudgetReached(PmragError):
    """``pmrag study --max-calls N``: the next model stage would make more remote calls than are left of ``N``;
    stopped before it, so a rerun (with a larger budget) resumes there."""

    exit_code = 3


@dataclass
class StudyRun:
    """What one ``pmrag study`` did: the executed notebooks and where the time went."""

    notebooks: list[Path] = field(default_factory=list)
    costs: list[str] = field(default_factory=list)                       # the cost table printed at the start
    dry_run: bool = False
    stage_seconds: dict[str, float] = field(default_factory=dict)      # computed in the runner, by stage
    notebook_seconds: dict[str, float] = field(default_factory=dict)   # executed ones, kernel start included
    forked_kernels: int = 0          # kernels forked from the warm process (pmrag.study.kernel_forks)


def numbered_notebooks(folder: Path) -> list[Path]:
    """``NN_name.ipynb`` files of ``folder``, in numeric order (none when the folder does not exist)."""
    if not Path(folder).is_dir():
        return []
    found = [p for p in Path(folder).iterdir() if NOTEBOOK_NAME.match(p.name)]
    return sorted(found, key=lambda p: (int(NOTEBOOK_NAME.match(p.name).group(1)), p.name))


def study_notebooks(params) -> list[Path]:
    """The numbered notebooks a study executes: those of ``notebooks_dir``, or of them the ones ``notebooks``
    lists by number; a listed number with no notebook is a :class:`~pmrag.core.errors.ParamsError`."""
    from pmrag.core.errors import ParamsError

    found = numbered_notebooks(params.notebooks_dir)
    if params.notebooks is None:
        return found
    numbers = {int(NOTEBOOK_NAME.match(p.name).group(1)): p for p in found}
    missing = [n for n in params.notebooks if n not in numbers]
    if missing:
        raise ParamsError(f"{params.path}: key 'notebooks': no notebook numbered {missing[0]} in "
                          f"{params.notebooks_dir}")
    return [p for p in found if int(NOTEBOOK_NAME.match(p.name).group(1)) in params.notebooks]


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
              kernel_name: str = "python3", force: bool = False, dry_run: bool = False,
              max_calls: int | None = None, fork_kernels: bool = True) -> StudyRun:
    """Compute the stages, execute every numbered notebook whose executed copy is not current (``jobs`` at a
    time, each once the stages it reads are computed; ``jobs=1``: one at a time after the last stage) with
    ``params_path`` as its parameter, write ``environment.json`` and the run README.

    A notebook is current while its file, the package's code, the stages it reads
    (:data:`~pmrag.study.notebooks.NOTEBOOK_READS`) and the params keys they key on are unchanged; it is then not
    executed again.  Raises :class:`NotebookFailed` naming the first notebook (in numeric order) and
    cell that failed; the partly executed notebook is kept under ``outputs/<run>/notebooks/`` for inspection.
    Raises :class:`RunInUse` when another run holds the run folder, and
    :class:`~pmrag.study.runfolder.ForeignRunFolder`, with nothing written, when the run folder holds files pmrag
    did not write (unless ``force``: ``pmrag study --force``).

    First the calls each model stage still has to make are counted and printed (:mod:`pmrag.study.costs`; the
    stages that call no model are computed for it).  ``dry_run``: stop there, no model called.  ``max_calls``:
    before each model stage, its remote calls are counted again (exactly, its inputs now made); the run stops with
    :class:`CallBudgetReached` before a stage that would bring this run's remote calls above ``max_calls``.

    ``fork_kernels`` (on Linux): the notebooks' kernels are forked from one process that imported what they
    import (:mod:`pmrag.study.kernel_forks`), started when the first kernel is; False: each kernel starts as a
    new Python process.
    """
    params = load_params(params_path)
    notebooks = study_notebooks(params)
    if not notebooks:
        raise PmragError(f"{params.path}: key 'notebooks_dir': no numbered notebooks (NN_name.ipynb) in {params.notebooks_dir}")
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    claim_run_folder(params.run_dir, force=force)
    # the collections after each stage (pmrag.core.memory) walk what this run made, not every imported module
    with run_folder_lock(params.run_dir), older_objects_frozen():
        return _run_locked(params, notebooks, progress=progress, fresh=fresh, jobs=jobs, kernel_name=kernel_name,
                           dry_run=dry_run, max_calls=max_calls, fork_kernels=fork_kernels)


def _run_locked(params, notebooks: list[Path], *, progress: bool, fresh: bool, jobs: int, kernel_name: str,
                dry_run: bool = False, max_calls: int | None = None, fork_kernels: bool = True) -> StudyRun:
    """:func:`run_study`'s work, under the run folder's lock."""
    from pmrag.present.report import write_run_readme
    from pmrag.study.facade import Study
    from pmrag.study.provenance import summary_lines

    run = StudyRun()
    study = Study(params, notebooks)
    if fresh:
        study.forget()
    partial = study.engine.remove_partial_results()
    if partial:
        _say(progress, f"[stages] removed {len(partial)} partial result file(s) left by a stopped process: "
                       f"{', '.join(p.name for p in partial)}")
    started = time.time()
    from pmrag.study.costs import study_costs

    run.costs = study_costs(study, compute=True).lines(params.prices)
    run.dry_run = dry_run
    if dry_run:
        return run
    _say(progress, "\n".join(run.costs))
    _say(progress, f"[stages] {len(study.computed_stages)} stages of run {params.run}")
    out_dir = params.run_dir / NOTEBOOKS_DIR
    failures = {}
    drawing = None
    stop = threading.Event()   # set on Ctrl-C: no kernel starts after it (pmrag.study.notebooks.execute_notebook)
    before = None if max_calls is None else CallBudget(study, max_calls)
    with _kernel_forks(notebooks, fork_kernels, progress) as forks:
        if jobs == 1 or len(notebooks) <= 1:
            _build(study, run, params, started, progress, before)
            stale = _stale(study, notebooks, progress)
            for number, notebook in enumerate(stale, start=1):
                _say(progress, f"[{number}/{len(stale)}] {notebook.name}")
                result = _execute_interruptibly(notebook, out_dir / notebook.name, params.path, kernel_name, progress,
                                                stop, forks)
                if not _record(study, run, notebook, result, failures):
                    break
        else:
            queue = NotebookQueue(study, run, notebooks, out_dir, params.path, jobs, kernel_name, progress, failures,
                                  stop, forks)
            with queue:
                _build(study, run, params, started, progress, before, after=queue.stage_done)
                drawing = _in_background(draw_graph, params)   # beside the last notebooks, not after them
                queue.finish()
        run.forked_kernels = 0 if forks is None else len(forks.kernels)
    if failures:
        first = min(failures, key=lambda nb: notebooks.index(nb))
        error, target = failures[first]
        raise NotebookFailed(
            f"notebook {first.name} failed in cell {error['cell_index']} (execution count {error['exec_count']}): "
            f"{error['ename']}: {error['evalue']} — executed copy: {target}")
    run.notebooks = [out_dir / nb.name for nb in notebooks]
    if drawing is None:
        draw_graph(params)
    else:
        drawing.result()   # drawn meanwhile; raises what drawing raised
    title = f"Study run `{params.run}`: {params.description or params.path.name}"
    readme = write_run_readme(params.run_dir, title, run.notebooks, summary_lines(params.run_dir))
    _say(progress, f"summary: {readme}")
    return run


def _in_background(function, *args) -> Future:
    """``function(*args)`` in a thread of its own, its return value or exception in the future.  A daemon thread:
    a study stopped meanwhile does not wait for it."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(function(*args))
        except BaseException as exc:   # noqa: BLE001 - handed to whoever asks for the result
            future.set_exception(exc)

    threading.Thread(target=run, name=f"pmrag-{function.__name__}", daemon=True).start()
    return future


def _build(study, run: StudyRun, params, started: float, progress: bool, before, after=None) -> None:
    """Compute the stages, say what the study loses, book each stage's seconds, write ``environment.json`` and
    drop the results from memory (the kernels load what they read)."""
    from pmrag.study.provenance import write_environment

    study.build(progress=progress, before=before, after=after, hold=("coverage",), helper=True)
    for warning in study.coverage().warnings:   # what the study loses is said whether or not --quiet
        _say(True, f"warning: {warning}")
    for line in stage_log(params.run_dir, started):
        if line["action"] == "computed":
            run.stage_seconds[line["stage"]] = line["seconds"]
    write_environment(params.run_dir, params, {n: study.engine.key(n) for n in study.computed_stages})
    study.engine.release()   # the coverage, held for its warnings above
    return_freed_memory()


def _stale(study, notebooks: list[Path], progress: bool) -> list[Path]:
    """The notebooks whose executed copy is not current; the others are said to be cached."""
    stale = [nb for nb in notebooks if not study.engine.is_current(StageKey("notebook", nb.stem))]
    for nb in notebooks:
        if nb not in stale:
            _say(progress, f"[cached] {nb.name}")
    return stale


def start_order(ready: list[Path], last_seconds: dict[str, float], history_readers: Collection[str]) -> list[Path]:
    """The order in which notebooks ready at once are started: the longest first, so that it does not start last
    and end alone.  Longest by ``last_seconds`` (the last execution's, where recorded); among those with none
    recorded (a clean run), one that reads the history itself (its ``ingest`` stage: work in proportion to the
    messages, e.g. copying them into the annotation store) before one that does not; then in numeric order."""
    return sorted(ready, key=lambda nb: (-last_seconds.get(nb.name, 0.0), nb.stem not in history_readers))


def _last_seconds(study, notebooks: list[Path]) -> dict[str, float]:
    """Each notebook's seconds at its last execution recorded in the study's store (stale or not)."""
    records = {nb.name: study.engine.record(StageKey("notebook", nb.stem)) for nb in notebooks}
    return {name: float(record["seconds"]) for name, record in records.items() if record and record.get("seconds")}


def notebook_needs(study, notebook: Path) -> frozenset[str]:
    """The study's computed stages (``name`` or ``name:item``) that ``notebook`` reads
    (:func:`~pmrag.study.notebooks.notebook_reads`): once they are computed its key is final and it can run."""
    reads = set(notebook_reads(study.params, notebook.stem))
    return frozenset(name for name in study.computed_stages if name in reads or name.split(":")[0] in reads)


BESIDE_STAGES_MAX_MESSAGES = 1_000_000
"""A study of more messages runs no notebook beside its stages: each notebook's kernel loads what it reads, which at
that size is gigabytes (the representations, the vector sets), on top of the results and arrays the stage process
holds.  Measured with ``benchmarks/bench_study.py --scale 10`` (3.6 million messages): notebook 02 beside the first
BM25 run made the study's peak, 8.3 GB against the stage process's own 6.8 GB at most.  At the paper's scale
(358,896 messages) a notebook beside the stages saves wall time and the sum stays small."""


class NotebookQueue:
    """Executes a study's notebooks ``jobs`` at a time, each as soon as the stages it reads are computed
    (:func:`notebook_needs`), while the later stages are still being computed (up to
    :data:`BESIDE_STAGES_MAX_MESSAGES` messages; a larger study's notebooks wait for the last stage).

    The stages are computed on one core (on two for a study of :data:`~pmrag.study.helper.HELPER_MESSAGES` messages:
    :mod:`pmrag.study.helper`); the first notebooks (chunking, representations) then run on the
    others beside the retrievers' stages instead of waiting for the last stage.  While stages are computed, at most
    ``jobs − 1`` notebooks run and no more than the other cores: a notebook beside the stages takes CPU time from
    them (on 2 cores, two notebooks beside them made the paper-scale study slower than none).  A notebook is checked
    for currency when it is ready, its stages' keys final by then; those ready at once start longest first
    (:func:`start_order`).  Completions are booked in the building thread
    (between two stages, and in :meth:`finish`), never in a worker, so one thread uses the engine.  After the first
    failure no further notebook starts; the stages go on.  Leaving the ``with`` block on an exception (Ctrl-C, a
    stage that failed) stops the running notebooks (:func:`_stop_notebooks`) before the exception goes on.
    """

    def __init__(self, study, run: StudyRun, notebooks: list[Path], out_dir: Path, params_path: Path, jobs: int,
                 kernel_name: str, progress: bool, failures: dict, stop: threading.Event, forks=None):
        self.study, self.run, self.out_dir, self.params_path = study, run, out_dir, params_path
        self.jobs, self.kernel_name, self.progress, self.failures, self.stop = jobs, kernel_name, progress, failures, stop
        self.forks = forks
        self.waiting = {nb: notebook_needs(study, nb) for nb in notebooks}   # not yet checked, numeric order
        self.last_seconds = _last_seconds(study, notebooks)
        self.history_readers = {nb.stem for nb in notebooks if "ingest" in notebook_reads(study.params, nb.stem)}
        self.ready: list[Path] = []
        self.running: dict[Future, Path] = {}
        self.done: set[str] = set()
        self.building = True
        self.while_building = max(1, min(jobs - 1, (os.cpu_count() or 1) - 1))
        self.beside: bool | None = None   # whether notebooks may run beside the stages; None: the ingest is to come
        self.started = 0
        self.pool = ThreadPoolExecutor(max_workers=jobs)

    def __enter__(self) -> NotebookQueue:
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is not None:
                self.ready.clear()
                _stop_notebooks(list(self.running), self.stop, self.forks)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def stage_done(self, name: str) -> None:
        """Called after each stage is computed (:meth:`Study.build <pmrag.study.facade.Study.build>`'s ``after``)."""
        self.done.add(name)
        self._book(wait_s=0)
        self._start()

    def finish(self) -> None:
        """After the last stage: start the rest, up to ``jobs`` at a time, and wait for every one."""
        self.building = False
        self.done.update(self.study.computed_stages)
        self._start()
        while self.running:
            self._book(wait_s=None)
            self._start()

    def _start(self) -> None:
        for notebook, needs in list(self.waiting.items()):
            if needs <= self.done:
                del self.waiting[notebook]
                if self.study.engine.is_current(StageKey("notebook", notebook.stem)):
                    _say(self.progress, f"[cached] {notebook.name}")
                else:
                    self.ready.append(notebook)
        limit = self._while_building() if self.building else self.jobs
        self.ready = start_order(self.ready, self.last_seconds, self.history_readers)
        while self.ready and len(self.running) < limit and not self.failures:
            notebook = self.ready.pop(0)
            if not self.started:
                _say(self.progress, f"[notebooks] executing each once the stages it reads are computed, {self.jobs} "
                                    f"at a time ({self._while_building()} while stages are computed)")
            self.started += 1
            _say(self.progress, f"[start] {notebook.name}")
            future = self.pool.submit(execute_notebook, notebook, self.out_dir / notebook.name, self.params_path,
                                      kernel_name=self.kernel_name, stop=self.stop, forks=self.forks)
            self.running[future] = notebook

    def _while_building(self) -> int:
        """How many notebooks may run beside the stages: :attr:`while_building`, or none for a study of more than
        :data:`BESIDE_STAGES_MAX_MESSAGES` messages (and none until the ingest, which counts them, is computed)."""
        if self.beside is None and "ingest" in self.done:
            messages = self.study.message_count()
            self.beside = messages <= BESIDE_STAGES_MAX_MESSAGES
            if not self.beside:
                _say(self.progress, f"[notebooks] {messages:,} messages: the notebooks wait for the last stage (a "
                                    "kernel beside the stages would add what it loads to what they hold)")
        return self.while_building if self.beside else 0

    def _book(self, wait_s: float | None) -> None:
        """Book the notebooks that ended (waiting up to ``wait_s`` seconds for one; None: until one ends)."""
        if not self.running:
            return
        finished = wait(list(self.running), timeout=wait_s, return_when=FIRST_COMPLETED).done
        for future in finished:
            notebook = self.running.pop(future)
            if _record(self.study, self.run, notebook, future.result(), self.failures):
                _say(self.progress, f"[done] {notebook.name} ({self.run.notebook_seconds[notebook.name]:.1f} s)")


class CallBudget:
    """``pmrag study --max-calls N``: called before each stage is computed (:meth:`Study.build`'s ``before``),
    it counts a model stage's remote calls (:func:`~pmrag.study.costs.study_costs`, its inputs made by then) and
    raises :class:`CallBudgetReached` when they would bring this run's calls above ``N``."""

    def __init__(self, study, max_calls: int):
        self.study, self.max_calls, self.spent = study, max_calls, 0

    def __call__(self, name: str) -> None:
        from pmrag.study.costs import MODEL_STAGES, study_costs

        if name.split(":")[0] not in MODEL_STAGES:
            return
        costs = study_costs(self.study, compute=True, stages=[name])
        calls = costs.remote_calls()
        if self.spent + calls > self.max_calls:
            raise CallBudgetReached(
                f"--max-calls {self.max_calls}: stage {name} would make {calls} remote call(s) after {self.spent} "
                "in this run; stopped before it, nothing of it was called (what was computed is kept: rerun with a "
                "larger --max-calls to go on)")
        self.spent += calls


def _execute_interruptibly(notebook: Path, target: Path, params_path: Path, kernel_name: str, progress: bool,
                           stop: threading.Event, forks=None) -> dict:
    """:func:`~pmrag.study.notebooks.execute_notebook` driven by a thread while this one waits: on Ctrl-C here the
    kernel is interrupted and shut down cleanly (:func:`_stop_notebooks`), not torn down in the middle of a cell."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(execute_notebook, notebook, target, params_path, kernel_name=kernel_name,
                             progress=progress, stop=stop, forks=forks)
        try:
            return future.result()
        except KeyboardInterrupt:
            _stop_notebooks([future], stop, forks)
            raise


def _stop_notebooks(futures: list[Future], stop: threading.Event, forks=None,
                    grace_s: float = KERNEL_STOP_GRACE_S) -> None:
    """After Ctrl-C: cancel the notebooks not started, set ``stop`` (no kernel starts from now on, and what the
    running ones write to stderr is not shown) and stop the running ones.

    Kernels run in sessions of their own, so the terminal's SIGINT never reaches them: each running kernel
    gets SIGINT here (its cell raises KeyboardInterrupt, papermill records the error in the executed copy and
    shuts the kernel down).  A kernel between two cells ignores SIGINT, so one still alive
    :data:`KERNEL_RESIGNAL_S` later gets it again (not sooner: one being shut down would report the signal); a
    kernel still running after ``grace_s`` is killed.  A second Ctrl-C meanwhile is ignored, so the stop completes.
    """
    for future in futures:
        future.cancel()
    stop.set()
    with sigint_ignored():
        running = [f for f in futures if not f.done()]
        signalled: dict[int, float] = {}
        deadline = time.monotonic() + grace_s
        while running and time.monotonic() < deadline:
            for kernel in _kernels(forks):
                if time.monotonic() - signalled.get(kernel.pid, -KERNEL_RESIGNAL_S) >= KERNEL_RESIGNAL_S:
                    _send(kernel, signal.SIGINT)
                    signalled[kernel.pid] = time.monotonic()
            running = list(wait(running, timeout=0.2).not_done)
        if running:
            for kernel in _kernels(forks):
                _send(kernel, None)
            wait(running, timeout=grace_s)


def _kernels(forks=None) -> list:
    """The Jupyter kernels this process started and that still run: its child processes given a connection file
    with ``-f FILE.json``, as kernelspecs do (``psutil.Process`` objects; none without psutil, which ipython
    requires), and the kernels ``forks`` forked for it (:class:`~pmrag.study.kernel_forks.ForkedKernel`)."""
    found = [] if forks is None else forks.live()
    try:
        import psutil
    except ImportError:
        return found
    for child in psutil.Process().children():
        try:
            if _is_kernel(child.cmdline()):
                found.append(child)
        except psutil.Error:   # it ended meanwhile
            continue
    return found


def _send(kernel, signum: int | None) -> None:
    """``signum`` to ``kernel`` (None: kill it); nothing if it ended meanwhile."""
    ended: tuple = (ValueError, OSError)   # ended, or the signal does not exist on this platform
    try:
        import psutil

        ended += (psutil.Error,)
    except ImportError:
        pass
    try:
        if signum is None:
            kernel.kill()
        else:
            kernel.send_signal(signum)
    except ended:
        pass


@contextmanager
def _kernel_forks(notebooks: list[Path], wanted: bool, progress: bool) -> Iterator:
    """A :class:`~pmrag.study.kernel_forks.KernelForks` warmed with what ``notebooks`` import (its process started
    with the first kernel), or None (not ``wanted``, or not supported here); closed on the way out, after saying
    why a kernel was not forked."""
    from pmrag.study import kernel_forks

    if not wanted or not kernel_forks.supported():
        yield None
        return
    with kernel_forks.KernelForks(kernel_forks.notebook_imports(notebooks)) as forks:
        yield forks
        if forks.declined:
            _say(progress, f"[notebooks] a kernel was started as a new process, not forked: {forks.declined}")


def _is_kernel(command: list[str]) -> bool:
    """A Jupyter kernel's command line: ``... -f <connection file>.json ...``."""
    return any(flag == "-f" and value.endswith(".json") for flag, value in zip(command, command[1:]))


_HELD = threading.local()   # .folders: the run folders this thread holds (run_folder_lock)


@contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir/.lock`` (the folder is created) for the duration; :class:`RunInUse`
    at once, naming the holder's pid, when another process (or another hold in this one) holds it.  The pid is
    written into the file only once the lock is held, so a refused run never overwrites it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+", encoding="utf-8") as handle:
        if not _try_lock(handle):
            error = RunInUse(f"{run_dir}: another pmrag study is running on this run folder (pid {_holder(handle)}); "
                             "wait for it to finish, or give this run another name")
            error.holder = _holder(handle)
            raise error
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        held = _held_folders()
        held.add(run_dir.resolve())
        try:
            yield
        finally:
            held.discard(run_dir.resolve())


@contextmanager
def held_run_folder(run_dir: Path) -> Iterator[None]:
    """The run folder's lock for the duration, unless this thread holds it already (the runner building its study,
    a cohort building a participant's): :meth:`Study.build <pmrag.study.facade.Study.build>` takes it so that two
    processes never compute one run folder's stages at once, each reading the other's half-written results."""
    if Path(run_dir).resolve() in _held_folders():
        yield
        return
    with run_folder_lock(run_dir):
        yield


def _held_folders() -> set:
    if not hasattr(_HELD, "folders"):
        _HELD.folders = set()
    return _HELD.folders


def _try_lock(handle) -> bool:
    """Take an exclusive, non-blocking lock on the open file ``handle``; False when another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows: lock the first byte
        import msvcrt

        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _holder(handle) -> str:
    """The pid written in the lock file by the run holding it (``unknown`` while it has not written it yet)."""
    try:
        handle.seek(0)
        text = handle.read(32).strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


def _record(study, run: StudyRun, notebook: Path, result: dict, failures: dict) -> bool:
    """Book one notebook's result; False when it failed."""
    if "error" in result:
        failures[notebook] = (result["error"], result["notebook"])
        return False
    run.notebook_seconds[notebook.name] = result["seconds"]
    study.engine.finish(StageKey("notebook", notebook.stem), notebook_value(notebook.stem, result), result["seconds"])
    return True


def _say(progress: bool, text: str) -> None:
    """A line on stderr (when ``progress``), above the stages' progress bar if one is drawn."""
    if progress:
        from tqdm.auto import tqdm

        tqdm.write(text, file=sys.stderr)


def draw_graph(params, out: Path | None = None) -> list[Path]:
    """Draw the study's computation stages and what each reads (``pmrag graph``) into ``out`` (default
    ``<run>/stage_graph``, the run folder claimed as for a study) as SVG and PNG, computing nothing; returns the
    two paths."""
    from pmrag.present.stage_graph import GRAPH_FILE, draw_stage_graph
    from pmrag.study.pipeline import build_stages

    params = load_params(params) if not hasattr(params, "run_dir") else params
    if out is None:
        claim_run_folder(params.run_dir, how_to_force="draw the graph elsewhere with --out")
    stages = build_stages(params)
    edges = [(need, stage.key) for stage in stages for need in stage.needs]
    title = (f"run {params.run}: {len(stages)} stages, {len(edges)} reads; each numbered notebook follows the "
             "stages it reads")
    return draw_stage_graph([stage.key for stage in stages], edges, out or params.run_dir / GRAPH_FILE, title)


def status_lines(params_path) -> list[str]:
    """``pmrag status``: one line per stage (name, state, reason), computing nothing and creating nothing: a run
    folder holding files pmrag did not write is refused, one without a store has every stage missing."""
    from pmrag.study.engine import StageStatus
    from pmrag.study.facade import Study
    from pmrag.study.pipeline import build_stages

    params = load_params(params_path)
    notebooks = study_notebooks(params)
    check_run_folder(params.run_dir)
    if (params.run_dir / STORE_FILE).exists():
        rows = Study(params, notebooks, claim=False).status()
    else:
        rows = [StageStatus(str(stage.key), "missing", "never computed") for stage in build_stages(params, notebooks)]
    width = max(len(r.name) for r in rows)
    counts = defaultdict(int)
    lines = []
    for row in rows:
        counts[row.state] += 1
        lines.append(f"{row.name:<{width}}  {row.state:<10}  {row.reason}".rstrip())
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    return [f"run {params.run} ({params.run_dir}): {summary}", *lines]


def cost_status_lines(params_path) -> list[str]:
    """``pmrag status``, after the stages: the calls each model stage still has to make and their price, counted
    from the cached stages only (:mod:`pmrag.study.costs`), computing nothing and creating nothing."""
    from pmrag.study.costs import study_costs
    from pmrag.study.facade import Study

    params = load_params(params_path)
    check_run_folder(params.run_dir)
    if not (params.run_dir / STORE_FILE).exists():
        return ["model calls still to make: not counted, nothing is ingested yet (pmrag study --dry-run ingests and "
                "chunks, calling no model, and counts them)"]
    study = Study(params, study_notebooks(params), claim=False)
    return study_costs(study).lines(params.prices)
