"""Notebook 04's look beyond the paper's pairings: each selection's numbers where the statistics and the multifusion
stage put them, and sentences that say what ran, what did not, and whose winner's curse is the larger."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.multisweep import MultiFusion
from pmrag.present import fusion_overview as fo


def held_out(in_sample, out_of_fold):
    summary = pd.DataFrame({"metric": ["recall@5", "mrr@5", "ndcg@5"], "in_sample": [in_sample, 0.5, 0.5],
                            "out_of_fold": [out_of_fold, 0.4, 0.4]})
    return SimpleNamespace(summary=summary.assign(gap=summary["in_sample"] - summary["out_of_fold"]))


def multi(search, in_sample, out_of_fold, configurations):
    summary = held_out(in_sample, out_of_fold).summary
    return MultiFusion(("a_bm25", "b_bm25", "c_vector"), "minmax", search, configurations, (0.5, 0.3, 0.2), summary,
                       pd.DataFrame(), 5, 10, 10)


def test_the_papers_selection_alone_says_what_would_run():
    statistics = SimpleNamespace(held_out=held_out(0.80, 0.74), configurations=(126, 0), held_out_broader=None,
                                 broader_pairings=0)
    overview = fo.fusion_overview(statistics, [], 6)
    assert list(overview.columns) == list(fo.COLUMNS) and list(overview["procedure"]) == [fo.PAPER_ROW]
    row = overview.iloc[0]
    assert (row["fused"], row["configurations"], row["recall@5 out of fold"]) == ("6 pairings", 126, 0.74)
    assert row["winner's curse"] == pytest.approx(0.06)
    text = fo.beyond_reading(overview, 6, 247, 21, 0)
    assert "no broader sweep ran" in text and "247 pairings (5187 configurations per fusion)" in text
    assert "hybrid.multi lists no fusion of three or more retrievers, so none ran" in text
    alone = fo.beyond_reading(overview, 6, 0, 21, 0)   # no lexical × dense pair for auto to add
    assert "holds no lexical × dense pair for hybrid.pairings: auto to add" in alone and "0 pairings" not in alone


def test_a_broader_sweep_and_multi_fusions_stand_beside_the_paper():
    statistics = SimpleNamespace(held_out=held_out(0.80, 0.74), configurations=(126, 5187),
                                 held_out_broader=held_out(0.86, 0.75), broader_pairings=247)
    results = [multi("grid", 0.83, 0.78, 66), multi("equal", 0.77, 0.77, 1)]
    overview = fo.fusion_overview(statistics, results, 6)
    assert list(overview["procedure"]) == [fo.PAPER_ROW, fo.BROADER_ROW, "minmax fusion, weights: grid",
                                           "minmax fusion, weights: equal"]
    assert list(overview["configurations"]) == [126, 5187, 66, 1]
    assert overview.loc[2, "weights"] == "0.5/0.3/0.2" and overview.loc[1, "fused"] == "247 pairings"
    text = fo.beyond_reading(overview, 247, 247, 21, 1)
    assert "the selection among all 5187 reaches 0.750 out of fold (+0.010) against 0.860 in sample" in text
    assert "its winner's curse is larger by 0.050" in text
    assert ("the best out of fold is minmax fusion, weights: grid of a_bm25 + b_bm25 + c_vector at 0.780, +0.040 "
            "beside the paper's selection") in text
    assert np.isclose(overview.loc[3, "winner's curse"], 0.0)
