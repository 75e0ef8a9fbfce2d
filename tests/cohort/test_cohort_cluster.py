"""The demo cohort (params/cohort_demo.yaml as shipped) on a 2-worker LocalCluster: pooled tables written, a rerun
recomputes nothing, a worker killed mid-run changes no table, a failed participant is retried once and reported in
one line while the others finish.  The cohort is the one this session built into outputs/cohort_demo (``built_cohort``:
the pooled-analysis notebook reads the same); the runs that change something run on copies, in a folder of their own,
with a copy of the committed embedding cache: nothing is embedded, nothing written back into params/."""

import os
import shutil
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from pmrag.cohort.run import run_cohort
from pmrag.study.runner import stage_log

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TABLES = ("per_participant", "by_type", "pooled", "differences", "participant_differences", "wins", "selection",
          "participants")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """This repository's params/ (the demo cohort, its base study and its embedding cache) in a folder of its own."""
    root = tmp_path_factory.mktemp("cohort_project")
    (root / "params").mkdir()
    for name in ("demo.yaml", "cohort_demo.yaml"):
        shutil.copy(REPO / "params" / name, root / "params" / name)
    shutil.copytree(REPO / "params" / "cohort_demo_cache", root / "params" / "cohort_demo_cache")
    return root


@pytest.fixture(scope="module")
def first_run(built_cohort):
    assert built_cohort.cached_after == built_cohort.cached_before, \
        "the committed cache lacks some text: run make cohort-demo-cache"
    return built_cohort.run


def tables(run) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(run.tables[name]) for name in TABLES}


def variant(project: Path, run_name: str, keep: tuple[str, ...], extra: str = "", settings: str = "") -> Path:
    """The demo cohort under another run name in ``project``, starting from a copy of the built cohort's
    participants in ``keep`` (their stages current: keys hold no location); ``extra`` is appended to the
    participants' list, ``settings`` to the ``cohort`` section."""
    source = REPO / "outputs" / "cohort_demo" / "participants"
    (project / "outputs" / run_name).mkdir(parents=True)
    shutil.copy(source.parent / ".pmrag-run", project / "outputs" / run_name / ".pmrag-run")   # pmrag's run folder
    for participant in keep:
        shutil.copytree(source / participant, project / "outputs" / run_name / "participants" / participant)
    text = (project / "params" / "cohort_demo.yaml").read_text(encoding="utf-8").replace(
        "run: cohort_demo\n", f"run: {run_name}\n", 1)
    text = text.replace("cohort:\n", f"{extra}cohort:\n", 1) + settings
    path = project / "params" / f"{run_name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_demo_cohort_writes_pooled_tables_with_a_participant_column(first_run, built_cohort):
    run_dir = built_cohort.run_dir
    assert not first_run.failed and set(first_run.seconds) == {"p01", "p02", "p03"}
    found = tables(first_run)
    assert {p: run_dir / "tables" / f"cohort_{p}.csv" for p in TABLES} == {p: first_run.tables[p] for p in TABLES}
    for name in ("per_participant", "by_type", "participant_differences", "selection", "participants"):
        assert set(found[name]["participant"]) == {"p01", "p02", "p03"}, name
    questions = found["participants"].set_index("participant")["n_questions"]
    assert (questions > 0).all()
    for name, table in found.items():
        assert {"n_participants", "n_questions"} <= set(table.columns), name
        assert set(table["summarizer"]) == {"extractive (offline stand-in, not an LLM)"}, name   # as a study's tables
    assert set(found["pooled"]["n_participants"]) == {3}
    assert set(found["pooled"]["n_questions"]) == {int(questions.sum())}
    assert found["wins"]["wins"].sum() == 3
    singles = ["raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_vector", "summary_vector"]
    for participant, rows in found["per_participant"].groupby("participant"):   # its singles, then its hybrid
        assert rows["method"].tolist()[:5] == singles and rows["method"].iloc[5].startswith("hybrid:")
        assert rows["role"].tolist().count("best_single") == 1 and rows["role"].iloc[5] == "selected_hybrid"
    assert first_run.dashboard.startswith("http://127.0.0.1:")
    for participant in ("p01", "p02", "p03"):
        folder = run_dir / "participants" / participant
        assert (folder / "study.yaml").is_file() and (folder / "study.sqlite").is_file()
        assert not (folder / "notebooks").exists()   # cohort.notebooks: false
        computed = {line["stage"] for line in stage_log(folder, built_cohort.started) if line["action"] == "computed"}
        assert {"metrics", "sweep", "hybrids", "runs:summary_vector"} <= computed   # cohort.stages: pooled
        assert not computed & {"statistics", "graph", "graph_evaluation", "failures", "reliability"}


def test_a_rerun_recomputes_nothing_and_writes_the_same_tables(first_run, built_cohort, client):
    before = tables(first_run)
    started = time.time()
    again = run_cohort(REPO / "params" / "cohort_demo.yaml", client=client, progress=False)
    for participant in ("p01", "p02", "p03"):
        log = stage_log(built_cohort.run_dir / "participants" / participant, started)
        assert [line["stage"] for line in log if line["action"] == "computed"] == [], participant
    for name, frame in tables(again).items():
        pd.testing.assert_frame_equal(frame, before[name], check_exact=True)
    # the run names its cluster's dashboard (the first run's cluster is closed once the cohort is built)
    assert again.dashboard.startswith("http://127.0.0.1:")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(again.dashboard, timeout=30) as page:
        body = page.read().decode("utf-8", errors="replace")
    assert page.status == 200 and "bokeh.min.js" in body and "needs bokeh" not in body   # drawn, not asked for


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process it started, as a lost node takes them all (an orphaned child would
    otherwise outlive the test)."""
    import psutil

    worker = psutil.Process(pid)
    family = [worker, *worker.children(recursive=True)]
    for process in family:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def test_a_worker_killed_mid_run_leaves_the_tables_unchanged(first_run, project, client):
    path = variant(project, "killed", keep=("p01", "p02"))   # p03 is computed again, and its worker killed
    p03 = project / "outputs" / "killed" / "participants" / "p03"
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(run=run_cohort(path, client=client, progress=False)))
    thread.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and thread.is_alive() and time.monotonic() < deadline:
        running = [worker for worker, keys in client.processing().items() if any("participant-p03" in k for k in keys)]
        if running and stage_log(p03):   # its study has computed a stage at least: mid-run
            killed = client.run(os.getpid, workers=running)[running[0]]
            kill_tree(killed)
        time.sleep(0.05)
    thread.join(timeout=180)
    assert killed is not None, "p03 finished before a worker could be killed"
    assert not outcome["run"].failed
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)
    expected = tables(first_run)
    for name, frame in tables(outcome["run"]).items():
        pd.testing.assert_frame_equal(frame, expected[name], check_exact=True)


def test_a_failed_participant_is_retried_once_then_reported_and_the_others_finish(first_run, project, client, capfd):
    shutil.copy(REPO / "tests" / "fixtures" / "line_json" / "truncated.json", project / "params" / "broken.json")
    path = variant(project, "with_failure", keep=("p01", "p02", "p03"),
                   extra="  - {id: broken, inputs: [broken.json]}\n")
    capfd.readouterr()
    run = run_cohort(path, client=client, progress=False)
    assert set(run.seconds) == {"p01", "p02", "p03"} and set(run.failed) == {"broken"}
    reported = [line for line in capfd.readouterr().err.splitlines() if line.startswith("participant ")]
    assert reported == [f"participant broken failed: {run.failed['broken']}"]
    assert run.failed["broken"].startswith("InputError: ") and "broken.json" in run.failed["broken"]
    attempts = [entry for entry in client.run_on_scheduler(_transitions) if "participant-broken" in entry[0]
                and entry[1] == "processing" and entry[2] in ("erred", "released", "waiting")]
    assert len(attempts) == 2   # the first try and one retry (cohort.retries: 1)
    found = tables(run)
    assert set(found["pooled"]["n_participants"]) == {3}
    status = found["participants"].set_index("participant")["status"].to_dict()
    assert status == {"p01": "finished", "p02": "finished", "p03": "finished", "broken": "failed"}


def test_a_cohort_where_no_participant_finishes_is_an_error(project, client):
    from pmrag.cohort.run import CohortFailed

    shutil.copy(REPO / "tests" / "fixtures" / "line_json" / "truncated.json", project / "params" / "broken.json")
    path = project / "params" / "all_broken.yaml"
    path.write_text("run: all_broken\nstudy: demo.yaml\nparticipants: [{id: only, inputs: [broken.json]}]\n"
                    "cohort: {retries: 0}\n", encoding="utf-8")
    with pytest.raises(CohortFailed, match="no participant finished \\(1 failed\\)"):
        run_cohort(path, client=client, progress=False)
    assert not (project / "outputs" / "all_broken" / "tables").exists()


def _transitions(dask_scheduler):
    return [(str(entry[0]), entry[1], entry[2]) for entry in dask_scheduler.transition_log]


def tiny_notebook(check: str) -> dict:
    """A notebook that prints ``check`` evaluated on its ``params_path`` parameter (a kernel, no study)."""
    return {"cells": [
        {"cell_type": "code", "id": "parameters", "metadata": {"tags": ["parameters"]},
         "source": 'params_path = "../params/demo.yaml"', "outputs": [], "execution_count": None},
        {"cell_type": "code", "id": "check", "metadata": {}, "source": f"print({check})", "outputs": [],
         "execution_count": None}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}


def one_participant(project: Path, settings: str) -> Path:
    """The demo cohort narrowed to p01 as run ``one`` (its folder copied from the built cohort on first use: its
    pooled stages current), with ``settings`` as the ``cohort`` section."""
    target = project / "outputs" / "one"
    if not target.exists():
        source = REPO / "outputs" / "cohort_demo"
        (target / "participants").mkdir(parents=True)
        shutil.copy(source / ".pmrag-run", target / ".pmrag-run")
        shutil.copytree(source / "participants" / "p01", target / "participants" / "p01")
    text = (project / "params" / "cohort_demo.yaml").read_text(encoding="utf-8").replace("run: cohort_demo\n", "run: one\n", 1)
    text = text[:text.index("  - id: p02\n")] + f"cohort: {settings}\n"
    # the stages beyond the pooled ones at a smaller size (keys of those stages only): a quicker graph and simulation
    text = text.replace("overrides: {dataset:", "overrides: {graph: {interest_rule: recurring, max_interests: 40}, "
                                                "statistics: {coverage_datasets: 10, coverage_resamples: 20}, bootstrap: {n_resamples: 500}, dataset:", 1)
    path = project / "params" / "one.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def computed_since(folder: Path, started: float) -> set[str]:
    return {line["stage"] for line in stage_log(folder, started) if line["action"] == "computed"}


def test_stages_all_computes_every_stage_and_notebooks_true_executes_the_notebooks(first_run, project, client):
    """``cohort.stages: all`` computes the stages beyond the pooled ones (from the committed caches: nothing is
    embedded); then ``cohort.notebooks: true`` runs each participant as a study (its numbered notebooks) and the
    pooled-analysis notebooks into the cohort's run folder, recomputing no stage.  One participant, and tiny
    notebooks in the project's notebooks folder (a kernel each; nbval runs the real pooled-analysis notebook)."""
    import nbformat

    notebooks = project / "notebooks"
    (notebooks / "cohort").mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(tiny_notebook("params_path.endswith('study.yaml')")), notebooks / "01_tiny.ipynb")
    nbformat.write(nbformat.from_dict(tiny_notebook("params_path.endswith('one.yaml')")),
                   notebooks / "cohort" / "01_pooled.ipynb")
    run_dir, folder = project / "outputs" / "one", project / "outputs" / "one" / "participants" / "p01"

    started = time.time()
    run = run_cohort(one_participant(project, "{stages: all}"), client=client, progress=False)
    assert not run.failed and run.notebooks == {}
    computed = computed_since(folder, started)
    assert {"statistics", "graph", "failures"} <= computed and "metrics" not in computed
    assert not (folder / "notebooks").exists() and not (run_dir / "notebooks").exists()
    expected = tables(first_run)["per_participant"].query("participant == 'p01'").reset_index(drop=True)
    pd.testing.assert_frame_equal(pd.read_csv(run.tables["per_participant"]), expected, check_exact=True)

    started = time.time()
    run = run_cohort(one_participant(project, "{stages: all, notebooks: true}"), client=client, progress=False)
    assert not run.failed
    assert computed_since(folder, started) == {"notebook:01_tiny"}
    executed = nbformat.read(folder / "notebooks" / "01_tiny.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "True\n"   # the participant's study file was its parameter
    assert run.notebooks == {"01_pooled": run_dir / "notebooks" / "01_pooled.ipynb"}
    pooled = nbformat.read(run.notebooks["01_pooled"], as_version=4)
    assert pooled.cells[-1].outputs[0]["text"] == "True\n"     # the cohort file was its parameter
