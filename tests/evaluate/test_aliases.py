"""Methods with identical rankings (pmrag.evaluate.aliases): the vectorised grouping against a direct pairwise
comparison of every two methods' top-k lists, question by question."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate.aliases import alias_groups, alias_lists

CHUNKS = [f"c{i:03d}" for i in range(60)]
QUESTIONS = [f"q{i:02d}" for i in range(12)]


def random_ranking(rng, depth=15):
    return {q: list(rng.choice(CHUNKS, size=depth, replace=False)) for q in QUESTIONS}


def planted_rankings(seed=0, k=10):
    """Rankings with exact copies, copies changed only below rank k, changed at rank k, shorter lists and a
    missing question, so that every way of (not) being an alias occurs."""
    rng = np.random.default_rng(seed)
    base = random_ranking(rng)
    other = random_ranking(rng)
    below_k = {q: chunks[:k] + chunks[k:][::-1] for q, chunks in base.items()}         # same top k
    at_k = {q: chunks[:k - 1] + [chunks[k], chunks[k - 1]] + chunks[k + 1:] for q, chunks in base.items()}
    one_question = dict(base)
    one_question[QUESTIONS[3]] = base[QUESTIONS[3]][1::-1] + base[QUESTIONS[3]][2:]     # ranks 1 and 2 swapped, once
    short = {q: chunks[:k - 2] for q, chunks in base.items()}
    missing = {q: chunks for q, chunks in base.items() if q != QUESTIONS[0]}
    return {"a": other, "b": base, "c": below_k, "d": at_k, "e": dict(other), "f": one_question, "g": short,
            "h": dict(short), "i": missing, "j": random_ranking(rng)}


def direct_representatives(rankings, k, questions):
    """The first earlier method whose top-k list equals this one's on every question (a method is its own when
    none does), comparing Python lists pair by pair."""
    names = list(rankings)

    def top(name, q):
        return list(rankings[name].get(q, []))[:k]

    representative = {}
    for i, name in enumerate(names):
        representative[name] = next((earlier for earlier in names[:i]
                                     if all(top(earlier, q) == top(name, q) for q in questions)), name)
        representative[name] = representative[representative[name]]
    return representative


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_groups_equal_the_direct_pairwise_comparison(seed, k):
    rankings = planted_rankings(seed, k=10)
    groups = alias_groups(rankings, k, QUESTIONS)
    assert list(groups["method"]) == list(rankings)
    assert dict(zip(groups["method"], groups["representative"])) == direct_representatives(rankings, k, QUESTIONS)


def test_the_planted_cases():
    groups = alias_groups(planted_rankings(k=10), 10, QUESTIONS).set_index("method")["representative"]
    assert groups["e"] == "a"                 # an exact copy
    assert groups["c"] == "b"                 # differs only below rank k
    assert groups["d"] == "d"                 # two chunks swapped at ranks k − 1 and k
    assert groups["f"] == "f"                 # one question differs
    assert groups["g"] == "g" and groups["h"] == "g"   # equally short lists are aliases of each other only
    assert groups["i"] == "i"                 # one question not ranked at all
    deeper = alias_groups(planted_rankings(k=10), 15, QUESTIONS).set_index("method")["representative"]
    assert deeper["c"] == "c"                 # at depth 15 the reversed tail shows


def test_frames_mappings_and_the_questions_compared():
    rankings = planted_rankings(k=10)
    frames = {name: pd.DataFrame([(q, c, r) for q, chunks in lists.items() for r, c in enumerate(chunks, 1)],
                                 columns=["question_id", "chunk_id", "rank"]).sample(frac=1, random_state=4)
              for name, lists in rankings.items()}
    pd.testing.assert_frame_equal(alias_groups(frames, 10, QUESTIONS), alias_groups(rankings, 10, QUESTIONS))
    # only the questions asked for count: without q00, the method missing it is an alias of b
    rest = alias_groups(rankings, 10, QUESTIONS[1:]).set_index("method")["representative"]
    assert rest["i"] == "b"
    # default questions: every question any method ranks
    pd.testing.assert_frame_equal(alias_groups(rankings, 10), alias_groups(rankings, 10, QUESTIONS))


def test_alias_lists_and_errors():
    lists = alias_lists(alias_groups(planted_rankings(k=10), 10, QUESTIONS))
    assert lists.to_dict("records") == [{"representative": "a", "aliases": "e"}, {"representative": "b", "aliases": "c"},
                                        {"representative": "g", "aliases": "h"}]
    assert alias_lists(alias_groups({"x": {"q": ["c1"]}}, 5)).empty
    assert alias_groups({}, 5).empty
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            alias_groups({"x": {"q": ["c1"]}}, bad)
    frame = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "chunk_id": ["c1", "c2", "c1"], "rank": [1, 1, 1]})
    with pytest.raises(ValueError, match="the ranking of 'y' has rank 1 twice for question 'q1'"):
        alias_groups({"x": {"q1": ["c1"]}, "y": frame}, 5)
    with pytest.raises(ValueError, match="ranks must be integers ≥ 1"):
        alias_groups({"y": frame.assign(rank=[0, 1, 2])}, 5)
    with pytest.raises(ValueError, match="lacks column"):
        alias_groups({"y": frame.drop(columns="rank")}, 5)
