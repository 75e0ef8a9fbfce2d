"""`pmrag study` executes the numbered notebooks with papermill and reports failures by notebook and cell."""

import subprocess
import sys
from pathlib import Path

import nbformat

from pmrag.study.runner import numbered_notebooks

REPO = Path(__file__).resolve().parents[1]


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


def test_study_executes_every_numbered_notebook_into_the_run_directory(tmp_path):
    params = write_params(tmp_path, REPO / "notebooks")
    result = pmrag("study", str(params), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = tmp_path / "out" / "t"
    committed = [p.name for p in numbered_notebooks(REPO / "notebooks")]
    assert committed[:6] == ["01_chunking.ipynb", "02_representations.ipynb", "03_retrievers.ipynb", "04_hybrid_sweep.ipynb",
                             "05_bootstrap.ipynb", "06_failure_analysis.ipynb"]
    assert sorted(p.name for p in (run_dir / "notebooks").iterdir()) == committed
    executed = nbformat.read(run_dir / "notebooks" / "01_chunking.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and str(params) in injected[0].source
    assert not [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    for table in ["table1_dataset", "chunking_sessions_windows", "raw_text_lengths", "message_inventory",
                  "representation_lengths", "per_question_metrics", "table3_single_retrievers"]:
        assert (run_dir / "tables" / f"{table}.csv").stat().st_size > 0
    assert (run_dir / "figures" / "chunk_lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    n = len(committed)
    assert f"[1/{n}] 01_chunking.ipynb" in result.stderr and f"[{n}/{n}] {committed[-1]}" in result.stderr
    assert (run_dir / "tables" / "hybrid_sweep.csv").is_file() and (run_dir / "tables" / "table4_hybrids.csv").is_file()
    assert (run_dir / "runs" / "embedding_text_vector.trec").is_file() and (run_dir / "qrels.trec").is_file()
    for table in ["bootstrap_cis", "table5_differences", "table6_best_hybrid_by_type", "table7_top5_failures",
                  "table8_failure_labels", "table9_success_overlap", "aggregate_detail", "topk_sensitivity"]:
        assert (run_dir / "tables" / f"{table}.csv").stat().st_size > 0
    for figure in ["figure4_differences", "figure5_best_hybrid_by_type", "figure6_topk_sensitivity"]:
        assert (run_dir / "figures" / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "public" / "per_question_metrics.csv").is_file()
    readme = (run_dir / "README.md").read_text(encoding="utf-8")
    assert "Selected best hybrid" in readme and "(figures/figure6_topk_sensitivity.png)" in readme


def test_failing_notebook_is_named_with_its_cell_and_exit_status(tmp_path):
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("raise ValueError('planted failure')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebooks / "01_fails.ipynb")
    params = write_params(tmp_path, notebooks)
    result = pmrag("study", "--quiet", str(params), cwd=tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "01_fails.ipynb" in last and "ValueError: planted failure" in last and "cell" in last
    assert "Traceback" not in result.stderr


def test_bad_params_exit_2_with_one_line(tmp_path):
    params = write_params(tmp_path, REPO / "notebooks", extra="chunking: {stride: many}\n")
    result = pmrag("study", str(params), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "chunking.stride" in result.stderr and "Traceback" not in result.stderr
