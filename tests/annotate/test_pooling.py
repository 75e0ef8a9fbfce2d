"""The stored pool: union of the retrievers' top-k and the recovered chunks, origins, a blind seeded order."""

import json

import numpy as np
import pandas as pd
import pytest

from pmrag.annotate.pooling import blind_positions, build_pool, pool_sizes, rankings_of, read_pool, write_pool
from pmrag.core import store
from tests.annotate.test_pool import random_rankings


@pytest.mark.parametrize("depth", [1, 5, 12])
def test_the_pool_is_the_brute_force_union_with_every_origin(depth):
    rankings = random_rankings(np.random.default_rng(depth))
    recovered = pd.DataFrame({"candidate_id": ["q1", "q1", "q1", "q9"], "hint": [0, 1, 1, 0],
                              "chunk_id": ["c99", "c99", "c00", "c98"], "message_id": ["m"] * 4})
    pooled = build_pool(rankings, depth, None, recovered, seed=3)
    brute: dict = {}
    for name, frame in rankings.items():
        for q, rank, c in frame.itertuples(index=False):
            if rank <= depth:
                brute.setdefault((q, c), []).append({"retriever": name, "rank": rank})
    for q, h, c, _ in recovered.itertuples(index=False):
        brute.setdefault((q, c), []).append({"hint": h})
    got = {(q, c): json.loads(o) for q, c, o in zip(pooled["question_id"], pooled["chunk_id"], pooled["origins"])}
    assert got.keys() == brute.keys()
    for key, origins in brute.items():
        assert sorted(map(json.dumps, got[key])) == sorted(map(json.dumps, origins))
    for _, chunks in pooled.groupby("question_id"):
        assert sorted(chunks["position"]) == list(range(len(chunks)))


def test_blind_order_is_seeded_per_question_and_independent_of_other_questions():
    chunk_ids = [f"c{i:02d}" for i in range(20)]
    first = blind_positions("q1", chunk_ids, 0)
    assert sorted(first) == list(range(20))
    assert first.tolist() == blind_positions("q1", chunk_ids[::-1], 0)[::-1].tolist()   # input order does not matter
    assert first.tolist() != blind_positions("q1", chunk_ids, 1).tolist()
    assert first.tolist() != blind_positions("q2", chunk_ids, 0).tolist()
    rankings = random_rankings(np.random.default_rng(0), n_questions=3)
    extra = random_rankings(np.random.default_rng(9), n_questions=2)
    more = {name: pd.concat([extra[name].assign(question_id="x" + extra[name]["question_id"]), frame])
            for name, frame in rankings.items()}          # two more questions, pooled first
    few, many = build_pool(rankings, 5, None), build_pool(more, 5, None)
    assert few.equals(many[many["question_id"].isin(few["question_id"])].reset_index(drop=True))


def test_not_alphabetical_nor_by_rank():
    rankings = {"r": pd.DataFrame({"question_id": ["q"] * 30, "rank": range(1, 31), "chunk_id": [f"c{i:02d}" for i in range(30)]})}
    pooled = build_pool(rankings, 30, None)
    assert pooled["chunk_id"].tolist() != sorted(pooled["chunk_id"])


def test_only_hints_and_chosen_questions():
    recovered = pd.DataFrame({"candidate_id": ["a", "b"], "hint": [0, 0], "chunk_id": ["x", "y"]})
    pooled = build_pool({}, 10, None, recovered, questions=["b"])
    assert pooled[["question_id", "chunk_id", "origins"]].values.tolist() == [["b", "y", '[{"hint":0}]']]
    assert build_pool({}, 10, None).empty


def test_write_read_and_sizes(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    rankings = random_rankings(np.random.default_rng(1), n_questions=2)
    recovered = pd.DataFrame({"candidate_id": ["q0"], "hint": [0], "chunk_id": ["c_hint"]})
    pooled = build_pool(rankings, 3, ["r0", "r1"], recovered)
    assert write_pool(engine, "p", pooled) == len(pooled)
    write_pool(engine, "other", pooled.iloc[:1])
    back = read_pool(engine, "p")
    assert back.sort_values(["question_id", "position"]).reset_index(drop=True).equals(
        pooled.sort_values(["question_id", "position"]).reset_index(drop=True))
    write_pool(engine, "p", pooled.iloc[:2])                     # a name written again is replaced
    assert len(read_pool(engine, "p")) == 2 and len(read_pool(engine, "other")) == 1
    sizes = pool_sizes(pooled).set_index("question_id")
    assert sizes.loc["q0", "by_hint"] == 1 and sizes["chunks"].sum() == len(pooled)
    assert (sizes["by_retriever"] <= sizes["chunks"]).all()
    with pytest.raises(ValueError, match="pool name"):
        write_pool(engine, "my pool", pooled)


def test_bad_depth_and_unknown_retriever():
    rankings = random_rankings(np.random.default_rng(2))
    with pytest.raises(ValueError, match="depth"):
        build_pool(rankings, 0, None)
    with pytest.raises(ValueError, match="no ranking for retriever"):
        build_pool(rankings, 3, ["nope"])


def test_rankings_of_keeps_the_named_questions_under_their_new_ids():
    rankings = {"a": pd.DataFrame({"question_id": ["q1", "q1", "q2", "q3"], "rank": [1, 2, 1, 1],
                                   "chunk_id": ["c1", "c2", "c3", "c4"]})}
    renamed = rankings_of(rankings, {"q1": "cand_1", "q3": "cand_3"})
    assert renamed["a"].values.tolist() == [["cand_1", 1, "c1"], ["cand_1", 2, "c2"], ["cand_3", 1, "c4"]]
    assert rankings["a"]["question_id"].tolist() == ["q1", "q1", "q2", "q3"]          # the input is left as it was
    pooled = build_pool(renamed, 1, ["a"], seed=0)
    assert pooled[["question_id", "chunk_id"]].values.tolist() == [["cand_1", "c1"], ["cand_3", "c4"]]
