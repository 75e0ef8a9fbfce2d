"""MMR diversification over a base retriever (pmrag.retrieve.diversify): greedy picks against a brute-force loop,
λ = 1 is the base ranking exactly, near duplicates and same-conversation neighbours give way to other dates and
sources, the score column keeps the base's scores by position."""

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from pmrag.core.names import RetrieverId
from pmrag.core.params import DEFAULT_RETRIEVERS, StudyParams
from pmrag.retrieve import diversify as dv
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import BM25Retriever, Corpus, Queries, VectorRetriever
from pmrag.study.params import component_context

HOUR = 3_600_000_000_000


def params(**diversify):
    return StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, diversify=diversify)


def make_corpus(n=40, dim=6, n_queries=4, n_sources=3, seed=0):
    """Random vectors (some near-duplicates), random hours over a month, random sources, words for BM25."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim))
    vectors[n // 2:] = vectors[: n - n // 2] + 0.1 * rng.normal(size=(n - n // 2, dim))   # near-duplicates
    vectors = vectors.astype(np.float32)
    chunks = pd.DataFrame({
        "chunk_id": [f"c{i:03d}" for i in range(n)],
        "source": [f"src{s}" for s in rng.integers(0, n_sources, size=n)],
        "start_at": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 24 * 30, size=n), unit="h"),
    })
    words = ["cafe", "train", "movie", "dinner", "trip", "book"]
    texts = [" ".join(rng.choice(words, size=5)) for _ in range(n)]
    queries = rng.normal(size=(n_queries, dim)).astype(np.float32)
    corpus = Corpus(chunks["chunk_id"].to_numpy(), chunks["start_at"].to_numpy(), lambda rep: texts,
                    lambda rep: vectors, table=chunks)
    return corpus, Queries([f"q{i}" for i in range(n_queries)], ["cafe trip", "movie", "book dinner", "train"][
        :n_queries], lambda: queries), chunks, vectors


def mmr(name, **diversify):
    return RETRIEVERS.get("mmr")(RetrieverId.parse(name), params(**diversify))


# ------------------------------------------------------------------------------------------ the kernels

def brute_force_mmr(relevance, redundancy, lam):
    """Greedy MMR written out: each step scans the unpicked items, max over the picked ones by a loop."""
    picked = []
    while len(picked) < len(relevance):
        best, best_gain = None, None
        for d in range(len(relevance)):
            if d in picked:
                continue
            gain = lam * relevance[d] - (1 - lam) * max([redundancy[d][s] for s in picked], default=0.0)
            if best_gain is None or gain > best_gain:
                best, best_gain = d, gain
        picked.append(best)
    return picked


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
def test_greedy_order_matches_a_brute_force_loop(lam):
    rng = np.random.default_rng(1)
    relevance = np.sort(rng.uniform(size=25))[::-1]
    redundancy = rng.uniform(size=(25, 25))
    assert dv.mmr_order(relevance, redundancy, lam).tolist() == brute_force_mmr(relevance, redundancy, lam)


def test_lambda_one_keeps_the_order_ties_included_and_ties_go_to_the_earlier_position():
    relevance = np.array([1.0, 0.5, 0.5, 0.5, 0.0])
    redundancy = np.random.default_rng(2).uniform(size=(5, 5))
    assert dv.mmr_order(relevance, redundancy, 1.0).tolist() == [0, 1, 2, 3, 4]
    assert dv.mmr_order(np.ones(3), np.zeros((3, 3)), 0.5).tolist() == [0, 1, 2]


def test_redundancy_matrix_is_the_formula_entry_by_entry():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(6, 4))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    times = rng.integers(0, 100, size=6) * HOUR
    sources = np.array([0, 1, 0, 0, 1, 2])
    got = dv.redundancy_matrix(vectors, times, sources, 0.4, 12)
    for i in range(6):
        for j in range(6):
            time_part = np.exp(-abs(int(times[i]) - int(times[j])) / HOUR / 12) if sources[i] == sources[j] else 0
            assert got[i, j] == pytest.approx(0.6 * max(vectors[i] @ vectors[j], 0) + 0.4 * time_part, abs=1e-12)


def test_pool_relevance_is_min_max_and_constant_pools_are_one():
    np.testing.assert_allclose(dv.pool_relevance(np.array([4.0, 3.0, 2.0])), [1.0, 0.5, 0.0])
    assert dv.pool_relevance(np.array([2.0, 2.0])).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------------------ the component

def brute_force_component(corpus, queries, chunks, vectors, pool, lam, time_weight, tau, depth):
    """Expected chunk orders: cosine base by Python's sort, then brute-force MMR over its top ``pool``."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    times = chunks["start_at"].to_numpy().astype("datetime64[ns]").astype(np.int64)
    orders = []
    for query in queries.vectors():
        cos = unit @ (query / np.linalg.norm(query))
        base = sorted(range(len(cos)), key=lambda d: (cos[d], times[d], chunks["chunk_id"][d]), reverse=True)
        top = base[:pool]
        low, high = min(cos[top]), max(cos[top])
        relevance = [(cos[d] - low) / (high - low) for d in top]
        redundancy = [[(1 - time_weight) * max(float(unit[d] @ unit[s]), 0) + time_weight * (
            np.exp(-abs(int(times[d]) - int(times[s])) / HOUR / tau) if chunks["source"][d] == chunks["source"][s]
            else 0) for s in top] for d in top]
        picked = [top[i] for i in brute_force_mmr(relevance, redundancy, lam)]
        orders.append([chunks["chunk_id"][d] for d in (picked + base[pool:])[:depth]])
    return orders


@pytest.mark.parametrize("pool, depth", [(15, 25), (15, 10), (40, 40)])
def test_mmr_over_vector_matches_a_brute_force_pipeline(pool, depth):
    corpus, queries, chunks, vectors = make_corpus()
    ranked = mmr("raw_text_mmr_vector", pool=pool, relevance_weight=0.6, time_weight=0.3,
                 time_scale_hours=48).rank(corpus, queries, depth)
    expected = brute_force_component(corpus, queries, chunks, vectors, pool, 0.6, 0.3, 48, depth)
    got = [rows["chunk_id"].tolist() for _, rows in ranked.rankings.groupby("question_id", sort=False)]
    assert got == expected
    base = VectorRetriever(RetrieverId("raw_text", "vector"), params()).rank(corpus, queries, depth)
    assert got != [rows["chunk_id"].tolist() for _, rows in base.rankings.groupby("question_id", sort=False)]
    # the score column is the base's, by position; the rank column is 1..depth
    pd.testing.assert_frame_equal(ranked.rankings[["question_id", "rank", "score"]],
                                  base.rankings[["question_id", "rank", "score"]])
    pd.testing.assert_series_equal(ranked.matches, base.matches)


@pytest.mark.parametrize("name, base_class", [("raw_text_mmr_vector", VectorRetriever),
                                              ("summary_mmr_bm25", BM25Retriever)])
@pytest.mark.parametrize("depth", [5, 30])
def test_lambda_one_is_the_base_ranking_exactly(name, base_class, depth):
    corpus, queries, _, _ = make_corpus(seed=4)
    got = mmr(name, relevance_weight=1, pool=20).rank(corpus, queries, depth)
    base_id = RetrieverId(RetrieverId.parse(name).representation, base_class.method)
    base = base_class(base_id, params()).rank(corpus, queries, depth)
    pd.testing.assert_frame_equal(got.rankings, base.rankings)
    pd.testing.assert_series_equal(got.matches, base.matches)


def test_only_the_pool_is_reordered_and_the_rest_follows_in_base_order():
    corpus, queries, _, _ = make_corpus(seed=5)
    got = mmr("raw_text_mmr_vector", relevance_weight=0.2, pool=10).rank(corpus, queries, 40)
    base = VectorRetriever(RetrieverId("raw_text", "vector"), params()).rank(corpus, queries, 40)
    changed = False
    for (_, ours), (_, theirs) in zip(got.rankings.groupby("question_id", sort=False),
                                      base.rankings.groupby("question_id", sort=False)):
        assert sorted(ours["chunk_id"][:10]) == sorted(theirs["chunk_id"][:10])
        assert ours["chunk_id"].tolist()[10:] == theirs["chunk_id"].tolist()[10:]
        assert np.all(np.diff(ours["score"].to_numpy()) <= 0)
        changed |= ours["chunk_id"].tolist() != theirs["chunk_id"].tolist()
    assert changed


def tiny(vectors, sources, hours, query):
    n = len(vectors)
    chunks = pd.DataFrame({"chunk_id": [f"c{i}" for i in range(n)], "source": sources,
                           "start_at": pd.Timestamp("2024-03-01") + pd.to_timedelta(hours, unit="h")})
    corpus = Corpus(chunks["chunk_id"].to_numpy(), chunks["start_at"].to_numpy(), lambda rep: [""] * n,
                    lambda rep: np.asarray(vectors, dtype=np.float32), table=chunks)
    return corpus, Queries(["q"], ["q"], lambda: np.asarray([query], dtype=np.float32))


def order(corpus, queries, **diversify):
    ranked = mmr("raw_text_mmr_vector", **diversify).rank(corpus, queries, 10)
    return ranked.rankings["chunk_id"].tolist()


@pytest.mark.integration
def test_a_chunk_of_another_date_beats_a_near_duplicate():
    # c0 best; c1 its near duplicate an hour later in the same conversation; c2 other words, 30 days later;
    # c3 barely relevant (the pool's minimum)
    corpus, queries = tiny([[1.0, 0.0, 0.0, 0.0], [0.99, 0.1, 0.0, 0.0], [0.85, 0.0, 0.527, 0.0],
                            [0.1, 0.0, 0.0, 0.995]], ["s", "s", "s", "t"], [0, 1, 720, 1440], [1.0, 0.0, 0.0, 0.0])
    assert order(corpus, queries, relevance_weight=1) == ["c0", "c1", "c2", "c3"]
    assert order(corpus, queries, relevance_weight=0.7, time_weight=0.5) == ["c0", "c2", "c1", "c3"]


@pytest.mark.integration
def test_time_is_redundant_within_a_conversation_only():
    # orthogonal contents, all in the same hour: c1 (same source as c0) gives way to c2 (another source)
    corpus, queries = tiny([[1.0, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0], [0.55, 0.0, 0.835, 0.0]], ["a", "a", "b"],
                           [0, 0, 0], [1.0, 0.0, 0.0, 0.0])
    assert order(corpus, queries, relevance_weight=1) == ["c0", "c1", "c2"]
    assert order(corpus, queries, relevance_weight=0.7, time_weight=0.5) == ["c0", "c2", "c1"]
    assert order(corpus, queries, relevance_weight=0.7, time_weight=0.0) == ["c0", "c1", "c2"]   # content alone


# ------------------------------------------------------------------------------------------ declarations

def test_declares_the_base_needs_and_its_own_vectors():
    cls = RETRIEVERS.get("mmr")
    bm25 = RetrieverId.parse("summary_mmr_bm25")
    assert tuple(map(str, cls.needs(bm25))) == ("representations", "vectors:summary")
    assert tuple(map(str, cls.needs(RetrieverId.parse("raw_text_mmr_vector")))) == ("vectors:raw_text", "query_vectors")
    assert cls.files(bm25, params()) == BM25Retriever.files(RetrieverId("summary", "bm25"), params())
    assert cls.uses(bm25) == (BM25Retriever, *BM25Retriever.uses(RetrieverId("summary", "bm25")))
    for method in dv.BASE_METHODS:
        assert set(RETRIEVERS.get(method).sections) <= set(cls.sections)


def validated(*names):
    return StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                       "retrieval": {"retrievers": [*DEFAULT_RETRIEVERS, *names]}},
                                      context=component_context())


def test_ids_validate_through_the_params():
    loaded = validated("raw_text_mmr_vector", "summary_mmr_bm25", "embedding_text_mmr_session")
    assert [str(r) for r in loaded.retrieval.retriever_ids()][-3:] == ["raw_text_mmr_vector", "summary_mmr_bm25",
                                                                      "embedding_text_mmr_session"]
    with pytest.raises(ValidationError, match="unknown mmr variant 'graph'"):
        validated("raw_text_mmr_graph")
    with pytest.raises(ValidationError, match="unknown mmr variant"):
        validated("raw_text_mmr")
