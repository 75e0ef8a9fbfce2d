"""Overrides from a notebook's parameters cell (pmrag.study.overrides): dotted keys checked by the params schema,
a run folder of their own seeded with the study's cached stages, and a note saying what they change and why."""

import json
from pathlib import Path

import pytest

from pmrag.core.errors import ParamsError
from pmrag.study.engine import StageStatus
from pmrag.study.overrides import (apply_overrides, notebooks_after, overrides_note, overrides_run, parse_overrides,
                                   seed_run_folder)
from pmrag.study.params import load_params

from conftest import make_tiny_study, write_file

REPO = Path(__file__).parents[2]
TINY = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
        "hybrid: {pairings: [[raw_text_bm25, summary_bm25]], beta_step: 0.25}\n"
        "analysis: {aggregate_type: contextual, reference_retriever: embedding_text_bm25, "
        "diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\nbootstrap: {n_resamples: 200}\n")


def overrides_error(path, overrides) -> str:
    with pytest.raises(ParamsError) as info:
        load_params(path, overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_overrides_come_as_a_mapping_or_its_text_and_sections_spread_into_keys():
    assert parse_overrides(None) == parse_overrides("") == parse_overrides({}) == parse_overrides("{}") == {}
    assert parse_overrides('{"hybrid.beta_step": 0.1}') == {"hybrid.beta_step": 0.1}      # papermill's -p: text
    assert parse_overrides({"hybrid": {"beta_step": 0.1, "rrf_k": 30}}) == {"hybrid.beta_step": 0.1,
                                                                          "hybrid.rrf_k": 30}
    assert parse_overrides({"analysis.diagnostic_hybrid": ["a", "b", 0.5]}) == {
        "analysis.diagnostic_hybrid": ["a", "b", 0.5]}


def test_applying_overrides_sets_dotted_keys_on_a_copy():
    raw = {"run": "x", "hybrid": {"beta_step": 0.05}, "bootstrap": None}
    changed = apply_overrides(raw, {"hybrid.beta_step": 0.1, "bootstrap.n_resamples": 100, "bm25.k1": 1.5})
    assert changed == {"run": "x", "hybrid": {"beta_step": 0.1}, "bootstrap": {"n_resamples": 100}, "bm25": {"k1": 1.5}}
    assert raw == {"run": "x", "hybrid": {"beta_step": 0.05}, "bootstrap": None}


@pytest.mark.parametrize("overrides, expected", [
    ({"hybrid.beta_stp": 0.1}, "overrides: unknown key 'hybrid.beta_stp'"),
    ({"nosuch.key": 1}, "overrides: unknown key 'nosuch.key'"),
    ({"hybrid.beta_step.x": 1}, "overrides: unknown key 'hybrid.beta_step.x' ('hybrid.beta_step' holds a value"),
    ({"outputs_dir": "/tmp"}, "overrides: key 'outputs_dir': where a study reads and writes is the params file's"),
    ({"run": "other"}, "overrides: key 'run': where a study reads and writes"),
    ("[1, 2]", "overrides: expected a mapping of dotted keys"),
    ("{a: [", "overrides: not a mapping of dotted keys"),
])
def test_an_unknown_key_or_a_location_is_one_line_naming_it(tmp_path, overrides, expected):
    path = write_file(tmp_path, "run: r\n")
    assert overrides_error(path, overrides).startswith(expected)


def test_a_bad_value_is_the_schemas_one_line_naming_the_dotted_key(tmp_path):
    path = write_file(tmp_path, "run: r\ndataset: {synthetic: {enabled: true}}\n")
    assert overrides_error(path, {"hybrid.beta_step": -0.1}) == (
        "overrides: key 'hybrid.beta_step': Input should be greater than 0, got -0.1")
    assert overrides_error(path, {"bootstrap.n_resamples": "many"}).startswith(
        "overrides: key 'bootstrap.n_resamples': Input should be a valid integer")
    assert load_params(path, {"hybrid.beta_step": 0.1}).hybrid.beta_step == 0.1


def test_the_file_is_checked_alone_first_so_its_errors_name_the_file(tmp_path):
    path = write_file(tmp_path, "run: r\ndataset: {synthetic: {enabled: true}}\nhybrid: {beta_step: 2}\n")
    assert overrides_error(path, {"bm25.k1": 1.0}).startswith(f"{path}: key 'hybrid.beta_step'")


def test_the_same_overrides_name_the_same_run_folder():
    one = overrides_run("demo", {"hybrid.beta_step": 0.1, "bm25.k1": 1.5})
    assert one == overrides_run("demo", {"bm25.k1": 1.5, "hybrid.beta_step": 0.1})
    assert one.startswith("demo-overrides-") and len(one) == len("demo-overrides-") + 8
    assert one != overrides_run("demo", {"hybrid.beta_step": 0.2})


def test_seeding_copies_the_stage_cache_once_and_leaves_the_source_alone(tmp_path):
    import sqlite3

    source = tmp_path / "demo"
    (source / "stages").mkdir(parents=True)
    (source / "stages" / "sweep.pkl").write_bytes(b"x")
    (source / "tables").mkdir()
    (source / "tables" / "t.csv").write_text("a\n1\n")
    with sqlite3.connect(source / "study.sqlite") as conn:
        conn.execute("create table t (a)")
        conn.execute("insert into t values (1)")
    conn.close()
    target = tmp_path / "demo-overrides-x"
    assert seed_run_folder(source, target)
    assert (target / "stages" / "sweep.pkl").read_bytes() == b"x"
    assert not (target / "tables").exists()                     # the study's tables stay its own
    with sqlite3.connect(target / "study.sqlite") as conn:
        assert conn.execute("select a from t").fetchall() == [(1,)]
    conn.close()
    (target / "stages" / "sweep.pkl").write_bytes(b"y")
    assert not seed_run_folder(source, target)                  # seeded once: its own results are kept
    assert (target / "stages" / "sweep.pkl").read_bytes() == b"y"
    assert (source / "stages" / "sweep.pkl").read_bytes() == b"x"


def test_the_note_is_one_line_without_overrides_and_says_what_and_why_with_them(tmp_path):
    path = write_file(tmp_path, "run: r\noutputs_dir: out\ndataset: {synthetic: {enabled: true}}\n")
    base = load_params(path)
    assert overrides_note(base, None, {}, [], []) == (
        'params: p.yaml, no overrides (set overrides = {"hybrid.beta_step": 0.1} above to try a value)')
    changed = load_params(path, {"hybrid.beta_step": 0.1}).model_copy(update={"run": "r-overrides-12345678"})
    changed._source = base.path
    statuses = [StageStatus("chunks", "cached", ""), StageStatus("sweep", "stale", "param hybrid.beta_step: 0.05 → 0.1"),
                StageStatus("hybrids", "stale", "upstream sweep")]
    note = overrides_note(changed, base, {"hybrid.beta_step": 0.1}, statuses, ["05_bootstrap", "09_selection"])
    lines = note.split("\n")
    assert lines[0] == "params: p.yaml with overrides hybrid.beta_step = 0.1 (the file: 0.05)"
    assert "out/r-overrides-12345678/, a run folder of their own; the study's out/r/ stays" in lines[1]
    assert lines[3:5] == ["  sweep: param hybrid.beta_step: 0.05 → 0.1", "  hybrids: upstream sweep"]
    assert "chunks" not in note
    assert "notebooks 05, 09 and its run README" in lines[5] and "`pmrag study p.yaml`" in lines[5]
    assert "`pmrag status p.yaml`" in lines[5]


def test_the_notebooks_after_one_are_those_with_a_higher_number():
    found = [Path(f"{n}.ipynb") for n in ("01_a", "04_b", "05_c", "11_d")]
    assert notebooks_after(found, "04") == notebooks_after(found, "04_b") == ["05_c", "11_d"]
    assert notebooks_after(found, "11") == []


def test_with_stale_stages_the_notebooks_after_one_are_those_that_read_them():
    """By their declared reads: after 03, a stale sweep leaves 10 and 11 (no hybrid read) out; a notebook that
    declares nothing (a researcher's own) reads every stage; a stale retriever's run reaches every reader of runs."""
    found = [Path(f"{n}.ipynb") for n in ("03_retrievers", "04_hybrid_sweep", "05_bootstrap", "10_incomplete_gold",
                                          "11_make_gold", "12_mine")]
    assert notebooks_after(found, "03", ["sweep", "hybrids"]) == ["04_hybrid_sweep", "05_bootstrap", "12_mine"]
    assert notebooks_after(found, "03", ["runs:raw_text_bm25"]) == ["04_hybrid_sweep", "10_incomplete_gold",
                                                                    "11_make_gold", "12_mine"]
    assert notebooks_after(found, "03", []) == ["12_mine"]


@pytest.mark.integration
def test_a_notebook_run_by_papermill_with_overrides_says_what_it_recomputed_and_sweeps_more(tmp_path):
    """Notebook 04 on the tiny study, ``-p overrides`` as papermill's command line gives it (text): the recompute
    lines, in the words of ``pmrag status``, and a sweep of 5 β instead of 3; the study's run folder untouched."""
    import papermill as pm

    study = make_tiny_study(tmp_path, TINY)
    study.hybrids()   # the study's own sweep, cached
    before = sorted(p.name for p in (study.run_dir / "stages").iterdir())
    target = tmp_path / "04.ipynb"
    pm.execute_notebook(str(REPO / "notebooks" / "04_hybrid_sweep.ipynb"), str(target), cwd=str(tmp_path),
                        parameters={"params_path": str(tmp_path / "p.yaml"),
                                    "overrides": json.dumps({"hybrid.beta_step": 0.5})},
                        kernel_name="python3", progress_bar=False)
    import nbformat

    text = "".join(output.get("text", "") for cell in nbformat.read(target, 4).cells if cell.cell_type == "code"
                   for output in cell.get("outputs", []))
    assert "params: p.yaml with overrides hybrid.beta_step = 0.5 (the file: 0.25)" in text
    assert "  sweep: param hybrid.beta_step: 0.25 → 0.5" in text
    assert "recomputing sweep: param hybrid.beta_step: 0.25 → 0.5\nrecomputing hybrids: upstream sweep" in text
    assert "× 3 β" in text and "× 5 β" not in text
    assert sorted(p.name for p in (study.run_dir / "stages").iterdir()) == before
    assert not (study.run_dir / "tables").exists()
    assert (tmp_path / "out" / overrides_run("tiny", {"hybrid.beta_step": 0.5}) / "tables").is_dir()
