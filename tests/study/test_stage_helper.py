"""The helper process that computes later stages while the building loop computes the stages in order: which
stages it may take and when, one owner per stage, the stages it stores are loaded (not computed again) and equal
those one process makes, and a helper that ends without a stage it claimed leaves that stage to the loop."""

import json
import os
import threading
import time

import pandas as pd
import pytest

from pmrag.core.parallel import process_context
from pmrag.study import helper
from pmrag.study.helper import BUILDER, FREE, HELPER, Claims, Plan, StageHelper, study_plan
from conftest import make_tiny_study

RETRIEVERS = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector, "
              "summary_vector, embedding_text_vector, raw_text_bm25_char2, raw_text_bm25_char3, raw_text_rm3]}\n")
COMPUTED = ["ingest", "chunks", "summaries", "speakers", "runs:a", "runs:b", "runs:wrapped", "metrics"]
READS = {"chunks": ["ingest"], "summaries": ["chunks"], "speakers": ["ingest", "chunks"],
         "runs:a": ["chunks", "summaries"], "runs:b": ["chunks", "summaries"], "runs:wrapped": ["runs:a"],
         "metrics": ["runs:a", "runs:b", "runs:wrapped"]}


def _plan(cached=()):
    return Plan(COMPUTED, lambda name: READS.get(name, []), lambda name: name in cached, ("summaries",))


def test_the_helper_may_take_every_stage_but_the_ingest_the_chunks_and_the_model_stages():
    plan = _plan()
    assert plan.names == ["speakers", "runs:a", "runs:b", "runs:wrapped", "metrics"]
    assert plan.at == [3, 4, 5, 6, 7] and plan.reads[plan.names.index("runs:wrapped")] == [4]
    assert _plan(cached={"runs:b"}).names == ["speakers", "runs:a", "runs:wrapped", "metrics"]


def test_a_stage_is_ready_when_the_loop_has_passed_what_it_reads_or_the_helper_stored_it():
    plan = _plan()
    names = lambda indices: [plan.names[i] for i in indices]   # noqa: E731
    everything = lambda i: True                                 # noqa: E731
    assert names(plan.ready(2, set(), everything)) == ["speakers"]           # the loop summarises
    assert names(plan.ready(4, set(), everything)) == ["runs:b"]             # latest first; not the loop's own
    stored = lambda *at: lambda i: plan.at[i] not in at                      # noqa: E731 - the helper's, not free
    assert names(plan.ready(4, {5}, stored(5))) == []                        # b stored: the rest reads the loop's a
    assert names(plan.ready(5, set(), everything)) == ["runs:wrapped"]       # a passed: what wraps it
    assert names(plan.ready(5, {6}, stored(6))) == []                        # metrics reads b, the loop's
    assert names(plan.ready(6, {6}, stored(6))) == ["metrics"]               # b passed, wrapped stored
    assert names(plan.ready(4, set(), lambda i: plan.names[i] != "runs:b")) == []   # b someone's already
    assert plan.start_at() == 2 and Plan(COMPUTED[:3], lambda n: READS.get(n, []), lambda n: False,
                                         ("summaries",)).start_at() is None


def test_each_stage_has_one_owner_whoever_claims_first():
    claims = Claims(["runs:a", "runs:b", "runs:c"], process_context())
    assert list(claims.owner) == [FREE] * 3 and claims.loop_at.value == 0
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


def _up_to_the_first_ranking(study) -> list[str]:
    """Compute the stages before the first retrieval stage in this process; the retrieval stages."""
    runs = [name for name in study.computed_stages if name.startswith("runs:")]
    for name in study.computed_stages[:study.computed_stages.index(runs[0])]:
        study.get(name)
    return runs


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    study = make_tiny_study(tmp_path_factory.mktemp("one"), RETRIEVERS)
    study.build()
    return study


@pytest.mark.integration
def test_the_stages_the_helper_stores_are_loaded_by_the_loop_and_equal_one_process_s(tmp_path, one_process):
    study = make_tiny_study(tmp_path, RETRIEVERS)
    runs = _up_to_the_first_ranking(study)
    second = StageHelper(study.params, study_plan(study), study.computed_stages)
    second.wait_for(runs[0])                               # the loop is at the first retrieval stage: it is the loop's
    deadline = time.monotonic() + 120
    while not set(runs[1:]) <= second.finished and time.monotonic() < deadline:
        if not second.done.empty():
            second.finished.add(second.done.get())
        time.sleep(0.05)
    assert second.finished == set(runs[1:])                # every other ranking, and nothing that reads them
    second.stop()
    study.build()
    computed_by = _computed_by(study)
    assert {name: computed_by.get(name) for name in runs[1:]} == {name: {second.process.pid} for name in runs[1:]}
    assert computed_by[runs[0]] == computed_by["metrics"] == {os.getpid()}
    ours, theirs = _rankings(study), _rankings(one_process)
    assert list(ours) == list(theirs)
    for name in ours:
        pd.testing.assert_frame_equal(ours[name], theirs[name])
    pd.testing.assert_frame_equal(study.get("metrics"), one_process.get("metrics"))


@pytest.mark.integration
def test_a_helper_that_ends_without_a_stage_it_claimed_leaves_it_to_the_loop(tmp_path, one_process):
    study = make_tiny_study(tmp_path, RETRIEVERS)
    runs = _up_to_the_first_ranking(study)
    second = StageHelper(study.params, study_plan(study), study.computed_stages)
    second.starting.join()                                 # started beside the loop: here, waited for
    second.process.kill()
    second.process.join()
    second.claims.owner[:] = [HELPER] * len(second.claims.names)   # it had claimed them all before it was killed
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
        lambda cls, study, start=StageHelper.start.__func__: started.append(start(cls, study)) or started[-1]))
    study = make_tiny_study(tmp_path, RETRIEVERS)
    study.build(helper=True)
    assert len(started) == 1 and started[0] is not None and not started[0].process.is_alive()
    for name, frame in _rankings(study).items():
        pd.testing.assert_frame_equal(frame, _rankings(one_process)[name])
    pd.testing.assert_frame_equal(study.get("metrics"), one_process.get("metrics"))


def test_no_helper_for_a_study_outside_the_sizes_it_pays_for(monkeypatch):
    calls = []
    monkeypatch.setattr(StageHelper, "__init__", lambda self, *args: calls.append(args))
    monkeypatch.setattr(helper, "study_plan", lambda study: _plan())
    monkeypatch.setattr(helper.os, "cpu_count", lambda: 2)
    low, high = helper.HELPER_MESSAGES

    class Study:   # what start reads of a study
        computed_stages = COMPUTED
        params = None

        def __init__(self, messages):
            self.messages = messages

        def message_count(self):
            return self.messages

    assert StageHelper.start(Study(low - 1)) is None and StageHelper.start(Study(high + 1)) is None and calls == []
    assert isinstance(StageHelper.start(Study(low)), StageHelper) and len(calls) == 1
