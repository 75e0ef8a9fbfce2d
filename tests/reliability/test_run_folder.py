"""Someone else's folder is never written into: a run folder that exists, holds files and carries no pmrag marker
is refused (``pmrag study``, ``pmrag status``, ``pmrag graph``, ``Study.from_params``) with one line naming the
folder and the fix, and comes out exactly as it went in; ``--force`` / ``force=True`` write into it anyway; an
empty folder, a run folder of an older pmrag (its store stamped) and a copied run folder are pmrag's."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from conftest import warm_cache
from pmrag.core import store
from pmrag.study import Study
from pmrag.study.runfolder import (MARKER_FILE, RUN_FOLDER_FORMAT, ForeignRunFolder, check_run_folder,
                                   claim_run_folder, run_folder_kind, stamped_store)
from pmrag.study.runner import status_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PARAMS = ("run: r\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nbs\n"
          "dataset: {inputs: [data/family.json], questions: data/questions.json}\n"
          "retrieval: {retrievers: [raw_text_bm25, summary_bm25]}\n"
          "hybrid: {pairings: [[raw_text_bm25, summary_bm25]], beta_step: 0.5}\n"
          "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
          "diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\n"
          "bootstrap: {n_resamples: 50}\nstatistics: {coverage_datasets: 50, coverage_resamples: 100}\n")


def project(root: Path, *, warm: bool = False) -> Path:
    """A tiny BM25-only study (the fixture family chat and its questions, one notebook) in ``root``; its params
    (``warm``: its cache primed with the committed vectors of the family chat's texts, for a test that builds it)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(FIXTURES / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "nbs").mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "nbs" / "01_one.ipynb")
    (root / "p.yaml").write_text(PARAMS, encoding="utf-8")
    if warm:
        warm_cache(root / "cache")
    return root / "p.yaml"


def someone_elses(folder: Path) -> dict[str, bytes]:
    """``folder`` filled with files pmrag did not write, among them names a study writes; what it holds."""
    (folder / "drafts").mkdir(parents=True)
    files = {"README.md": b"# my thesis notes\n", "environment.json": b'{"mine": true}\n',
             "qrels.trec": b"q1 0 d1 1\n", "drafts/chapter1.md": b"chapter one\n"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return snapshot(folder)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file and folder under ``folder`` (relative name → content; folders map to b"/")."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"/") for p in sorted(folder.rglob("*"))}


def pmrag(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env.pop("PMRAG_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "pmrag", *args], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", env=env, timeout=300)


def one_line(result: subprocess.CompletedProcess, command: str) -> str:
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"pmrag {command}: error: ") and "Traceback" not in result.stderr
    return line


# ------------------------------------------------------------------------------------ a foreign folder is refused

@pytest.mark.integration
def test_study_status_and_graph_refuse_a_foreign_folder_and_leave_it_as_it_was(tmp_path):
    project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    before = someone_elses(run_dir)
    line = one_line(pmrag(tmp_path, "study", "--quiet", "p.yaml"), "study")
    assert str(run_dir) in line and "pmrag study --force" in line and MARKER_FILE in line
    assert str(run_dir) in one_line(pmrag(tmp_path, "status", "p.yaml"), "status")
    assert "--out" in one_line(pmrag(tmp_path, "graph", "p.yaml"), "graph")
    assert snapshot(run_dir) == before                      # no .lock, no marker, no store, nothing replaced
    assert not (tmp_path / "cache").exists()


def test_the_facade_refuses_a_foreign_folder_before_writing_anything(tmp_path):
    params = project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    before = someone_elses(run_dir)
    with pytest.raises(ForeignRunFolder) as info:
        Study.from_params(params)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{run_dir}: ") and "force=True" in message
    assert info.value.exit_code == 2
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("what", ["random bytes", "another application's database", "an unstamped database"])
def test_a_study_sqlite_that_pmrag_did_not_stamp_does_not_make_a_folder_ours(tmp_path, what):
    params = project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    run_dir.mkdir(parents=True)
    db = run_dir / "study.sqlite"
    if what == "random bytes":
        db.write_bytes(os.urandom(4096))
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            if what == "another application's database":
                conn.execute(f"PRAGMA application_id = {store.APPLICATION_ID + 1}")
        conn.close()
    before = snapshot(run_dir)
    assert run_folder_kind(run_dir) == "foreign" and not stamped_store(db)
    with pytest.raises(ForeignRunFolder):
        Study.from_params(params)
    with pytest.raises(ForeignRunFolder):
        status_lines(params)
    assert snapshot(run_dir) == before


def test_a_file_where_the_run_folder_goes_is_one_line(tmp_path):
    params = project(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r").write_text("not a folder", encoding="utf-8")
    with pytest.raises(ForeignRunFolder, match=r"r: the run folder's path is a file, not a folder; set another 'run'"):
        Study.from_params(params)
    assert (tmp_path / "out" / "r").read_text(encoding="utf-8") == "not a folder"


def test_a_folder_made_by_a_newer_pmrag_is_refused_even_forced(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / MARKER_FILE).write_text(json.dumps({"format": RUN_FOLDER_FORMAT + 1}), encoding="utf-8")
    with pytest.raises(ForeignRunFolder, match=rf"newer pmrag \(run folder format {RUN_FOLDER_FORMAT + 1};"):
        claim_run_folder(run_dir, force=True)


# --------------------------------------------------------------------------------------------------- --force

@pytest.mark.integration
def test_force_writes_into_a_foreign_folder_and_marks_it(tmp_path):
    project(tmp_path, warm=True)
    run_dir = tmp_path / "out" / "r"
    someone_elses(run_dir)
    result = pmrag(tmp_path, "study", "--quiet", "--force", "p.yaml")
    assert result.returncode == 0, result.stderr
    assert (run_dir / MARKER_FILE).is_file() and (run_dir / "notebooks" / "01_one.ipynb").is_file()
    assert (run_dir / "drafts" / "chapter1.md").read_bytes() == b"chapter one\n"   # what the study does not write stays
    again = pmrag(tmp_path, "study", "--quiet", "p.yaml")                            # ours from now on
    assert again.returncode == 0, again.stderr


def test_the_facade_writes_into_a_foreign_folder_with_force(tmp_path):
    params = project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    someone_elses(run_dir)
    study = Study.from_params(params, force=True)
    assert run_folder_kind(run_dir) == "marked" and stamped_store(run_dir / "study.sqlite")
    study.store.dispose()
    Study.from_params(params).store.dispose()


# --------------------------------------------------------------------------------- folders that are pmrag's

def test_a_missing_or_empty_folder_is_created_and_marked(tmp_path):
    params = project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    assert run_folder_kind(run_dir) == "missing"
    Study.from_params(params).store.dispose()
    assert run_folder_kind(run_dir) == "marked"
    shutil.rmtree(run_dir)
    run_dir.mkdir()
    assert run_folder_kind(run_dir) == "empty"
    Study.from_params(params).store.dispose()
    assert run_folder_kind(run_dir) == "marked"


def test_the_marker_names_no_place(tmp_path):
    run_dir = claim_run_folder(tmp_path / "somewhere" / "r")
    text = (run_dir / MARKER_FILE).read_text(encoding="utf-8")
    marker = json.loads(text)
    assert set(marker) == {"format", "made_by"} and marker["format"] == RUN_FOLDER_FORMAT
    assert marker["made_by"].startswith("pmrag ")
    assert "somewhere" not in text and str(tmp_path) not in text and "/" not in text


def test_a_marker_is_never_rewritten(tmp_path):
    run_dir = claim_run_folder(tmp_path / "r")
    (run_dir / MARKER_FILE).write_text("", encoding="utf-8")    # being written by a second run starting at once
    claim_run_folder(run_dir)
    assert (run_dir / MARKER_FILE).read_text(encoding="utf-8") == ""
    assert check_run_folder(run_dir) == "marked"


@pytest.mark.parametrize("round_", range(40))
def test_runs_claiming_one_new_folder_at_once_all_succeed(tmp_path, round_):
    """A claim that sees the folder between another's creating it and its marker must not take it for foreign."""
    run_dir = tmp_path / "out" / "r"
    errors, start = [], threading.Barrier(8)

    def claim():
        start.wait()
        try:
            claim_run_folder(run_dir)
        except Exception as exc:   # noqa: BLE001 — collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and [p.name for p in run_dir.iterdir()] == [MARKER_FILE]


def test_a_run_folder_of_an_older_pmrag_is_recognised_and_marked(tmp_path):
    params = project(tmp_path)
    run_dir = tmp_path / "out" / "r"
    run_dir.mkdir(parents=True)
    store.open_store(run_dir / "study.sqlite").dispose()            # what an older pmrag left, without a marker
    (run_dir / "README.md").write_text("# Study run `r`\n", encoding="utf-8")
    (run_dir / "stages").mkdir()
    assert run_folder_kind(run_dir) == "old"
    lines = status_lines(params)                                       # status reads it, and marks nothing
    assert lines[0].startswith("run r (") and not (run_dir / MARKER_FILE).exists()
    Study.from_params(params).store.dispose()
    assert run_folder_kind(run_dir) == "marked"


def test_status_creates_nothing(tmp_path):
    params = project(tmp_path)
    lines = status_lines(params)
    assert not (tmp_path / "out").exists()
    states = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert {"ingest", "qrels", "failures", "notebook:01_one"} <= set(states) and set(states.values()) == {"missing"}
    (tmp_path / "out" / "r").mkdir(parents=True)
    status_lines(params)
    assert list((tmp_path / "out" / "r").iterdir()) == []


@pytest.mark.integration
def test_a_copied_run_folder_keeps_its_marker_and_stays_current(tmp_path):
    params = project(tmp_path / "first", warm=True)
    Study.from_params(params).build(progress=False)
    shutil.copytree(tmp_path / "first", tmp_path / "elsewhere" / "copy")
    copied = tmp_path / "elsewhere" / "copy" / "out" / "r"
    assert (copied / MARKER_FILE).read_bytes() == (tmp_path / "first" / "out" / "r" / MARKER_FILE).read_bytes()
    study = Study.from_params(tmp_path / "elsewhere" / "copy" / "p.yaml")
    assert {row.state for row in study.status()} == {"cached"}
