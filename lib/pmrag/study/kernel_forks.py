"""Notebook kernels forked from one warm process, so that each kernel does not import the notebooks' packages again.

A kernel for a numbered notebook starts as a fresh Python (``python -m ipykernel_launcher -f FILE``), and its
first cell imports pandas, seaborn (with scipy.stats), SQLAlchemy and pmrag: 2.5–3 s of CPU before any work,
paid again by each of a study's notebooks.  :class:`KernelForks` starts one process (:func:`serve`) that imports
ipykernel and what the notebooks import, once, and then forks one kernel per request.  The child becomes the
kernel that command would have started: a session of its own, the environment, working directory and stderr the
kernel manager asked for, the launcher's ``sys.path``, and the kernel's own argv; it shares the imported modules
copy-on-write.  A module's import reads the environment at most once, so a request whose environment differs from
the warm process's in anything but the launch's own variables (:data:`PER_KERNEL_ENV`, :data:`SET_BY_IMPORTS`) is
not served: that kernel, and one of any other command, starts as a subprocess as before
(:meth:`KernelForks.launch` returns None).

Used by ``pmrag study`` on Linux (fork is unsafe with some macOS system frameworks).  The runner, not the
kernel's parent, watches and signals each forked kernel through a pidfd (:class:`ForkedKernel`), which names
that process and no later one with the same pid.
"""

from __future__ import annotations

import ast
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pmrag.present.artifacts import INLINE_BACKEND

LAUNCHER = ("-m", "ipykernel_launcher")
WARM_BASE = ("ipykernel.kernelapp", "matplotlib.pyplot")
PER_KERNEL_ENV = frozenset({"PMRAG_NOTEBOOK", "JPY_PARENT_PID", "JPY_SESSION_NAME"})
"""Variables a kernel's environment may hold and the warm process's may not: the notebook it executes (read by
:mod:`pmrag.study.notebooks` when the child adopts it), the parent's pid (the child's ``parent_handle`` is its
real parent, the warm process) and the Jupyter session's name (read by no import)."""
SET_BY_IMPORTS = frozenset({"KMP_INIT_AT_FORK"})
"""Variables a library sets in the environment of the process that imports it, which a kernel may therefore hold
and the warm process may not: scikit-learn and joblib set ``KMP_INIT_AT_FORK`` (for Intel's OpenMP runtime, which
reads it when loaded, not at any Python import), and the runner imports them for its stages after the warm
process has started.  The kernel gets the value, as a started kernel would."""
SHELL_HOOKS = {"ipywidgets": "_handle_ipython", "matplotlib_inline.backend_inline": "_enable_matplotlib_integration"}
"""Modules that, when imported inside a kernel, hook into its IPython shell (ipywidgets registers its comm
targets; the inline backend its figure display): imported in the warm process, before any shell exists, the
hook is run again in the child once its shell exists (:func:`load_ipython_extension`)."""
SHELL_BOUND = ("tqdm.autonotebook", "tqdm.auto")
"""Modules whose import picks an implementation by whether a shell exists, which cannot be run again: a warm
process that imported one forks no kernel."""
WARM_CALLS = (("pmrag.study.closure", "parse_package_imports"),)
"""Functions the warm process runs after its imports, where their module is among them: work each kernel would
repeat, remembered in memory the kernels inherit.  A kernel that opens the study keys its stages, and parsing the
imports of ~100 modules was 0.5 s of that in each; they are remembered by each module's text, so a module edited
since is parsed again."""
READY_TIMEOUT_S = 120.0
READY_POLL_S = 0.1
CLOSE_WAIT_S = 1.0   # an idle warm process ends at once on its socket closing; one still importing is killed
MESSAGE_BYTES = 1 << 20   # one request: a kernel's argv and environment


def supported() -> bool:
    """Whether kernels can be forked here: Linux (pidfds, and fork without macOS's framework hazards)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def notebook_imports(notebooks: Iterable[Path]) -> list[str]:
    """The modules the code cells of ``notebooks`` import, in first-seen order: ``import a.b`` gives ``a.b``;
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module).  Cells that do not parse (magics) are
    skipped; a name that is no module is skipped by the warm process."""
    seen: dict[str, None] = {}
    for notebook in notebooks:
        cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
        for cell in cells:
            if cell.get("cell_type") != "code":
                continue
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    seen.update(dict.fromkeys(alias.name for alias in node.names))
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    seen[node.module] = None
                    seen.update(dict.fromkeys(f"{node.module}.{alias.name}" for alias in node.names))
    return list(seen)


class ForkedKernel:
    """A forked kernel as jupyter_client's local provisioner uses a ``subprocess.Popen``: ``pid``, ``poll``,
    ``wait``, ``send_signal``, ``kill``, ``terminate``, no pipes.  It is the warm process's child, not this
    one's: its exit status is not known here, so ``returncode`` is 0 once it has ended.  Used from several
    threads (the kernel's manager, the runner's Ctrl-C): the pidfd stays open until :meth:`release`."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd, self.returncode = pid, pidfd, None

    def poll(self) -> int | None:
        if self.returncode is None and self._pidfd >= 0 and self._ended(timeout=0):
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            self.returncode = 0
        return self.returncode

    def _ended(self, timeout: float | None) -> bool:
        """Whether the process ended, waiting up to ``timeout`` seconds (None: until it does)."""
        return bool(select.select([self._pidfd], [], [], timeout)[0])

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def release(self) -> None:
        """Close the pidfd (once the kernel's manager is done with it)."""
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def __del__(self):
        self.release()


class KernelForks:
    """The warm process, started by :meth:`start` or by the first :meth:`launch` (its imports run in the
    background; a run whose notebooks are all current starts none), asked by :meth:`launch` for kernels
    (thread-safe), ended by :meth:`close` (it also ends when this process does: its socket closes).
    ``modules``: what it imports beside ipykernel and ``matplotlib.pyplot`` (a module that fails to import is
    skipped: the kernel's own import reports it).  ``declined``: why the last kernel not forked was not ('' while
    every kernel was)."""

    def __init__(self, modules: Iterable[str] = ()):
        self.modules = [*WARM_BASE, *modules]
        self.kernels: list[ForkedKernel] = []
        self.declined = ""
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self._env: dict[str, str] = {}
        self._ready = False
        self._gone = ""

    def start(self) -> KernelForks:
        if self._socket is not None or self._gone:
            return self
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._env = _warm_env(os.environ)
        command = [sys.executable, "-c", f"from pmrag.study.kernel_forks import serve; serve({theirs.fileno()})"]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=self._env,
                                         pass_fds=[theirs.fileno()], start_new_session=True)
        theirs.close()
        self._socket = ours
        ours.sendall(json.dumps({"modules": self.modules}).encode())
        return self

    def launch(self, command: list[str], env: dict[str, str], cwd: str | None, stderr_path: str,
               stop: threading.Event | None = None) -> ForkedKernel | None:
        """A kernel forked for ``command`` (a kernelspec's argv, formatted), or None when it is not served here
        (:attr:`declined` says why): not this Python's ipykernel launcher, an environment the warm process was
        not started with, the warm process gone or unable to fork (then no later request is served either), or
        ``stop`` set while the warm process still imported."""
        reason = self._declines(command, env)
        if reason:
            self.declined = reason
            return None
        request = {"argv": list(command[3:]), "env": env, "cwd": str(cwd or os.getcwd()), "stderr": stderr_path}
        with self._lock:
            self.start()
            try:
                if not self._ready and not self._await_ready(stop):
                    self.declined = "the run was stopped"
                    return None
                self._socket.sendall(json.dumps(request).encode())
                message, fds, _flags, _address = socket.recv_fds(self._socket, MESSAGE_BYTES, 1)
            except OSError as error:
                self._gone = self.declined = f"the warm process is gone ({error})"
                return None
            reply = json.loads(message.decode() or "{}")
            if "pid" not in reply or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                self._gone = self.declined = reply.get("error", "the warm process is gone")
                return None
            kernel = ForkedKernel(reply["pid"], fds[0])
            self.kernels.append(kernel)
            return kernel

    def live(self) -> list[ForkedKernel]:
        """The forked kernels still running."""
        return [kernel for kernel in self.kernels if kernel.poll() is None]

    def close(self) -> None:
        """End the warm process: it ends on its socket's closing, or is killed if still importing after
        :data:`CLOSE_WAIT_S` (the kernels it forked end with it: their parent is gone)."""
        for kernel in self.kernels:
            kernel.release()
        if self._socket is not None:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)   # for every copy: a worker forked from this process has one
            except OSError:
                pass
            self._socket.close()
            self._socket = None
            self._gone = "closed"
        if self._process is not None:
            try:
                self._process.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> KernelForks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _declines(self, command: list[str], env: dict[str, str]) -> str:
        if self._gone:
            return self._gone
        if len(command) < 3 or tuple(command[1:3]) != LAUNCHER:
            return f"kernel command {command[:3]} is not ipykernel's launcher"
        if os.path.realpath(command[0]) != os.path.realpath(sys.executable):
            return f"kernel command runs {command[0]}, not {sys.executable}"
        warm = self._env if self._socket is not None else _warm_env(os.environ)   # what start() would use
        differ = sorted(set(_warm_env(env).items()) ^ set(warm.items()))
        if differ:
            return f"the kernel's environment differs from the warm process's in {differ[0][0]}"
        return ""

    def _await_ready(self, stop: threading.Event | None) -> bool:
        """Wait for the warm process's imports; False if ``stop`` was set meanwhile."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not select.select([self._socket], [], [], READY_POLL_S)[0]:
            if stop is not None and stop.is_set():
                return False
            if time.monotonic() > deadline:
                raise OSError(f"its imports took more than {READY_TIMEOUT_S:.0f} s")
        if not self._socket.recv(MESSAGE_BYTES):
            raise OSError("it ended before its imports did")
        self._ready = True
        return True


def _warm_env(env) -> dict[str, str]:
    """``env`` without :data:`PER_KERNEL_ENV` and :data:`SET_BY_IMPORTS`, with ipykernel's matplotlib backend
    unless it names one: what the warm process is started with, and what a kernel's environment must equal."""
    warm = {name: value for name, value in env.items() if name not in PER_KERNEL_ENV | SET_BY_IMPORTS}
    if not warm.get("MPLBACKEND"):
        warm["MPLBACKEND"] = INLINE_BACKEND   # as ipykernel sets it before the kernel's code imports matplotlib
    return warm


def serve(fd: int) -> None:
    """The warm process: import the requested modules, then fork one kernel per request on socket ``fd`` and send
    back its pid and a pidfd.  Ends when the socket closes.  Refuses to fork once a thread runs beside the main
    one (a forked child would hold a copy of that thread's locks and no thread).  Says nothing when the socket
    closes early (the run was stopped while it imported).

    The imported objects are frozen out of the garbage collector's generations (``gc.freeze``): a child's
    collections then leave them alone, and their pages stay shared instead of being copied into each kernel."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # stopped by the socket closing; its kernels restore the default
    channel = socket.socket(fileno=fd)
    try:
        _serve(channel)
    except (BrokenPipeError, ConnectionResetError):
        return


def _serve(channel: socket.socket) -> None:
    import gc
    import importlib

    modules = json.loads(channel.recv(MESSAGE_BYTES) or b'{"modules": []}')["modules"]
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:   # noqa: BLE001 - not a module, or broken: the kernel's own import says which
            continue
    for module, function in WARM_CALLS:
        if module in sys.modules:
            try:
                getattr(sys.modules[module], function)()
            except Exception:   # noqa: BLE001 - a warm-up only spares the kernels work they still do themselves
                pass
    gc.collect()
    gc.freeze()
    channel.sendall(json.dumps({"ready": len(sys.modules)}).encode())
    while True:
        readable, _, _ = select.select([channel], [], [], 1.0)
        _reap()
        if not readable:
            continue
        message = channel.recv(MESSAGE_BYTES)
        if not message:
            return
        refusal = _refusal()
        if refusal:
            channel.sendall(json.dumps({"error": refusal}).encode())
            continue
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _become_kernel(request, channel)
        pidfd = os.pidfd_open(pid)   # the child stays a zombie until _reap, so this is that process
        socket.send_fds(channel, [json.dumps({"pid": pid}).encode()], [pidfd])
        os.close(pidfd)


def _refusal() -> str:
    """Why the warm process cannot fork a kernel now, or ''."""
    if threading.active_count() > 1:
        return f"{threading.active_count()} threads run in the warm process"
    bound = [name for name in SHELL_BOUND if name in sys.modules]
    return f"the warm process imported {bound[0]}, which chose its implementation without a shell" if bound else ""


def load_ipython_extension(shell) -> None:
    """In a forked kernel, once its shell exists (loaded through ``--IPKernelApp.extra_extensions``): run the
    :data:`SHELL_HOOKS` of the modules the warm process imported, as their import in the kernel would have."""
    for name, hook in SHELL_HOOKS.items():
        if name in sys.modules:
            getattr(sys.modules[name], hook)()


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _become_kernel(request: dict, channel: socket.socket) -> None:
    """In the forked child: become ``python -m ipykernel_launcher ARGV`` as the kernel manager would have
    started it; never returns."""
    import atexit
    import importlib.util
    import traceback

    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        channel.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if request["stderr"]:
            stderr = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.dup2(stderr, 2)
            os.close(stderr)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**request["env"], "JPY_PARENT_PID": str(os.getppid())})
        if "pmrag.study.notebooks" in sys.modules:
            sys.modules["pmrag.study.notebooks"].adopt_reader()
        if sys.path and sys.path[0] == "":
            del sys.path[0]                       # as the launcher does; the kernel's init_path adds it back
        launcher = importlib.util.find_spec("ipykernel_launcher")
        sys.argv = [launcher.origin, *request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}",
                    f"--IPKernelApp.extra_extensions={__name__}"]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:   # noqa: BLE001 - reported on the kernel's stderr, as a crashed kernel's would be
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
