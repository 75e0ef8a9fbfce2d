"""``pmrag study``: execute the numbered notebooks in order with papermill into ``outputs/<run>/``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.study.params import load_params

NOTEBOOK_NAME = re.compile(r"^(\d+)_.+\.ipynb$")


class NotebookFailed(PmragError):
    """A notebook raised: names the notebook, the cell and the error."""

    exit_code = 1


def numbered_notebooks(folder: Path) -> list[Path]:
    """``NN_name.ipynb`` files of ``folder``, in numeric order."""
    found = [p for p in Path(folder).iterdir() if NOTEBOOK_NAME.match(p.name)]
    return sorted(found, key=lambda p: (int(NOTEBOOK_NAME.match(p.name).group(1)), p.name))


def run_study(params_path, *, progress: bool = True, kernel_name: str = "python3") -> list[Path]:
    """Execute every numbered notebook with ``params_path`` as its parameter; returns the executed copies.

    Raises :class:`NotebookFailed` naming the notebook and cell that failed; the partly executed
    notebook is kept under ``outputs/<run>/notebooks/`` for inspection.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    params = load_params(params_path)
    notebooks = numbered_notebooks(params.notebooks_dir)
    if not notebooks:
        raise PmragError(f"{params.path}: key 'notebooks_dir': no numbered notebooks (NN_name.ipynb) in {params.notebooks_dir}")
    out_dir = params.run_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = []
    for number, notebook in enumerate(notebooks, start=1):
        if progress:
            print(f"[{number}/{len(notebooks)}] {notebook.name}", file=sys.stderr, flush=True)
        target = out_dir / notebook.name
        try:
            pm.execute_notebook(
                str(notebook), str(target), parameters={"params_path": str(params.path)},
                cwd=str(notebook.parent), kernel_name=kernel_name, progress_bar=progress,
            )
        except PapermillExecutionError as exc:
            raise NotebookFailed(
                f"notebook {notebook.name} failed in cell {exc.cell_index} (execution count {exc.exec_count}): "
                f"{exc.ename}: {exc.evalue} — executed copy: {target}"
            ) from None
        executed.append(target)
    from pmrag.present.report import write_run_readme

    readme = write_run_readme(params.run_dir, f"Study run `{params.run}`: {params.data['description'] or params.path.name}", executed)
    if progress:
        print(f"summary: {readme}", file=sys.stderr, flush=True)
    return executed
