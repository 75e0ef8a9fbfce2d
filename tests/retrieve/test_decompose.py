"""Query decomposition without a model: the offline stand-in's sub-queries, the clean-up rules, SubQueries and the
stage (pmrag.retrieve.subqueries), and the decomp retriever's RRF (pmrag.retrieve.decompose) against a brute-force
fusion (exact fractions, the paper's tie-breaks) of the base retrievers' own rankings."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from pmrag.core.names import RetrieverId
from pmrag.core.params import DecompositionSection, EmbeddingSection, StudyParams
from pmrag.retrieve.decompose import DecompRetriever, rrf_scores
from pmrag.retrieve.subqueries import (DecompositionError, SubQueries, build_subqueries, clean_subqueries,
                                       decompose, decompose_questions, group_terms, label,
                                       offline_subqueries, owner_of)
from pmrag.retrieve.ranking import Ranker
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import SUB_QUERIES, BM25Retriever, Corpus, Queries, VectorRetriever

VECTOR = RetrieverId("embedding_text", "decomp", "vector")
BM25 = RetrieverId("raw_text", "decomp", "bm25")


def params(bm25=None, **decomposition) -> StudyParams:
    return StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, decomposition=decomposition,
                       bm25=bm25 or {})


# ------------------------------------------------------------------------------------------ offline stand-in

def test_terms_are_cut_into_consecutive_groups_as_even_as_possible():
    assert group_terms(["a", "b", "c", "d", "e"], 2) == ["a b c", "d e"]
    assert group_terms(["a", "b", "c", "d", "e"], 3) == ["a b", "c d", "e"]
    assert group_terms(["a", "b"], 4) == ["a", "b"]
    assert group_terms([], 4) == []


def test_offline_subqueries_are_the_questions_content_words_up_to_the_cap():
    question = "Where did Mel and Sam go hiking last summer in Kyoto?"
    [(four, dropped)] = offline_subqueries([question], 4)
    assert four == ("Mel Sam", "hiking", "summer", "Kyoto") and dropped == 0
    [(two, _)] = offline_subqueries([question], 2)
    assert two == ("Mel Sam hiking", "summer Kyoto")
    [(one, _)] = offline_subqueries([question], 1)
    assert one == ("Mel Sam hiking summer Kyoto",)


def test_a_japanese_question_is_cut_by_sudachi_into_nouns():
    [(found, _)] = offline_subqueries(["去年の夏に佐藤さんと行ったカフェの名前は何でしたっけ？"], 4)
    assert found == ("佐藤", "カフェ", "名前")        # 去年 (adverb-like), 夏 (one character) are no term


def test_a_question_without_content_words_or_only_itself_has_no_subquery():
    found = offline_subqueries(["hiking", "What was it?", "？"], 4)
    assert [kept for kept, _ in found] == [(), (), ()]
    assert found[0][1] == 1                               # "hiking" is the question itself: dropped


def test_clean_up_drops_empty_repeated_and_the_question_then_keeps_the_first_max():
    kept, dropped = clean_subqueries(["  Kyoto\n trip ", "", "kyoto TRIP", "Where did we go?", "Mel", "Sam", "Jo"],
                                     "where did we  go?", 2)
    assert kept == ("Kyoto trip", "Mel") and dropped == 5
    assert clean_subqueries(["Ｋｙｏｔｏ", "kyoto"], "q", 4) == (("Ｋｙｏｔｏ",), 1)   # NFKC: one query


def test_the_offline_backend_is_labelled_a_stand_in():
    section = DecompositionSection()
    assert section.backend == "offline"
    assert label(section) == "offline stand-in (the question's content words), not an LLM"
    found, name, provenance = decompose(["q1", "q2"], ["Did Mel go hiking in Kyoto?", "hiking"], section)
    assert found == [("Mel", "hiking", "Kyoto"), ()] and name == label(section)
    assert provenance["backend"] == "offline" and provenance["label"] == name and provenance["dropped"] == 1
    assert "not an LLM" not in label(DecompositionSection(backend="openai"), "gpt-4o-mini")
    with pytest.raises(DecompositionError, match="question 'q1' is given twice"):
        decompose(["q1", "q1"], ["a", "b"], section)
    with pytest.raises(DecompositionError, match="'openai' needs the summarizer section"):
        decompose(["q1"], ["a"], DecompositionSection(backend="openai"))


# ------------------------------------------------------------------------------------------ SubQueries

def test_subqueries_rows_follow_the_question_order_asked_for():
    matrix = np.arange(8, dtype=np.float32).reshape(4, 2)
    found = SubQueries(("q1", "q2", "q3"), (("a", "b"), (), ("c", "d")), owner_of([("a", "b"), (), ("c", "d")]),
                       matrix, "x", {})
    texts, owner, rows = found.rows_for(["q3", "q2", "q1"])
    assert texts == ["c", "d", "a", "b"] and owner.tolist() == [0, 0, 2, 2] and rows.tolist() == [2, 3, 0, 1]
    assert found.texts() == ["a", "b", "c", "d"]
    with pytest.raises(DecompositionError, match="no entry for question 'q9'; recompute the decomposition stage"):
        found.rows_for(["q1", "q9"])
    with pytest.raises(DecompositionError, match="3 vectors for 4 sub-queries"):
        SubQueries(found.question_ids, found.subqueries, found.owner, matrix[:3], "x", {})
    with pytest.raises(DecompositionError, match="owner"):
        SubQueries(found.question_ids, found.subqueries, np.array([0, 0, 1, 2]), matrix, "x", {})


def test_build_subqueries_embeds_every_subquery_once_in_order_and_nothing_when_there_is_none():
    asked = []

    def embed(texts):
        asked.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    found = build_subqueries(["q1", "q2"], [("ab",), ("c", "defg")], embed, "lbl", {"k": 1})
    assert asked == [["ab", "c", "defg"]] and found.matrix[:, 0].tolist() == [2, 1, 4]
    assert found.owner.tolist() == [0, 1, 1] and found.label == "lbl"
    empty = build_subqueries(["q1"], [()], lambda texts: pytest.fail("embedded nothing"), "lbl", {})
    assert empty.matrix.shape == (0, 0)
    with pytest.raises(DecompositionError, match=r"shape \(1, 2\) for 3 sub-queries"):
        build_subqueries(["q1", "q2"], [("ab",), ("c", "defg")], lambda texts: np.zeros((1, 2)), "lbl", {})


def test_the_stage_embeds_the_subqueries_as_queries_through_the_studys_embedder(tmp_path):
    from pmrag.represent.embed import make_embedder

    study = StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, cache_dir=str(tmp_path / "cache"),
                        decomposition={"max_subqueries": 2})
    questions = pd.DataFrame({"question_id": ["q2", "q1"], "text": ["Did Mel go hiking in Kyoto with Sam?", "ok?"],
                              "type": ["x", "x"]})
    found = decompose_questions(questions["question_id"].tolist(), questions["text"].tolist(), study.decomposition,
                                embedding=study.embedding, cache_dir=study.cache_dir)
    assert found.question_ids == ("q2", "q1") and found.subqueries == (("Mel hiking", "Kyoto Sam"), ())
    embedder = make_embedder(study.embedding)
    np.testing.assert_allclose(found.matrix, embedder.embed(["Mel hiking", "Kyoto Sam"], "query"), atol=1e-5)
    assert found.label.startswith("offline stand-in") and found.provenance["embedding_model"] == embedder.model_id


def test_decompose_questions_takes_explicit_inputs_and_embeds_through_the_cache_folder(tmp_path):
    from pmrag.represent.embed import EmbeddingCache

    found = decompose_questions(["q2", "q1"], ["Did Mel go hiking in Kyoto with Sam?", "ok?"],
                                DecompositionSection(max_subqueries=2), embedding=EmbeddingSection(),
                                cache_dir=tmp_path / "cache")
    assert found.question_ids == ("q2", "q1") and found.subqueries == (("Mel hiking", "Kyoto Sam"), ())
    assert found.matrix.shape == (2, 384) and found.owner.tolist() == [0, 0]
    assert found.provenance["backend"] == "offline" and found.provenance["embedding_model"] == "e5-local/" + \
        EmbeddingSection().resolved_model
    with EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite") as cache:
        assert len(cache) == 2                                     # both sub-queries, as queries
    with pytest.raises(DecompositionError, match="needs the summarizer section"):
        decompose_questions(["q1"], ["x?"], DecompositionSection(backend="openai"), embedding=EmbeddingSection(),
                            cache_dir=tmp_path / "cache")


# ------------------------------------------------------------------------------------------ RRF, brute force

def paper_order(scores, times, ids, candidates):
    """Candidates (chunk indices) by score ↓, start time ↓, chunk id ↓ (plain Python sort)."""
    return sorted(candidates, key=lambda d: (scores[d], times[d], ids[d]), reverse=True)


def brute_rrf(lists, k, times, ids, depth, n_chunks, pad=True):
    """Σ Fraction(1, k + rank) over the lists (each a list of chunk indices), every chunk ranked by the fused
    score and the paper's tie-breaks; chunks in no list follow at 0 when ``pad``."""
    fused = {d: Fraction(0) for d in range(n_chunks)}
    for ranked in lists:
        for rank, d in enumerate(ranked, start=1):
            fused[d] += Fraction(1, k + rank)
    candidates = range(n_chunks) if pad else [d for d in range(n_chunks) if fused[d] > 0]
    order = paper_order(fused, times, ids, candidates)[:depth]
    return [ids[d] for d in order], [float(fused[d]) for d in order]


def small_corpus(rng, n):
    ids = np.array([f"c{i:03d}" for i in rng.permutation(n)])
    times = np.array("2024-01-01", dtype="datetime64[ns]") + rng.integers(0, 5, n) * np.timedelta64(1, "h")
    return ids, times   # few distinct times: many time ties, broken by chunk id


def test_rrf_scores_equal_exact_fractions_and_sum_equal_ranks_bit_identically():
    rng = np.random.default_rng(3)
    ids, times = small_corpus(rng, 30)
    scores = rng.integers(0, 4, (5, 30)).astype(float)          # many score ties: the tie-breaks decide
    owner = np.array([0, 1, 0, 0, 1])
    ranker = Ranker(times, ids)
    fused = rrf_scores(scores, owner, 2, ranker, 7, 60)
    ns = times.astype(np.int64)
    for question in (0, 1):
        lists = [paper_order(scores[j], ns, ids, range(30))[:7] for j in np.flatnonzero(owner == question)]
        expected = {d: Fraction(0) for d in range(30)}
        for ranked in lists:
            for rank, d in enumerate(ranked, start=1):
                expected[d] += Fraction(1, 60 + rank)
        np.testing.assert_allclose(fused[question], [float(expected[d]) for d in range(30)], rtol=0, atol=1e-15)
        for a in range(30):                                     # equal exact sums are equal floats
            for b in range(30):
                if expected[a] == expected[b]:
                    assert fused[question, a] == fused[question, b]


def test_rrf_scores_keep_only_marked_chunks_and_check_their_inputs():
    ids, times = small_corpus(np.random.default_rng(0), 6)
    ranker = Ranker(times, ids)
    scores = np.array([[3.0, 0, 0, 1, 0, 2]])
    fused = rrf_scores(scores, np.array([0]), 1, ranker, 4, 10, keep=scores > 0)
    np.testing.assert_allclose(fused[0], [1 / 11, 0, 0, 1 / 13, 0, 1 / 12])
    with pytest.raises(ValueError, match="rrf k must be a positive integer"):
        rrf_scores(scores, np.array([0]), 1, ranker, 4, 0)
    with pytest.raises(ValueError, match="owner must index the 1 questions"):
        rrf_scores(scores, np.array([1]), 1, ranker, 4, 10)


# ------------------------------------------------------------------------------------------ the retriever

WORDS = ["kyoto", "hiking", "cafe", "mel", "sam", "boots", "rain", "train", "birthday", "cake"]
QUESTION_TEXTS = ["mel hiking kyoto", "cake for sam", "what about boots"]
SUBQUERIES = (("mel hiking", "kyoto train"), (), ("boots", "rain boots", "cafe"))


def corpus_and_queries(rng, n=40, dim=8):
    ids, times = small_corpus(rng, n)
    texts = [" ".join(rng.choice(WORDS, rng.integers(1, 5))) for _ in range(n)]
    chunk_vectors = rng.normal(size=(n, dim)).astype(np.float32)
    sub_matrix = rng.normal(size=(5, dim)).astype(np.float32)
    question_vectors = rng.normal(size=(3, dim)).astype(np.float32)
    found = SubQueries(("q3", "q1", "q2"), (SUBQUERIES[2], SUBQUERIES[0], SUBQUERIES[1]),
                       owner_of([SUBQUERIES[2], SUBQUERIES[0], SUBQUERIES[1]]),
                       np.vstack([sub_matrix[2:], sub_matrix[:2]]), "x", {})   # stored in another question order
    corpus = Corpus(ids, times, lambda rep: texts, lambda rep: chunk_vectors,
                    lambda key: found if key == SUB_QUERIES else pytest.fail(str(key)))
    queries = Queries(["q1", "q2", "q3"], QUESTION_TEXTS, lambda: question_vectors)
    return corpus, queries, sub_matrix, question_vectors


def base_lists(base, study, corpus, texts, vectors, depth):
    """Each text's top-``depth`` chunk ids by the base retriever itself, one query at a time."""
    out = []
    for i, text in enumerate(texts):
        one = Queries(["x"], [text], lambda i=i: vectors[i:i + 1])
        ranked = base.rank(Corpus(corpus.chunk_ids, corpus.start_times, corpus.texts, corpus.vectors), one, depth)
        out.append(ranked.rankings["chunk_id"].tolist())
    return out


@pytest.mark.parametrize("variant, zero_scores", [("vector", "pad"), ("bm25", "pad"), ("bm25", "drop")])
def test_decomp_is_the_rrf_of_the_base_retrievers_own_lists(variant, zero_scores):
    rng = np.random.default_rng(7)
    corpus, queries, sub_matrix, question_vectors = corpus_and_queries(rng)
    study = params(bm25={"zero_scores": zero_scores}, rrf_k=5)
    depth = 12
    rid = RetrieverId("raw_text", "decomp", variant)
    base = (VectorRetriever(RetrieverId("raw_text", "vector"), study) if variant == "vector"
            else BM25Retriever(RetrieverId("raw_text", "bm25"), study))
    ranked = RETRIEVERS.get("decomp")(rid, study).rank(corpus, queries, depth)
    index = {c: i for i, c in enumerate(corpus.chunk_ids)}
    ns = corpus.start_times.astype(np.int64)
    offset = 0
    for q, (question_id, text) in enumerate(zip(queries.question_ids, queries.texts)):
        subs = SUBQUERIES[q]
        vectors = np.vstack([question_vectors[q:q + 1], sub_matrix[offset:offset + len(subs)]])
        offset += len(subs)
        lists = [[index[c] for c in found] for found in
                 base_lists(base, study, corpus, [text, *subs], vectors, depth)]
        expected_ids, expected_scores = brute_rrf(lists, 5, ns, corpus.chunk_ids, depth, len(corpus.chunk_ids),
                                                  pad=(zero_scores == "pad"))
        got = ranked.rankings[ranked.rankings["question_id"] == question_id]
        assert got["chunk_id"].tolist() == expected_ids
        np.testing.assert_allclose(got["score"].to_numpy(), expected_scores, rtol=0, atol=1e-15)
        assert got["rank"].tolist() == list(range(1, len(expected_ids) + 1))
        assert (np.diff(got["score"].to_numpy()) <= 0).all()
    if zero_scores == "drop":
        assert (ranked.rankings["score"] > 0).all()
    assert list(ranked.matches.index) == queries.question_ids


def test_a_question_without_subqueries_keeps_the_base_order():
    rng = np.random.default_rng(11)
    corpus, queries, _, _ = corpus_and_queries(rng)
    study = params(rrf_k=60)
    ranked = DecompRetriever(VECTOR, study).rank(corpus, queries, 15)
    plain = VectorRetriever(RetrieverId("embedding_text", "vector"), study).rank(corpus, queries, 15)
    got = ranked.rankings[ranked.rankings["question_id"] == "q2"]          # q2 has no sub-query
    want = plain.rankings[plain.rankings["question_id"] == "q2"]
    assert got["chunk_id"].tolist() == want["chunk_id"].tolist()
    np.testing.assert_allclose(got["score"], 1 / (60 + np.arange(1, 16)))
    other = ranked.rankings[ranked.rankings["question_id"] == "q1"]["chunk_id"].tolist()
    assert other != plain.rankings[plain.rankings["question_id"] == "q1"]["chunk_id"].tolist()   # sub-queries count


def test_subqueries_that_repeat_the_question_multiply_its_scores_by_one_plus_m():
    rng = np.random.default_rng(5)
    corpus, queries, _, question_vectors = corpus_and_queries(rng)
    same = SubQueries(("q1", "q2", "q3"), SUBQUERIES, owner_of(SUBQUERIES),
                      np.repeat(question_vectors, [len(s) for s in SUBQUERIES], axis=0), "x", {})
    corpus = Corpus(corpus.chunk_ids, corpus.start_times, corpus.texts, corpus.vectors, lambda key: same)
    ranked = DecompRetriever(VECTOR, params(rrf_k=3)).rank(corpus, queries, 10)
    plain = VectorRetriever(RetrieverId("embedding_text", "vector"), params()).rank(corpus, queries, 10)
    assert ranked.rankings["chunk_id"].tolist() == plain.rankings["chunk_id"].tolist()
    for question_id, m in zip(queries.question_ids, (2, 0, 3)):
        got = ranked.rankings.loc[ranked.rankings["question_id"] == question_id, "score"].to_numpy()
        np.testing.assert_allclose(got, (1 + m) / (3 + np.arange(1, 11)), rtol=1e-15)


def test_the_component_declares_the_decomposition_stage_and_its_base_inputs():
    assert set(DecompRetriever.variants()) == {"vector", "bm25"}
    assert tuple(map(str, DecompRetriever.needs(VECTOR))) == ("decomposition", "vectors:embedding_text", "query_vectors")
    assert tuple(map(str, DecompRetriever.needs(BM25))) == ("decomposition", "representations")
    assert DecompRetriever.files(VECTOR, params()) == []
    assert [p.name for p in DecompRetriever.files(BM25, params())] == ["bm25_tokenizer_spec.txt"]
    assert [c.__module__ for c in DecompRetriever.uses(BM25)] == ["pmrag.retrieve.retrievers", "pmrag.retrieve.tokenizer"]
    assert "decomposition.rrf_k" in DecompRetriever.sections
    assert DecompRetriever.reads_embedding_cut(VECTOR) and not DecompRetriever.reads_embedding_cut(BM25)
    with pytest.raises(ValueError, match="the decomp variant must be one of vector, bm25"):
        DecompRetriever.needs(RetrieverId("summary", "decomp", "graph"))
    with pytest.raises(ValueError, match="ranks with 'decomp'"):
        DecompRetriever(RetrieverId("summary", "vector"), params())
