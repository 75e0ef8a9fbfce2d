"""The multifusion stage: part of a study only when hybrid.multi lists something, reading the runs of those
retrievers alone and keyed on the keys it reads (so the paper's sweep is not recomputed when a list changes)."""

from pmrag.core.names import StageKey
from pmrag.core.params import StudyParams
from pmrag.study.items import fused_many
from pmrag.study.pipeline import build_stages

THREE = ["raw_text_bm25", "summary_bm25", "summary_vector"]


def params(multi=()):
    return StudyParams.model_validate({"run": "x", "dataset": {"synthetic": {"enabled": True}},
                                       "hybrid": {"multi": [list(m) for m in multi]}})


def stages(p):
    return {str(stage.key): stage for stage in build_stages(p)}


def test_the_stage_exists_only_when_hybrid_multi_lists_something():
    assert "multifusion" not in stages(params())
    stage = stages(params([THREE, [*THREE[:2], "embedding_text_vector"]]))["multifusion"]
    assert {key for key in stage.needs if key.name == "runs"} == {
        StageKey("runs", name) for name in [*THREE, "embedding_text_vector"]}
    assert {"hybrid.multi", "hybrid.multi_step", "statistics.n_seeds"} <= set(stage.params)
    assert "hybrid.pairings" not in stage.params and "bootstrap.n_resamples" not in stage.params


def test_the_sweep_is_not_keyed_on_the_multi_fusion_keys():
    before, after = stages(params())["sweep"], stages(params([THREE]))["sweep"]
    assert dict(before.params) == dict(after.params) and not any(k.startswith("hybrid.multi") for k in before.params)


def test_fused_many_lists_each_retriever_once_in_list_order():
    assert [str(r) for r in fused_many(params([THREE, ["summary_vector", "raw_text_vector", "raw_text_bm25"]]))] == [
        *THREE, "raw_text_vector"]
