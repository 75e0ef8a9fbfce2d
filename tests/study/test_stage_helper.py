"""The helper process that ranks some retrievers while the building loop ranks the others: which stages it may
take, one owner per stage, the stages it stores are loaded (not computed again) and equal those one process makes,
and a helper that ends without a stage it claimed leaves that stage to the loop."""

import json
import os
import threading

import pandas as pd
import pytest

from pmrag.core.parallel import process_context
from pmrag.study import helper
from pmrag.study.helper import BUILDER, FREE, HELPER, Claims, StageHelper, helper_stages
from conftest import make_tiny_study

RETRIEVERS = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector, "
              "summary_vector, embedding_text_vector, raw_text_bm25_char2, raw_text_bm25_char3, raw_text_rm3]}\n")


def test_the_helper_takes_the_retrieval_stages_without_a_current_record_from_the_first():
    computed = ["ingest", "chunks", "runs:a_bm25", "runs:b_bm25", "runs:c_vector", "metrics", "runs:d_bm25",
                "runs:e_wrapped"]
    reads = {"runs:e_wrapped": ["chunks", "runs:a_bm25"]}            # a wrapping retriever reads another's rankings
    needs = lambda name: reads.get(name, ["ingest", "chunks"])       # noqa: E731
    assert helper_stages(computed, 2, lambda name: False, needs) == ["runs:a_bm25", "runs:b_bm25", "runs:c_vector",
                                                                     "runs:d_bm25"]
    assert helper_stages(computed, 2, lambda name: name == "runs:b_bm25", needs) == ["runs:a_bm25", "runs:c_vector",
                                                                                     "runs:d_bm25"]
    assert helper_stages(computed, 3, lambda name: False, needs) == []      # not at the first one
    assert helper_stages(computed, 1, lambda name: False, needs) == []      # not a retrieval stage


def test_each_stage_has_one_owner_whoever_claims_first():
    claims = Claims(["runs:a", "runs:b", "runs:c"], process_context())
    assert list(claims.owner) == [FREE] * 3
    assert claims.claim("runs:a", BUILDER) == BUILDER and claims.claim("runs:c", HELPER) == HELPER
    assert claims.claim("runs:a", HELPER) == BUILDER and claims.claim("runs:c", BUILDER) == HELPER
    assert list(claims.owner) == [BUILDER, FREE, HELPER]


def _computed_by(study) -> dict[str, set[int]]:
    lines = [json.loads(line) for line in (study.run_dir / "stage_log.jsonl").read_text().splitlines()]
    pids: dict[str, set[int]] = {}
    for line in lines:
        if line["action"] == "computed":
            pids.setdefault(line["stage"], set()).add(line["pid"])
    return pids


def _rankings(study) -> dict[str, pd.DataFrame]:
    return {str(rid): study.ranked(rid).rankings for rid in study.retrievers()}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    study = make_tiny_study(tmp_path_factory.mktemp("one"), RETRIEVERS)
    study.build()
    return study


@pytest.mark.integration
def test_the_stages_the_helper_stores_are_loaded_by_the_loop_and_equal_one_process_s(tmp_path, one_process):
    study = make_tiny_study(tmp_path, RETRIEVERS)
    runs = [name for name in study.computed_stages if name.startswith("runs:")]
    study.get(runs[0])                                     # the loop has reached the first retrieval stage
    second = StageHelper(study.params, runs[1:])
    second.process.join(120)                               # the helper claims and stores every one it was given
    assert second.process.exitcode == 0 and list(second.claims.owner) == [HELPER] * (len(runs) - 1)
    for name in runs[1:]:
        second.wait_for(name)                              # stored: nothing to wait for
    second.stop()
    study.build()
    computed_by = _computed_by(study)
    assert {name for name in runs[1:] if computed_by.get(name) != {second.process.pid}} == set()
    assert computed_by[runs[0]] == {os.getpid()}
    ours, theirs = _rankings(study), _rankings(one_process)
    assert list(ours) == list(theirs)
    for name in ours:
        pd.testing.assert_frame_equal(ours[name], theirs[name])
    pd.testing.assert_frame_equal(study.get("metrics"), one_process.get("metrics"))


@pytest.mark.integration
def test_a_helper_that_ends_without_a_stage_it_claimed_leaves_it_to_the_loop(tmp_path, one_process):
    study = make_tiny_study(tmp_path, RETRIEVERS)
    runs = [name for name in study.computed_stages if name.startswith("runs:")]
    study.get("representations")
    second = StageHelper(study.params, runs)
    second.process.kill()
    second.process.join()
    second.claims.owner[:] = [HELPER] * len(runs)          # it had claimed them all before it was killed
    waited = threading.Thread(target=lambda: [second.wait_for(name) for name in runs])
    waited.start()
    waited.join(30)
    assert not waited.is_alive()                           # the loop does not wait for a helper that has ended
    second.stop()
    study.build()
    computed_by = _computed_by(study)
    assert all(computed_by[name] == {os.getpid()} for name in runs)
    for name, frame in _rankings(study).items():
        pd.testing.assert_frame_equal(frame, _rankings(one_process)[name])


@pytest.mark.integration
def test_a_build_with_a_helper_gives_the_results_of_one_without(tmp_path, one_process, monkeypatch):
    monkeypatch.setattr(helper, "HELPER_MESSAGES", (0, 10**9))   # the tiny study is far below the size it needs
    started = []
    monkeypatch.setattr(StageHelper, "start", classmethod(
        lambda cls, *args, start=StageHelper.start.__func__: started.append(start(cls, *args)) or started[-1]))
    study = make_tiny_study(tmp_path, RETRIEVERS)
    study.build(helper=True)
    assert len(started) == 1 and started[0] is not None and not started[0].process.is_alive()
    for name, frame in _rankings(study).items():
        pd.testing.assert_frame_equal(frame, _rankings(one_process)[name])
    pd.testing.assert_frame_equal(study.get("metrics"), one_process.get("metrics"))


def test_no_helper_for_a_study_outside_the_sizes_it_pays_for(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(StageHelper, "__init__", lambda self, *args: calls.append(args))
    low, high = helper.HELPER_MESSAGES

    class Engine:
        @staticmethod
        def stage(name):
            return type("Stage", (), {"needs": ("ingest",)})

    class Study:   # what start reads of a study
        computed_stages = ("ingest", "runs:a_bm25", "runs:b_bm25")
        params = None
        engine = Engine

    monkeypatch.setattr(helper, "_recorded", lambda engine, name: False)
    monkeypatch.setattr(helper.os, "cpu_count", lambda: 2)
    assert StageHelper.start(Study, 1, low - 1) is None and StageHelper.start(Study, 1, high + 1) is None
    assert calls == []
    assert isinstance(StageHelper.start(Study, 1, low), StageHelper) and calls == [(None, ["runs:a_bm25", "runs:b_bm25"])]
