"""The Study's hybrid stages: every (pairing, beta) swept, the selected runs written and scored consistently."""

import numpy as np
import pytest

from pmrag.core.errors import ParamsError
from pmrag.core.names import HybridId
from pmrag.evaluate import sweep as hybrid_sweep
from pmrag.evaluate import trec
from conftest import make_tiny_study

pytestmark = pytest.mark.integration

RETRIEVERS = "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector]}\n"
PAIRINGS = "[[summary_bm25, raw_text_vector], [raw_text_bm25, raw_text_vector]]"
ANALYSIS = "analysis: {aggregate_type: contextual, diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_tiny_study(
        tmp_path_factory.mktemp("hybrid"),
        RETRIEVERS + ANALYSIS + "bootstrap: {n_resamples: 100}\n" f"hybrid: {{pairings: {PAIRINGS}, beta_step: 0.25}}\n",
    )


def test_sweep_covers_every_configured_pairing_and_beta(study):
    pairings = study.params.hybrid.pairing_ids()
    assert [tuple(map(str, p)) for p in pairings] == [("summary_bm25", "raw_text_vector"), ("raw_text_bm25", "raw_text_vector")]
    assert study.params.hybrid.betas() == (0.0, 0.25, 0.5, 0.75, 1.0)
    sweep = study.sweep()
    n_questions = len(study.evaluation().questions)
    assert len(sweep) == 2 * 5 * n_questions
    assert len(study.hybrids().macro) == 10
    assert len(hybrid_sweep.macro_by_configuration(sweep)) == 10


def test_a_pairing_with_a_retriever_the_study_does_not_run_is_refused(tmp_path):
    """A pairing naming a retriever outside retrieval.retrievers is refused on load, not silently dropped."""
    with pytest.raises(ParamsError, match=r"key 'hybrid\.pairings\[1\]': summary_vector is not in retrieval\.retrievers"):
        make_tiny_study(tmp_path, RETRIEVERS + ANALYSIS
                        + "hybrid: {pairings: [[summary_bm25, raw_text_vector], [raw_text_bm25, summary_vector]]}\n")


def test_selected_runs_are_written_and_score_like_the_sweep(study):
    hybrids = study.hybrids()
    macro, best = hybrids.macro, hybrids.best
    assert len(best) == 2
    rows = hybrids.selected_rows()
    assert [str(h) for h in hybrids.ids()] == list(dict.fromkeys(rows["retriever"]))
    for _, row in best.iterrows():
        name = HybridId.of(row.bm25, row.vector, row.beta)
        assert str(name) == f"hybrid:{row.bm25}+{row.vector}@{row.beta:.2f}"
        path = study.run_dir / "runs" / f"hybrid__{row.bm25}+{row.vector}__beta{row.beta:.2f}.trec"
        assert name.file_stem() == path.stem
        assert len(trec.read_run(path)) > 0
        scored = rows[rows["retriever"] == str(name)]
        assert scored["recall@5"].mean() == pytest.approx(row["recall@5"], abs=1e-12)
        in_sweep = macro[(macro["bm25"] == row.bm25) & (macro["vector"] == row.vector)]
        assert row["recall@5"] == pytest.approx(in_sweep["recall@5"].max(), abs=1e-12)


def test_ceilings_bound_the_union(study):
    ceilings = hybrid_sweep.candidate_ceilings(study.rankings(), study.evaluation().qrels,
                                               study.params.hybrid.pairing_ids(), study.params.retrieval.depth)
    assert len(ceilings) == 2
    assert np.all(ceilings["oracle union recall"] >= ceilings[["bm25 recall@200", "vector recall@200"]].max(axis=1) - 1e-12)
