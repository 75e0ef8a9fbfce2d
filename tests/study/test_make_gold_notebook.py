"""Notebook 11 (making gold) on a history without gold — a LINE export, no questions file — runs to the end and
says plainly that there is nothing to grade yet; its annotation store is a file of the run folder, the study's
store gains no candidate, pool or grade."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import warm_cache
from pmrag.core import store
from pmrag.study.notebooks import execute_notebook

REPO = Path(__file__).resolve().parents[2]


BM25_ONLY = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
             "hybrid: {pairings: [[raw_text_bm25, embedding_text_bm25]]}\n")   # no vectors to compute
DIAGNOSTIC = "diagnostic_hybrid: [raw_text_bm25, embedding_text_bm25, 0.5]"


def executed_text(params: Path, folder: Path) -> str:
    """Notebook 11 executed with ``params`` as the runner executes it (undeclared reads fail it): what it printed."""
    target = folder / "11_make_gold.ipynb"
    result = execute_notebook(REPO / "notebooks" / "11_make_gold.ipynb", target, params)
    assert "error" not in result, result
    cells = json.loads(target.read_text(encoding="utf-8"))["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


@pytest.mark.integration
def test_on_a_line_export_without_gold_it_says_there_are_no_grades_yet(tmp_path):
    (tmp_path / "data").mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "line_json" / "family.json", tmp_path / "data" / "family.json")
    warm_cache(tmp_path / "cache")
    params = tmp_path / "p.yaml"
    params.write_text("run: line\noutputs_dir: out\ncache_dir: cache\ndataset: {inputs: [data/family.json]}\n"
                      + BM25_ONLY + "analysis: {aggregate_type: contextual, " + DIAGNOSTIC + "}\n", encoding="utf-8")
    printed = executed_text(params, tmp_path / "executed")
    assert "The study has no questions to type in: type yours in the entry widget below" in printed
    assert "No grades yet: grade the pool in the grading widget above" in printed
    assert "Nothing to export yet: no annotator has graded the pool." in printed
    assert "SIMULATED" not in printed and str(tmp_path) not in printed          # no absolute path in the outputs
    run = tmp_path / "out" / "line"
    assert (run / "make_gold" / "annotation.sqlite").is_file()
    engine = store.open_store(run / "study.sqlite")
    try:
        for table in ("question_candidates", "pool", "judgments"):
            assert store.read_table(engine, table).empty, table
    finally:
        engine.dispose()


@pytest.mark.integration
def test_on_the_embedded_demo_corpus_it_grades_with_simulated_annotators_reading_only_what_it_declares(tmp_path):
    """The demo's branch (``simulated_annotator: auto`` on the embedded corpus) reads the dataset's chunk-level gold;
    run as the runner runs it, an undeclared read would fail the notebook."""
    params = tmp_path / "p.yaml"
    params.write_text("run: demo\noutputs_dir: out\ncache_dir: cache\n"
                      "dataset: {synthetic: {enabled: true, n_messages: 1100, n_questions: 6}}\n"
                      + BM25_ONLY + "analysis: {" + DIAGNOSTIC + "}\n", encoding="utf-8")
    printed = executed_text(params, tmp_path / "executed")
    assert "SIMULATED grades (no person graded)" in printed and "wrote make_gold/gold/" in printed
    assert "No grades yet" not in printed and str(tmp_path) not in printed
    run = tmp_path / "out" / "demo"   # the history was copied after the notebook's study had stored it
    counts = {}
    for name in ("study.sqlite", "make_gold/annotation.sqlite"):
        engine = store.open_store(run / name)
        try:
            counts[name] = [len(store.read_table(engine, table)) for table in ("messages", "chunk_messages")]
        finally:
            engine.dispose()
    assert counts["make_gold/annotation.sqlite"] == counts["study.sqlite"] and counts["study.sqlite"][0] > 1000
