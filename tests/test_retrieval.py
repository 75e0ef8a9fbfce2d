"""Single-retriever runs: rankings follow the scores and the tie-break, TREC files agree with our metrics."""

import warnings

import numpy as np
import pandas as pd
import pytest

from pmrag.present import tables
from pmrag.evaluate import trec
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.retrieval import bm25_rankings, dense_rankings
from pmrag.retrieve.tokenizer import tokenize_many
from conftest import make_tiny_study

TEXTS = ["カフェでケーキ", "カフェ ミモザ で打ち合わせ", "会議は延期", "ケーキ屋 ミモザ", "延期 延期 会議"]
CHUNK_IDS = np.array(["c0", "c1", "c2", "c3", "c4"])
STARTS = np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"], dtype="datetime64[ns]")


def test_bm25_rankings_are_the_scores_in_tie_broken_order():
    ranking = bm25_rankings(TEXTS, ["ミモザのカフェ"], ["q"], CHUNK_IDS, STARTS, depth=5)
    scores = BM25Index.fit(tokenize_many(TEXTS)).scores(tokenize_many(["ミモザのカフェ"])[0])
    assert ranking["chunk_id"].tolist()[0] == "c1"  # both query terms
    assert np.allclose(ranking["score"], np.sort(scores)[::-1])
    zero = ranking[ranking["score"] == 0]["chunk_id"].tolist()
    assert zero == ["c4", "c2"]  # equal (zero) scores: later start time first
    assert ranking["rank"].tolist() == [1, 2, 3, 4, 5]


def test_dense_ties_are_broken_by_start_time_then_chunk_id():
    vectors = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    starts = np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-02"], dtype="datetime64[ns]")
    ranking = dense_rankings(vectors, np.array([[2.0, 0.0]]), ["q"], np.array(["a", "b", "c", "d"]), starts, depth=4)
    assert ranking["chunk_id"].tolist() == ["d", "b", "a", "c"]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    return make_tiny_study(
        tmp_path_factory.mktemp("tiny"),
        "embedding: {representations: [raw_text]}\nretrieval: {ks: [1, 5]}\nbootstrap: {n_resamples: 200}\n",
    )


def test_study_writes_trec_runs_that_ranx_scores_like_our_metrics(tiny_study):
    from ranx import Qrels, Run, evaluate

    files = tiny_study.build_runs()
    assert sorted(files) == ["embedding_text_bm25", "raw_text_bm25", "raw_text_vector", "summary_bm25"]
    per_question = tiny_study.per_question_metrics()
    assert set(per_question.columns) >= {"retriever", "question_id", "question_type", "recall@1", "mrr@5", "ndcg@5"}
    qrels = Qrels.from_file(str(tiny_study.run_dir / "qrels.trec"), kind="trec")
    for retriever, path in files.items():
        run = Run.from_file(path, kind="trec")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluate(qrels, run, ["recall@5-l2", "ndcg_burges@5"], return_mean=False, threads=1)
        ours = per_question[per_question["retriever"] == retriever].set_index("question_id")
        for qid in ours.index:
            assert run.scores["recall@5-l2"][qid] == pytest.approx(ours.loc[qid, "recall@5"], abs=1e-9)
            assert run.scores["ndcg_burges@5"][qid] == pytest.approx(ours.loc[qid, "ndcg@5"], abs=1e-9)


def test_trec_run_keeps_the_stored_ranking(tiny_study):
    rankings = tiny_study.rankings()
    written = trec.read_run(tiny_study.build_runs()["raw_text_bm25"])
    stored = rankings[rankings["retriever"] == "raw_text_bm25"]
    assert written[["question_id", "chunk_id", "rank"]].values.tolist() == stored[["question_id", "chunk_id", "rank"]].values.tolist()


def test_table3_and_grid_from_the_study(tiny_study):
    cis = tables.metric_cis(tiny_study.per_question_metrics(), 5, tiny_study.bootstrap_params())
    table = tables.table3(cis)
    assert list(table.columns) == ["Recall@5", "MRR@5", "nDCG@5"]
    assert table.index.tolist() == tiny_study.retrievers()
    assert all(cell.count("[") == 1 for cell in table.to_numpy().ravel())
    grid = tables.representation_grid(cis)
    assert grid.loc["raw_text", "vector"] == pytest.approx(cis.query("retriever == 'raw_text_vector' and metric == 'recall@5'")["mean"].item())
    assert pd.isna(grid.loc["summary", "vector"])
