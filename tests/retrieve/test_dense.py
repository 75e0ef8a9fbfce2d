"""Dense scores are cosine similarities (eq. 10), whatever the vectors' norms."""

import numpy as np
import pytest

from pmrag.retrieve.dense import cosine_scores, l2_normalise


def test_scores_equal_cosine_similarity_computed_directly():
    rng = np.random.default_rng(0)
    chunks = rng.normal(size=(50, 16)) * rng.uniform(0.1, 10, size=(50, 1))
    queries = rng.normal(size=(4, 16)) * 3
    expected = np.array([[q @ d / (np.linalg.norm(q) * np.linalg.norm(d)) for d in chunks] for q in queries])
    assert np.allclose(cosine_scores(chunks, queries), expected, atol=1e-6)


def test_scale_of_a_vector_does_not_change_its_score():
    rng = np.random.default_rng(1)
    chunks = rng.normal(size=(10, 8)).astype(np.float32)
    query = rng.normal(size=8)
    scaled = chunks.copy()
    scaled[3] *= 1000
    assert np.allclose(cosine_scores(chunks, query), cosine_scores(scaled, query), atol=1e-6)


def test_zero_vector_scores_zero_and_dimensions_must_match():
    chunks = np.array([[0.0, 0.0], [1.0, 0.0]])
    assert cosine_scores(chunks, np.array([1.0, 0.0])).tolist() == [[0.0, 1.0]]
    assert np.allclose(np.linalg.norm(l2_normalise(np.array([[3.0, 4.0]])), axis=1), 1)
    with pytest.raises(ValueError, match="dimension"):
        cosine_scores(chunks, np.ones(3))
