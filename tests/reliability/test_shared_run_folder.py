"""A run folder shared or changed behind a study's back: a stage result planted by someone else never runs its
code (results are sealed per user), and data ingested into a finished study's store makes the stages that
reflect it stale, in `pmrag status` too; `pmrag ingest` into the store of a running study is refused."""

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tiny_study
from pmrag.study import Study
from pmrag.study import sealed
from pmrag.study.runner import run_folder_lock

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMALL = "bootstrap: {n_resamples: 50}\nhybrid: {beta_step: 0.5}\n"


class Payload:
    """A pickle that touches a file when it is loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("built")
    make_tiny_study(root, SMALL).build()
    return root


def copy_of(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built, tmp_path / "study")
    return tmp_path / "study"


def states(study: Study) -> dict[str, tuple[str, str]]:
    return {row.name: (row.state, row.reason) for row in study.status()}


@pytest.mark.parametrize("forge", ["raw pickle", "sealing header, wrong tag"])
def test_a_planted_result_never_runs_and_is_recomputed(built, tmp_path, capsys, forge):
    root = copy_of(built, tmp_path)
    marker = tmp_path / "payload_ran"
    stages_dir = root / "out" / "tiny" / "stages"
    record_key = Study.from_params(root / "p.yaml").engine.record("metrics")["key"]
    planted = pickle.dumps((record_key, Payload(marker)))
    if forge != "raw pickle":
        planted = sealed.MAGIC + b"\0" * 32 + planted
    (stages_dir / "metrics.pkl").write_bytes(planted)

    study = Study.from_params(root / "p.yaml")
    metrics = study.metrics()
    assert not marker.exists()
    assert len(metrics) and set(metrics["retriever"]) == {str(r) for r in study.retrievers()}
    assert "metrics.pkl was not sealed by this user's pmrag" in capsys.readouterr().err
    assert sealed.unseal((stages_dir / "metrics.pkl").read_bytes()) is not None   # resealed by this user


def test_a_run_folder_of_another_user_is_recomputed_not_loaded(built, tmp_path, monkeypatch, capsys):
    root = copy_of(built, tmp_path)
    monkeypatch.setenv(sealed.KEY_ENV, str(tmp_path / "someone_else.key"))
    study = Study.from_params(root / "p.yaml")
    found = states(study)
    assert {state for state, _ in found.values()} == {"stale"}
    assert found["ingest"][1].startswith("computed by another user's pmrag")
    study.failures()
    assert "was not sealed by this user's pmrag" in capsys.readouterr().err
    lines = (root / "out" / "tiny" / "stage_log.jsonl").read_text(encoding="utf-8").splitlines()
    assert any('"action": "computed"' in line and '"stage": "ingest"' in line for line in lines)


def test_an_ingest_into_a_finished_studys_store_makes_its_readers_stale(built, tmp_path):
    root = copy_of(built, tmp_path)
    study = Study.from_params(root / "p.yaml")
    assert {state for state, _ in states(study).values()} == {"cached"}
    extra = tmp_path / "extra.json"
    extra.write_text('{"2024-05-01": [{"time": "09:00", "sender": "Ken", "type": "text", "text": "late note"}]}',
                     encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "pmrag", "ingest", str(extra), "--db", str(study.run_dir /
                             "study.sqlite")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr

    status = subprocess.run([sys.executable, "-m", "pmrag", "status", str(root / "p.yaml")], capture_output=True,
                            text=True, timeout=300)
    stages = status.stdout.split("\n\n")[0]                        # the stages, then the model calls still to make
    rows = {line.split()[0]: line.split(maxsplit=2)[1:] for line in stages.strip().splitlines()[1:]}
    assert rows["ingest"][0] == "stale" and "the store's data changed since this stage ran" in rows["ingest"][1]
    assert rows["chunks"][0] == "stale" and rows["metrics"][0] == "stale"   # through the chain
    again = Study.from_params(root / "p.yaml")
    again.build()
    assert {state for state, _ in states(again).values()} == {"cached"}
    assert len(again.messages()) == len(Study.from_params(built / "p.yaml").messages())   # the params' data again


def test_pmrag_ingest_into_the_store_of_a_running_study_is_refused(built, tmp_path):
    root = copy_of(built, tmp_path)
    run_dir = root / "out" / "tiny"
    with run_folder_lock(run_dir):      # a study running on it
        result = subprocess.run([sys.executable, "-m", "pmrag", "ingest", str(FIXTURES / "line_json" / "family.json"),
                                 "--db", str(run_dir / "study.sqlite")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("pmrag ingest: error: ") and f"(pid {os.getpid()})" in line
    assert "where a pmrag study is running" in line
