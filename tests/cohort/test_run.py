"""The cohort's task and its error lines, in this process (no cluster): a participant's error leaves the task as
one line that never quotes the data; a participant's study file is rewritten only when it changes."""

import shutil
from pathlib import Path

import pytest

from pmrag.cohort.params import load_cohort
from pmrag.cohort.run import ParticipantFailed, _written_study, failure_line, run_participant
from pmrag.core.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def test_a_pmrag_error_keeps_its_one_line_and_any_other_error_only_its_type():
    error = InputError(Path("/data/chat.json"), "line 3", "not valid JSON")
    assert failure_line(error) == f"InputError: {error}"
    assert "\n" not in failure_line(InputError(Path("x"), "line 1", "a\nb"))
    secret = ValueError("my secret message text")
    assert failure_line(secret) == "ValueError (its text is not shown: it may quote the data)"
    assert failure_line(ParticipantFailed("InputError: x")) == "InputError: x"


@pytest.mark.integration
def test_the_task_turns_a_failing_study_into_one_safe_line(tmp_path):
    shutil.copy(REPO / "tests" / "fixtures" / "line_json" / "truncated.json", tmp_path / "broken.json")
    (tmp_path / "base.yaml").write_text("run: base\noutputs_dir: out\ncache_dir: cache\n"
                                        "dataset: {inputs: [broken.json]}\n", encoding="utf-8")
    (tmp_path / "cohort.yaml").write_text("run: c\nstudy: base.yaml\nparticipants: [{id: a, inputs: [broken.json]}]\n",
                                          encoding="utf-8")
    cohort = load_cohort(tmp_path / "cohort.yaml")
    study_file = _written_study(cohort, cohort.participants[0])
    with pytest.raises(ParticipantFailed) as info:
        run_participant(str(study_file))
    assert str(info.value).startswith("InputError: ") and "broken.json" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_the_written_study_is_rewritten_only_when_it_changes(tmp_path):
    (tmp_path / "base.yaml").write_text("run: base\noutputs_dir: out\ncache_dir: cache\n"
                                        "dataset: {synthetic: {enabled: true, n_messages: 1100, n_questions: 6}}\n",
                                        encoding="utf-8")
    (tmp_path / "cohort.yaml").write_text("run: c\nstudy: base.yaml\nparticipants: [{id: a}]\n", encoding="utf-8")
    cohort = load_cohort(tmp_path / "cohort.yaml")
    first = _written_study(cohort, cohort.participants[0])
    stamp = first.stat().st_mtime_ns
    assert _written_study(cohort, cohort.participants[0]).stat().st_mtime_ns == stamp
    assert sorted(p.name for p in first.parent.iterdir()) == [".pmrag-run", "study.yaml"]   # claimed, then written


def test_pmrag_cohort_exits_1_when_a_participant_failed_and_0_when_none_did(monkeypatch, tmp_path, capsys):
    import pmrag.cohort.run as cohort_run
    from pmrag.cli import main

    tables = {"pooled": tmp_path / "tables" / "cohort_pooled.csv"}
    outcomes = iter([cohort_run.CohortRun(tables=tables, seconds={"a": 1.0}, failed={"b": "InputError: x"}),
                     cohort_run.CohortRun(tables=tables, seconds={"a": 1.0, "b": 2.0})])
    monkeypatch.setattr(cohort_run, "run_cohort", lambda path, progress: next(outcomes))
    assert main(["cohort", "c.yaml", "--quiet"]) == 1
    assert capsys.readouterr().out.strip() == (f"cohort done: 1 participant(s) finished, 1 failed; tables in "
                                               f"{tmp_path / 'tables'}")
    assert main(["cohort", "c.yaml"]) == 0
    executed = {"01_pooled": tmp_path / "notebooks" / "01_pooled.ipynb"}
    monkeypatch.setattr(cohort_run, "run_cohort", lambda path, progress: cohort_run.CohortRun(
        tables=tables, seconds={"a": 1.0}, notebooks=executed))
    capsys.readouterr()
    assert main(["cohort", "c.yaml", "--quiet"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"; pooled-analysis notebook(s) in {tmp_path / 'notebooks'}")




def test_the_task_runs_its_study_without_helper_processes_unless_told(monkeypatch):
    import pmrag.cohort.run as cohort_run
    from pmrag.core.parallel import worker_processes

    monkeypatch.setattr(cohort_run, "_run_participant", lambda file, notebooks, stages: worker_processes(2))
    assert run_participant("study.yaml") == 0                      # the cohort's way: ingest parses in the task
    assert run_participant("study.yaml", in_process=False) == 2    # as pmrag study runs alone
    assert worker_processes(2) == 2                                # and only within the task
