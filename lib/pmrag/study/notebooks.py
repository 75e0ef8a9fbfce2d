"""Executing a numbered notebook with papermill, quietly and without keeping private state in the copy.

The executed copy keeps no widget state (the failure inspector's holds message texts and names); the kernel's
transport is encrypted where the kernel supports it, and its stderr reaches the user without the kernel's
known noise.  A failure comes back as data, not an exception, so it can cross a thread or process boundary.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated

from pmrag.core.errors import PmragError
from pmrag.core.names import StageKey
from pmrag.core.params import StudyParams
from pmrag.study.declare import Reads, Runtime, stage

NOTEBOOKS_DIR = "notebooks"   # executed copies, in the run folder
NOTEBOOK_PACKAGES = ("numpy", "pandas", "matplotlib", "seaborn", "ipykernel", "papermill", "networkx", "ipywidgets")
NOTEBOOK_EXTRA_PACKAGES = {"10_incomplete_gold": ("ir-measures", "pytrec-eval-terrier"),   # its cross-check's evaluator
                           "11_make_gold": ("anywidget",)}                                  # the grading key pad
NOTEBOOK_READS: dict[str, tuple[str, ...]] = {
    "01_chunking": ("ingest", "chunks", "coverage"),
    "02_representations": ("ingest", "summaries", "representation_profile", "vectors"),
    "03_retrievers": ("qrels", "coverage", "runs", "metrics"),
    "04_hybrid_sweep": ("qrels", "runs", "sweep", "hybrids", "statistics", "multifusion"),
    "05_bootstrap": ("qrels", "metrics", "hybrids", "reliability"),
    "06_failure_analysis": ("chunks", "private_strings", "qrels", "runs", "metrics", "hybrids",
                            "reliability", "failures"),
    "07_memory_graph": ("ingest", "chunks", "qrels", "graph", "interest_relevance", "graph_evaluation"),
    "08_beyond_retrieval": ("qrels", "representation_profile", "decomposition", "runs", "metrics", "sweep", "hybrids",
                            "learned_fusion"),
    "09_selection_and_power": ("qrels", "metrics", "hybrids", "statistics"),
    "10_incomplete_gold": ("chunk_table", "qrels", "runs"),
    "11_make_gold": ("ingest", "chunks", "chunk_table", "runs"),   # chunks: the dataset gold of simulated grades
    "12_answers": ("qrels", "answers"),
}
"""The stages each numbered notebook reads (through :class:`~pmrag.study.facade.Study`), by stem: a bare name is
every item of that stage (``runs``: every retriever's).  Its notebook stage keys on these stages and on the params
keys they key on, so a change to the β grid leaves the notebooks that read no hybrid current.  Enforced: under
the runner a notebook that reads a stage not listed here fails (:class:`UndeclaredRead`).  Declared here, beside
:data:`NOTEBOOK_EXTRA_PACKAGES`, not in each notebook's metadata: the stage graph and ``pmrag status`` read it
without opening eleven notebooks, and a notebook's committed JSON is not rewritten to change what it declares.  A
notebook not listed (a researcher's own) reads every stage, unenforced."""
READER_ENV = "PMRAG_NOTEBOOK"   # set in a kernel the runner starts: the stem of the notebook it executes


class UndeclaredRead(PmragError):
    """A notebook executed by the runner read a stage its declaration (:data:`NOTEBOOK_READS`) does not list."""


def notebook_reads(params: StudyParams, stem: str) -> tuple[str, ...]:
    """The stages notebook ``stem`` reads: its :data:`NOTEBOOK_READS` entry, or every computation stage."""
    from pmrag.study.items import stage_items

    declared = NOTEBOOK_READS.get(stem)
    return declared if declared is not None else tuple(name for name in stage_items(params, []) if name != "notebook")


def reads_declared(stem: str | None) -> tuple[str, ...] | None:
    """What a notebook (by stem) may read when executed by the runner; None: anything (no notebook, or one
    that declares nothing)."""
    return None if stem is None else NOTEBOOK_READS.get(stem)


def check_read(stem: str, declared: tuple[str, ...], key: StageKey) -> None:
    """Raise :class:`UndeclaredRead` (one line naming the stage and the notebook) unless ``declared`` lists
    ``key``'s stage (by name, or by ``name:item``)."""
    if key.name not in declared and str(key) not in declared:
        raise UndeclaredRead(f"notebook {stem}.ipynb reads stage {key}, which it does not declare: add "
                             f"{key.name!r} to its reads in pmrag.study.notebooks.NOTEBOOK_READS")


_READER = os.environ.pop(READER_ENV, None)   # popped: a process the notebook starts (a `pmrag study`) is no reader


def current_reader() -> str | None:
    """The stem of the notebook this process is the kernel of, when the runner started it; else None."""
    return _READER


def adopt_reader() -> None:
    """Read :data:`READER_ENV` again, as at import: for a kernel forked from a process that imported this module
    (:mod:`pmrag.study.kernel_forks`), once its environment is the kernel's."""
    global _READER
    _READER = os.environ.pop(READER_ENV, None)


def execute_notebook(notebook: Path, target: Path, params_path: Path, *, kernel_name: str = "python3",
                     progress: bool = False, stop: threading.Event | None = None, forks=None) -> dict:
    """Execute ``notebook`` with papermill into ``target`` (``params_path`` as its parameter); a failure is
    returned as ``{"error": {...}}`` (cell index, execution count, error name and value), never raised, so it can
    cross a process boundary.

    ``stop`` is set by the runner on Ctrl-C, before it interrupts the kernels: from then on no kernel is
    started (:class:`KernelNotStarted`), and what the kernels write to stderr and papermill logs is dropped (a
    kernel interrupted while Python starts up reports "Fatal Python error: init_import_site", and papermill
    that it died; the user asked it to stop).

    The executed copy keeps no widget state: nbclient's ``store_widget_state`` is off and any ``widgets`` key
    left in the notebook's metadata is removed, because a widget's state (the failure inspector's) holds
    message texts and names.  The kernel's transport is encrypted where the kernel supports it
    (:func:`_kernel_manager_class`), and its stderr is captured and passed on without the kernel's known
    noise (the "without encryption" warning, a KeyboardInterrupt at shutdown, :func:`kernel_stderr_without_noise`);
    anything else it wrote (a crash, a real warning) still reaches stderr, after the notebook ends.  The kernel's
    environment names the notebook (:data:`READER_ENV`), so a read of a stage it does not declare fails it.
    ``forks`` (a :class:`~pmrag.study.kernel_forks.KernelForks`): the kernel is forked from its warm process
    where it serves the kernelspec and environment, else started as a new process.
    """
    import sys
    import tempfile
    import time

    without_iri_grammar()
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    started = time.perf_counter()
    stop = threading.Event() if stop is None else stop
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pmrag-kernel-") as scratch, _logs_dropped_after(stop):
        stderr_path = Path(scratch) / "kernel.stderr"
        try:
            pm.execute_notebook(str(notebook), str(target), parameters={"params_path": str(params_path)},
                                cwd=str(notebook.parent), kernel_name=kernel_name, progress_bar=progress,
                                **_quiet_engine_options(stderr_path, stop, notebook.stem, forks))
        except PapermillExecutionError as exc:
            return {"error": {"cell_index": exc.cell_index, "exec_count": exc.exec_count, "ename": exc.ename,
                              "evalue": exc.evalue}, "notebook": str(target)}
        except KernelNotStarted as exc:
            return {"error": {"cell_index": None, "exec_count": None, "ename": "KeyboardInterrupt", "evalue": str(exc)},
                    "notebook": str(target)}
        finally:
            drop_widget_state(target)
            if stderr_path.is_file() and not stop.is_set():
                sys.stderr.write(kernel_stderr_without_noise(stderr_path.read_text(encoding="utf-8", errors="replace")))
    return {"notebook": str(target), "seconds": round(time.perf_counter() - started, 3)}


def without_iri_grammar() -> None:
    """Let jsonschema, which papermill imports through nbformat, go without ``rfc3987_syntax`` in this process.

    jsonschema imports it, when installed, for its ``iri`` format check (jupyter-events asks for
    ``jsonschema[format-nongpl]``, which installs it), and version 1.1.0 builds its grammar at import: 2.0 of the
    2.4 s that importing papermill took here, in the runner's process beside the stages' (python-jsonschema issue
    1392).  nbformat's schemas check no ``iri`` format and nothing else in the runner validates one, so the module
    is marked missing (unless already imported) and jsonschema leaves that one check out."""
    import sys

    sys.modules.setdefault("rfc3987_syntax", None)


class KernelNotStarted(RuntimeError):
    """A notebook's kernel was about to start after the run was interrupted."""


EXECUTION_LOGGERS = ("papermill", "traitlets")   # papermill logs nbclient's messages; jupyter_client's go to traitlets


@contextmanager
def _logs_dropped_after(stop: threading.Event) -> Iterator[None]:
    """For the duration, records of :data:`EXECUTION_LOGGERS` are dropped once ``stop`` is set."""
    def still_running(_record) -> bool:
        return not stop.is_set()

    loggers = [logging.getLogger(name) for name in EXECUTION_LOGGERS]
    for logger in loggers:
        logger.addFilter(still_running)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(still_running)


KERNEL_NOISE = ("Kernel is running over TCP without encryption", "KeyboardInterrupt caught in kernel")
"""Lines a kernel writes to stderr on every run that say nothing about the notebook (ipykernel 7 logs the first
at start-up when its transport is not encrypted, e.g. a kernelspec that does not declare CurveZMQ support)."""


def _quiet_engine_options(stderr_path: Path, stop: threading.Event, reader: str = "", forks=None) -> dict:
    """papermill engine options (passed on to nbclient's ``NotebookClient``): no widget state, the kernel ended
    at once when the last cell's outputs are in, and a kernel manager that encrypts the transport, sends the
    kernel's stderr to ``stderr_path``, starts no kernel once ``stop`` is set, names the notebook ``reader`` in
    the kernel's environment and forks the kernel from ``forks`` where it can.

    Ended at once (``shutdown_kernel="immediate"``, as nbval does): a kernel asked to shut down collects its whole
    heap on the way out, and jupyter_client waits up to 2.5 s for it before sending SIGTERM: 2.7 s per notebook on a
    slow 2-core machine.  Every output has arrived by then and a notebook writes its files in its cells; nothing
    is left for the kernel to do."""
    from traitlets.config import Config

    manager = _kernel_manager_class()
    return {"store_widget_state": False, "shutdown_kernel": "immediate", "kernel_manager_class": manager,
            "config": Config({manager.__name__: {"stderr_path": str(stderr_path), "stop": Uncopied(stop),
                                                 "reader": reader, "forks": Uncopied(forks)}})}


class Uncopied:
    """A value handed to a traitlets object through its configuration as it is: traitlets deep-copies configured
    values, and a copied ``threading.Event`` (which cannot be copied anyway) would never see the runner set it."""

    def __init__(self, value):
        self.value = value

    def __deepcopy__(self, memo):
        return self


@cache
def _kernel_manager_class():
    """nbclient's kernel manager (``AsyncKernelManager``), changed in four ways: CurveZMQ transport encryption
    where the kernelspec declares support (jupyter_client's ``transport_encryption = "auto"``; ipykernel 7 then
    has nothing to warn about), the kernel's stderr written to the ``stderr_path`` file, not inherited, no
    kernel launched once ``stop`` is set (:class:`KernelNotStarted`), and the notebook's stem in the kernel's
    environment (:data:`READER_ENV`; without one, whatever the runner's environment held there is removed).  With
    ``forks`` (a :class:`~pmrag.study.kernel_forks.KernelForks`) the kernel is forked from its warm process where
    it serves the command and environment, and jupyter_client's local provisioner watches and signals it as the
    process it would have started.
    jupyter_client starts each kernel in a session of its own, so the terminal's Ctrl-C never reaches it: the
    runner interrupts it."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_client.provisioning import LocalProvisioner
    from traitlets import Instance, Unicode, default

    class PmragKernelManager(AsyncKernelManager):
        stderr_path = Unicode("", config=True, help="file that receives the kernel's stderr ('' = inherit)")
        stop = Instance(Uncopied, allow_none=True, config=True, help="a threading.Event: once set, no kernel is launched")
        reader = Unicode("", config=True, help="the stem of the notebook the kernel executes")
        forks = Instance(Uncopied, allow_none=True, config=True, help="a KernelForks the kernel is forked from")

        if "transport_encryption" in AsyncKernelManager.class_trait_names():
            @default("transport_encryption")
            def _encrypt_when_possible(self):
                return "auto" if zmq.has("curve") else "disabled"

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            self._refuse_once_stopped()
            env = {name: value for name, value in kw.get("env", os.environ).items() if name != READER_ENV}
            kw = {**kw, "env": {**env, READER_ENV: self.reader} if self.reader else env}
            if self._forked(kernel_cmd, kw):
                return None
            if not self.stderr_path:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with open(self.stderr_path, "ab") as stderr:   # the kernel keeps its own copy of the descriptor
                return await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": stderr})

        def _refuse_once_stopped(self) -> None:
            if self.stop is not None and self.stop.value.is_set():
                raise KernelNotStarted("the run was interrupted before this notebook's kernel started")

        def _forked(self, kernel_cmd, kw) -> bool:
            forks = None if self.forks is None else self.forks.value
            if forks is None or not isinstance(self.provisioner, LocalProvisioner):
                return False
            kernel = forks.launch(kernel_cmd, kw["env"], kw.get("cwd"), self.stderr_path,
                                  None if self.stop is None else self.stop.value)
            if kernel is not None and self.stop is not None and self.stop.value.is_set():
                kernel.kill()                 # forked as the run was stopped
            self._refuse_once_stopped()
            if kernel is None:
                return False
            provisioner = self.provisioner   # what LocalProvisioner.launch_kernel records of the process it starts
            provisioner.process, provisioner.pid, provisioner.pgid = kernel, kernel.pid, kernel.pid
            provisioner.cwd = kw.get("cwd", os.getcwd())
            self._reconcile_connection_info(provisioner.connection_info)
            return True

    return PmragKernelManager


def kernel_stderr_without_noise(text: str) -> str:
    """``text`` (a kernel's stderr) without :data:`KERNEL_NOISE` lines and without a KeyboardInterrupt that the
    kernel reports when it is interrupted at shutdown (a bare ``KeyboardInterrupt`` line, or a traceback ending
    in one); every other line is kept, in order."""
    kept: list[str] = []
    traceback: list[str] = []
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if traceback:
            traceback.append(line)
            if line[:1].isspace() or not stripped:
                continue                      # still inside the traceback's frames
            if stripped != "KeyboardInterrupt":
                kept.extend(traceback)
            traceback = []
        elif stripped.startswith("Traceback (most recent call last)"):
            traceback = [line]
        elif stripped != "KeyboardInterrupt" and not any(noise in line for noise in KERNEL_NOISE):
            kept.append(line)
    kept.extend(traceback)                    # an unfinished traceback is kept as it is
    return "".join(kept)


def drop_widget_state(notebook: Path) -> None:
    """Remove ``metadata.widgets`` (the widgets' saved state) from the notebook file, if it has one."""
    import nbformat

    if not notebook.is_file():
        return
    node = nbformat.read(notebook, as_version=nbformat.NO_CONVERT)
    if "widgets" in node.metadata:
        del node.metadata["widgets"]
        nbformat.write(node, notebook)


@stage(lambda p, stem: f"execute {stem}.ipynb", item="stem", whole_packages=("pmrag",),
       files=lambda p, stem: [Path(p.notebooks_dir) / f"{stem}.ipynb"],
       packages=lambda p, stem: NOTEBOOK_PACKAGES + NOTEBOOK_EXTRA_PACKAGES.get(stem, ()),
       outputs=lambda value, stem: [value["notebook"], *value["produced"]])
def notebook(stem: str, reads: Annotated[tuple, Reads(notebook_reads, unread_params=True)], runtime: Runtime) -> dict:
    """A numbered notebook executed into the run folder: current while the notebook file, the package's code
    (it may call any of the package's functions), the notebook's packages, the stages it reads
    (:data:`NOTEBOOK_READS`), the params keys they key on and the params keys no stage keys on are unchanged."""
    source = Path(runtime.notebooks_dir) / f"{stem}.ipynb"
    result = execute_notebook(source, runtime.path(NOTEBOOKS_DIR, source.name), runtime.params_path,
                              progress=runtime.progress)
    if "error" in result:
        error = result["error"]
        raise PmragError(f"notebook {source.name} failed in cell {error['cell_index']}: {error['ename']}: "
                         f"{error['evalue']}")
    return notebook_value(stem, result)


def notebook_value(stem: str, result: dict) -> dict:
    """What the notebook stage records of an execution (the runner's too): the executed copy and the tables and
    figures the notebook writes, relative to the run folder, and the seconds it took."""
    from pmrag.present.artifacts import produced_by

    return {"notebook": f"{NOTEBOOKS_DIR}/{stem}.ipynb", "produced": produced_by(stem), "seconds": result["seconds"]}

