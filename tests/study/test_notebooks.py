"""Executing a notebook (pmrag.study.notebooks) once the run is being stopped: no kernel starts, and what the
execution machinery logs meanwhile is not shown (the Ctrl-C of a real run: tests/cli/test_cli_errors.py)."""

import copy
import logging
import threading

import nbformat

from pmrag.study.notebooks import EXECUTION_LOGGERS, Uncopied, _logs_dropped_after, execute_notebook


def test_no_kernel_starts_once_the_run_is_stopped(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import pathlib\npathlib.Path('ran').touch()")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "01_a.ipynb")
    stop = threading.Event()
    stop.set()
    result = execute_notebook(tmp_path / "01_a.ipynb", tmp_path / "out" / "01_a.ipynb", tmp_path / "p.yaml", stop=stop)
    assert result["error"]["ename"] == "KeyboardInterrupt", result
    assert result["error"]["evalue"] == "the run was interrupted before this notebook's kernel started"
    assert not (tmp_path / "ran").exists()


def test_execution_logs_are_dropped_once_stopped_and_only_meanwhile(caplog):
    stop = threading.Event()
    logger = logging.getLogger(EXECUTION_LOGGERS[0])
    with caplog.at_level(logging.WARNING), _logs_dropped_after(stop):
        logger.error("before the stop")
        stop.set()
        logger.error("Error occurred while starting new kernel client for kernel k: Kernel died")
        logging.getLogger(EXECUTION_LOGGERS[1]).error("jupyter_client, while stopping")
    with caplog.at_level(logging.WARNING):
        logger.error("after the notebook")
    assert [r.getMessage() for r in caplog.records] == ["before the stop", "after the notebook"]
    assert all(not logging.getLogger(name).filters for name in EXECUTION_LOGGERS)


def test_a_stop_event_crosses_the_kernel_managers_configuration_uncopied():
    stop = threading.Event()
    shared = Uncopied(stop)
    assert copy.deepcopy({"stop": shared})["stop"].value is stop


def test_the_runner_executes_and_validates_a_notebook_without_the_iri_grammar(tmp_path):
    """jsonschema goes without rfc3987_syntax in the runner's process (its 2 s import: python-jsonschema #1392):
    marked missing there, the executed notebook still validates against nbformat's schema."""
    import subprocess
    import sys

    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell("params_path = ''")
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell("print(params_path)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "01_a.ipynb")
    code = (
        "import sys\nfrom pathlib import Path\nfrom pmrag.study.notebooks import execute_notebook\n"
        f"result = execute_notebook(Path({str(tmp_path / '01_a.ipynb')!r}), Path({str(tmp_path / 'out.ipynb')!r}), "
        "Path('p.yaml'))\n"
        "import nbformat\n"
        f"nbformat.validate(nbformat.read({str(tmp_path / 'out.ipynb')!r}, as_version=4))\n"
        "print(result.get('error'), 'jsonschema' in sys.modules, sys.modules.get('rfc3987_syntax', 'absent'))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert run.stdout.split() == ["None", "True", "None"], run.stderr
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "p.yaml\n"
