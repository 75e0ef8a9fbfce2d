"""RM3 pseudo-relevance feedback: against a loop over dicts, λ = 1 is BM25, ids, tie-breaks."""

import math
from collections import Counter

import numpy as np
import pytest

from pmrag.core.names import RetrieverId
from pmrag.core.params import DEFAULT_RETRIEVERS, StudyParams
from pmrag.retrieve.prf import RM3Retriever, top_terms
from pmrag.retrieve.registry import RETRIEVERS, TOKENIZERS
from pmrag.retrieve.retrievers import BM25Retriever, Corpus, Queries
from pmrag.retrieve.tokenizer import tokenize
from pmrag.study.params import component_context

DOCS = [
    "京都旅行 新幹線 チケット 京都駅",
    "京都 ホテル 予約 京都タワー ホテル",
    "ホテル 朝食 バイキング",
    "テニス 練習 合宿 テニス",
    "新幹線 東京駅 時間 チケット",
    "カフェ ケーキ コーヒー",
    "京都 紅葉 写真 紅葉 紅葉",
    "京都 ホテル",
    "",
    "ホテル 京都 京都",
]
QUESTIONS = ["京都 ホテル", "新幹線 チケット チケット", "テニス", "存在しない語", "紅葉 京都", "ケーキ 京都 ホテル"]


def loop_bm25(docs, query_weights, k1=1.2, b=0.75):
    """Equation 8 with a weight per query term (counts for plain BM25), by loops over dicts."""
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    df = Counter(t for d in docs for t in set(d))
    scores = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for term, weight in query_weights.items():
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += weight * idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(score)
    return scores


def loop_rm3(docs, query, times, ids, m, k, lam):
    """RM3 as the module docstring states it, one question at a time."""
    first_seen = {t: i for i, t in reversed(list(enumerate(t for d in docs for t in d)))}
    counts = Counter(t for t in query if t in first_seen)
    length = sum(counts.values())
    first = loop_bm25(docs, counts)
    order = sorted(range(len(docs)), key=lambda i: (first[i], times[i], ids[i]), reverse=True)
    feedback = [i for i in order[:m] if first[i] > 0]
    total = sum(first[i] for i in feedback)
    model = Counter()
    for i in feedback:
        for term, f in Counter(docs[i]).items():
            model[term] += f / len(docs[i]) * first[i] / total
    kept = sorted(model, key=lambda t: (-model[t], first_seen[t]))[:k]
    mass = sum(model[t] for t in kept)
    weights = Counter({t: lam * c for t, c in counts.items()})
    for term in kept:
        weights[term] += (1 - lam) * length * model[term] / mass
    return loop_bm25(docs, weights)


def corpus_and_queries():
    n = len(DOCS)
    times = np.array(["2024-01-05"] * 3 + [f"2024-02-{i + 1:02d}" for i in range(n - 3)], dtype="datetime64[ns]")
    corpus = Corpus(chunk_ids=np.array([f"c{i:02d}" for i in range(n)]), start_times=times,
                    texts=lambda rep: list(DOCS), vectors=lambda rep: None)
    queries = Queries([f"q{i}" for i in range(len(QUESTIONS))], list(QUESTIONS), lambda: None)
    return corpus, queries


def params(**bm25):
    return StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, bm25=bm25)


def scores_of(ranked, corpus):
    table = ranked.rankings.pivot(index="question_id", columns="chunk_id", values="score")
    return table.loc[[f"q{i}" for i in range(len(QUESTIONS))], corpus.chunk_ids].to_numpy()


@pytest.mark.parametrize("m, k, lam", [(3, 4, 0.5), (1, 1, 0.2), (10, 50, 0.0), (2, 3, 0.8)])
def test_rm3_scores_equal_a_loop_over_dicts(m, k, lam):
    corpus, queries = corpus_and_queries()
    ranked = RM3Retriever(RetrieverId("raw_text", "rm3"), params(prf_docs=m, prf_terms=k, prf_weight=lam)).rank(
        corpus, queries, depth=len(DOCS))
    docs = [tokenize(t) for t in DOCS]
    times = corpus.start_times.astype(np.int64)
    expected = np.array([loop_rm3(docs, tokenize(q), times, list(corpus.chunk_ids), m, k, lam) for q in QUESTIONS])
    np.testing.assert_allclose(scores_of(ranked, corpus), expected, rtol=1e-12, atol=1e-12)
    assert (expected[3] == 0).all()          # no token in the vocabulary: no feedback, nothing scores


def test_feedback_reaches_chunks_without_a_query_token():
    corpus, queries = corpus_and_queries()
    ranked = RM3Retriever(RetrieverId("raw_text", "rm3"), params(prf_docs=2, prf_terms=10, prf_weight=0.3)).rank(
        corpus, queries, depth=len(DOCS))
    bm25 = BM25Retriever(RetrieverId("raw_text", "bm25"), params()).rank(corpus, queries, depth=len(DOCS))
    assert (ranked.matches > bm25.matches).any() and (ranked.matches >= bm25.matches).all()
    expanded, plain = scores_of(ranked, corpus), scores_of(bm25, corpus)
    assert ((expanded > 0) & (plain == 0)).any() and not ((expanded == 0) & (plain > 0)).any()


@pytest.mark.parametrize("variant", [None, "sudachi", "char2"])
def test_rm3_with_prf_weight_one_ranks_exactly_like_bm25(variant, tmp_path):
    corpus, queries = corpus_and_queries()
    settings = StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, cache_dir=str(tmp_path),
                           bm25={"prf_weight": 1, "prf_docs": 3, "prf_terms": 5})
    rm3 = RM3Retriever(RetrieverId("summary", "rm3", variant), settings).rank(corpus, queries, depth=len(DOCS))
    bm25 = BM25Retriever(RetrieverId("summary", "bm25", variant), settings).rank(corpus, queries, depth=len(DOCS))
    assert rm3.rankings.equals(bm25.rankings)
    assert rm3.matches.equals(bm25.matches)


@pytest.mark.agreement
def test_top_terms_keep_the_most_probable_ties_to_the_lower_column_and_renormalise():
    import scipy.sparse as sp

    model = sp.csr_matrix(np.array([[0.1, 0.3, 0.3, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.2, 0.0]]))
    kept = top_terms(model, 2).toarray()
    np.testing.assert_allclose(kept, [[0, 0.5, 0.5, 0, 0], [0, 0, 0, 0, 0], [0.5 / 0.7, 0, 0, 0.2 / 0.7, 0]])


def test_rm3_ids_name_the_tokenizer_like_bm25_and_validate_through_params():
    assert set(RM3Retriever.variants()) == set(BM25Retriever.variants())
    assert RETRIEVERS.get("rm3") is RM3Retriever
    assert RM3Retriever.sections == ("bm25",) and tuple(map(str, RM3Retriever.needs(RetrieverId("raw_text", "rm3")))) == (
        "representations",)
    assert RM3Retriever.__module__ == "pmrag.retrieve.prf"
    assert RM3Retriever.uses(RetrieverId("summary", "rm3", "sudachi")) == (TOKENIZERS.get("sudachi"),)
    ids = ["raw_text_rm3", "summary_rm3_sudachi", "embedding_text_rm3_char3"]
    loaded = StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                         "retrieval": {"retrievers": [*DEFAULT_RETRIEVERS, *ids]}},
                                        context=component_context())
    assert set(ids) <= set(loaded.retrieval.retrievers)
    with pytest.raises(ValueError, match="unknown rm3 variant"):
        StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                    "retrieval": {"retrievers": [*DEFAULT_RETRIEVERS, "raw_text_rm3_kuromoji"]}},
                                   context=component_context())


def test_rm3_params_are_validated_with_the_key_named():
    with pytest.raises(ValueError, match="prf_weight"):
        params(prf_weight=1.5)
    with pytest.raises(ValueError, match="prf_docs"):
        params(prf_docs=0)
