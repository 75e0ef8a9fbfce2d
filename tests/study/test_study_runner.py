"""`pmrag study` executes the numbered notebooks with papermill, executes again only what changed, and reports
failures by notebook and cell.  (The committed notebooks under `pmrag study`, on a second dataset: test_locomo_study.)"""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import warm_cache
from pmrag.study import kernel_forks
from pmrag.study.runner import NotebookFailed, StudyRun, numbered_notebooks, run_study, start_order

REPO = Path(__file__).resolve().parents[2]


def pmrag(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pmrag", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def write_params(tmp_path, notebooks_dir, extra=""):
    path = tmp_path / "params" / "study.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"run: t\noutputs_dir: ../out\nnotebooks_dir: {notebooks_dir}\ncache_dir: {REPO / 'params' / 'demo_cache'}\n"
        "dataset:\n  synthetic: {enabled: true, n_messages: 12000}\n" + extra,
        encoding="utf-8",
    )
    return path


def test_notebooks_are_picked_up_in_numeric_order(tmp_path):
    for name in ["10_late.ipynb", "02_b.ipynb", "01_a.ipynb", "notes.ipynb", "3_c.ipynb"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in numbered_notebooks(tmp_path)] == ["01_a.ipynb", "02_b.ipynb", "3_c.ipynb", "10_late.ipynb"]


def write_notebook(path: Path, *sources: str) -> None:
    """A numbered notebook with a ``parameters`` cell (``params_path``) and ``sources`` as its code cells."""
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, *(nbformat.v4.new_code_cell(source) for source in sources)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def write_tiny_params(tmp_path, notebooks_dir, bootstrap: int = 200) -> Path:
    """The fixture family chat (two questions), BM25 retrievers only: its stages take seconds."""
    fixtures = Path(__file__).parents[1] / "fixtures"
    (tmp_path / "data").mkdir(exist_ok=True)
    shutil.copy(fixtures / "line_json" / "family.json", tmp_path / "data" / "family.json")
    shutil.copy(fixtures / "questions" / "family_questions.json", tmp_path / "data" / "questions.json")
    warm_cache(tmp_path / "cache")
    path = tmp_path / "p.yaml"
    path.write_text(
        f"run: tiny\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: {notebooks_dir}\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n"
        "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
        "hybrid: {pairings: [[raw_text_bm25, summary_bm25]], beta_step: 0.25}\n"
        "analysis: {aggregate_type: contextual, reference_retriever: embedding_text_bm25, diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\n"
        f"bootstrap: {{n_resamples: {bootstrap}}}\n"
        # the coverage simulation at the tiny study's size (conftest.make_tiny_study): 0.05 s instead of 0.7 s a build
        "statistics: {coverage_datasets: 50, coverage_resamples: 100}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.integration
def test_only_notebooks_whose_inputs_changed_are_executed_again(tmp_path, capsys, monkeypatch):
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    monkeypatch.setenv("PMRAG_NOTEBOOK", "99_inherited")   # each kernel is told its own notebook, nothing inherited
    write_notebook(notebooks / "01_a.ipynb", "from pmrag.study import Study\nn = len(Study.from_params(params_path).chunks())",
                   "from pmrag.study.notebooks import current_reader\nassert current_reader() == '01_a'")
    write_notebook(notebooks / "02_b.ipynb", "x = 2")
    params = write_tiny_params(tmp_path, notebooks)
    first = run_study(params, jobs=1)
    assert isinstance(first, StudyRun)
    executed = ["01_a.ipynb", "02_b.ipynb"]
    assert first.notebooks == [tmp_path / "out" / "tiny" / "notebooks" / name for name in executed]
    assert sorted(first.notebook_seconds) == executed and all(s > 0 for s in first.notebook_seconds.values())
    assert first.forked_kernels == (2 if kernel_forks.supported() else 0)   # from one warm process
    assert {"ingest", "chunks", "runs:raw_text_bm25", "hybrids", "reliability"} <= set(first.stage_seconds)
    progress = capsys.readouterr().err
    assert "[1/2] 01_a.ipynb" in progress and "[2/2] 02_b.ipynb" in progress

    # a result half written by a process that was killed: removed by the next run, which has nothing to compute
    stopped = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                 text=True, check=True).stdout)
    partial = tmp_path / "out" / "tiny" / "stages" / f"metrics.pkl.{stopped}.tmp"
    partial.write_bytes(b"partial")
    second = run_study(params, jobs=1)
    assert second.notebook_seconds == {} and second.stage_seconds == {}
    assert second.notebooks == first.notebooks and all(p.is_file() for p in second.notebooks)
    assert not partial.exists()
    progress = capsys.readouterr().err
    assert "[cached] 01_a.ipynb" in progress
    assert f"removed 1 partial result file(s) left by a stopped process: {partial.name}" in progress

    # the notebooks untouched, one params value changed: every notebook again, and only the stage reading it
    write_tiny_params(tmp_path, notebooks, bootstrap=300)
    third = run_study(params, jobs=1)
    assert sorted(third.notebook_seconds) == executed
    assert set(third.stage_seconds) == {"reliability", "statistics", "graph_evaluation"}   # each reads bootstrap.n_resamples

    # one notebook edited, nothing else: only that notebook
    write_notebook(notebooks / "02_b.ipynb", "x = 3")
    fourth = run_study(params, jobs=1)
    assert sorted(fourth.notebook_seconds) == ["02_b.ipynb"] and fourth.stage_seconds == {}


@pytest.mark.integration
def test_failing_notebook_is_named_with_its_cell_and_exit_status(tmp_path):
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    write_notebook(notebooks / "01_fails.ipynb", "x = 1", "raise ValueError('planted failure')")
    params = write_tiny_params(tmp_path, notebooks)
    result = pmrag("study", "--quiet", str(params), cwd=tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "01_fails.ipynb" in last and "ValueError: planted failure" in last and "cell" in last
    assert "Traceback" not in result.stderr
    with pytest.raises(NotebookFailed) as failed:  # the same error, raised by run_study
        run_study(params, progress=False)
    assert failed.value.exit_code == 1 and last == f"pmrag study: error: {failed.value}"


@pytest.mark.integration
def test_bad_params_exit_2_with_one_line(tmp_path):
    params = write_params(tmp_path, REPO / "notebooks", extra="chunking: {stride: many}\n")
    result = pmrag("study", str(params), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "chunking.stride" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.integration
def test_a_notebook_starts_once_the_stages_it_reads_are_computed_while_later_stages_are_computed(tmp_path):
    """With ``jobs`` > 1 a notebook runs as soon as the stages it declares are computed: the chunking notebook (it
    reads the ingest, chunks and coverage) has run before the study's last stage is computed, which waits
    for it here; a notebook that declares nothing reads every stage and starts only after the last."""
    import threading
    import time

    from pmrag.study.facade import Study
    from pmrag.study.params import load_params
    from pmrag.study.runner import NotebookQueue, notebook_needs, study_notebooks

    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    ran = tmp_path / "chunking-ran"
    write_notebook(notebooks / "01_chunking.ipynb",
                   "from pmrag.study import Study\nn = len(Study.from_params(params_path).chunks())\n"
                   f"open({str(ran)!r}, 'w').write(str(n))")
    write_notebook(notebooks / "02_undeclared.ipynb", "x = 2")
    params = load_params(write_tiny_params(tmp_path, notebooks))
    listed = study_notebooks(params)
    study = Study(params, listed)
    chunking, undeclared = listed
    assert notebook_needs(study, chunking) == {"ingest", "chunks", "coverage"}
    assert notebook_needs(study, undeclared) == set(study.computed_stages)
    last = study.computed_stages[-1]
    seen_before_last = []

    def before(name):
        if name == last:   # the chunking notebook must have run without waiting for this stage
            deadline = time.monotonic() + 120
            while not ran.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            seen_before_last.append((ran.exists(), undeclared in queue.waiting))

    run, failures = StudyRun(), {}
    with NotebookQueue(study, run, listed, tmp_path / "out" / "tiny" / "notebooks", params.path, 2, "python3",
                       False, failures, threading.Event()) as queue:
        study.build(progress=False, before=before, after=queue.stage_done)
        queue.finish()
    assert seen_before_last == [(True, True)] and not failures
    assert sorted(run.notebook_seconds) == ["01_chunking.ipynb", "02_undeclared.ipynb"]
    assert int(ran.read_text()) == len(study.chunks())


@pytest.mark.integration
def test_the_notebooks_of_a_study_above_the_size_limit_wait_for_the_last_stage(tmp_path, monkeypatch):
    """Above :data:`BESIDE_STAGES_MAX_MESSAGES` messages a notebook whose stages are computed is ready but held: no
    kernel runs beside the stages; after the last stage every notebook runs."""
    import threading

    from pmrag.study import runner
    from pmrag.study.facade import Study
    from pmrag.study.params import load_params
    from pmrag.study.runner import NotebookQueue, study_notebooks

    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    write_notebook(notebooks / "01_chunking.ipynb", "from pmrag.study import Study\nn = len(Study.from_params(params_path).chunks())")
    params = load_params(write_tiny_params(tmp_path, notebooks))
    listed = study_notebooks(params)
    study = Study(params, listed)
    last = study.computed_stages[-1]
    held = []

    monkeypatch.setattr(runner, "BESIDE_STAGES_MAX_MESSAGES", 0)   # any study is above it

    def before(name):
        if name == last:
            held.append((len(queue.running), [nb.name for nb in queue.ready]))

    run, failures = StudyRun(), {}
    with NotebookQueue(study, run, listed, tmp_path / "out" / "tiny" / "notebooks", params.path, 2, "python3",
                       False, failures, threading.Event()) as queue:
        study.build(progress=False, before=before, after=queue.stage_done)
        queue.finish()
    assert held == [(0, ["01_chunking.ipynb"])] and queue.beside is False and not failures
    assert sorted(run.notebook_seconds) == ["01_chunking.ipynb"]


def test_notebooks_ready_at_once_start_longest_first():
    ready = [Path(f"{name}.ipynb") for name in ("03_a", "06_b", "10_c", "11_d")]
    names = lambda order: [nb.stem for nb in order]   # noqa: E731
    # a clean run (nothing recorded): the ones reading the history first, then numeric order
    assert names(start_order(ready, {}, {"06_b", "11_d"})) == ["06_b", "11_d", "03_a", "10_c"]
    # recorded seconds first, longest first; the unrecorded after them
    recorded = {"03_a.ipynb": 4.0, "10_c.ipynb": 26.0, "11_d.ipynb": 76.2}
    assert names(start_order(ready, recorded, {"06_b", "11_d"})) == ["11_d", "10_c", "03_a", "06_b"]
    assert names(start_order(ready, {}, set())) == ["03_a", "06_b", "10_c", "11_d"]
