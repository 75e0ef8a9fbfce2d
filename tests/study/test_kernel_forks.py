"""Notebook kernels forked from a warm process (pmrag.study.kernel_forks): the child is the kernel a started
process would have been, what is not served falls back to a started kernel, and the runner can signal it."""

import os
import signal
import subprocess
import sys
import threading
import time

import nbformat
import pytest

from pmrag.study import kernel_forks
from pmrag.study.kernel_forks import ForkedKernel, KernelForks, notebook_imports
from pmrag.study.closure import module_path as closure_module_path
from pmrag.study.notebooks import execute_notebook

pytestmark = pytest.mark.skipif(not kernel_forks.supported(), reason="kernels are forked on Linux only")

PROBE_CELLS = [
    "import os, signal, sys, threading\nimport pandas as pd\nimport ipywidgets\nimport matplotlib.pyplot as plt\n"
    "from pmrag.study.notebooks import current_reader\n"
    "print(current_reader(), os.environ.get('PMRAG_NOTEBOOK'), os.environ.get('PROBE'), os.getcwd() == PROBE_DIR)\n"
    "print(sys.path[0] == '', signal.getsignal(signal.SIGINT) is signal.default_int_handler,\n"
    "      signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL, os.getsid(0) == os.getpid())\n"
    "print(sorted(get_ipython().kernel.comm_manager.targets))\n"
    "print(plt.get_backend(), os.environ['JPY_PARENT_PID'] == str(os.getppid()))",
    "fig, ax = plt.subplots()\nax.plot([1, 2, 3])\nplt.show()",
    "pd.DataFrame({'a': [1, 2]})",
    "ipywidgets.IntSlider(value=3)",
    "import subprocess\n"
    "print(subprocess.run([sys.executable, '-c', 'print(7)'], capture_output=True, text=True).stdout,"
    " subprocess.call(['true']))",
    "get_ipython().kernel.log.warning('to the kernel log')",
]


def probe_notebook(folder):
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell(f"PROBE_DIR = {str(folder)!r}"),
                *(nbformat.v4.new_code_cell(source) for source in PROBE_CELLS)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "01_probe.ipynb"
    nbformat.write(nb, path)
    return path


def outputs(path):
    """Each code cell's outputs: stream texts, and the MIME types of the rich ones."""
    cells = nbformat.read(path, as_version=4).cells
    return [[output.get("text") or (output.output_type, sorted(output.get("data", {})))
             for output in cell.outputs] for cell in cells if cell.cell_type == "code"]


@pytest.mark.integration
def test_a_forked_kernel_executes_a_notebook_as_a_started_kernel_does(tmp_path, monkeypatch, capfd):
    notebook = probe_notebook(tmp_path)
    monkeypatch.setenv("PROBE", "inherited")
    with KernelForks(notebook_imports([notebook])) as forks:
        forked = execute_notebook(notebook, tmp_path / "forked.ipynb", tmp_path / "p.yaml", forks=forks)
        assert len(forks.kernels) == 1 and forks.declined == ""
        assert forks.kernels[0].poll() == 0            # shut down with the notebook
    forked_stderr = capfd.readouterr().err
    started = execute_notebook(notebook, tmp_path / "started.ipynb", tmp_path / "p.yaml")
    started_stderr = capfd.readouterr().err
    assert "error" not in forked and "error" not in started, (forked, started)
    assert outputs(tmp_path / "forked.ipynb") == outputs(tmp_path / "started.ipynb")
    probe = outputs(tmp_path / "forked.ipynb")
    assert probe[3] == ["01_probe None inherited True\nFalse True True True\n"
                        "['jupyter.widget', 'jupyter.widget.control']\n"
                        "module://matplotlib_inline.backend_inline True\n"]
    assert probe[4] == [("display_data", ["image/png", "text/plain"])]
    assert probe[6] == [("execute_result", ["application/vnd.jupyter.widget-view+json", "text/plain"])]
    assert probe[7] == ["7\n 0\n"]
    assert "to the kernel log" in forked_stderr     # the kernel's own stderr, passed on as a started one's is
    assert forked_stderr == started_stderr, (forked_stderr, started_stderr)


@pytest.mark.integration
def test_a_forked_kernel_inherits_the_parsed_imports_of_the_package(tmp_path):
    """The warm process runs its WARM_CALLS after its imports: a kernel that opens a study then parses no module
    of the package again (pmrag.study.closure remembers them by their text)."""
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell(
        "from pmrag.study import closure\nprint(closure.import_statements_of_source.cache_info().currsize)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "01_parsed.ipynb")
    with KernelForks(notebook_imports([tmp_path / "01_parsed.ipynb"])) as forks:
        execute_notebook(tmp_path / "01_parsed.ipynb", tmp_path / "out.ipynb", tmp_path / "p.yaml", forks=forks)
        assert len(forks.kernels) == 1
    texts = {path.read_text(encoding="utf-8") for path in closure_module_path("pmrag").parent.rglob("*.py")}
    assert outputs(tmp_path / "out.ipynb")[-1] == [f"{len(texts)}\n"]   # remembered by text: one per distinct text


def test_notebook_imports_lists_imported_modules_and_names_that_may_be_modules(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import pandas as pd, numpy\nfrom pmrag.present import plots, tables"),
                nbformat.v4.new_code_cell("%%time\nimport seaborn"),          # a magic: not Python, skipped
                nbformat.v4.new_code_cell("def f():\n    from . import local\n    import scipy.stats\n"),
                nbformat.v4.new_markdown_cell("import matplotlib")]
    nbformat.write(nb, tmp_path / "a.ipynb")
    assert notebook_imports([tmp_path / "a.ipynb", tmp_path / "a.ipynb"]) == [
        "pandas", "numpy", "pmrag.present", "pmrag.present.plots", "pmrag.present.tables", "scipy.stats"]


def test_kernels_of_another_command_or_environment_are_not_forked(tmp_path):
    forks = KernelForks(["json"])
    command = [sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "k.json")]
    env = dict(os.environ, PMRAG_NOTEBOOK="01_a", JPY_SESSION_NAME="s", KMP_INIT_AT_FORK="FALSE")
    assert forks._declines(command, env) == ""
    assert forks.launch(["/usr/bin/python3.9", *command[1:]], env, None, "") is None
    assert "runs /usr/bin/python3.9" in forks.declined
    assert forks.launch([sys.executable, "-m", "other_kernel", "-f", "k.json"], env, None, "") is None
    assert "is not ipykernel's launcher" in forks.declined
    assert forks.launch(command, dict(env, OMP_NUM_THREADS="7"), None, "") is None
    assert forks.declined == "the kernel's environment differs from the warm process's in OMP_NUM_THREADS"
    assert forks.kernels == [] and forks._process is None      # nothing served: no warm process was started
    forks.start()
    assert forks._await_ready(None)
    forks.close()
    assert forks._process.returncode == 0      # ended on the closed socket
    assert forks.launch(command, env, None, "") is None and forks.declined == "closed"


def test_the_warm_process_forks_nothing_beside_a_thread_or_a_shell_bound_import(monkeypatch):
    before = threading.active_count()          # 1 unless an earlier test in this process left a thread
    assert kernel_forks._refusal() == ("" if before == 1 else f"{before} threads run in the warm process")
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert kernel_forks._refusal() == f"{before + 1} threads run in the warm process"
    finally:
        release.set()
        thread.join()
    monkeypatch.setattr(threading, "active_count", lambda: 1)   # the thread check passed; the import one is left
    monkeypatch.setitem(sys.modules, "tqdm.autonotebook", object())
    assert kernel_forks._refusal() == ("the warm process imported tqdm.autonotebook, which chose its implementation "
                                       "without a shell")


def test_a_forked_kernel_is_watched_and_signalled_through_its_pidfd():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    kernel = ForkedKernel(process.pid, os.pidfd_open(process.pid))
    assert kernel.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        kernel.wait(timeout=0.05)
    kernel.send_signal(signal.SIGTERM)
    assert kernel.wait(timeout=10) == 0                         # ended; its status is its parent's to read
    assert process.wait() == -signal.SIGTERM
    kernel.kill()                                              # nothing to signal any more: no error
    assert kernel.poll() == 0


def test_the_warm_process_is_ended_at_once_even_while_importing(tmp_path, monkeypatch, capfd):
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(30)\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    forks = KernelForks(["slow_import"]).start()
    time.sleep(0.5)
    started = time.monotonic()
    forks.close()
    assert forks._process.returncode == -signal.SIGKILL            # killed: it was still importing
    assert time.monotonic() - started < kernel_forks.CLOSE_WAIT_S + 2
    assert capfd.readouterr().err == ""        # nothing said: a Ctrl-C while it imports shows one line


def test_an_idle_warm_process_ends_on_its_socket_closing():
    forks = KernelForks(["json"]).start()
    assert forks._await_ready(None)
    forks.close()
    assert forks._process.returncode == 0
