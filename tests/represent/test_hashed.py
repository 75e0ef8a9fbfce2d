"""pmrag.represent.hashed: the hashed-stand-in embedding backend (deterministic, unit length, not a model, named as
such), chosen only when the params name it."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from pmrag.core.params import HASHED_STAND_IN_LABEL, EmbeddingSection
from pmrag.represent.embed import EmbeddingCache, embed_passages, embed_with_cache, embedder_model_id, make_embedder
from pmrag.represent.hashed import HashedStandInEmbedder, hashed_vectors

TEXTS = ["明日の夕方6時に駅の改札で待ってるね", "明日の夕方7時に駅の改札で待ってるよ", "新しいカフェのケーキが美味しかった",
         "The meeting moved to Friday.", "", "あ"]


def test_vectors_are_deterministic_unit_length_and_depend_on_the_seed():
    first = hashed_vectors(TEXTS, 64)
    assert first.dtype == np.float32 and first.shape == (len(TEXTS), 64)
    np.testing.assert_array_equal(first, hashed_vectors(list(TEXTS), 64))
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)   # the empty text too (dimension 0)
    np.testing.assert_array_equal(first[4], np.eye(64, dtype=np.float32)[0])
    assert not np.array_equal(hashed_vectors(TEXTS, 64, seed=1), first)
    assert not np.array_equal(hashed_vectors(TEXTS, 128)[:, :64], first)


def test_known_values_do_not_move():
    """A change of the hashing would silently move every stand-in number: two vectors pinned (signed counts of the
    characters and character pairs over 8 dimensions, scaled to unit length)."""
    counts = np.array([[0, 2, 0, 0, 0, 0, 1, 0], [2, 0, 0, 0, -3, -1, 1, 0]], dtype=np.float64)   # 3 and 7 n-grams
    expected = counts / np.linalg.norm(counts, axis=1, keepdims=True)
    np.testing.assert_allclose(hashed_vectors(["ab", "明日の駅"], 8), expected, atol=1e-7)


def test_similar_texts_are_closer_than_unrelated_ones():
    vectors = hashed_vectors(TEXTS, 256)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.6
    assert similarity[0, 1] > similarity[0, 2] + 0.4 and similarity[0, 1] > similarity[0, 3] + 0.4


def test_a_pair_never_spans_two_texts_so_batches_do_not_change_a_vector():
    one_by_one = np.concatenate([hashed_vectors([t], 32) for t in TEXTS])
    np.testing.assert_array_equal(HashedStandInEmbedder(32, batch_size=2).embed(TEXTS, "query"), one_by_one)
    np.testing.assert_array_equal(HashedStandInEmbedder(32).embed(TEXTS, "passage"), one_by_one)
    assert HashedStandInEmbedder(32).embed([], "query").shape == (0, 32)


@pytest.mark.parametrize("dim", [1, 0, 2.5, True])
def test_a_bad_dimension_or_kind_is_refused(dim):
    with pytest.raises(ValueError, match="dim must be an integer"):
        hashed_vectors(["x"], dim)
    with pytest.raises(ValueError, match="kind must be"):
        HashedStandInEmbedder(8).embed(["x"], "document")


def test_only_params_that_name_it_choose_it_and_it_names_itself():
    section = EmbeddingSection(backend="hashed-stand-in", stand_in_dim=32)
    embedder = make_embedder(section)
    assert isinstance(embedder, HashedStandInEmbedder) and embedder.dim == 32
    assert embedder.model_id == embedder_model_id(section) == "hashed-stand-in/d32-s0"
    assert section.label() == f"{HASHED_STAND_IN_LABEL}, 32 dimensions" and "not a language model" in section.label()
    assert embedder_model_id(EmbeddingSection()) == "e5-local/multilingual-e5-small-q4"   # the default is a model
    assert EmbeddingSection().label() == "e5-local multilingual-e5-small-q4"
    with pytest.raises(ValidationError, match="not used by backend hashed-stand-in"):
        EmbeddingSection(backend="hashed-stand-in", model="text-embedding-3-small")
    with pytest.raises(ValidationError, match="stand_in_dim"):
        EmbeddingSection(backend="hashed-stand-in", stand_in_dim=1)


def test_its_vectors_skip_the_cache(tmp_path):
    section = EmbeddingSection(backend="hashed-stand-in", stand_in_dim=16, max_chars=10)
    embedder = make_embedder(section)
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        vectors = embed_passages(embedder, TEXTS, cache, section, progress=False)
        queries = embed_with_cache(embedder, TEXTS[:2], "query", cache, progress=False)
        assert cache.model_dim(embedder.model_id) is None   # nothing stored: computing is cheaper than a lookup
    np.testing.assert_array_equal(vectors[0], hashed_vectors([TEXTS[0][:5] + "\n" + TEXTS[0][-5:]], 16)[0])
    np.testing.assert_array_equal(queries, hashed_vectors(TEXTS[:2], 16))
