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


def test_equal_chunk_vectors_score_equally_wherever_they_lie():
    from pmrag.retrieve.dense import cosine_scores, distinct_rows, l2_normalise

    rng = np.random.default_rng(5)
    chunks = rng.normal(size=(1209, 384)).astype(np.float32)
    chunks[::3] = chunks[0]                       # one vector repeated at every tile position
    queries = rng.normal(size=(37, 384)).astype(np.float32)
    scores = cosine_scores(chunks, queries)
    assert (scores[:, ::3] == scores[:, :1]).all()
    first, inverse = distinct_rows(chunks)
    assert len(first) == 1209 - 403 + 1 and first[0] == 0 and (chunks[first][inverse] == chunks).all()
    np.testing.assert_allclose(scores, l2_normalise(queries) @ l2_normalise(chunks).T, rtol=0, atol=1e-6)
    distinct = chunks[first]                      # no repeats: the plain product, as it stands
    assert np.array_equal(cosine_scores(distinct, queries), l2_normalise(queries) @ l2_normalise(distinct).T)
