"""The declared stage graph on the tiny study: every stage cached after a build, a change marks exactly the
stages that depend on it (with the cause as the reason), a recomputation equals a fresh study, each stage is
computed or loaded at most once per process, undeclared reads are refused, ``forget`` drops everything,
``pmrag status`` computes nothing, and notebooks only load what the build computed."""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from typing import Annotated

from pmrag.core import store
from pmrag.core.names import StageKey
from pmrag.core.params import BM25Section, StudyParams
from pmrag.study import Study
from pmrag.study import engine as engine_module
from pmrag.study.declare import (DeclarationError, Derived, Keys, Restricted, Runtime, Stage, params_at,
                                 resolve_stage, stage)
from pmrag.study.engine import LOG_FILE, Engine, StageError
from conftest import make_tiny_study

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "lib" / "pmrag" / "retrieve" / "bm25_tokenizer_spec.txt"
PROMPTS = REPO / "lib" / "pmrag" / "represent" / "prompts" / "ja"
SMALL = "bootstrap: {n_resamples: 100}\nhybrid: {beta_step: 0.25}\n"

STAGES = [
    "ingest", "chunks", "chunk_table", "qrels", "summaries", "representations", "coverage", "representation_profile",
    "private_strings", "vectors:raw_text", "vectors:summary", "vectors:embedding_text", "query_vectors", "graph",
    "interest_relevance", "runs:raw_text_bm25", "runs:summary_bm25", "runs:embedding_text_bm25",
    "runs:raw_text_vector", "runs:summary_vector", "runs:embedding_text_vector",
    "metrics", "sweep", "hybrids", "reliability", "failures", "selection_coverage", "statistics", "graph_evaluation",
]
BM25_RUNS = {"runs:raw_text_bm25", "runs:summary_bm25", "runs:embedding_text_bm25"}
ANALYSIS = {"metrics", "sweep", "hybrids", "reliability", "failures", "selection_coverage", "statistics",
            "graph_evaluation"}
HISTORY = {"private_strings"}   # read from the messages and chunks alone, by notebook 06


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """An embedding cache holding the tiny study's texts, copied into each test's study (no model run there); its
    folder holds that study built (:func:`built` copies it)."""
    root = tmp_path_factory.mktemp("warm")
    study = make_tiny_study(root, SMALL)
    study.build()
    study.store.dispose()
    return root / "cache"


def tiny(root: Path, warm_cache: Path, extra: str = "") -> Study:
    shutil.copytree(warm_cache, root / "cache")
    return make_tiny_study(root, SMALL + extra)


@pytest.fixture(scope="module")
def built(tmp_path_factory, warm_cache):
    """``built(root, setup)``: the tiny study of a CHANGES setup (default none) with every stage computed, copied
    into ``root`` and reopened there.  Each setup's study is built once per module (the one without a setup is
    :func:`warm_cache`'s); a copied study finds every stage current
    (test_a_copied_or_moved_study_finds_every_stage_current), so a test that starts from a built study pays a copy
    instead of a build."""
    templates = {_nothing: warm_cache.parent}

    def copy(root: Path, setup=None) -> Study:
        setup = setup or _nothing
        if setup not in templates:
            template = tmp_path_factory.mktemp("built")
            study = tiny(template, warm_cache, setup(template))
            study.build()
            study.store.dispose()
            templates[setup] = template
        shutil.copytree(templates[setup], root, dirs_exist_ok=True)
        return reopen(root)

    return copy


def reopen(root: Path) -> Study:
    return Study.from_params(root / "p.yaml")


def log(study: Study) -> list[dict]:
    path = study.run_dir / LOG_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def states(study: Study) -> dict[str, str]:
    return {row.name: row.state for row in study.status()}


def reasons(study: Study) -> dict[str, str]:
    return {row.name: row.reason for row in study.status()}


def needs(stages: dict[StageKey, Stage]) -> dict[str, set[str]]:
    """Each stage's declared upstream stages, by name."""
    return {str(key): {str(need) for need in stage.needs} for key, stage in stages.items()}


def dependents(stages: dict[StageKey, Stage], seeds) -> set[str]:
    """``seeds`` and every stage that needs one of them, directly or through others (from the declared needs)."""
    found, reads = set(seeds), needs(stages)
    changed = True
    while changed:
        changed = False
        for name, upstream in reads.items():
            if name not in found and found.intersection(upstream):
                found.add(name)
                changed = True
    return found


def ancestors(stages: dict[StageKey, Stage], targets) -> set[str]:
    """``targets`` and everything they need, transitively."""
    found, todo, reads = set(), list(targets), needs(stages)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(reads[name])
    return found


def per_process(lines: list[dict]) -> Counter:
    return Counter((line["pid"], line["stage"]) for line in lines)


# ------------------------------------------------------------------------------------------- a: cached

@pytest.mark.integration
def test_build_caches_every_stage_and_a_new_study_recomputes_nothing(tmp_path, warm_cache):
    study = tiny(tmp_path, warm_cache)
    assert list(study.computed_stages) == STAGES
    assert states(study) == {name: "missing" for name in STAGES}
    study.build()
    assert states(study) == {name: "cached" for name in STAGES}
    assert set(reasons(study).values()) == {""}
    first = log(study)
    assert [line["stage"] for line in first] == STAGES  # each computed once, upstream first
    assert {line["action"] for line in first} == {"computed"}

    again = reopen(tmp_path)
    again.build()
    second = log(again)[len(first):]
    assert {line["action"] for line in second} == {"loaded"}
    assert sorted(line["stage"] for line in second) == sorted(STAGES)
    assert states(again) == {name: "cached" for name in STAGES}


# ------------------------------------------------------------------------------------------- b: staleness

@pytest.mark.integration
def test_dependents_helper_matches_the_declared_graph(tmp_path, warm_cache):
    stages = tiny(tmp_path, warm_cache).engine.stages
    assert dependents(stages, BM25_RUNS) == BM25_RUNS | ANALYSIS
    assert dependents(stages, {"chunks"}) == set(STAGES) - {"ingest", "query_vectors"}
    assert dependents(stages, {"summaries"}) == set(STAGES) - {"ingest", "chunks", "chunk_table", "qrels", "query_vectors",
                                                               *HISTORY}
    assert dependents(stages, {"ingest"}) == set(STAGES)
    assert dependents(stages, {"coverage"}) == {"coverage"}   # read by notebooks and the runner, by no stage
    runs = {name for name in STAGES if name.startswith("runs:")}
    assert dependents(stages, {"chunk_table"}) == {"chunk_table", "private_strings"} | runs | ANALYSIS   # not the
    # chunks' other readers
    assert dependents(stages, HISTORY) == HISTORY
    assert dependents(stages, {"representation_profile"}) == {"representation_profile"}
    assert ancestors(stages, {"sweep"}) == (set(STAGES) - ANALYSIS - {"runs:raw_text_vector", "vectors:raw_text",
                                                                      "coverage", "representation_profile", "graph",
                                                                      "interest_relevance"} - HISTORY | {"sweep"})
    assert ancestors(stages, {"graph"}) == {"graph", "summaries", "chunks", "ingest"}


def _tokenizer_spec(root):
    shutil.copy(SPEC, root / "spec.txt")
    return "bm25: {tokenizer_spec: spec.txt}\n"


def _edit_tokenizer_spec(root, monkeypatch):
    spec = root / "spec.txt"
    assert spec.read_text(encoding="utf-8").rstrip().endswith("質問")  # the last section is [stopwords]
    with open(spec, "a", encoding="utf-8") as fh:
        fh.write("words\n")  # a stopword the chat uses ("same words")
    return "spec.txt"   # named relative to the params file: a moved study keeps its keys


def _k1(root):
    return "bm25: {k1: 1.2}\n"


def _edit_k1(root, monkeypatch):
    path = root / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("k1: 1.2", "k1: 1.5"), encoding="utf-8")
    return "bm25.k1"


def _nothing(root):
    return ""


def _edit_chunking_code(root, monkeypatch):
    name = "pmrag.chunking.windows"
    assert name in engine_module._MODULE_DIGESTS  # computed by the build: the memo is what a new key reads
    monkeypatch.setitem(engine_module._MODULE_DIGESTS, name, "0" * 64)
    return name


def _prompts(root):
    shutil.copytree(PROMPTS, root / "prompts")
    return "representations: {prompts: prompts}\n"


def _edit_summary_prompt(root, monkeypatch):
    path = root / "prompts" / "summary_user.txt"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n箇条書きで答えてください。\n")
    return "prompts/summary_user.txt"


def _edit_input(root, monkeypatch):
    path = root / "data" / "family.json"
    text = path.read_text(encoding="utf-8")
    assert text.count('"same words"') == 2
    path.write_text(text.replace('"same words"', '"other words, edited"', 1), encoding="utf-8")
    return "data/family.json"


CHANGES = {
    # change: (setup, edit, stages whose own declaration changed, their exact reason given the edit's return)
    "tokenizer_spec": (_tokenizer_spec, _edit_tokenizer_spec, BM25_RUNS, lambda x: f"file {x} changed"),
    # the offline interest relevance scores interests with BM25 too (the study's k1 and b)
    "bm25_k1": (_k1, _edit_k1, BM25_RUNS | {"interest_relevance"}, lambda x: f"param {x}: 1.2 → 1.5"),
    # coverage renders message lines with pmrag.chunking.windows itself (to find them in raw_text)
    "chunking_code": (_nothing, _edit_chunking_code, {"chunks", "coverage"}, lambda x: f"module {x} changed"),
    "summary_prompt": (_prompts, _edit_summary_prompt, {"summaries"}, lambda x: f"file {x} changed"),
    "input_file": (_nothing, _edit_input, {"ingest"}, lambda x: f"file {x} changed"),
}
EXPECTED_STALE = {  # hard-coded, so that the dependents helper is checked too
    "tokenizer_spec": BM25_RUNS | ANALYSIS,
    "bm25_k1": BM25_RUNS | ANALYSIS | {"interest_relevance"},
    "chunking_code": set(STAGES) - {"ingest", "query_vectors"},
    "summary_prompt": set(STAGES) - {"ingest", "chunks", "chunk_table", "qrels", "query_vectors", *HISTORY},
    "input_file": set(STAGES),
}
# what the next build recomputes: the stale stages, except where a stage's result came out unchanged and its
# dependents key on that result (summaries: the extractive stand-in does not read the prompt files)
EXPECTED_COMPUTED = {**EXPECTED_STALE, "summary_prompt": {"summaries"}}


@pytest.mark.integration
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_marks_exactly_its_dependents_stale(change, tmp_path, built, monkeypatch):
    setup, edit, seeds, reason = CHANGES[change]
    study = built(tmp_path, setup)
    assert set(states(study).values()) == {"cached"}
    cause = edit(tmp_path, monkeypatch)

    changed = reopen(tmp_path)
    status = {row.name: row for row in changed.status()}
    stale = {name for name, row in status.items() if row.state == "stale"}
    assert stale == EXPECTED_STALE[change]
    assert stale == dependents(changed.engine.stages, seeds)
    assert {name for name, row in status.items() if row.state == "cached"} == set(STAGES) - stale
    for name in seeds:   # the cause first (a seed downstream of another seed also names that upstream)
        assert status[name].reason.split("; ")[0] == reason(cause), name
    for name in stale - seeds:  # downstream: the reason is an upstream stage, never the cause itself
        assert status[name].reason.startswith("upstream "), (name, status[name].reason)
        assert cause not in status[name].reason
        named = [part.removeprefix("upstream ") for part in status[name].reason.split("; ")]
        assert set(named) <= stale and set(named) <= needs(changed.engine.stages)[name]

    before = len(log(changed))
    changed.build()
    after = log(changed)[before:]
    assert sorted(line["stage"] for line in after if line["action"] == "computed") == sorted(EXPECTED_COMPUTED[change])
    assert sorted(line["stage"] for line in after if line["action"] == "loaded") == \
        sorted(set(STAGES) - EXPECTED_COMPUTED[change])
    assert set(states(changed).values()) == {"cached"}


@pytest.mark.integration
def test_an_unchanged_upstream_result_leaves_its_dependents_loaded_through_an_accessor(tmp_path, built):
    built(tmp_path, _prompts)
    _edit_summary_prompt(tmp_path, None)
    changed = reopen(tmp_path)
    before = len(log(changed))
    changed.failures()
    after = log(changed)[before:]
    assert [line["stage"] for line in after if line["action"] == "computed"] == ["summaries"]


@pytest.mark.integration
def test_the_statistics_hold_the_coverage_stage_s_simulation_of_the_study_s_sweep(tmp_path, built):
    from pmrag.evaluate.selection_coverage import selection_coverage

    study = built(tmp_path)
    stage = study.get("selection_coverage")
    pd.testing.assert_frame_equal(study.statistics().coverage.table, stage.table)
    p = study.params
    pairings = [(str(a), str(b)) for a, b in p.hybrid.selection_pairing_ids()]
    direct = selection_coverage(study.get("sweep"), p.statistics.coverage_datasets, p.statistics.coverage_resamples,
                                p.bootstrap.seed, p.bootstrap.confidence, pairings=pairings)
    pd.testing.assert_frame_equal(stage.table, direct.table)
    pd.testing.assert_frame_equal(stage.per_dataset, direct.per_dataset)


@pytest.mark.integration
def test_statistics_that_fuse_and_simulate_themselves_equal_those_from_the_hybrids_and_coverage_stages(tmp_path,
                                                                                                    built):
    import dataclasses

    from pmrag.evaluate.statistics import SIMULATE

    study = built(tmp_path)
    stage = study.engine.stage("statistics")
    inputs = {need: study.get(need) for need in stage.needs}
    by_name = {str(need): need for need in inputs}
    hybrids = inputs[by_name["hybrids"]]
    assert set(hybrids.rankings) >= {str(h) for h in hybrids.ids()}
    inputs[by_name["hybrids"]] = dataclasses.replace(hybrids, rankings=None)
    inputs[by_name["selection_coverage"]] = SIMULATE
    again, held = stage.run(inputs, study.engine.runtime.resumed(False)), study.statistics()
    for field in ("group_rows", "message_rows", "comparisons", "aliases"):
        pd.testing.assert_frame_equal(getattr(again, field), getattr(held, field))
    pd.testing.assert_frame_equal(again.coverage.table, held.coverage.table)


# ------------------------------------------------------------------------------------------- c: no stale numbers

@pytest.mark.integration
def test_recomputation_after_a_change_equals_a_fresh_study(tmp_path, warm_cache, built):
    edited = built(tmp_path / "edited", _k1)   # bm25: {k1: 1.2}
    assert edited.params.bm25.k1 == 1.2
    old_scores = {name: edited.ranked(name).rankings for name in ("raw_text_bm25", "summary_bm25")}
    path = tmp_path / "edited" / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("k1: 1.2", "k1: 2.0"), encoding="utf-8")
    edited = reopen(tmp_path / "edited")
    edited.build()

    fresh = tiny(tmp_path / "fresh", warm_cache, "bm25: {k1: 2.0}\n")
    fresh.build()
    assert edited.params.bm25.k1 == fresh.params.bm25.k1 == 2.0
    for name, old in old_scores.items():
        new = edited.ranked(name).rankings
        pd.testing.assert_frame_equal(new, fresh.ranked(name).rankings, check_exact=False, rtol=0, atol=1e-12)
        assert np.abs(new["score"].to_numpy() - old["score"].to_numpy()).max() > 1e-3  # k1 mattered
    pd.testing.assert_frame_equal(edited.metrics(), fresh.metrics(), check_exact=False, rtol=0, atol=1e-12)
    pd.testing.assert_frame_equal(edited.sweep(), fresh.sweep(), check_exact=False, rtol=0, atol=1e-12)
    pd.testing.assert_frame_equal(edited.hybrids().best, fresh.hybrids().best, check_exact=False, rtol=0, atol=1e-12)
    assert edited.hybrids().selected == fresh.hybrids().selected
    pd.testing.assert_frame_equal(edited.reliability().cis, fresh.reliability().cis, check_exact=False, rtol=0,
                                  atol=1e-12)


# ------------------------------------------------------------------------------------------- d: in-process memo

ACCESSES = """
for _ in range(3):
    study.per_question()
    study.reliability()
    study.failures()
    study.sweep()
"""


@pytest.mark.integration
def test_each_stage_is_computed_or_loaded_once_per_process(tmp_path, warm_cache):
    study = tiny(tmp_path, warm_cache)
    exec(ACCESSES, {"study": study})
    lines = log(study)
    used = ancestors(study.engine.stages, {"metrics", "hybrids", "reliability", "failures", "sweep"})
    assert set(per_process(lines).values()) == {1}
    assert {line["stage"] for line in lines} == used
    assert {line["action"] for line in lines} == {"computed"}

    # another process on the same folder: loads each stage it asks for once (a cached result needs no
    # upstream), computes nothing
    code = f"from pmrag.study import Study\nstudy = Study.from_params({str(tmp_path / 'p.yaml')!r})\n{ACCESSES}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    other = log(study)[len(lines):]
    assert {line["pid"] for line in other} - {line["pid"] for line in lines}
    assert set(per_process(other).values()) == {1}
    assert {line["stage"] for line in other} == {"metrics", "hybrids", "reliability", "failures", "sweep"}
    assert {line["action"] for line in other} == {"loaded"}


def test_build_keeps_in_memory_only_the_results_no_stage_reads(tmp_path, built):
    study = built(tmp_path)
    study.build()
    computed = set(study.computed_stages)
    read = {str(need) for name in computed for need in study.engine.stage(name).needs} & computed
    assert {"ingest", "chunks", "metrics"} <= read   # dropped once their last reader was computed
    assert {str(key) for key in study.engine.memo} == computed - read
    pd.testing.assert_frame_equal(study.chunks(), reopen(tmp_path).chunks())   # an accessor loads it again


def test_a_build_that_holds_only_the_coverage_ends_with_only_the_coverage_in_memory(tmp_path, built):
    study = built(tmp_path)
    study.engine.release()
    study.forget()
    study.build(hold=("coverage",))   # the runner's build: its notebooks load what they read
    assert [str(key) for key in study.engine.memo] == ["coverage"]
    assert {"failures", "statistics"} <= set(study.computed_stages)   # read by no stage, computed, not held
    assert all(study.engine.is_current(name) for name in study.computed_stages)
    pd.testing.assert_frame_equal(study.coverage().chunk_coverage, reopen(tmp_path).coverage().chunk_coverage)


def test_release_drops_results_from_memory_and_the_next_read_loads_the_same_from_disk(tmp_path, built):
    study = built(tmp_path)
    first = study.metrics()
    assert study.engine.memo
    before = len(log(study))
    study.engine.release()
    assert not study.engine.memo
    again = study.metrics()
    assert again is not first
    pd.testing.assert_frame_equal(again, first)
    assert [(line["stage"], line["action"]) for line in log(study)[before:]] == [("metrics", "loaded")]


def test_within_one_get_a_record_is_read_once_until_any_thread_writes_one(tmp_path, built):
    """A get's walk reads each record once; a record written meanwhile, here by another thread (the runner records
    notebooks from its worker threads), makes the walk read them again; outside a get nothing is kept."""
    import threading

    engine = built(tmp_path).engine
    metrics = StageKey.of("metrics")
    with engine._one_walk():
        first = engine.record(metrics)
        assert engine.record(metrics) is first
        writer = threading.Thread(target=engine._write_record, args=(metrics, "written-meanwhile", {"complete": False}))
        writer.start()
        writer.join()
        assert engine.record(metrics)["key"] == "written-meanwhile" != first["key"]
    assert engine.record(metrics) is not engine.record(metrics)


# ------------------------------------------------------------------------------------------- e: declarations

@stage("one")
def one() -> int:
    return 1


@stage("one plus k1")
def honest(one: int, bm25: Annotated[BM25Section, Keys("k1")]) -> float:
    return one + bm25.k1


@stage("reads a name that is no stage, section or marker")
def sneaky(one: int, other: int) -> int:
    return one + other


@stage("peeks past its declared keys")
def peeks(params: Annotated[StudyParams, Restricted(lambda p, item: ("bm25",))]) -> int:
    return params.chunking.window_size


@stage("an upstream the study may not have")
def optional(ghost: int | None = None) -> bool:
    return ghost is None


@stage("an upstream the study must have")
def required(ghost: int) -> int:
    return ghost


@stage("metric cut-offs")
def derived(ks: Annotated[tuple, Derived(StudyParams.metric_ks, "retrieval.ks", "analysis.failure_k",
                                         "analysis.recovery_ks")]) -> tuple:
    return ks


def resolve(function, params, families):
    return resolve_stage(function, params, families, param_json=lambda dotted: str(params_at(params, dotted)))


def test_a_signature_is_the_declaration_and_a_parameter_naming_nothing_is_refused(tmp_path):
    params = StudyParams.model_validate({"run": "toy", "dataset": {"inputs": ["chat.json"]}})
    families = {**{name: ("",) for name in ("one", "honest", "peeks", "optional", "derived")}, "ghost": ()}
    declared = resolve(honest, params, families)
    assert declared.needs == (StageKey("one"),) and declared.params == {"bm25.k1": "1.2"}
    assert resolve(derived, params, families).params == {"retrieval.ks": "(5, 10, 20, 200)", "analysis.failure_k": "5",
                                                         "analysis.recovery_ks": "(10, 20)"}
    assert resolve(optional, params, families).needs == ()
    with pytest.raises(DeclarationError, match=r"^stage sneaky: parameter 'other' names no stage, params section or "
                                               r"marker$"):
        resolve(sneaky, params, families)
    with pytest.raises(DeclarationError, match=r"^stage required: parameter 'ghost' reads stage ghost, which this study "
                                               r"does not have$"):
        resolve(required, params, families)
    runtime = Runtime(store.open_store(tmp_path / "toy.sqlite"), tmp_path / "run", tmp_path / "cache")
    engine = Engine([resolve(f, params, families) for f in (one, honest, peeks, optional, derived)], runtime,
                    lambda path: path.name)
    assert engine.get("honest") == pytest.approx(2.2, abs=1e-12)
    assert engine.get("optional") is True and engine.get("derived") == (5, 10, 20, 200)
    with pytest.raises(DeclarationError, match=r"^stage peeks reads params\.chunking without declaring it$"):
        engine.get("peeks")
    assert {row.name: row.state for row in engine.status()} == {
        "one": "cached", "honest": "cached", "peeks": "missing", "optional": "cached", "derived": "cached"}
    with pytest.raises(StageError, match=r"^stage honest needs unknown stage\(s\) one$"):
        Engine([resolve(honest, params, families)], runtime, lambda path: path.name)
    with pytest.raises(StageError, match=r"^unknown stage 'ghost'"):
        engine.get("ghost")


# ------------------------------------------------------------------------------------------- f: forget

@pytest.mark.integration
def test_forget_drops_every_stage_and_the_next_build_computes_each_once(tmp_path, built):
    study = built(tmp_path)
    before = len(log(study))
    study.forget()
    assert {row.name: (row.state, row.reason) for row in study.status()} == {
        name: ("missing", "never computed") for name in STAGES}
    assert not list((study.run_dir / "stages").glob("*.pkl"))
    assert states(reopen(tmp_path)) == {name: "missing" for name in STAGES}
    study.build()
    after = log(study)[before:]
    assert Counter(line["stage"] for line in after) == Counter(STAGES)
    assert {line["action"] for line in after} == {"computed"}
    assert states(study) == {name: "cached" for name in STAGES}


@pytest.mark.integration
def test_a_result_that_cannot_be_written_leaves_no_partial_file_and_those_of_stopped_processes_are_removed(
        tmp_path, built):
    import os

    study = built(tmp_path)
    stages = study.run_dir / "stages"
    with pytest.raises(Exception):
        study.engine._save(StageKey.of("metrics"), "key", lambda: None)   # a lambda does not pickle
    assert not list(stages.glob("*.tmp"))
    stopped = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                 text=True, check=True).stdout)
    left = stages / f"metrics.pkl.{stopped}.tmp"
    writing = stages / f"sweep.pkl.{os.getpid()}.tmp"   # a process still running: its write in progress
    other = stages / "notes.tmp"
    for path in (left, writing, other):
        path.write_bytes(b"partial")
    assert study.engine.remove_partial_results() == [left]
    assert not left.exists() and writing.exists() and other.exists()


# ------------------------------------------------------------------------------------------- g: pmrag status

@pytest.mark.integration
def test_pmrag_status_prints_every_stage_and_computes_nothing(tmp_path, built):
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9]*_*.ipynb"))
    study = built(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8") + f"notebooks_dir: {REPO / 'notebooks'}\nbm25: {{k1: 1.5}}\n",
                    encoding="utf-8")
    logged = (study.run_dir / LOG_FILE).read_bytes()

    result = subprocess.run([sys.executable, "-m", "pmrag", "status", str(path)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    stages, costs = result.stdout.strip().split("\n\n")   # the stages, then the model calls still to make
    header, *lines = stages.splitlines()
    assert costs.startswith("model calls still to make (counted without calling a model; ")
    n_stale = len(BM25_RUNS | ANALYSIS | {"interest_relevance"})
    assert header.startswith("run tiny (")
    assert header.endswith(f"{len(STAGES) - n_stale} cached, {n_stale} stale, {len(notebooks)} missing")
    rows = {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines}
    assert list(rows) == STAGES + [f"notebook:{stem}" for stem in notebooks]
    for name in STAGES:
        if name in BM25_RUNS:
            assert rows[name] == ["stale", "param bm25.k1: 1.2 → 1.5"]
        elif name == "interest_relevance":   # BM25 over interest labels
            assert rows[name] == ["stale", "param bm25.k1: 1.2 → 1.5"]
        elif name in ANALYSIS:
            assert rows[name][0] == "stale" and rows[name][1].startswith("upstream "), rows[name]
        else:
            assert rows[name] == ["cached"]
    for stem in notebooks:
        assert rows[f"notebook:{stem}"] == ["missing", "never computed"]
    assert (study.run_dir / LOG_FILE).read_bytes() == logged  # nothing computed, nothing loaded


@pytest.mark.integration
def test_status_of_a_study_without_a_notebooks_folder_lists_its_stages(tmp_path, built):
    from pmrag.study.runner import status_lines

    built(tmp_path)
    lines = status_lines(tmp_path / "p.yaml")
    assert [line.split()[0] for line in lines[1:]] == STAGES


# ------------------------------------------------------------------------------------------- i: relocatable keys

@pytest.mark.integration
def test_a_copied_or_moved_study_finds_every_stage_current(tmp_path, warm_cache):
    tiny(tmp_path / "first", warm_cache).build()
    shutil.copytree(tmp_path / "first", tmp_path / "elsewhere" / "copy")
    copied = reopen(tmp_path / "elsewhere" / "copy")
    assert states(copied) == {name: "cached" for name in STAGES}
    before = len(log(copied))
    copied.failures()
    assert {line["action"] for line in log(copied)[before:]} == {"loaded"}

    # the run folder moved on its own, the params file pointing at its new place
    (tmp_path / "first" / "out").rename(tmp_path / "moved_out")
    path = tmp_path / "first" / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("outputs_dir: out", "outputs_dir: ../moved_out"),
                    encoding="utf-8")
    moved = reopen(tmp_path / "first")
    assert states(moved) == {name: "cached" for name in STAGES}
    assert moved.vectors("summary")[0].shape[0] == len(moved.chunks())   # the vectors' files are found there


@pytest.mark.integration
def test_no_key_holds_a_location(tmp_path, warm_cache):
    study = tiny(tmp_path, warm_cache)
    for name in study.engine.stages:
        text = json.dumps(study.engine.manifest(name), ensure_ascii=False)
        assert str(tmp_path) not in text and str(REPO) not in text, name


# ------------------------------------------------------------------------------------------- j: pmrag graph

@pytest.mark.integration
def test_pmrag_graph_draws_every_stage_and_read_without_computing(tmp_path, warm_cache):
    study = tiny(tmp_path, warm_cache)
    result = subprocess.run([sys.executable, "-m", "pmrag", "graph", str(tmp_path / "p.yaml")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    svg, png = (Path(line) for line in result.stdout.split())
    assert (svg, png) == (study.run_dir / "stage_graph.svg", study.run_dir / "stage_graph.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text(encoding="utf-8")
    reads = sum(len(stage.needs) for stage in study.engine.stages.values())
    assert f"run tiny: {len(STAGES)} stages, {reads} reads" in text
    assert all(name in text for name in STAGES)
    assert not log(study) and states(study) == {name: "missing" for name in STAGES}
