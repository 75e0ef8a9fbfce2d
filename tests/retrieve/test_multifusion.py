"""Fusion of k retrievers (eq. 11–15 with one weight per list, weighted RRF over many): by hand, against the pair
fusion at k = 2, the sweep's vectorised scores against the fused run, the simplex grid, and agreement with ranx's
``wsum`` of min-max runs and ``rrf``."""

import math

import numpy as np
import pandas as pd
import pytest
from ranx import Run
from ranx import fuse as ranx_fuse

from pmrag.retrieve.fusion import fuse
from pmrag.retrieve.multifusion import MULTI_FUSIONS, fuse_many, layout, scores, simplex_grid


def ranking(lists):
    rows = [(q, c, i + 1, s) for q, chunks in lists.items() for i, (c, s) in enumerate(chunks.items())]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


def random_lists(seed, k=3, n_q=5, depth=40, n_chunks=120):
    rng = np.random.default_rng(seed)
    chunk_ids = np.array([f"c{i:04d}" for i in range(n_chunks)])
    frames = []
    for r in range(k):
        rows = []
        for q in range(n_q):
            score = np.sort(rng.random(depth) * (r + 1) * 5)[::-1]
            rows.append(pd.DataFrame({"question_id": f"q{q}", "chunk_id": rng.choice(chunk_ids, depth, replace=False),
                                      "rank": np.arange(1, depth + 1), "score": score}))
        frames.append(pd.concat(rows, ignore_index=True))
    return frames


def test_weighted_minmax_and_rrf_by_hand():
    a = ranking({"q": {"x": 3.0, "y": 1.0}})
    b = ranking({"q": {"y": 4.0, "z": 2.0}})
    c = ranking({"q": {"z": 9.0, "x": 0.0}})
    fused = fuse_many([a, b, c], [0.5, 0.3, 0.2])
    # ŝ: a x 1, y 0; b y 1, z 0; c z 1, x 0
    assert dict(zip(fused["chunk_id"], fused["score"])) == pytest.approx({"x": 0.5, "y": 0.3, "z": 0.2})
    assert list(fused["rank"]) == [1, 2, 3]
    rrf = fuse_many([a, b, c], [0.5, 0.3, 0.2], fusion="rrf", rrf_k=1)
    expected = {"x": 0.5 / 2 + 0.2 / 3, "y": 0.5 / 3 + 0.3 / 2, "z": 0.3 / 3 + 0.2 / 2}
    assert dict(zip(rrf["chunk_id"], rrf["score"])) == pytest.approx(expected, abs=1e-15)


def test_ties_go_to_the_larger_chunk_id():
    a = ranking({"q": {"a": 1.0, "b": 1.0}})
    b = ranking({"q": {"c": 1.0}})
    c = ranking({"q": {"d": 1.0}})
    assert list(fuse_many([a, b, c], [1 / 3] * 3)["chunk_id"]) == ["d", "c", "b", "a"]


@pytest.mark.parametrize("fusion", ["minmax", "rrf"])
def test_two_lists_rank_as_the_pair_fusion_with_beta_on_the_first(fusion):
    first, second = random_lists(1, k=2)
    for beta in (0.0, 0.3, 1.0):
        ours = fuse_many([first, second], [beta, 1 - beta], fusion=fusion, rrf_k=7)
        pair = fuse(first, second, beta, fusion, rrf_k=7)
        pd.testing.assert_frame_equal(ours.reset_index(drop=True), pair.reset_index(drop=True),
                                      check_exact=False, atol=1e-12, rtol=0)


def test_scores_of_many_weights_at_once_equal_each_fused_run():
    frames = random_lists(2)
    lists = layout(frames)
    grid = simplex_grid(3, 0.25)
    many = scores(lists, grid, "minmax")
    for g in (0, 4, len(grid) - 1):
        run = fuse_many(frames, grid[g])
        top = run[run["rank"] == 1].set_index("question_id")["score"]
        np.testing.assert_allclose(many[g].max(axis=1), top.reindex(lists.question_ids).to_numpy(), rtol=0, atol=0)


def test_the_simplex_grid_has_every_composition_once():
    grid = simplex_grid(3, 0.1)
    assert grid.shape == (math.comb(12, 2), 3)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0, atol=1e-12)
    assert len({tuple(w) for w in grid}) == len(grid) and (grid >= 0).all()
    assert simplex_grid(4, 0.5).shape == (math.comb(5, 3), 4)
    with pytest.raises(ValueError, match="1/step must be a whole number"):
        simplex_grid(3, 0.3)
    with pytest.raises(ValueError, match="k must be an integer ≥ 2"):
        simplex_grid(1, 0.1)


def test_bad_weights_and_fusions_are_refused():
    frames = random_lists(3)
    with pytest.raises(ValueError, match="one weight per ranking"):
        fuse_many(frames, [0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative and sum to 1"):
        fuse_many(frames, [0.5, 0.6, -0.1])
    with pytest.raises(ValueError, match="fusion must be one of minmax, rrf"):
        fuse_many(frames, [1 / 3] * 3, fusion="combmnz")
    with pytest.raises(ValueError, match="at least two rankings"):
        layout(frames[:1])
    assert MULTI_FUSIONS.names() == ("minmax", "rrf")


def ranx_run(frame):
    lists = {}
    for q, c, s in zip(frame["question_id"], frame["chunk_id"], frame["score"]):
        lists.setdefault(str(q), {})[str(c)] = float(s)
    return Run(lists)


@pytest.mark.agreement
def test_weighted_minmax_agrees_with_ranx_wsum_of_min_max_runs():
    frames = random_lists(4, k=4)
    for weights in ([0.25] * 4, [0.4, 0.3, 0.2, 0.1], [0.0, 0.5, 0.0, 0.5]):
        ours = fuse_many(frames, weights)
        theirs = ranx_fuse(runs=[ranx_run(f) for f in frames], norm="min-max", method="wsum",
                           params={"weights": list(weights)}).to_dict()
        assert sum(len(v) for v in theirs.values()) == len(ours)
        expected = np.array([theirs[q][c] for q, c in zip(ours["question_id"], ours["chunk_id"])])
        np.testing.assert_allclose(ours["score"].to_numpy(), expected, rtol=0, atol=1e-9)


@pytest.mark.agreement
def test_equal_weight_rrf_agrees_with_ranx_rrf_over_many_runs():
    frames = random_lists(5, k=3)   # distinct scores: ranx's ranks (by score) are the rankings' own
    ours = fuse_many(frames, [1 / 3] * 3, fusion="rrf", rrf_k=60)
    theirs = ranx_fuse(runs=[ranx_run(f) for f in frames], norm=None, method="rrf", params={"k": 60}).to_dict()
    expected = np.array([theirs[q][c] for q, c in zip(ours["question_id"], ours["chunk_id"])]) / 3
    np.testing.assert_allclose(ours["score"].to_numpy(), expected, rtol=0, atol=1e-12)
