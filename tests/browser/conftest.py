"""JupyterLab in headless Chromium, for the browser tests (``make browser-test``; marked ``browser``).

What a fixture here guarantees:

* **Skips, never fails, for a missing tool** — without Debian's ``chromium`` on the PATH or the ``playwright``
  package (its Python driver only: no browser is downloaded) every browser test is skipped with the reason.
* **The committed notebooks are never touched** — the server's root is a temporary folder holding a *copy* of
  the notebook whose ``parameters`` cell names the repository's params file by its absolute path (the original
  ``../params/demo.yaml`` is relative to ``notebooks/``); every other relative path in a study is resolved from
  the params file, so the copy reads and writes exactly what the committed notebook does (``outputs/demo/``,
  as nbval's run does).  JupyterLab may autosave the copy; nothing under ``notebooks/`` is served at all.
* **Nothing of the user's Jupyter is read or written** — configuration, data, runtime files, lab settings,
  workspaces and IPython's profile live in the same temporary folder; lab settings turn off news and update
  checks, so no notification covers the page and nothing asks the network.
* **One server for the browser tests** — every browser test is served by one JupyterLab (a start costs seconds of
  a tight test budget); each test module puts its files in its own folder under the server's root and gets a
  :class:`Lab` whose ``page_url`` and ``path`` resolve names inside that folder.  The server and Chromium are
  stopped after the last browser test, not at the end of the session: an idle lab page polls its server, and the
  two took a fifth of a core through every later test.
* **The server is always stopped** — through its shutdown API, then SIGTERM, then SIGKILL; the kernels it
  started are ended by process ID if they outlived it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "params" / "demo.yaml"
SCREENSHOTS = REPO / "outputs" / "browser"
VIEWPORT = {"width": 1280, "height": 900}
# Launch flags for Debian's chromium on a machine without network or GPU; a fresh profile per launch.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-proxy-server")
SERVER_START_S = 60
SERVER_STOP_S = 20
# Lab settings that keep the page quiet (no news toast, no update check: both would also ask the network) and
# render every cell of a notebook (``windowingMode: none``), so a page measures every output, not the visible ones.
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings":
                {"fetchNews": "false", "checkForUpdates": False},
                "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}


# -- pure helpers ----------------------------------------------------------------------------------------
def chromium_path() -> str | None:
    """Debian's ``chromium`` launcher (``/usr/bin/chromium``) as found on the PATH; ``None`` when absent."""
    return shutil.which("chromium")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the server is told not to try another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def notebook_copy(source: Path, folder: Path, params_path: Path) -> Path:
    """A copy of ``source`` in ``folder`` with its outputs cleared and its ``parameters`` cell's first line set to
    ``params_path = "<absolute params_path>"`` (its other parameters kept); the original file is only read."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    tagged = [c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        raise ValueError(f"{source.name}: expected one cell tagged 'parameters', found {len(tagged)}")
    lines = "".join(tagged[0]["source"]).split("\n")
    tagged[0]["source"] = "\n".join([f"params_path = {json.dumps(str(params_path))}", *lines[1:]])
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    target = folder / source.name
    target.write_text(json.dumps(notebook, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return target


def lab_environment(home: Path) -> dict[str, str]:
    """The server's environment: this one with every Jupyter/IPython folder under ``home`` and no proxy."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    folders = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
               "JUPYTERLAB_SETTINGS_DIR": "lab-settings", "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
               "IPYTHONDIR": "ipython"}
    for variable, name in folders.items():
        (home / name).mkdir(parents=True, exist_ok=True)
        env[variable] = str(home / name)
    for name, values in LAB_SETTINGS.items():
        path = home / "lab-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    return env


# -- the server ------------------------------------------------------------------------------------------
@dataclass
class Lab:
    """A running JupyterLab: its base URL, token, served root, process and log file; ``folder`` is where a test's
    files live under the root (``""``: the root itself)."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen
    log: Path
    folder: str = ""

    def within(self, folder: str) -> Lab:
        """The same server, with names resolved in ``folder`` under the root (created)."""
        (self.root / folder).mkdir(parents=True, exist_ok=True)
        return replace(self, folder=folder)

    @property
    def files(self) -> Path:
        """The folder on disk where this view's names live."""
        return self.root / self.folder

    def path(self, name: str) -> str:
        """``name``'s path relative to the served root, as JupyterLab's commands take it."""
        return f"{self.folder}/{name}" if self.folder else name

    def api(self, path: str, method: str = "GET") -> object:
        """The JSON answer of the server's REST API at ``path`` (no proxy, 5 s timeout)."""
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=5) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def page_url(self, notebook: str) -> str:
        """The lab URL that opens ``notebook`` (relative to the root) and sets the token cookie."""
        return f"{self.url}/lab/tree/{self.path(notebook)}?token={self.token}"

    def log_tail(self, n_chars: int = 3000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-n_chars:] if self.log.exists() else ""


def start_lab(root: Path, home: Path, extra_args: tuple[str, ...] = ()) -> Lab:
    """``jupyter lab`` of this Python's environment serving ``root`` on 127.0.0.1 (with ``extra_args``), waited
    for until its API answers (``RuntimeError`` with the log's tail when it does not within a minute)."""
    port, token = free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    command = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               "--allow-root", "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly",
               "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", *extra_args]
    log = home / "lab.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=root, env=lab_environment(home), stdin=subprocess.DEVNULL,
                                   stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, root, process, log)
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with status {process.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("/api/status")
            return lab
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    stop_lab(lab)
    raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_S} s:\n{lab.log_tail()}")


def stop_lab(lab: Lab) -> None:
    """Stop the server and every kernel it started, whatever state it is in."""
    import psutil

    try:
        children = psutil.Process(lab.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    if lab.process.poll() is None:
        try:
            lab.api("/api/shutdown", method="POST")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        try:
            lab.process.wait(SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            lab.process.send_signal(signal.SIGTERM)
            try:
                lab.process.wait(SERVER_STOP_S)
            except subprocess.TimeoutExpired:
                lab.process.kill()
                lab.process.wait()
    for child in children:
        try:
            child.terminate()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=5)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


# -- fixtures --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium() -> str:
    """The chromium executable; skips the test when it or the playwright package is missing."""
    path = chromium_path()
    if path is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium fonts-noto-cjk)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def demo_study(chromium):
    """The demo study's stages, computed once (a no-op when cached; about a minute on a clean clone)."""
    from pmrag.study import Study

    study = Study.from_params(PARAMS)
    study.build()
    return study


@pytest.fixture(scope="package")
def lab_server(chromium, tmp_path_factory):
    """The browser tests' one JupyterLab (see the module docstring), its app exposed to the page so a test can open
    notebooks without reloading; stopped after the last browser test."""
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    server = start_lab(root, home, ("--LabApp.expose_app_in_browser=True",))
    try:
        yield server
    finally:
        stop_lab(server)


@pytest.fixture(scope="module")
def lab(demo_study, lab_server):
    """The lab serving a copy of notebook 06 (see the module docstring) in its own folder."""
    view = lab_server.within("inspector")
    notebook_copy(REPO / "notebooks" / "06_failure_analysis.ipynb", view.files, PARAMS)
    return view


@pytest.fixture(scope="package")
def browser(chromium, tmp_path_factory):
    """Headless Chromium driven by Playwright, with a new empty profile; closed after the last browser test."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile), executable_path=chromium, headless=True, args=list(CHROMIUM_FLAGS),
            viewport=VIEWPORT, env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """``outputs/browser/`` (git-ignored), created."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
