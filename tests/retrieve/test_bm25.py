"""BM25 (§5.1, equations 8–9): a loop-based reference, bm25s, the tie-break, validation."""

import math

import bm25s
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from bm25s.tokenization import Tokenized

from pmrag.core.params import BM25Section
from pmrag.retrieve.bm25 import BM25Index, idf, length_norm, posting_weights, query_matrix, tf_weight
from pmrag.retrieve.ranking import (Ranker, kth_bounds, lower_bounds_of_kth, rank, rankings_from_score_blocks,
                                    rankings_from_scores, split_at_kth, top_k_candidates)
from pmrag.retrieve.tokenizer import tokenize, tokenize_many

CORPUS = [
    "2024-05-03 14:05 ゆい: 来週の京都旅行、新幹線のチケット取った？",
    "2024-05-03 14:06 母: まだ。USB充電器も忘れずに",
    "京都のホテルは駅の近くがいいな。京都駅から歩ける所",
    "ホテルの予約完了！京都タワーの近く",
    "明日のライブ、渋谷駅の改札で待ち合わせね",
    "ライブ最高だった。セットリスト送るね",
    "レポートの締め切りは金曜17時、提出はPDFで",
    "report.pdf を送ったよ、version 2.1",
    "PV数が伸びてる！動画のPVが1000超えた",
    "USBメモリどこ置いた？USB-Cのケーブルも",
    "新しいカフェのケーキ美味しかった",
    "カフェでケーキとコーヒー、コーヒーおかわり",
    "バイトのシフト変更お願いします",
    "シフト表見た？来週のシフト",
    "塾があるから少し遅れるかも",
    "雨だから練習は中止",
    "テニスの練習、明日は朝9時から",
    "テニス部の合宿の持ち物リスト",
    "誕生日プレゼント何がいいと思う？ハンカチとか",
    "お母さんの誕生日、ケーキ予約した",
    "プランAとプランBどっちにする？",
    "A型とB型の相性",
    "うん",
    "笑",
    "🍣🍣🍣",
    "京都 京都 京都 京都 京都 京都 京都 京都 京都 京都 京都 京都",
    "新幹線の時間、東京駅発8時",
    "東京タワーと京都タワー",
    "python_script.py の v1.2-beta を動かした",
    "iPhone15のケース買った、USB充電も",
]

QUERIES = [
    ["京都", "ホテル"],
    ["京都", "京都", "ホテル"],
    ["usb", "ケーブル"],
    ["pv", "動画", "pv"],
    ["存在しない語", "京都"],
    ["存在しない語"],
    ["a", "b", "プラン"],
    ["ケーキ", "コーヒー", "カフェ", "ケーキ"],
    ["report.pdf", "2.1"],
    [],
]


def direct_bm25(docs, query, k1=1.2, b=0.75):
    """Equations 8–9 by loops, straight from the paper (a token absent from d adds 0, also where k1 = 0
    or b = 1 with |d| = 0 would make the fraction 0/0)."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    out = []
    for d in docs:
        score = 0.0
        for t in query:
            df = sum(1 for other in docs if t in other)
            term_idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            f = d.count(t)
            if f:
                score += term_idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
        out.append(score)
    return np.array(out)


@pytest.fixture(scope="module")
def small_docs():
    docs = tokenize_many(CORPUS)
    assert [] in docs
    return docs


# --- (a) equations 8–9 against a loop-based reference --------------------------------------------


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.0, 0.75), (2.0, 0.0), (1.2, 1.0)])
def test_scores_equal_direct_equations(small_docs, k1, b):
    index = BM25Index.fit(small_docs, BM25Section(k1=k1, b=b))
    for query in QUERIES:
        np.testing.assert_allclose(index.scores(query), direct_bm25(small_docs, query, k1, b), rtol=1e-12, atol=1e-12)


def test_scores_many_equals_scores(small_docs):
    index = BM25Index.fit(small_docs)
    many = index.scores_many(QUERIES)
    assert many.shape == (len(QUERIES), len(small_docs)) and many.dtype == np.float64
    for row, query in zip(many, QUERIES):
        np.testing.assert_array_equal(row, index.scores(query))


def test_repeated_query_tokens_count_repeatedly(small_docs):
    index = BM25Index.fit(small_docs)
    once, twice = index.scores(["京都", "ホテル"]), index.scores(["京都", "京都", "ホテル"])
    np.testing.assert_allclose(twice - once, index.scores(["京都"]), rtol=1e-12, atol=0)
    assert (twice > once).sum() == sum("京都" in d for d in small_docs)


def test_index_statistics(small_docs):
    index = BM25Index.fit(small_docs)
    assert index.n_docs == len(CORPUS)
    assert list(index.doc_lengths) == [len(d) for d in small_docs]
    assert index.avgdl == pytest.approx(sum(map(len, small_docs)) / len(small_docs))
    df = sum("京都" in d for d in small_docs)
    assert index.idf[index.vocabulary["京都"]] == pytest.approx(math.log(1 + (len(small_docs) - df + 0.5) / (df + 0.5)))
    assert idf(np.array([0]), 10)[0] == pytest.approx(math.log(1 + 10.5 / 0.5))
    assert (index.idf > 0).all()


def test_posting_weights_in_place_are_equation_8_bit_for_bit(zipf):
    _, _, index, _ = zipf
    counts = index.counts
    doc_freqs = np.diff(counts.indptr)
    for k1, b in ((1.2, 0.75), (0.9, 0.4), (2.0, 1.0)):
        expected = np.repeat(index.idf, doc_freqs) * tf_weight(counts.data, index.doc_lengths[counts.indices],
                                                               index.avgdl, k1, b)
        found = posting_weights(counts.data, length_norm(index.doc_lengths, index.avgdl, b), counts.indices,
                                index.idf, doc_freqs, k1)
        assert np.array_equal(found, expected) and found.dtype == np.float64
        tf = counts.data.copy()
        over = posting_weights(tf, length_norm(index.doc_lengths, index.avgdl, b), counts.indices, index.idf,
                               doc_freqs, k1, overwrite_tf=True)
        assert over is tf and np.array_equal(over, expected)   # written over the counts, the same bits


def test_an_index_without_counts_scores_the_same_and_shares_its_postings(small_docs):
    kept, lean = BM25Index.fit(small_docs), BM25Index.fit(small_docs, keep_counts=False)
    assert lean.counts is None and kept.counts is not None
    assert np.shares_memory(kept.weights.indices, kept.counts.indices)   # the same postings, held once
    assert np.shares_memory(kept.weights.indptr, kept.counts.indptr)
    np.testing.assert_array_equal(lean.scores_many(QUERIES), kept.scores_many(QUERIES))
    counted = BM25Index.fit_counts(kept.counts.T, kept.vocabulary, keep_counts=False)
    assert counted.counts is None
    np.testing.assert_array_equal(counted.scores_many(QUERIES), kept.scores_many(QUERIES))
    given = kept.counts.copy()
    by_term = BM25Index.fit_term_counts(given, kept.vocabulary, keep_counts=False)   # already terms × documents
    np.testing.assert_array_equal(by_term.scores_many(QUERIES), kept.scores_many(QUERIES))
    assert np.shares_memory(by_term.weights.data, given.data)   # taken over: the weights are where its counts were
    assert kept.counts.data.max() >= 1 and np.array_equal(kept.counts.data, np.round(kept.counts.data))  # kept ones stay


def test_tokenizer_feeds_queries_too(small_docs):
    index = BM25Index.fit(small_docs)
    scores = index.scores(tokenize("京都のホテルについて教えて"))
    assert int(np.argmax(scores)) in (2, 3)


# --- (b) against bm25s on a larger Zipf corpus ---------------------------------------------------


def zipf_corpus(n_docs=2000, n_vocab=4000, seed=7):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_vocab + 1) ** 1.1
    p /= p.sum()
    lengths = rng.integers(1, 250, size=n_docs)
    lengths[17] = 0
    docs = [[f"t{i}" for i in rng.choice(n_vocab, size=n, p=p)] for n in lengths]
    queries = []
    for _ in range(50):
        size = int(rng.integers(1, 9))
        ids = np.unique(np.concatenate([rng.choice(n_vocab, size=size, p=p), rng.integers(0, n_vocab, size=2)]))
        queries.append([f"t{i}" for i in ids] + ["never_seen"])
    return docs, queries


@pytest.fixture(scope="module")
def zipf():
    docs, queries = zipf_corpus()
    vocab = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in d] for d in docs]
    retrievers = {}
    for dtype in ("float64", "float32"):
        retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype=dtype)
        retriever.index(Tokenized(ids=ids, vocab=dict(vocab)), show_progress=False)
        retrievers[dtype] = retriever
    return docs, queries, BM25Index.fit(docs), retrievers


def bm25s_scores(retriever, query):
    """bm25s.BM25 (lucene) leaves out the constant (k1 + 1) factor of equation 8."""
    known = [t for t in query if t in retriever.vocab_dict]
    return (1.2 + 1) * retriever.get_scores(known).astype(np.float64)


@pytest.mark.agreement
def test_zipf_queries_are_unique_tokens_with_one_absent(zipf):
    _, queries, index, _ = zipf
    assert all(len(set(q)) == len(q) and "never_seen" not in index.vocabulary for q in queries)


@pytest.mark.agreement
def test_scores_match_bm25s_float64(zipf):
    _, queries, index, retrievers = zipf
    ours = index.scores_many(queries)
    for row, query in zip(ours, queries):
        np.testing.assert_allclose(row, bm25s_scores(retrievers["float64"], query), rtol=1e-12, atol=1e-12)


@pytest.mark.agreement
def test_scores_match_bm25s_float32(zipf):
    _, queries, index, retrievers = zipf
    ours = index.scores_many(queries)
    for row, query in zip(ours, queries):
        np.testing.assert_allclose(row, bm25s_scores(retrievers["float32"], query), rtol=1e-5, atol=1e-5 * row.max())


def separated_top(scores, k, rel_gap):
    """True if the top k+1 scores are pairwise further apart than rel_gap (no near-ties to reorder)."""
    top = np.sort(scores)[::-1][: k + 1]
    return bool((np.diff(top[::-1]) > rel_gap * max(top[0], 1e-300)).all())


@pytest.mark.agreement
@pytest.mark.parametrize("dtype, gap", [("float64", 1e-9), ("float32", 1e-4)])
def test_top10_matches_bm25s_retrieve(zipf, dtype, gap):
    docs, queries, index, retrievers = zipf
    n = len(docs)
    times, chunk_ids = np.zeros(n, dtype=np.int64), np.arange(n)
    compared = 0
    for query in queries:
        scores = index.scores(query)
        if not separated_top(scores, 10, gap):
            continue
        known = [retrievers[dtype].vocab_dict[t] for t in query if t in retrievers[dtype].vocab_dict]
        theirs, _ = retrievers[dtype].retrieve([known], k=10, show_progress=False)
        np.testing.assert_array_equal(rank(scores, times, chunk_ids, 10), theirs[0])
        compared += 1
    assert compared >= 40


def test_dense_and_sparse_term_rows_sum_as_the_sparse_product_bit_for_bit(zipf):
    _, _, index, _ = zipf
    dense_terms = np.flatnonzero(index.dense.slot >= 0)
    sparse_terms = np.flatnonzero(index.dense.slot < 0)
    assert len(dense_terms) and len(sparse_terms)
    rng = np.random.default_rng(11)
    rows = [np.sort(np.concatenate([rng.choice(dense_terms, 2, replace=False), rng.choice(sparse_terms, 3, replace=False)])) for _ in range(30)]
    query = sp.csr_matrix((rng.choice([1.0, 2.0, 0.37], 150), np.concatenate(rows), np.arange(0, 151, 5)),
                          shape=(30, index.weights.shape[0]))
    product = (query @ index.weights).toarray()
    assert np.array_equal(index.scores_matrix(query), product)
    # blocks are written over the last block's scores: a row that starts with a dense term of weight 1 is written as
    # 0 + its row, the others from zeros
    first = query.indices[query.indptr[:-1]]
    starts_dense = (index.dense.slot[first] >= 0) & (query.data[query.indptr[:-1]] == 1.0)
    assert starts_dense.any() and not starts_dense.all()
    assert np.array_equal(np.vstack([block.copy() for block in index.score_blocks(query, 4)]), product)
    assert np.array_equal(index.dense.rows, index.weights[dense_terms].toarray())   # each dense row, as stored
    assert np.array_equal(index.dense.slot[dense_terms], np.arange(len(dense_terms)))


@pytest.mark.parametrize("rows", [1, 2, 7, None])
def test_score_blocks_are_the_rows_of_the_score_matrix_bit_for_bit(zipf, rows):
    _, queries, index, _ = zipf
    query = query_matrix(queries[:17], index.vocabulary)
    whole = index.scores_matrix(query)
    blocks = [block.copy() for block in index.score_blocks(query, rows)]   # one buffer: copied as they come
    assert [len(block) for block in blocks[:-1]] == [rows or len(blocks[0])] * (len(blocks) - 1)
    assert np.array_equal(np.vstack(blocks), whole)
    assert list(index.score_blocks(query[:0], rows)) == []
    with pytest.raises(ValueError, match="rows must be a positive integer"):
        index.score_blocks(query, 0)                # when called, before any block is asked for
    with pytest.raises(ValueError, match="term columns"):
        index.score_blocks(query[:, :-1])


def test_top_of_blocks_is_top_many(zipf):
    docs, queries, index, _ = zipf
    rng = np.random.default_rng(3)
    ranker = Ranker(rng.integers(0, 40, size=len(docs)), np.arange(len(docs)))
    query = query_matrix(queries, index.vocabulary)
    expected = ranker.top_many(index.scores_matrix(query), 30)
    tops = ranker.top_of_blocks(index.score_blocks(query, 3), 30)
    assert len(tops) == len(expected) and all(np.array_equal(a, b) for a, b in zip(tops, expected))
    with pytest.raises(ValueError, match="entries, the corpus"):
        ranker.top_of_blocks([np.zeros((1, len(docs) + 1))], 3)
    with pytest.raises(ValueError, match="finite"):
        ranker.top_of_blocks([np.full((1, len(docs)), np.nan)], 3)


@pytest.mark.parametrize("positive_only", [False, True])
def test_rankings_from_score_blocks_equal_those_of_the_whole_matrix(positive_only):
    rng = np.random.default_rng(8)
    scores = np.where(rng.random((9, 300)) < np.linspace(0.0, 0.9, 9)[:, None], rng.integers(1, 4, (9, 300)) * 0.5, 0.0)
    times = rng.integers(0, 20, size=300)
    chunk_ids = np.array([f"c{i:03d}" for i in rng.permutation(300)], dtype=object)
    question_ids = [f"q{i}" for i in range(9)]
    expected = rankings_from_scores(scores, question_ids, chunk_ids, times, 40, scores > 0 if positive_only else None)
    blocks = (scores[i:i + 4] for i in range(0, 9, 4))
    rankings, matches = rankings_from_score_blocks(blocks, question_ids, chunk_ids, times, 40,
                                                   positive_only=positive_only)
    pd.testing.assert_frame_equal(rankings, expected)
    assert matches.tolist() == (scores > 0).sum(axis=1).tolist()
    assert len(rankings[rankings["question_id"] == "q0"]) == (0 if positive_only else 40)   # q0 scores 0 everywhere
    assert (rankings.groupby("question_id")["rank"].min() == 1).all()
    with pytest.raises(ValueError, match="hold 4 rows, for 9 questions"):
        rankings_from_score_blocks([scores[:4]], question_ids, chunk_ids, times, 40)


@pytest.mark.agreement
def test_repeated_tokens_match_bm25s_which_does_not_deduplicate(zipf):
    _, queries, index, retrievers = zipf
    for query in queries[:10]:
        repeated = query + query[:2] + query[:1]
        ours = index.scores(repeated)
        np.testing.assert_allclose(ours, bm25s_scores(retrievers["float64"], repeated), rtol=1e-12, atol=1e-12)
        expected = index.scores(query) + index.scores(query[:2]) + index.scores(query[:1])
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)


# --- (c) ranking and tie-break ---------------------------------------------------------------------


def brute_force_rank(scores, times_ns, chunk_ids, k):
    keyed = sorted(range(len(scores)), key=lambda i: (scores[i], times_ns[i], chunk_ids[i], i), reverse=True)
    return keyed[:k]


def test_ties_by_start_time_descending_then_chunk_id_descending():
    scores = np.array([1.0, 2.0, 2.0, 2.0, 2.0, 0.5])
    times = np.array(
        ["2024-01-01T10:00", "2024-01-01T09:00", "2024-01-02T09:00", "2024-01-01T09:00", "2023-12-31", "2025-01-01"],
        dtype="datetime64[m]",
    )
    chunk_ids = np.array(["c0", "c1", "c2", "c3", "c4", "c5"])
    assert list(rank(scores, times, chunk_ids, 6)) == [2, 3, 1, 4, 0, 5]


def test_ties_at_the_k_th_score_are_all_candidates():
    scores = np.array([3.0, 2.0, 2.0, 2.0, 2.0, 1.0])
    times = np.array([0, 5, 9, 1, 9, 99])
    chunk_ids = np.array(["a", "b", "c", "d", "e", "f"])
    assert list(rank(scores, times, chunk_ids, 2)) == [0, 4]
    assert list(rank(scores, times, chunk_ids, 3)) == [0, 4, 2]


def test_zero_score_documents_ranked_after_positive_ones():
    scores = np.array([0.0, 1.5, 0.0, 0.7, 0.0])
    times = np.array([10, 1, 30, 2, 20])
    ids = np.array(["x", "y", "z", "w", "v"])
    assert list(rank(scores, times, ids, 10)) == [1, 3, 2, 4, 0]
    assert list(rank(scores, times, ids, 2)) == [1, 3]


def test_rank_matches_brute_force_with_many_ties():
    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(1, 300))
        scores = rng.integers(0, 4, size=n) * 0.5
        times = rng.integers(0, 5, size=n).astype(np.int64)
        chunk_ids = np.array([f"chunk_{i:04d}" for i in rng.permutation(n)])
        if trial % 3 == 0:
            chunk_ids[: n // 2] = "dup"
        for k in (1, 5, 200, 1000):
            expected = brute_force_rank(scores.tolist(), times.tolist(), chunk_ids.tolist(), k)
            assert list(rank(scores, times, chunk_ids, k)) == expected


def test_split_at_kth_from_any_lower_bound_and_any_likely_one():
    rng = np.random.default_rng(8)
    scores = rng.integers(0, 6, size=(3, 500)).astype(np.float64)
    for k in (1, 9, 120):
        bounds = lower_bounds_of_kth(scores, k)
        for row, bound in zip(scores, bounds):
            kth = np.sort(row)[::-1][k - 1]
            assert bound <= kth
            # a likely bound may be right (below the k-th), the k-th itself or above it (too few above: fallback)
            for given in (bound, kth, row.min()):
                for likely in (None, given, (given + kth) / 2, kth, kth + 0.5, row.max() + 1):
                    above, tied = split_at_kth(row, k, given, likely)
                    assert sorted(above) == list(np.flatnonzero(row > kth))
                    assert sorted(tied) == list(np.flatnonzero(row == kth))
                    candidates, found = top_k_candidates(row, k, given, likely)
                    assert found == kth and sorted(candidates) == list(np.flatnonzero(row >= kth))


def test_kth_bounds_sure_below_the_kth_and_likely_above_the_sure_one():
    rng = np.random.default_rng(9)
    scores = rng.gamma(2.0, size=(20, 22_329))
    for k in (5, 200, 1_000):
        sure, likely = kth_bounds(scores, k)
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1]
        assert (sure <= kth).all() and (likely >= sure).all()
        assert np.array_equal(sure, lower_bounds_of_kth(scores, k))
        if k == 200:   # the guess is tighter: far fewer scores above it than above the sure bound
            assert (likely > sure).all() and (likely <= kth).all()
            assert ((scores > likely[:, None]).sum(1) * 3 < (scores > sure[:, None]).sum(1)).all()


def test_top_many_with_a_likely_bound_that_misses():
    # a periodic row: 25 high scores every `period` places, the rest tied at 1.  The sample takes every 12th score
    # (5,000 // (8 · 50)), so for period 12 it holds all 25 high ones, its guess lies above the 50th largest and the
    # ranking falls back to the sure bound; the other periods rank through the thousands tied at 1
    n, k = 5_000, 50
    times = np.arange(n, dtype=np.int64) % 97
    chunk_ids = np.array([f"c{i:05d}" for i in range(n)])
    ranker = Ranker(times, chunk_ids)
    for period in (2, 3, 5, 12, 13):
        scores = np.where(np.arange(n) % period == 0, 3.0 + (np.arange(n) % 7) * 0.25, 1.0).astype(np.float64)
        scores[::period][k // 2:] = 1.0
        sure, likely = kth_bounds(scores[np.newaxis], k)
        if period == 12:
            assert likely[0] > sure[0] and (scores > likely[0]).sum() < k
        expected = brute_force_rank(scores.tolist(), times.tolist(), chunk_ids.tolist(), k)
        assert list(ranker.top_many(scores[np.newaxis], k)[0]) == expected


def test_top_many_is_top_of_each_row_with_a_corpus_wide_tie_at_zero():
    rng = np.random.default_rng(5)
    n = 2_000
    scores = np.where(rng.random((12, n)) < np.linspace(0.01, 0.9, 12)[:, None], rng.integers(1, 6, (12, n)) * 0.25, 0.0)
    times = rng.integers(0, 50, size=n).astype(np.int64)
    chunk_ids = np.array([f"chunk_{i:04d}" for i in rng.permutation(n)])
    ranker = Ranker(times, chunk_ids)
    for k in (1, 7, 40, 500):
        tops = ranker.top_many(scores, k)
        for row, top in zip(scores, tops):
            assert list(top) == brute_force_rank(row.tolist(), times.tolist(), chunk_ids.tolist(), k)
    with pytest.raises(ValueError, match="2-D"):
        ranker.top_many(scores[0], 3)


def test_datetime64_and_integer_nanoseconds_agree():
    times = np.array(["2024-01-01T00:00:00.000000001", "2024-01-01T00:00:00.000000002"], dtype="datetime64[ns]")
    scores = np.array([1.0, 1.0])
    ids = np.array(["b", "a"])
    assert list(rank(scores, times, ids, 2)) == [1, 0]
    assert list(rank(scores, times.astype(np.int64), ids, 2)) == [1, 0]
    assert list(rank(scores, times.astype("datetime64[s]"), ids, 2)) == [0, 1]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"k": 0}, ValueError),
        ({"k": 2.0}, ValueError),
        ({"k": True}, ValueError),
        ({"scores": np.array([1.0, np.nan])}, ValueError),
        ({"scores": np.ones((2, 1))}, ValueError),
        ({"start_times": np.array([0, 1, 2])}, ValueError),
        ({"start_times": np.array(["2024-01-01", "NaT"], dtype="datetime64[D]")}, ValueError),
        ({"start_times": np.array(["2024-01-01", "2024-01-02"])}, TypeError),
    ],
)
def test_rank_validation(kwargs, error):
    args = {"scores": np.array([1.0, 2.0]), "start_times": np.array([0, 1]), "chunk_ids": np.array(["a", "b"]), "k": 1}
    args.update(kwargs)
    with pytest.raises(error):
        rank(**args)


# --- (d) parameter and input validation ------------------------------------------------------------


@pytest.mark.parametrize(
    "k1, b",
    [
        (-0.1, 0.75), (1.2, -0.01), (1.2, 1.01), (float("nan"), 0.75), (float("inf"), 0.75),
        (True, 0.75), ("1.2", 0.75), (1.2, None),
    ],
)
def test_k1_b_validation(k1, b):
    with pytest.raises(ValueError):
        BM25Section(k1=k1, b=b)


def test_paper_defaults():
    assert BM25Section() == BM25Section(k1=1.2, b=0.75)
    assert BM25Index.fit([["x"]]).params == BM25Section(k1=1.2, b=0.75)
    assert BM25Section(k1=0, b=1).k1 == 0


def test_fit_input_validation():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index.fit([])
    with pytest.raises(TypeError, match="tokenize first"):
        BM25Index.fit(["京都のホテル"])
    with pytest.raises(TypeError):
        BM25Index.fit("京都")
    with pytest.raises(TypeError, match="tokenize first"):
        BM25Index.fit([["x"]]).scores_many(["x"])


# --- (e) empty queries, empty corpora --------------------------------------------------------------


def test_empty_or_unknown_query_scores_zero(small_docs):
    index = BM25Index.fit(small_docs)
    for query in ([], ["never_seen"], tokenize("これについて教えて")):
        scores = index.scores(query)
        assert scores.shape == (len(small_docs),) and scores.dtype == np.float64
        assert not scores.any()
    assert index.scores_many([]).shape == (0, len(small_docs))


def test_corpus_of_empty_documents():
    index = BM25Index.fit([[], []])
    assert index.avgdl == 0.0
    np.testing.assert_array_equal(index.scores(["x"]), [0.0, 0.0])


def test_fit_accepts_any_iterable_of_token_lists():
    from_generator = BM25Index.fit(iter([("a", "b"), ("b",)]))
    np.testing.assert_array_equal(from_generator.scores(["b"]), BM25Index.fit([["a", "b"], ["b"]]).scores(["b"]))


def test_token_lists_encoded_a_block_at_a_time_give_the_ids_of_one_pass(monkeypatch):
    """Blocks of 3 documents (``ENCODE_DOCS``): a term first seen in a later block gets the next id, a term seen
    before keeps its id; the index fitted from an iterator equals the one fitted from the whole list."""
    from pmrag.retrieve import bm25 as bm25_module

    docs = [["b", "a", "b"], [], ["c", "a"], ["d"], ["a", "e", "d"], ["f", "b"], ["e"]]
    reference: dict[str, int] = {}
    ids = [reference.setdefault(t, len(reference)) for doc in docs for t in doc]
    monkeypatch.setattr(bm25_module, "ENCODE_DOCS", 3)
    vocabulary, token_ids, lengths = bm25_module.encode_token_lists(iter(docs))
    assert vocabulary == reference and list(vocabulary) == ["b", "a", "c", "d", "e", "f"]
    assert token_ids.tolist() == ids and lengths.tolist() == [3, 0, 2, 1, 3, 2, 1]
    blocked = BM25Index.fit(iter(docs))
    monkeypatch.setattr(bm25_module, "ENCODE_DOCS", 10**6)
    whole = BM25Index.fit(docs)
    assert blocked.vocabulary == whole.vocabulary
    assert (blocked.weights != whole.weights).nnz == 0 and np.array_equal(blocked.idf, whole.idf)
    with pytest.raises(TypeError, match="tokenize first"):
        BM25Index.fit(iter([["a"], ["b"], ["c"], "d e"]))   # in the second block


def test_index_texts_tokenizes_in_blocks_and_indexes_as_one_call(monkeypatch):
    """Documents go to the tokenizer a block at a time, encoded (``encode_many``, the regex tokenizer) or as token
    lists (a tokenizer with ``tokenize_many`` alone); either way the index is that of one block.  A subclass of the
    regex tokenizer with a ``tokenize_many`` of its own has its documents tokenized by it, as its queries are."""
    from pmrag.retrieve import bm25 as bm25_module
    from pmrag.retrieve.lexical import index_texts
    from pmrag.retrieve.tokenizer import RegexTokenizer, default_spec

    calls = []

    class Counting(RegexTokenizer):
        def encode_many(self, texts):
            calls.append(("encode", len(texts)))
            return super().encode_many(texts)

    class ListsOnly:
        def tokenize_many(self, texts):
            calls.append(("lists", len(list(texts))))
            return tokenize_many(texts)

    documents = [f"会議 {i} の資料 room{i % 4} です" for i in range(10)]
    queries = ["会議 room1", "資料"]
    monkeypatch.setattr(bm25_module, "ENCODE_DOCS", 4)
    blocked, blocked_queries = index_texts(Counting(default_spec()), documents, queries, BM25Section())
    assert calls == [("encode", 4), ("encode", 4), ("encode", 2)]   # three blocks (the queries: tokenize_many)
    calls.clear()
    lists, lists_queries = index_texts(ListsOnly(), documents, queries, BM25Section())
    assert calls == [("lists", 4), ("lists", 4), ("lists", 2), ("lists", 2)]
    monkeypatch.setattr(bm25_module, "ENCODE_DOCS", 10**6)
    whole, whole_queries = index_texts(RegexTokenizer(default_spec()), documents, queries, BM25Section())
    for index, query_counts in ((blocked, blocked_queries), (lists, lists_queries)):
        assert index.vocabulary == whole.vocabulary and (index.weights != whole.weights).nnz == 0
        assert (query_counts != whole_queries).nnz == 0

    class Tagged(RegexTokenizer):   # a subclass's own tokens reach the documents too, not the spec's alone
        def tokenize_many(self, texts):
            return [[*tokens, "tagged"] for tokens in tokenize_many(texts)]

    tagged, tagged_queries = index_texts(Tagged(default_spec()), documents, queries, BM25Section())
    assert set(tagged.vocabulary) == set(whole.vocabulary) | {"tagged"} and tagged.doc_lengths.min() >= 1
    assert tagged_queries[:, tagged.vocabulary["tagged"]].toarray().ravel().tolist() == [1.0, 1.0]


def test_regex_encode_many_is_encode_block_of_the_token_lists():
    """The regex tokenizer's ``encode_many`` (its rule applied once per distinct match) gives exactly the terms,
    ids and lengths of ``encode_block`` over ``tokenize_many``: short terms kept, single characters dropped but
    ``a``/``b``, stopwords dropped, documents left with no token (or none to begin with) of length 0."""
    from pmrag.retrieve.bm25 import encode_block
    from pmrag.retrieve.tokenizer import default_spec

    spec = default_spec()
    words = ["usb", "pv", "a", "b", "c", "x", "7", "コレ", "ソノ", "会議", "室", "ルーム", "r2-d2", "v1.2", "資料",
             "これ", "の", "です", "Ｕｓｂ", "room", "ROOM", "東京都", "ア", "ab"]
    rng = np.random.default_rng(11)
    texts = ["", "の です", "c x 7"] + [" ".join(rng.choice(words, size=int(rng.integers(0, 12)))) for _ in range(300)]
    expected_terms, expected_ids, expected_lengths = encode_block(tokenize_many(texts, spec))
    terms, ids, lengths = spec.encode_many(texts)
    assert terms == expected_terms and {"usb", "pv", "a", "b"} <= set(terms)
    assert not {"c", "x", "7", "コレ", "ソノ", "室", "ア"} & set(terms)
    assert ids.dtype == expected_ids.dtype and ids.tolist() == expected_ids.tolist()
    assert lengths.dtype == expected_lengths.dtype and lengths.tolist() == expected_lengths.tolist()
    assert lengths[:3].tolist() == [0, 0, 0]
    empty_terms, empty_ids, empty_lengths = spec.encode_many(["", "の"])
    assert empty_terms == [] and len(empty_ids) == 0 and empty_lengths.tolist() == [0, 0]
