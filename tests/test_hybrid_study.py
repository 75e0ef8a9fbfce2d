"""The Study's hybrid stage: every (pairing, beta) swept, the selected runs written and scored consistently."""

import numpy as np
import pytest

from pmrag.evaluate import trec
from conftest import make_tiny_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_tiny_study(
        tmp_path_factory.mktemp("hybrid"),
        "embedding: {representations: [raw_text]}\nbootstrap: {n_resamples: 100}\n"
        "hybrid: {pairings: [[summary_bm25, raw_text_vector], [raw_text_bm25, raw_text_vector], "
        "[raw_text_bm25, summary_vector]], beta_step: 0.25}\n",
    )


def test_sweep_covers_every_available_pairing_and_beta(study):
    assert study.hybrid_pairings() == [("summary_bm25", "raw_text_vector"), ("raw_text_bm25", "raw_text_vector")]
    assert study.hybrid_betas().tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    sweep = study.hybrid_sweep()
    n_questions = len(study.evaluable_questions())
    assert len(sweep) == 2 * 5 * n_questions
    assert len(study.hybrid_sweep_macro(sweep)) == 10


def test_selected_runs_are_written_and_score_like_the_sweep(study):
    macro = study.hybrid_sweep_macro()
    best = study.best_hybrids(macro)
    assert len(best) == 2
    rows = study.hybrid_runs(best)
    for row in best.itertuples(index=False):
        name = study.hybrid_name(row.bm25, row.vector, row.beta)
        assert name == f"hybrid:{row.bm25}+{row.vector}@{row.beta:.2f}"
        path = study.run_dir / "runs" / f"hybrid__{row.bm25}+{row.vector}__beta{row.beta:.2f}.trec"
        assert len(trec.read_run(path)) > 0
        scored = rows[rows["retriever"] == name]
        assert scored["recall@5"].mean() == pytest.approx(row[3], abs=1e-12)
        in_sweep = macro[(macro["bm25"] == row.bm25) & (macro["vector"] == row.vector)]
        assert row[3] == pytest.approx(in_sweep["recall@5"].max(), abs=1e-12)


def test_ceilings_bound_the_union(study):
    ceilings = study.candidate_ceilings()
    assert np.all(ceilings["oracle union recall"] >= ceilings[["bm25 recall@200", "vector recall@200"]].max(axis=1) - 1e-12)
