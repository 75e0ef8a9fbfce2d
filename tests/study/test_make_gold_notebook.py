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


@pytest.mark.integration
def test_on_a_line_export_without_gold_it_says_there_are_no_grades_yet(tmp_path):
    (tmp_path / "data").mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "line_json" / "family.json", tmp_path / "data" / "family.json")
    warm_cache(tmp_path / "cache")
    params = tmp_path / "p.yaml"
    params.write_text("run: line\noutputs_dir: out\ncache_dir: cache\ndataset: {inputs: [data/family.json]}\n"
                      "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
                      "hybrid: {pairings: [[raw_text_bm25, embedding_text_bm25]]}\n"
                      "analysis: {aggregate_type: contextual, diagnostic_hybrid: [raw_text_bm25, embedding_text_bm25, "
                      "0.5]}\n", encoding="utf-8")
    target = tmp_path / "executed" / "11_make_gold.ipynb"
    result = execute_notebook(REPO / "notebooks" / "11_make_gold.ipynb", target, params)
    assert "error" not in result, result
    cells = json.loads(target.read_text(encoding="utf-8"))["cells"]
    printed = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
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
