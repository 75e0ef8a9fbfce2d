"""Executing a numbered notebook with papermill, quietly and without keeping private state in the copy.

The executed copy keeps no widget state (the failure inspector's holds message texts and names); the kernel's
transport is encrypted where the kernel supports it, and its stderr reaches the user without the kernel's
known noise.  A failure comes back as data, not an exception, so it can cross a thread or process boundary.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated

from pmrag.core.params import StudyParams, unkeyed_keys
from pmrag.study.declare import Restricted, Runtime, stage
from pmrag.study.params import FOLDER_KEYS

NOTEBOOKS_DIR = "notebooks"   # executed copies, in the run folder
NOTEBOOK_PACKAGES = ("numpy", "pandas", "matplotlib", "seaborn", "ipykernel", "papermill", "networkx", "ipywidgets")
NOTEBOOK_EXTRA_PACKAGES = {"10_incomplete_gold": ("ir-measures", "pytrec-eval-terrier"),   # its cross-check's evaluator
                           "11_make_gold": ("anywidget",)}                                  # the grading key pad
NOTEBOOK_KEYS = tuple(name for name in StudyParams.model_fields if name not in FOLDER_KEYS + unkeyed_keys())


def execute_notebook(notebook: Path, target: Path, params_path: Path, *, kernel_name: str = "python3",
                     progress: bool = False, stop: threading.Event | None = None) -> dict:
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
    anything else it wrote (a crash, a real warning) still reaches stderr, after the notebook ends.
    """
    import sys
    import tempfile
    import time

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
                                **_quiet_engine_options(stderr_path, stop))
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


def _quiet_engine_options(stderr_path: Path, stop: threading.Event) -> dict:
    """papermill engine options (passed on to nbclient's ``NotebookClient``): no widget state, and a kernel
    manager that encrypts the transport, sends the kernel's stderr to ``stderr_path`` and starts no kernel once
    ``stop`` is set."""
    from traitlets.config import Config

    manager = _kernel_manager_class()
    return {"store_widget_state": False, "kernel_manager_class": manager,
            "config": Config({manager.__name__: {"stderr_path": str(stderr_path), "stop": Uncopied(stop)}})}


class Uncopied:
    """A value handed to a traitlets object through its configuration as it is: traitlets deep-copies configured
    values, and a copied ``threading.Event`` (which cannot be copied anyway) would never see the runner set it."""

    def __init__(self, value):
        self.value = value

    def __deepcopy__(self, memo):
        return self


@cache
def _kernel_manager_class():
    """nbclient's kernel manager (``AsyncKernelManager``), changed in three ways: CurveZMQ transport encryption
    where the kernelspec declares support (jupyter_client's ``transport_encryption = "auto"``; ipykernel 7 then
    has nothing to warn about), the kernel's stderr written to the ``stderr_path`` file, not inherited, and no
    kernel launched once ``stop`` is set (:class:`KernelNotStarted`).  jupyter_client starts each kernel in a
    session of its own, so the terminal's Ctrl-C never reaches it: the runner interrupts it."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Instance, Unicode, default

    class PmragKernelManager(AsyncKernelManager):
        stderr_path = Unicode("", config=True, help="file that receives the kernel's stderr ('' = inherit)")
        stop = Instance(Uncopied, allow_none=True, config=True, help="a threading.Event: once set, no kernel is launched")

        if "transport_encryption" in AsyncKernelManager.class_trait_names():
            @default("transport_encryption")
            def _encrypt_when_possible(self):
                return "auto" if zmq.has("curve") else "disabled"

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if self.stop is not None and self.stop.value.is_set():
                raise KernelNotStarted("the run was interrupted before this notebook's kernel started")
            if not self.stderr_path:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with open(self.stderr_path, "ab") as stderr:   # the kernel keeps its own copy of the descriptor
                return await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": stderr})

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
def notebook(stem: str, settings: Annotated[StudyParams, Restricted(lambda p, stem: NOTEBOOK_KEYS)],
             runtime: Runtime) -> dict:
    """A numbered notebook executed into the run folder: current while the notebook file, the params (but the
    folders), the package's code, the notebook's packages and every computation stage are unchanged (it may read
    any stage and call any of the package's functions)."""
    from pmrag.core.errors import PmragError

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

