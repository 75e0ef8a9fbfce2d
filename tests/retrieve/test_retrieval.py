"""Single-retriever runs: rankings follow the scores and the tie-break, TREC files agree with our metrics."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pmrag.core import store
from pmrag.core.names import RetrieverId
from pmrag.core.params import DatasetSection, StudyParams, SyntheticSection
from pmrag.evaluate import reliability, trec
from pmrag.present import tables
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.retrievers import BM25Retriever, Corpus, Queries, VectorRetriever
from pmrag.retrieve.tokenizer import tokenize_many
from conftest import make_tiny_study

TEXTS = ["カフェでケーキ", "カフェ ミモザ で打ち合わせ", "会議は延期", "ケーキ屋 ミモザ", "延期 延期 会議"]
CHUNK_IDS = np.array(["c0", "c1", "c2", "c3", "c4"])
STARTS = np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"], dtype="datetime64[ns]")
PARAMS = StudyParams(run="x", dataset=DatasetSection(synthetic=SyntheticSection(enabled=True)))


def no_vectors(*_):
    raise AssertionError("BM25 must not read vectors")


def test_bm25_rankings_are_the_scores_in_tie_broken_order():
    corpus = Corpus(CHUNK_IDS, STARTS, texts={"raw_text": TEXTS}.__getitem__, vectors=no_vectors)
    queries = Queries(["q"], ["ミモザのカフェ"], vectors=no_vectors)
    ranked = BM25Retriever(RetrieverId.parse("raw_text_bm25"), PARAMS).rank(corpus, queries, depth=5)
    ranking = ranked.rankings
    scores = BM25Index.fit(tokenize_many(TEXTS)).scores(tokenize_many(["ミモザのカフェ"])[0])
    assert ranking["chunk_id"].tolist()[0] == "c1"  # both query terms
    assert np.allclose(ranking["score"], np.sort(scores)[::-1])
    zero = ranking[ranking["score"] == 0]["chunk_id"].tolist()
    assert zero == ["c4", "c2"]  # equal (zero) scores: later start time first
    assert ranking["rank"].tolist() == [1, 2, 3, 4, 5]
    assert ranked.matches.to_dict() == {"q": 3}  # c0, c1, c3 share a token with the question


def test_dense_ties_are_broken_by_start_time_then_chunk_id():
    vectors = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    starts = np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-02"], dtype="datetime64[ns]")
    corpus = Corpus(np.array(["a", "b", "c", "d"]), starts, texts=no_vectors, vectors={"raw_text": vectors}.__getitem__)
    queries = Queries(["q"], ["?"], vectors=lambda: np.array([[2.0, 0.0]]))
    ranking = VectorRetriever(RetrieverId.parse("raw_text_vector"), PARAMS).rank(corpus, queries, depth=4).rankings
    assert ranking["chunk_id"].tolist() == ["d", "b", "a", "c"]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    return make_tiny_study(
        tmp_path_factory.mktemp("tiny"),
        "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector], ks: [1, 5]}\n"
        "hybrid: {pairings: [[raw_text_bm25, raw_text_vector]]}\n"
        "analysis: {aggregate_type: contextual, diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\nbootstrap: {n_resamples: 200}\n",
    )


def run_files(study) -> dict[str, Path]:
    """Each single retriever's TREC run, written by its ``runs:<retriever>`` stage."""
    files = {}
    for rid in study.retrievers():
        study.ranked(rid)  # computes (or loads) the stage
        files[str(rid)] = study.run_dir / "runs" / f"{rid.file_stem()}.trec"
    return files


@pytest.mark.integration
def test_study_writes_trec_runs_that_ranx_scores_like_our_metrics(tiny_study):
    from ranx import Qrels, Run, evaluate

    files = run_files(tiny_study)
    assert sorted(files) == ["embedding_text_bm25", "raw_text_bm25", "raw_text_vector", "summary_bm25"]
    per_question = tiny_study.metrics()
    assert set(per_question.columns) >= {"retriever", "question_id", "question_type", "recall@1", "mrr@5", "ndcg@5"}
    qrels = Qrels.from_file(str(tiny_study.run_dir / "qrels.trec"), kind="trec")
    for retriever, path in files.items():
        run = Run.from_file(str(path), kind="trec")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluate(qrels, run, ["recall@5-l2", "ndcg_burges@5"], return_mean=False, threads=1)
        ours = per_question[per_question["retriever"] == retriever].set_index("question_id")
        for qid in ours.index:
            assert run.scores["recall@5-l2"][qid] == pytest.approx(ours.loc[qid, "recall@5"], abs=1e-9)
            assert run.scores["ndcg_burges@5"][qid] == pytest.approx(ours.loc[qid, "ndcg@5"], abs=1e-9)


@pytest.mark.integration
def test_trec_run_keeps_the_stored_ranking(tiny_study):
    ranking = tiny_study.rankings()["raw_text_bm25"]
    written = trec.read_run(run_files(tiny_study)["raw_text_bm25"])
    columns = ["question_id", "chunk_id", "rank"]
    assert len(written) > 0
    assert written[columns].values.tolist() == ranking[columns].values.tolist()
    stored = store.read_table(tiny_study.store, "rankings", ("retriever", "question_id", "rank"))
    stored = stored[stored["retriever"] == "raw_text_bm25"]
    assert stored[columns].values.tolist() == ranking[columns].values.tolist()


@pytest.mark.integration
def test_table3_and_grid_from_the_study(tiny_study):
    cis = reliability.metric_cis(tiny_study.metrics(), 5, tiny_study.params.bootstrap)
    table = tables.table3(cis)
    assert list(table.columns) == ["Recall@5", "MRR@5", "nDCG@5"]
    assert table.index.tolist() == [str(rid) for rid in tiny_study.retrievers()]
    assert all(cell.count("[") == 1 for cell in table.to_numpy().ravel())
    grid = tables.representation_grid(cis)
    assert grid.loc["raw_text", "vector"] == pytest.approx(cis.query("retriever == 'raw_text_vector' and metric == 'recall@5'")["mean"].item())
    assert pd.isna(grid.loc["summary", "vector"])


# --- the sides of a hybrid (hybrid.pairings: auto) ------------------------------------------------------------


LOCOMO_RETRIEVERS = ["raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_vector", "summary_vector",
                     "embedding_text_vector", "raw_text_bm25_word", "embedding_text_bm25_word", "raw_text_bm25_char3",
                     "raw_text_rm3_word", "raw_text_multivec_max", "raw_text_multivec_softmax", "raw_text_mmr_vector",
                     "raw_text_session", "raw_text_decomp_vector", "excerpt_vector", "summary_excerpt_vector"]


def test_a_retriever_reading_the_question_vector_is_dense_the_others_lexical():
    from pmrag.retrieve.retrievers import side_of

    sides = {name: side_of(RetrieverId.parse(name)) for name in [*LOCOMO_RETRIEVERS, "raw_text_mmr_bm25",
                                                                   "raw_text_decomp_bm25", "summary_graph_interest"]}
    lexical = {name for name, side in sides.items() if side == "lexical"}
    assert lexical == {"raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_bm25_word",
                       "embedding_text_bm25_word", "raw_text_bm25_char3", "raw_text_rm3_word", "raw_text_mmr_bm25",
                       "raw_text_decomp_bm25"}
    assert set(sides.values()) == {"lexical", "dense"}


def test_auto_over_locomos_retrievers_sweeps_every_lexical_dense_pair_through_the_loader(tmp_path):
    from pmrag.study.items import paired
    from pmrag.study.params import component_context

    raw = {"run": "t", "dataset": {"synthetic": {"enabled": True}}, "retrieval": {"retrievers": LOCOMO_RETRIEVERS},
           "hybrid": {"pairings": "auto"}}
    params = StudyParams.model_validate(raw, context=component_context())
    pairs = params.hybrid.pairings
    assert len(pairs) == 7 * 10 and len(set(pairs)) == 70   # 7 lexical × 10 dense retrievers, each pair once
    assert ("raw_text_bm25_word", "raw_text_multivec_max") in pairs   # the pairing the paper's six never try
    assert set(map(str, paired(params))) == set(LOCOMO_RETRIEVERS)   # the sweep stage reads every listed ranking
