"""Retrievers as components: a method registered in a test runs through every stage (rankings, TREC run, metrics,
sweep, hybrids, intervals, tables); an unregistered method is refused on load; BM25's zero_scores setting."""

import numpy as np
import pytest

from pmrag.core.errors import ParamsError
from pmrag.core.names import HybridId, RetrieverId
from pmrag.evaluate import reliability, trec
from pmrag.present import tables
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import TEXTS, RetrieverComponent, ranked_from_scores
from conftest import make_tiny_study

TOY = "raw_text_toy"
RETRIEVERS_LISTED = ["raw_text_bm25", "summary_bm25", "raw_text_vector", "summary_vector", TOY]
TOY_YAML = (
    f"retrieval: {{retrievers: [{', '.join(RETRIEVERS_LISTED)}]}}\n"
    "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25}\n"
    f"hybrid: {{pairings: [[raw_text_bm25, raw_text_vector], [{TOY}, raw_text_vector]], beta_step: 0.25}}\n"
    "bootstrap: {n_resamples: 200}\n"
)


def shared_characters(question: str, text: str) -> int:
    """The toy score: distinct characters (ignoring case and whitespace) the question and the chunk share."""
    return len({c for c in question.lower() if not c.isspace()} & set(text.lower()))


class ToyRetriever(RetrieverComponent):
    """Ranks a representation's texts by the characters they share with the question."""

    method = "toy"

    @classmethod
    def needs(cls, rid):
        return (TEXTS,)

    def rank(self, corpus, queries, depth):
        texts = corpus.texts(self.rid.representation)
        scores = np.array([[shared_characters(q, t) for t in texts] for q in queries.texts], dtype=np.float64)
        return ranked_from_scores(scores, corpus, queries, depth)


@pytest.fixture(scope="module")
def toy_study(tmp_path_factory):
    RETRIEVERS.register("toy")(ToyRetriever)
    try:
        study = make_tiny_study(tmp_path_factory.mktemp("toy"), TOY_YAML)
        study.build()
        yield study
    finally:
        RETRIEVERS.unregister("toy")


def test_toy_rankings_are_its_scores_in_order(toy_study):
    rankings = toy_study.rankings()
    assert list(rankings) == RETRIEVERS_LISTED
    toy = rankings[TOY]
    questions = toy_study.evaluation().questions.set_index("question_id")["text"]
    texts = toy_study.representations().set_index("chunk_id")["raw_text"]
    n_chunks = len(texts)
    assert sorted(toy["question_id"].unique()) == sorted(questions.index)
    for qid, rows in toy.groupby("question_id"):
        assert rows["rank"].tolist() == list(range(1, n_chunks + 1))
        assert sorted(rows["chunk_id"]) == sorted(texts.index)
        expected = [shared_characters(questions[qid], texts[c]) for c in rows["chunk_id"]]
        assert rows["score"].tolist() == pytest.approx(expected, abs=0)
        assert np.all(np.diff(rows["score"].to_numpy()) <= 0)
        assert max(expected) > 0
    ranked = toy_study.ranked(TOY)
    assert ranked.matches.to_dict() == {q: int((toy[toy["question_id"] == q]["score"] > 0).sum())
                                        for q in questions.index}


def test_toy_run_file_holds_its_rankings(toy_study):
    run = trec.read_run(toy_study.run_dir / "runs" / f"{TOY}.trec")
    rankings = toy_study.rankings()[TOY]
    assert run[["question_id", "chunk_id"]].values.tolist() == rankings[["question_id", "chunk_id"]].values.tolist()
    assert run["rank"].tolist() == rankings["rank"].tolist()
    assert set(run["tag"]) == {TOY}


def test_toy_metrics_rows_score_its_rankings(toy_study):
    metrics = toy_study.metrics()
    assert list(dict.fromkeys(metrics["retriever"])) == RETRIEVERS_LISTED
    rows = metrics[metrics["retriever"] == TOY].set_index("question_id")
    evaluation = toy_study.evaluation()
    assert sorted(rows.index) == sorted(evaluation.questions["question_id"])
    rankings = toy_study.rankings()[TOY]
    for qid, gold in evaluation.qrels[evaluation.qrels["relevance"] == 2].groupby("question_id"):
        ranked = rankings[rankings["question_id"] == qid]
        first = ranked[ranked["chunk_id"].isin(gold["chunk_id"])]["rank"].min()
        assert rows.loc[qid, "mrr@5"] == pytest.approx(1 / first if first <= 5 else 0.0, abs=1e-12)


def test_toy_pairing_is_swept_selected_and_bootstrapped(toy_study):
    betas = toy_study.params.hybrid.betas()
    assert betas == (0.0, 0.25, 0.5, 0.75, 1.0)
    sweep = toy_study.sweep()
    swept = sweep[(sweep["bm25"] == TOY) & (sweep["vector"] == "raw_text_vector")]
    n_questions = len(toy_study.evaluation().questions)
    assert len(swept) == len(betas) * n_questions
    assert sorted(set(swept["beta"])) == list(betas)
    assert set(zip(sweep["bm25"], sweep["vector"])) == {("raw_text_bm25", "raw_text_vector"), (TOY, "raw_text_vector")}

    hybrids = toy_study.hybrids()
    best = hybrids.best[hybrids.best["bm25"] == TOY]
    assert len(best) == 1 and best["vector"].item() == "raw_text_vector"
    chosen = HybridId(RetrieverId.parse(TOY), RetrieverId.parse("raw_text_vector"), best["beta"].item())
    assert chosen in hybrids.ids()
    assert (toy_study.run_dir / "runs" / f"{chosen.file_stem()}.trec").is_file()

    cis = toy_study.reliability().cis
    for name in (TOY, str(chosen)):
        assert sorted(cis[cis["retriever"] == name]["metric"]) == ["mrr@5", "ndcg@5", "recall@5"], name
    mean = toy_study.per_question().groupby("retriever")["recall@5"].mean()
    toy_cis = cis[(cis["retriever"] == TOY) & (cis["metric"] == "recall@5")]
    assert toy_cis["mean"].item() == pytest.approx(mean[TOY], abs=1e-12)
    assert toy_cis["ci_low"].item() <= toy_cis["mean"].item() <= toy_cis["ci_high"].item()


def test_tables_show_the_toy_retriever(toy_study):
    table = tables.table3(toy_study.reliability().cis)  # notebook 05: singles and hybrids
    assert TOY in table.index and list(table.columns) == ["Recall@5", "MRR@5", "nDCG@5"]
    assert table.loc[TOY].notna().all()
    cis = reliability.metric_cis(toy_study.metrics(), k=5, params=toy_study.params.bootstrap)  # notebook 03
    assert list(tables.table3(cis).index) == RETRIEVERS_LISTED
    grid = tables.representation_grid(cis)
    assert list(grid.columns) == ["bm25", "toy", "vector"]
    assert list(grid.index) == ["raw_text", "summary"]
    toy_mean = cis[(cis["retriever"] == TOY) & (cis["metric"] == "recall@5")]["mean"].item()
    assert grid.loc["raw_text", "toy"] == pytest.approx(toy_mean, abs=1e-12)
    assert np.isnan(grid.loc["summary", "toy"])


def test_an_unregistered_method_is_refused_on_load(tmp_path):
    with pytest.raises(ParamsError) as caught:
        make_tiny_study(tmp_path, "retrieval: {retrievers: [raw_text_bm25, raw_text_nosuch]}\n")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'p.yaml'}: key 'retrieval.retrievers': ")
    assert "'nosuch'" in message and "raw_text_nosuch" in message


def test_a_pairing_must_name_listed_retrievers(toy_study, tmp_path):
    with pytest.raises(ParamsError) as caught:  # toy is registered (the fixture) but not listed
        make_tiny_study(tmp_path, f"hybrid: {{pairings: [[raw_text_bm25, raw_text_vector], [{TOY}, raw_text_vector]]}}"
                                  "\n")
    message = str(caught.value)
    assert "\n" not in message
    assert message == f"{tmp_path / 'p.yaml'}: key 'hybrid.pairings[1]': {TOY} is not in retrieval.retrievers"


def _bm25_rankings(tmp_path, extra: str):
    study = make_tiny_study(tmp_path, extra)
    ranked = study.ranked("raw_text_bm25")
    return ranked, len(study.chunks())


def test_zero_scores_drop_keeps_only_matching_chunks(tmp_path):
    ranked, n_chunks = _bm25_rankings(tmp_path, "bm25: {zero_scores: drop}\n")
    rows = ranked.rankings
    assert (rows["score"] > 0).all()
    counts = rows.groupby("question_id").size()
    assert ranked.matches.min() < n_chunks  # some question has chunks without a query token
    for qid, matches in ranked.matches.items():
        assert counts.get(qid, 0) == min(matches, 200)
        assert rows[rows["question_id"] == qid]["rank"].tolist() == list(range(1, counts.get(qid, 0) + 1))


@pytest.mark.parametrize("depth", [3, 200])
def test_zero_scores_pad_fills_the_list_with_zeros_at_the_end(tmp_path, depth):
    ranked, n_chunks = _bm25_rankings(tmp_path, f"bm25: {{zero_scores: pad}}\nretrieval: {{depth: {depth}}}\n")
    rows = ranked.rankings
    length = min(depth, n_chunks)
    for qid, matches in ranked.matches.items():
        scores = rows[rows["question_id"] == qid]["score"].to_numpy()
        assert len(scores) == length
        assert np.all(scores[:min(matches, length)] > 0) and np.all(scores[min(matches, length):] == 0)
    if depth >= n_chunks:
        assert (rows["score"] == 0).sum() == sum(n_chunks - m for m in ranked.matches)
