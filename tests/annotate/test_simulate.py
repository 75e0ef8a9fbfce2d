"""Simulated annotators from a dataset's gold: every pooled chunk graded by the gold, and a seeded perturbation."""

import numpy as np
import pandas as pd
import pytest

from pmrag.annotate.simulate import gold_grades, perturbed_grades

POOLED = pd.DataFrame({"question_id": ["c1", "c1", "c1", "c2", "c3"], "chunk_id": ["a", "b", "c", "a", "z"]})
QRELS = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q9"], "chunk_id": ["a", "c", "a", "z"],
                      "relevance": [2, 1, 1, 2]})


def test_every_pooled_chunk_takes_its_gold_grade_and_zero_where_the_gold_has_none():
    graded = gold_grades(POOLED, QRELS, {"c1": "q1", "c2": "q2"})
    assert graded.values.tolist() == [["c1", "a", 2], ["c1", "b", 0], ["c1", "c", 1], ["c2", "a", 1], ["c3", "z", 0]]
    same_ids = gold_grades(POOLED.assign(question_id=["q1", "q1", "q1", "q2", "q9"]), QRELS)
    assert same_ids["relevance"].tolist() == [2, 0, 1, 1, 2]
    with pytest.raises(ValueError, match="qrels lacks column"):
        gold_grades(POOLED, QRELS.drop(columns="relevance"))


def test_the_perturbation_moves_a_seeded_share_by_one_step():
    rng = np.random.default_rng(0)
    grades = pd.DataFrame({"question_id": ["q"] * 400, "chunk_id": [f"c{i}" for i in range(400)],
                           "relevance": rng.integers(0, 3, 400)})
    moved = perturbed_grades(grades, 0.25, seed=7)
    changed = moved["relevance"] != grades["relevance"]
    assert changed.sum() == 100 and (abs(moved["relevance"] - grades["relevance"]) <= 1).all()
    assert moved["relevance"].between(0, 2).all() and grades["relevance"].tolist() == rng_copy(grades)
    assert moved.equals(perturbed_grades(grades, 0.25, seed=7))            # the same seed, the same annotator
    assert not moved.equals(perturbed_grades(grades, 0.25, seed=8))
    assert perturbed_grades(grades, 0.0, seed=7).equals(grades)
    with pytest.raises(ValueError, match="share must be between 0 and 1"):
        perturbed_grades(grades, 1.5, seed=7)


def rng_copy(grades):
    """The input's grades, read again: the perturbation returns a new frame and leaves its input as it was."""
    return np.random.default_rng(0).integers(0, 3, 400).tolist()
