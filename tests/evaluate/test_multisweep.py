"""Weights of a k-retriever fusion chosen on training folds only and scored out of fold: the vectorised metrics
against pmrag.metrics of the fused run, the in-sample choice against a brute-force search, each fold's choice made
on its training questions alone, equal weights (nothing chosen: no winner's curse) and coordinate ascent."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.metrics import per_question_metrics
from pmrag.evaluate.multisweep import WeightedLayout, multi_fusion, multi_fusion_table, weights_label
from pmrag.evaluate.selection import fold_masks
from pmrag.retrieve.multifusion import fuse_many, simplex_grid

NAMES = ("raw_text_bm25", "summary_bm25", "raw_text_vector")


def study(seed=0, n_q=30, depth=30, n_chunks=80):
    rng = np.random.default_rng(seed)
    chunk_ids = np.array([f"c{i:03d}" for i in range(n_chunks)])
    questions = [f"q{i:02d}" for i in range(n_q)]
    gold = {q: rng.choice(chunk_ids, 3, replace=False) for q in questions}
    rankings = {}
    for r, name in enumerate(NAMES):
        rows = []
        for q in questions:
            # each list puts some of the gold near the top, more or less reliably
            pool = list(dict.fromkeys([*gold[q][: r + 1], *rng.choice(chunk_ids, depth * 2)]))
            order = rng.permutation(pool[:depth]) if rng.random() < 0.4 else pool[:depth]
            rows.append(pd.DataFrame({"question_id": q, "chunk_id": order, "rank": np.arange(1, depth + 1),
                                      "score": np.sort(rng.random(depth))[::-1] * (r + 1)}))
        rankings[name] = pd.concat(rows, ignore_index=True)
    qrels = pd.DataFrame([(q, c, 2) for q in questions for c in gold[q]],
                         columns=["question_id", "chunk_id", "relevance"])
    types = pd.Series(["a", "b", "c"] * (n_q // 3), index=questions)
    return rankings, qrels, types


@pytest.fixture(scope="module")
def data():
    return study()


@pytest.mark.parametrize("fusion", ["minmax", "rrf"])
def test_vectorised_metrics_equal_those_of_the_fused_run(data, fusion):
    rankings, qrels, _ = data
    frames = [rankings[n] for n in NAMES]
    grid = simplex_grid(3, 0.25)
    values = WeightedLayout(frames, qrels).values(grid, fusion, rrf_k=5)
    for g in (3, len(grid) - 1):
        expected = per_question_metrics(fuse_many(frames, grid[g], fusion, rrf_k=5), qrels, ks=(5,))
        got = values[:, :, g].T
        np.testing.assert_allclose(got, expected[["recall@5", "mrr@5", "ndcg@5"]].to_numpy(), rtol=0, atol=1e-12)


def brute_force(per_weight, questions):
    """The paper's rule by hand: the first weights (tie-break order) whose rounded (Recall, nDCG, MRR)@5 is largest."""
    best, best_key = None, None
    for w, metrics in per_weight.items():
        m = metrics.loc[questions].mean()
        key = tuple(np.round([m["recall@5"], m["ndcg@5"], m["mrr@5"]], 12))
        if best_key is None or key > best_key:
            best, best_key = w, key
    return best, best_key


def test_grid_choice_in_sample_and_on_each_training_part(data):
    rankings, qrels, types = data
    result = multi_fusion(rankings, NAMES, qrels, types, search="grid", step=0.25, n_splits=3, n_repeats=1)
    grid = simplex_grid(3, 0.25)
    assert result.configurations == len(grid)
    order = np.argsort(np.round(np.abs(grid - 1 / 3).sum(axis=1), 10), kind="stable")   # ties: nearest equal first
    values = WeightedLayout([rankings[n] for n in NAMES], qrels).values(grid, "minmax")   # = the fused runs' (above)
    questions = types.sort_index().index
    per_weight = {tuple(grid[g]): pd.DataFrame(values[:, :, g].T, index=questions,
                                               columns=["recall@5", "mrr@5", "ndcg@5"]) for g in order}
    _, key = brute_force(per_weight, questions)
    summary = result.summary.set_index("metric")
    assert summary.at["recall@5", "in_sample"] == pytest.approx(key[0], abs=1e-12)
    held_out, _ = fold_masks(types.sort_index(), 3, 1, 0)
    oof = np.zeros(len(types))
    for fold in held_out:
        w, _ = brute_force(per_weight, questions[~fold])
        oof[fold] = per_weight[w]["recall@5"].to_numpy()[fold]
    assert summary.at["recall@5", "out_of_fold"] == pytest.approx(oof.mean(), abs=1e-12)
    assert summary.at["recall@5", "gap"] == pytest.approx(key[0] - oof.mean(), abs=1e-12)
    assert result.chosen["times"].sum() == 3


def test_equal_weights_choose_nothing_so_in_sample_is_out_of_fold(data):
    rankings, qrels, types = data
    result = multi_fusion(rankings, NAMES, qrels, types, fusion="rrf", search="equal", n_splits=3, n_repeats=2)
    assert result.configurations == 1 and result.weights == pytest.approx((1 / 3,) * 3)
    np.testing.assert_allclose(result.summary["gap"], 0.0, atol=1e-12)


def test_coordinate_ascent_ends_where_no_single_weight_on_the_grid_does_better(data):
    rankings, qrels, types = data
    folds = dict(n_splits=3, n_repeats=1, step=0.25)
    ascent = multi_fusion(rankings, NAMES, qrels, types, search="coordinate ascent", **folds)
    equal = multi_fusion(rankings, NAMES, qrels, types, search="equal", **folds)
    layout = WeightedLayout([rankings[n] for n in NAMES], qrels)   # its metrics = the fused runs' (above)

    def key(w):
        recall, mrr, ndcg = layout.values(np.asarray(w)[None, :], "minmax")[:, :, 0].mean(axis=1)
        return tuple(np.round([recall, ndcg, mrr], 12))

    reached = key(np.array(ascent.weights))
    assert reached[0] == pytest.approx(ascent.summary.at[0, "in_sample"], abs=1e-12)
    assert reached >= key(np.full(3, 1 / 3)) and reached[0] >= equal.summary.at[0, "in_sample"]
    for r in range(3):
        for level in (0.0, 0.25, 0.5, 0.75, 1.0):
            rest = np.delete(np.array(ascent.weights), r)
            rest = rest * (1 - level) / rest.sum() if rest.sum() > 0 else np.full(2, (1 - level) / 2)
            assert key(np.insert(rest, r, level)) <= reached
    assert sum(ascent.weights) == pytest.approx(1.0) and ascent.configurations >= 16


def test_the_table_and_bad_searches(data):
    rankings, qrels, types = data
    result = multi_fusion(rankings, NAMES, qrels, types, search="equal", n_splits=3, n_repeats=1)
    table = multi_fusion_table([result])
    assert table.loc[0, "retrievers"] == " + ".join(NAMES) and table.loc[0, "weights"] == "0.333/0.333/0.333"
    assert table.loc[0, "recall@5 out of fold"] == result.summary.at[0, "out_of_fold"]
    assert weights_label([0.5, 0.25, 0.25]) == "0.5/0.25/0.25"
    with pytest.raises(ValueError, match="search must be one of"):
        multi_fusion(rankings, NAMES, qrels, types, search="random")
