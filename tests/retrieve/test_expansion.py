"""Session / cluster expansion (pmrag.retrieve.expansion): α·(the unit's best cosine) + (1 − α)·(own cosine),
against a brute-force loop; α = 0 is the vector retriever; clusters are scikit-learn's, per source and block."""

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from sklearn.cluster import AgglomerativeClustering

from pmrag.core.names import RetrieverId
from pmrag.core.params import DEFAULT_RETRIEVERS, StudyParams
from pmrag.retrieve import expansion as ex
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import Corpus, Queries, VectorRetriever

from pmrag.study.params import component_context


def make_corpus(n_sources=3, sessions_per_source=3, chunks_per_session=4, dim=8, n_queries=5, seed=0):
    """Random chunk vectors; chunks ordered by (source, session, window) with hourly start times."""
    rng = np.random.default_rng(seed)
    rows = [(s, k) for s in range(n_sources) for k in range(sessions_per_source) for _ in range(chunks_per_session)]
    n = len(rows)
    chunks = pd.DataFrame({
        "chunk_id": [f"c{i:03d}" for i in range(n)],
        "source": [f"src{s}" for s, _ in rows],
        "session_index": [k for _, k in rows],
        "start_at": pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n), unit="h"),
    })
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    queries = rng.normal(size=(n_queries, dim)).astype(np.float32)
    corpus = Corpus(chunk_ids=chunks["chunk_id"].to_numpy(), start_times=chunks["start_at"].to_numpy(),
                    texts=lambda rep: [""] * n, vectors=lambda rep: vectors,
                    table=chunks)
    return corpus, Queries([f"q{i}" for i in range(n_queries)], [""] * n_queries, lambda: queries), chunks, vectors


def params(**expansion):
    return StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, expansion=expansion)


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def brute_force_scores(chunk_vectors, query_vectors, units, alpha):
    scores = np.empty((len(query_vectors), len(chunk_vectors)))
    for q, query in enumerate(query_vectors):
        for d, vector in enumerate(chunk_vectors):
            best = max(cosine(query, chunk_vectors[e]) for e in range(len(chunk_vectors)) if units[e] == units[d])
            scores[q, d] = alpha * best + (1 - alpha) * cosine(query, vector)
    return scores


def brute_force_order(scores_row, chunks):
    """Chunk ids by score ↓, start time ↓, chunk id ↓ (the paper's tie-breaks), by Python's sort."""
    keyed = sorted(zip(scores_row, chunks["start_at"], chunks["chunk_id"]), key=lambda t: (t[0], t[1], t[2]),
                   reverse=True)
    return [chunk_id for _, _, chunk_id in keyed]


# ------------------------------------------------------------------------------------------ sessions

def test_session_scores_and_ranking_match_a_brute_force_loop():
    corpus, queries, chunks, vectors = make_corpus()
    sessions = list(zip(chunks["source"], chunks["session_index"]))
    ranked = RETRIEVERS.get("session")(RetrieverId("raw_text", "session"), params(session_weight=0.3)).rank(
        corpus, queries, depth=len(chunks))
    expected = brute_force_scores(vectors, queries.vectors(), sessions, 0.3)
    for q, (qid, rows) in enumerate(ranked.rankings.groupby("question_id", sort=False)):
        assert qid == queries.question_ids[q]
        assert rows["chunk_id"].tolist() == brute_force_order(expected[q], chunks)
        by_chunk = dict(zip(chunks["chunk_id"], expected[q]))
        np.testing.assert_allclose(rows["score"], [by_chunk[c] for c in rows["chunk_id"]], atol=1e-6)
    assert ranked.matches.tolist() == (expected > 0).sum(axis=1).tolist()


def test_sessions_are_source_and_session_index_pairs_in_order_of_first_appearance():
    units = ex.session_units(["a", "a", "b", "a", "b"], [0, 0, 0, 1, 0])
    assert units.tolist() == [0, 0, 1, 2, 1]


@pytest.mark.parametrize("variant", [None, "cluster"])
def test_alpha_zero_is_the_vector_retriever_exactly(variant):
    corpus, queries, chunks, _ = make_corpus(seed=1)
    got = RETRIEVERS.get("session")(RetrieverId("summary", "session", variant),
                                    params(session_weight=0, cluster_distance=0.9)).rank(corpus, queries, 10)
    base = VectorRetriever(RetrieverId("summary", "vector"), params()).rank(corpus, queries, 10)
    pd.testing.assert_frame_equal(got.rankings, base.rankings)
    pd.testing.assert_series_equal(got.matches, base.matches)


def test_alpha_one_ranks_whole_units_each_contiguous():
    corpus, queries, chunks, _ = make_corpus(seed=2)
    ranked = RETRIEVERS.get("session")(RetrieverId("raw_text", "session"), params(session_weight=1)).rank(
        corpus, queries, depth=len(chunks))
    unit_of = dict(zip(chunks["chunk_id"], zip(chunks["source"], chunks["session_index"])))
    for _, rows in ranked.rankings.groupby("question_id"):
        units = [unit_of[c] for c in rows["chunk_id"]]
        runs = [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u]
        assert len(runs) == len(set(units)) == 9          # every session's 4 chunks are one block of ranks
        within = rows.assign(unit=units).groupby("unit", sort=False)["score"].nunique()
        assert (within == 1).all()                         # tied at the session's best cosine


def test_a_weak_chunk_of_a_strong_session_rises_above_a_middling_lone_chunk():
    # question along x; session 0 holds the best chunk (x) and a weak one; session 1 one middling chunk
    chunks = pd.DataFrame({"chunk_id": ["a", "b", "c"], "source": ["s", "s", "s"], "session_index": [0, 0, 1],
                           "start_at": pd.to_datetime(["2024-01-01 10:00", "2024-01-01 10:30", "2024-01-02 00:00"])})
    vectors = np.array([[1.0, 0.0], [0.3, 1.0], [0.6, 0.8]], dtype=np.float32)
    corpus = Corpus(chunks["chunk_id"].to_numpy(), chunks["start_at"].to_numpy(), lambda rep: [""] * 3,
                    lambda rep: vectors, table=chunks)
    queries = Queries(["q"], ["x"], lambda: np.array([[1.0, 0.0]], dtype=np.float32))
    plain = VectorRetriever(RetrieverId("raw_text", "vector"), params()).rank(corpus, queries, 3)
    expanded = RETRIEVERS.get("session")(RetrieverId("raw_text", "session"), params(session_weight=0.5)).rank(
        corpus, queries, 3)
    assert plain.rankings["chunk_id"].tolist() == ["a", "c", "b"]
    assert expanded.rankings["chunk_id"].tolist() == ["a", "b", "c"]   # b: 0.5·1 + 0.5·0.287 > c: 0.6


def test_unit_max_matches_a_loop_and_rejects_misshapen_units():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(3, 11))
    units = rng.integers(0, 4, size=11)
    expected = [[max(scores[q, e] for e in range(11) if units[e] == units[d]) for d in range(11)] for q in range(3)]
    np.testing.assert_array_equal(ex.unit_max(scores, units), expected)
    with pytest.raises(ValueError, match="one entry per chunk"):
        ex.unit_max(scores, units[:5])


def test_chunks_are_aligned_by_chunk_id_and_missing_ones_refused():
    corpus, _, chunks, _ = make_corpus(n_sources=1, sessions_per_source=2, chunks_per_session=2)
    shuffled = Corpus(corpus.chunk_ids, corpus.start_times, corpus.texts, corpus.vectors, table=chunks.iloc[::-1])
    assert ex.chunk_attributes(shuffled, ("session_index",))["session_index"].tolist() == [0, 0, 1, 1]
    short = Corpus(corpus.chunk_ids, corpus.start_times, corpus.texts, corpus.vectors, table=chunks.iloc[1:])
    with pytest.raises(ValueError, match="1 corpus chunk"):
        ex.chunk_attributes(short, ("source",))


# ------------------------------------------------------------------------------------------ clusters

def sklearn_partition(vectors, distance):
    labels = AgglomerativeClustering(metric="cosine", linkage="average", distance_threshold=distance,
                                     n_clusters=None).fit_predict(vectors)
    return pd.factorize(labels)[0].tolist()      # renumbered in order of first appearance, as ours


def clustered_vectors(n_groups=5, per_group=6, dim=16, spread=0.15, seed=4):
    """Groups of vectors around random centres, interleaved so that clusters are not runs of rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_groups, dim))
    vectors = np.repeat(centres, per_group, axis=0) + spread * rng.normal(size=(n_groups * per_group, dim))
    return vectors[rng.permutation(len(vectors))]


@pytest.mark.agreement
def test_clusters_of_one_source_are_a_direct_scikit_learn_call():
    vectors = clustered_vectors()
    ours = ex.cluster_units(vectors, ["s"] * len(vectors), 0.3)
    assert ours.tolist() == sklearn_partition(vectors, 0.3)
    assert 1 < len(set(ours)) < len(vectors)                   # the threshold merges some chunks, not all
    assert ex.cluster_units(vectors, ["s"] * len(vectors), 0.3).tolist() == ours.tolist()   # deterministic


@pytest.mark.agreement
def test_clusters_never_cross_a_source_or_a_block():
    vectors = clustered_vectors(seed=5)
    sources = np.array(["a", "b"] * 15)
    ours = ex.cluster_units(vectors, sources, 0.3)
    for source in ("a", "b"):
        rows = np.flatnonzero(sources == source)
        assert pd.factorize(ours[rows])[0].tolist() == sklearn_partition(vectors[rows], 0.3)
    assert not set(ours[sources == "a"]) & set(ours[sources == "b"])
    blocked = ex.cluster_units(vectors, ["s"] * 30, 0.3, max_block=8)      # 30 rows → blocks of 8, 8, 7, 7
    assert [len(b) for b in ex.blocks(30, 8)] == [8, 8, 7, 7]
    for block in ex.blocks(30, 8):
        assert pd.factorize(blocked[block])[0].tolist() == sklearn_partition(vectors[block], 0.3)
        assert not set(blocked[block]) & set(np.delete(blocked, block))


def test_a_zero_vector_is_its_own_cluster_and_a_wide_threshold_merges_the_rest():
    vectors = clustered_vectors(n_groups=2, per_group=3)
    vectors[2] = 0
    units = ex.cluster_units(vectors, ["s"] * 6, 2.0)
    assert (units == units[2]).sum() == 1
    assert len(set(np.delete(units, 2))) == 1


def test_cluster_variant_expands_clusters_of_the_representation_vectors():
    corpus, queries, chunks, vectors = make_corpus(n_sources=2, seed=6)
    component = RETRIEVERS.get("session")(RetrieverId("raw_text", "session", "cluster"),
                                          params(session_weight=0.4, cluster_distance=0.8))
    units = ex.cluster_units(vectors, chunks["source"].to_numpy(), 0.8)
    assert 1 < len(set(units)) < len(chunks)
    ranked = component.rank(corpus, queries, depth=len(chunks))
    expected = brute_force_scores(vectors, queries.vectors(), units, 0.4)
    for q, (_, rows) in enumerate(ranked.rankings.groupby("question_id", sort=False)):
        assert rows["chunk_id"].tolist() == brute_force_order(expected[q], chunks)


# ------------------------------------------------------------------------------------------ as a component

def test_declares_its_stages_sections_and_variants():
    cls = RETRIEVERS.get("session")
    assert set(cls.variants()) == {"", "cluster"}
    assert tuple(map(str, cls.needs(RetrieverId("summary", "session", "cluster")))) == ("vectors:summary", "query_vectors")
    assert cls.sections == ("expansion",)
    assert cls.__module__ == "pmrag.retrieve.expansion" and cls.uses(RetrieverId("summary", "session")) == ()


def validated(*names):
    """Params listing the default retrievers and ``names``, validated against the registered components."""
    return StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                       "retrieval": {"retrievers": [*DEFAULT_RETRIEVERS, *names]}},
                                      context=component_context())


def test_ids_validate_through_the_params():
    loaded = validated("raw_text_session", "summary_session_cluster")
    assert [str(r) for r in loaded.retrieval.retriever_ids()][-2:] == ["raw_text_session", "summary_session_cluster"]
    with pytest.raises(ValidationError, match="unknown session variant 'clusters'"):
        validated("raw_text_session_clusters")
