"""Pooling: the union of every retriever's top-k, checked against a brute-force union."""

import numpy as np
import pandas as pd
import pytest

from pmrag.annotate.pool import pool_chunks


def random_rankings(rng, n_retrievers=4, n_questions=7, n_chunks=30, depth=12):
    rankings = {}
    for r in range(n_retrievers):
        rows = []
        for q in range(n_questions):
            chosen = rng.choice(n_chunks, size=depth, replace=False)
            rows += [(f"q{q}", rank, f"c{c:02d}") for rank, c in enumerate(chosen, start=1)]
        rankings[f"r{r}"] = pd.DataFrame(rows, columns=["question_id", "rank", "chunk_id"])
    return rankings


@pytest.mark.parametrize("depth", [1, 3, 5, 12, 50])
def test_the_pool_is_the_union_of_every_top_k(depth):
    rankings = random_rankings(np.random.default_rng(depth))
    pooled = pool_chunks(rankings, depth)
    brute = {(q, c) for frame in rankings.values() for q, rank, c in frame.itertuples(index=False) if rank <= depth}
    assert set(zip(pooled["question_id"], pooled["chunk_id"])) == brute
    contributions = {(q, c, name, rank) for name, frame in rankings.items()
                     for q, rank, c in frame.itertuples(index=False) if rank <= depth}
    assert set(pooled.itertuples(index=False, name=None)) == contributions
    assert len(pooled) == len(contributions)


def test_a_subset_of_retrievers_pools_only_theirs_and_rows_are_ordered_by_best_rank():
    rankings = {"a": pd.DataFrame({"question_id": ["q", "q"], "rank": [1, 2], "chunk_id": ["x", "y"]}),
                "b": pd.DataFrame({"question_id": ["q", "q"], "rank": [1, 2], "chunk_id": ["y", "z"]}),
                "c": pd.DataFrame({"question_id": ["q"], "rank": [1], "chunk_id": ["w"]})}
    pooled = pool_chunks(rankings, 2, ["b", "a"])
    assert list(pooled.itertuples(index=False, name=None)) == [
        ("q", "x", "a", 1), ("q", "y", "b", 1), ("q", "y", "a", 2), ("q", "z", "b", 2)]


@pytest.mark.parametrize("depth, retrievers, message", [
    (0, None, "depth must be an integer ≥ 1"), (2.5, None, "depth must be an integer"),
    (3, [], "at least one retriever"), (3, ["nope"], "no ranking for retriever(s) 'nope'")])
def test_bad_arguments_are_refused_in_one_line(depth, retrievers, message):
    rankings = {"a": pd.DataFrame({"question_id": ["q"], "rank": [1], "chunk_id": ["x"]})}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pool_chunks(rankings, depth, retrievers)
