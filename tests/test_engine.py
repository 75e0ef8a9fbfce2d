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

from pmrag.core import store
from pmrag.core.params import StudyParams
from pmrag.study import Study
from pmrag.study import engine as engine_module
from pmrag.study.engine import LOG_FILE, Engine, Stage, StageError
from conftest import make_tiny_study

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "lib" / "pmrag" / "retrieve" / "bm25_tokenizer_spec.txt"
PROMPTS = REPO / "lib" / "pmrag" / "represent" / "prompts" / "ja"
SMALL = "bootstrap: {n_resamples: 100}\nhybrid: {beta_step: 0.25}\n"

STAGES = [
    "ingest", "chunks", "qrels", "summaries", "representations", "coverage",
    "vectors:raw_text", "vectors:summary", "vectors:embedding_text", "query_vectors", "graph",
    "interest_relevance", "runs:raw_text_bm25", "runs:summary_bm25", "runs:embedding_text_bm25",
    "runs:raw_text_vector", "runs:summary_vector", "runs:embedding_text_vector",
    "metrics", "sweep", "hybrids", "reliability", "failures", "statistics", "graph_evaluation",
]
BM25_RUNS = {"runs:raw_text_bm25", "runs:summary_bm25", "runs:embedding_text_bm25"}
ANALYSIS = {"metrics", "sweep", "hybrids", "reliability", "failures", "statistics", "graph_evaluation"}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """An embedding cache holding the tiny study's texts, copied into each test's study (no model run there)."""
    root = tmp_path_factory.mktemp("warm")
    make_tiny_study(root, SMALL).build()
    return root / "cache"


def tiny(root: Path, warm_cache: Path, extra: str = "") -> Study:
    shutil.copytree(warm_cache, root / "cache")
    return make_tiny_study(root, SMALL + extra)


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


def dependents(stages: dict[str, Stage], seeds) -> set[str]:
    """``seeds`` and every stage that needs one of them, directly or through others (from the declared needs)."""
    found = set(seeds)
    changed = True
    while changed:
        changed = False
        for name, stage in stages.items():
            if name not in found and found.intersection(stage.needs):
                found.add(name)
                changed = True
    return found


def ancestors(stages: dict[str, Stage], targets) -> set[str]:
    """``targets`` and everything they need, transitively."""
    found, todo = set(), list(targets)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(stages[name].needs)
    return found


def per_process(lines: list[dict]) -> Counter:
    return Counter((line["pid"], line["stage"]) for line in lines)


# ------------------------------------------------------------------------------------------- a: cached

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

def test_dependents_helper_matches_the_declared_graph(tmp_path, warm_cache):
    stages = tiny(tmp_path, warm_cache).engine.stages
    assert dependents(stages, BM25_RUNS) == BM25_RUNS | ANALYSIS
    assert dependents(stages, {"chunks"}) == set(STAGES) - {"ingest", "query_vectors"}
    assert dependents(stages, {"summaries"}) == set(STAGES) - {"ingest", "chunks", "qrels", "query_vectors"}
    assert dependents(stages, {"ingest"}) == set(STAGES)
    assert ancestors(stages, {"sweep"}) == (set(STAGES) - ANALYSIS - {"runs:raw_text_vector", "vectors:raw_text",
                                                                      "coverage", "graph", "interest_relevance"}
                                            | {"sweep"})
    assert ancestors(stages, {"graph"}) == {"graph", "summaries", "chunks", "ingest"}


def _tokenizer_spec(root):
    shutil.copy(SPEC, root / "spec.txt")
    return "bm25: {tokenizer_spec: spec.txt}\n"


def _edit_tokenizer_spec(root, monkeypatch):
    spec = root / "spec.txt"
    assert spec.read_text(encoding="utf-8").rstrip().endswith("質問")  # the last section is [stopwords]
    with open(spec, "a", encoding="utf-8") as fh:
        fh.write("words\n")  # a stopword the chat uses ("same words")
    return str(spec.resolve())


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
    return str(path.resolve())


def _edit_input(root, monkeypatch):
    path = root / "data" / "family.json"
    text = path.read_text(encoding="utf-8")
    assert text.count('"same words"') == 2
    path.write_text(text.replace('"same words"', '"other words, edited"', 1), encoding="utf-8")
    return str(path.resolve())


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
    "summary_prompt": set(STAGES) - {"ingest", "chunks", "qrels", "query_vectors"},
    "input_file": set(STAGES),
}
# what the next build recomputes: the stale stages, except where a stage's result came out unchanged and its
# dependents key on that result (summaries: the extractive stand-in does not read the prompt files)
EXPECTED_COMPUTED = {**EXPECTED_STALE, "summary_prompt": {"summaries"}}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_marks_exactly_its_dependents_stale(change, tmp_path, warm_cache, monkeypatch):
    setup, edit, seeds, reason = CHANGES[change]
    study = tiny(tmp_path, warm_cache, setup(tmp_path))
    study.build()
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
        assert set(named) <= stale and set(named) <= set(changed.engine.stages[name].needs)

    before = len(log(changed))
    changed.build()
    after = log(changed)[before:]
    assert sorted(line["stage"] for line in after if line["action"] == "computed") == sorted(EXPECTED_COMPUTED[change])
    assert sorted(line["stage"] for line in after if line["action"] == "loaded") == \
        sorted(set(STAGES) - EXPECTED_COMPUTED[change])
    assert set(states(changed).values()) == {"cached"}


def test_an_unchanged_upstream_result_leaves_its_dependents_loaded_through_an_accessor(tmp_path, warm_cache):
    tiny(tmp_path, warm_cache, _prompts(tmp_path)).build()
    _edit_summary_prompt(tmp_path, None)
    changed = reopen(tmp_path)
    before = len(log(changed))
    changed.failures()
    after = log(changed)[before:]
    assert [line["stage"] for line in after if line["action"] == "computed"] == ["summaries"]


# ------------------------------------------------------------------------------------------- c: no stale numbers

def test_recomputation_after_a_change_equals_a_fresh_study(tmp_path, warm_cache):
    edited = tiny(tmp_path / "edited", warm_cache, "bm25: {k1: 1.2}\n")
    edited.build()
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


# ------------------------------------------------------------------------------------------- e: declarations

def _one(ctx):
    return 1


def _honest(ctx):
    return ctx.get("one") + ctx.params.bm25.k1


def _sneaky(ctx):
    return ctx.get("one") + 1


def _peeks(ctx):
    return ctx.params.chunking.window_size


def _derived(ctx):
    return ctx.params.metric_ks()


def test_undeclared_reads_raise_stage_error(tmp_path):
    params = StudyParams.model_validate({"run": "toy", "dataset": {"inputs": ["chat.json"]}})
    db = store.open_store(tmp_path / "toy.sqlite")
    engine = Engine([
        Stage("one", _one),
        Stage("honest", _honest, needs=("one",), params=("bm25.k1",)),
        Stage("sneaky", _sneaky),
        Stage("peeks", _peeks, params=("bm25",)),
        Stage("derived", _derived, params=("retrieval.ks",)),
    ], params, db, tmp_path / "run")
    assert engine.get("honest") == pytest.approx(2.2, abs=1e-12)
    with pytest.raises(StageError, match=r"^stage sneaky reads stage one without declaring it in needs$"):
        engine.get("sneaky")
    with pytest.raises(StageError, match=r"^stage peeks reads params\.chunking without declaring it$"):
        engine.get("peeks")
    with pytest.raises(StageError, match=r"^stage derived uses params\.metric_ks\(\) without declaring "
                                         r"analysis\.failure_k, analysis\.recovery_ks$"):
        engine.get("derived")
    assert {row.name: row.state for row in engine.status()} == {
        "one": "cached", "honest": "cached", "sneaky": "missing", "peeks": "missing", "derived": "missing"}
    with pytest.raises(StageError, match=r"^stage late needs unknown stage\(s\) ghost$"):
        Engine([Stage("one", _one), Stage("late", _one, needs=("one", "ghost"))], params, db, tmp_path / "run")
    with pytest.raises(StageError, match=r"^unknown stage 'ghost'"):
        engine.get("ghost")


# ------------------------------------------------------------------------------------------- f: forget

def test_forget_drops_every_stage_and_the_next_build_computes_each_once(tmp_path, warm_cache):
    study = tiny(tmp_path, warm_cache)
    study.build()
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


# ------------------------------------------------------------------------------------------- g: pmrag status

def test_pmrag_status_prints_every_stage_and_computes_nothing(tmp_path, warm_cache):
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9]*_*.ipynb"))
    study = tiny(tmp_path, warm_cache, f"notebooks_dir: {REPO / 'notebooks'}\n")
    study.build()
    path = tmp_path / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "bm25: {k1: 1.5}\n", encoding="utf-8")
    logged = (study.run_dir / LOG_FILE).read_bytes()

    result = subprocess.run([sys.executable, "-m", "pmrag", "status", str(path)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    header, *lines = result.stdout.strip().splitlines()
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


def test_status_of_a_study_without_a_notebooks_folder_lists_its_stages(tmp_path, warm_cache):
    from pmrag.study.runner import status_lines

    tiny(tmp_path, warm_cache).build()
    lines = status_lines(tmp_path / "p.yaml")
    assert [line.split()[0] for line in lines[1:]] == STAGES


# ------------------------------------------------------------------------------------------- h: notebooks

def test_notebooks_only_load_what_the_build_computed(tmp_path, warm_cache):
    from pmrag.study.notebooks import execute_notebook

    study = tiny(tmp_path, warm_cache, f"notebooks_dir: {REPO / 'notebooks'}\n")
    study.build()
    built = log(study)
    for stem in ("04_hybrid_sweep", "05_bootstrap", "06_failure_analysis"):
        notebook = REPO / "notebooks" / f"{stem}.ipynb"
        result = execute_notebook(notebook, study.run_dir / "notebooks" / notebook.name, tmp_path / "p.yaml")
        assert "error" not in result, result
    lines = log(study)
    assert set(per_process(lines).values()) == {1}
    in_notebooks = lines[len(built):]
    pids = {line["pid"] for line in in_notebooks}
    assert len(pids) == 3 and {line["pid"] for line in built}.isdisjoint(pids)
    assert {line["action"] for line in in_notebooks} == {"loaded"}
    loaded = {line["stage"] for line in in_notebooks}
    assert {"sweep", "hybrids", "metrics", "reliability", "failures", "qrels", "chunks", "ingest"} <= loaded
    assert loaded <= set(STAGES)
    for table in ("table4_hybrids", "bootstrap_cis", "table7_top5_failures"):
        assert (study.run_dir / "tables" / f"{table}.csv").stat().st_size > 0
