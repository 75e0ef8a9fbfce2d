"""Each numbered notebook declares the stages it reads (pmrag.study.notebooks.NOTEBOOK_READS): its stage keys on
those and on the params keys they key on, so a change to the β grid leaves a notebook that reads no hybrid
current; under the runner a read of an undeclared stage fails the notebook with one line."""

from pathlib import Path
from typing import Annotated

import pytest

from conftest import make_tiny_study, write_file
from pmrag.core.errors import ParamsError
from pmrag.core.names import StageKey
from pmrag.study import notebooks
from pmrag.study.declare import DeclarationError, Reads, Runtime, keyed_params, read_stages, resolve_stage, stage
from pmrag.study.facade import Study
from pmrag.study.items import graph_stages, stage_items
from pmrag.study.notebooks import NOTEBOOK_READS, UndeclaredRead
from pmrag.study.params import load_params
from pmrag.study.pipeline import build_stages, relocatable_params
from pmrag.study.runner import numbered_notebooks, study_notebooks

REPO = Path(__file__).resolve().parents[2]
TINY = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25]}\n"
        "hybrid: {pairings: [[raw_text_bm25, summary_bm25]], beta_step: 0.25}\n"
        "analysis: {aggregate_type: contextual, reference_retriever: summary_bm25, "
        "diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\nbootstrap: {n_resamples: 200}\n")


@stage("reads the chunks", item="stem")
def chunks_reader(stem: str, reads: Annotated[tuple, Reads(lambda p, s: ["chunks"], unread_params=True)],
                  runtime: Runtime) -> tuple:
    return reads


def test_every_committed_notebook_declares_what_it_reads_and_each_name_is_a_stage():
    stems = [path.stem for path in numbered_notebooks(REPO / "notebooks")]
    assert sorted(NOTEBOOK_READS) == stems
    params = load_params(REPO / "params" / "demo.yaml")
    assert {name for reads in NOTEBOOK_READS.values() for name in reads} <= set(stage_items(params, [])) - {"notebook"}


def test_a_bare_name_reads_every_item_an_item_one_and_an_unknown_stage_is_named():
    families = {"ingest": ("",), "runs": ("a", "b"), "decomposition": ()}
    key = StageKey("notebook", "03_x")
    assert read_stages(key, ["runs", "ingest", "decomposition"], families) == (
        StageKey("runs", "a"), StageKey("runs", "b"), StageKey("ingest"))
    assert read_stages(key, ["runs:b", "runs:c"], families) == (StageKey("runs", "b"),)
    with pytest.raises(DeclarationError, match=r"^stage notebook:03_x reads stage 'sweeps', which is no stage"):
        read_stages(key, ["sweeps"], families)


def test_a_reader_keys_on_the_params_of_what_it_reads_and_of_their_upstream_only(tmp_path):
    params = load_params(write_file(tmp_path, "run: r\noutputs_dir: out\ndataset: {synthetic: {enabled: true}}\n"
                                    + TINY))
    built = {stage.key: stage for stage in build_stages(params)}
    keys = keyed_params([StageKey("chunks")], built)
    assert "chunking" in keys and "dataset.format" in keys           # chunks', then ingest's
    assert not any(k.startswith(("hybrid", "bootstrap")) for k in keys)
    assert "hybrid.beta_step" in keyed_params([StageKey("hybrids")], built)   # through the sweep it reads

    families = {name: tuple(str(item) for item in items) for name, items in stage_items(params, []).items()}
    resolved = resolve_stage(chunks_reader, params, families, item="01", param_json=relocatable_params(params),
                             built=built)
    assert resolved.needs == (StageKey("chunks"),)
    assert "chunking" in resolved.params and "dataset.show_chat_text" in resolved.params   # no stage keys the latter
    keyed_elsewhere = {k for stage in built.values() for k in stage.params} - set(keyed_params([StageKey("chunks")], built))
    assert {"hybrid.beta_step", "bootstrap"} <= keyed_elsewhere                     # the sweep's and the reliability's
    assert not keyed_elsewhere & set(resolved.params)
    assert not any(k.startswith(("hybrid.beta_step", "bootstrap", "outputs_dir")) for k in resolved.params)
    assert "hybrid.multi" in resolved.params   # no stage keys on it while it lists nothing: read as unread params


def test_a_beta_change_leaves_the_notebooks_that_read_no_hybrid_current_and_status_says_why(tmp_path):
    make_tiny_study(tmp_path, TINY + f"notebooks_dir: {REPO / 'notebooks'}\n")
    params_path = tmp_path / "p.yaml"
    found = numbered_notebooks(REPO / "notebooks")
    study = Study.from_params(params_path, found)
    for stem in ("01_chunking", "02_representations", "04_hybrid_sweep", "05_bootstrap"):
        study.engine.finish(StageKey("notebook", stem), {"notebook": f"notebooks/{stem}.ipynb", "produced": [],
                                                         "seconds": 0.0}, 0.0)
    params_path.write_text(params_path.read_text(encoding="utf-8").replace("beta_step: 0.25", "beta_step: 0.5"),
                           encoding="utf-8")
    status = {row.name: row for row in Study.from_params(params_path, found).status()}
    assert status["notebook:01_chunking"].state == status["notebook:02_representations"].state == "cached"
    assert status["notebook:04_hybrid_sweep"].state == status["notebook:05_bootstrap"].state == "stale"
    assert "param hybrid.beta_step: 0.25 → 0.5" in status["notebook:04_hybrid_sweep"].reason
    assert "upstream sweep" in status["notebook:04_hybrid_sweep"].reason


def test_a_notebook_that_reads_an_undeclared_stage_fails_with_one_line(tmp_path, monkeypatch):
    study = make_tiny_study(tmp_path, TINY)
    monkeypatch.setattr(notebooks, "_READER", "01_chunking")
    reader = Study.from_params(tmp_path / "p.yaml")
    assert len(reader.chunks()) == len(study.chunks())   # declared: read (its upstream ingest computed unasked)
    with pytest.raises(UndeclaredRead) as info:
        reader.sweep()
    assert str(info.value) == ("notebook 01_chunking.ipynb reads stage sweep, which it does not declare: add 'sweep' "
                               "to its reads in pmrag.study.notebooks.NOTEBOOK_READS")
    monkeypatch.setattr(notebooks, "_READER", "12_mine")     # a notebook that declares nothing reads anything
    assert len(Study.from_params(tmp_path / "p.yaml").sweep()) > 0


def test_the_graph_stages_exist_only_when_a_notebook_or_a_retriever_reads_them(tmp_path):
    def stages_of(extra: str) -> tuple:
        params = load_params(write_file(tmp_path, "run: r\noutputs_dir: out\ndataset: {synthetic: {enabled: true}}\n"
                                        + TINY + extra))
        return graph_stages(params), stage_items(params, [])["vectors"]

    assert stages_of("") == (("graph", "interest_relevance", "graph_evaluation"), ("summary", "raw_text"))
    assert stages_of("notebooks: [1, 3, 4]\n") == ((), ())   # BM25 only: no vectors either
    assert stages_of("notebooks: [1, 7]\n")[0] == ("graph", "interest_relevance", "graph_evaluation")
    assert stages_of("notebooks: [1, 99]\n")[0] == ("graph", "interest_relevance", "graph_evaluation")  # undeclared
    graph_retriever = TINY.replace("summary_bm25]}", "summary_bm25, summary_graph_interest]}", 1)
    assert graph_retriever != TINY
    params = load_params(write_file(tmp_path, "run: r\noutputs_dir: out\ndataset: {synthetic: {enabled: true}}\n"
                                    + graph_retriever + "notebooks: [1]\n"))
    assert graph_stages(params) == ("graph", "interest_relevance")


def test_a_study_executes_the_notebooks_it_lists_and_names_a_missing_one(tmp_path):
    folder = tmp_path / "nbs"
    folder.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb", "07_c.ipynb"):
        (folder / name).write_text("{}")
    head = f"run: r\noutputs_dir: out\nnotebooks_dir: {folder}\ndataset: {{synthetic: {{enabled: true}}}}\n"
    assert [p.name for p in study_notebooks(load_params(write_file(tmp_path, head)))] == [
        "01_a.ipynb", "02_b.ipynb", "07_c.ipynb"]
    assert [p.name for p in study_notebooks(load_params(write_file(tmp_path, head + "notebooks: [7, 1]\n")))] == [
        "01_a.ipynb", "07_c.ipynb"]
    with pytest.raises(ParamsError) as info:
        study_notebooks(load_params(write_file(tmp_path, head + "notebooks: [1, 5]\n")))
    assert str(info.value) == f"{tmp_path / 'p.yaml'}: key 'notebooks': no notebook numbered 5 in {folder}"
