"""The calls a study's model stages still have to make, counted before any call (pmrag.study.costs): the counts,
the token estimate, the prices, and a tiny study against the local fake server whose requests they must equal."""

import shutil
from pathlib import Path

import pytest

from pmrag.core.names import StageKey
from pmrag.core.params import EmbeddingSection, ModelPrice, SummarizerSection
from pmrag.represent.embed import cache_key, embedder_model_id
from pmrag.represent.llm import Done, Prompts
from pmrag.study.costs import (SUMMARY_FREE, StageCost, approx_tokens, cost_lines, embedding_cost, llm_cost,
                               price_text, price_total, representations_without_summaries, run_rate, study_costs,
                               summaries_rate, summary_cost, text_tokens)

from conftest import make_tiny_study

PRICES = {"gpt-4o-mini": ModelPrice(input_per_million=0.15, output_per_million=0.6)}
PROMPTS = Prompts("SYSTEM", "USER")


# ------------------------------------------------------------------------------------------- counts

def test_tokens_are_one_per_kana_or_kanji_and_one_per_four_other_characters():
    assert approx_tokens(8) == 2 and approx_tokens(9) == 3 and approx_tokens(0) == 0
    assert text_tokens(["今日は晴れ", "abcdefgh"]) == (13, 5 + 2)
    assert text_tokens(["カフェ ok"]) == (6, 3 + 1)


def test_japanese_characters_are_those_of_the_ranges_in_any_piece_of_the_texts(monkeypatch):
    import re

    import numpy as np

    from pmrag.study import costs

    pattern = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")
    edges = [c for low, high in costs.JAPANESE_RANGES for c in (low - 1, low, low + 1, high - 1, high, high + 1)]
    rng = np.random.default_rng(4)
    alphabet = [chr(c) for c in edges] + list("ab \n😀") + [chr(c) for c in rng.integers(0x20, 0x10FFFF, 300)
                                                             if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(rng.choice(alphabet, int(rng.integers(0, 40)))) for _ in range(200)]
    assert all(costs.japanese_chars(t) == len(pattern.findall(t)) for t in texts)
    whole = text_tokens(texts)
    chars, japanese = sum(map(len, texts)), sum(len(pattern.findall(t)) for t in texts)
    assert whole == (chars, approx_tokens(chars, japanese))
    monkeypatch.setattr(costs, "COUNT_PIECE_CHARS", 7)   # counted a few texts at a time: the same
    assert text_tokens(texts) == whole and text_tokens([]) == (0, 0)


def test_an_llm_step_calls_the_items_without_an_ok_row_for_their_input_and_counts_the_prompts():
    import hashlib

    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()   # noqa: E731
    items = [("a", "same"), ("b", "changed"), ("c", "new")]
    done = {"a": Done("x", sha("same")), "b": Done("x", sha("before"))}
    cost = llm_cost("graph", items, done, model="m", prompts=PROMPTS, max_output_tokens=10)
    assert (cost.calls, cost.items) == (2, 2)
    assert cost.input_chars == 2 * len("SYSTEM" + "USER\n\n") + len("changed") + len("new")
    assert cost.output_tokens == 20 and not cost.local and not cost.bound
    kept = llm_cost("summaries", items, done, model="m", prompts=None, max_output_tokens=10, keeps_changed_input=True)
    assert (kept.calls, kept.input_chars) == (1, 3)   # the summaries' rule: any ok row is kept


def test_summaries_start_from_an_empty_table_unless_the_stage_resumes_its_own_run():
    section = SummarizerSection(backend="openai", max_input_chars=4)
    chunks = [("c1", "abcdefgh"), ("c2", "ijkl")]
    resumed = summary_cost(chunks, ["c1"], section, None, resumes=True)
    assert (resumed.calls, resumed.input_chars, resumed.model) == (1, 4, "gpt-4o-mini")
    assert summary_cost(chunks, ["c1"], section, None, resumes=False).calls == 2
    assert summary_cost(chunks, [], section, None, resumes=True).input_chars == 8   # the first 4 characters each
    assert summary_cost(chunks, [], SummarizerSection(), None, resumes=False).local   # the extractive stand-in


def test_embeddings_call_for_the_distinct_texts_missing_from_the_cache_in_batches():
    section = EmbeddingSection(backend="openai", model="e5", base_url="http://127.0.0.1:9/v1", batch_size=2)
    texts = ["a", "b", "b", "c", "d", "e"]
    cached = {cache_key(embedder_model_id(section), "passage", "a")}
    cost = embedding_cost("vectors:raw_text", texts, "passage", section, cached)
    assert (cost.calls, cost.items, cost.input_chars, cost.output_tokens) == (2, 4, 4, None)
    assert embedding_cost("q", texts, "query", section, cached).items == 5     # another kind: another key
    assert embedder_model_id(section) == "openai/e5@127.0.0.1:9"
    assert embedding_cost("v", texts, "passage", EmbeddingSection(), ()).local
    assert embedding_cost("v", texts, "passage", section, ()).items == 5        # nothing cached: the distinct texts


# ------------------------------------------------------------------------------------------- prices

def test_prices_come_from_the_table_input_estimated_and_output_at_its_cap():
    cost = StageCost("summaries", "openai", "gpt-4o-mini", 2, 2, 8_000_000, 2_000_000, max_output_tokens=500_000)
    assert price_text(cost, PRICES) == "≈ $0.3000 in + ≤ $0.6000 out"
    assert price_total([cost], PRICES) == pytest.approx(0.9, abs=1e-12)
    vectors = StageCost("vectors:summary", "openai", "text-embedding-3-small", 1, 3, 40, 10)
    assert price_text(vectors, PRICES) == "no price for model text-embedding-3-small in prices"
    assert price_total([cost, vectors], PRICES) is None
    assert price_text(StageCost("v", "e5-local", "e5", 3, 3, 9, 3), PRICES) == "local"
    assert price_text(StageCost("s", "openai", "gpt-4o-mini", 0, 0, 0, 0), {}) == "$0"


def test_the_table_marks_bounds_and_unknowns_and_totals_the_remote_calls():
    costs = [StageCost("summaries", "openai", "gpt-4o-mini", 3, 3, 400, 100, 10),
             StageCost("vectors:summary", "openai", "gpt-4o-mini", 1, 3, None, None, bound=True, note="after x"),
             StageCost("graph (interest label vectors)", "openai", "gpt-4o-mini", None, None, None, None, bound=True,
                       note="unknown until y")]
    lines = cost_lines(costs, PRICES, "chunks: computed")
    assert "chunks: computed" in lines[0]
    assert "≤ 1" in lines[3] and " ? " in lines[4]
    assert "  vectors:summary: after x" in lines and "  graph (interest label vectors): unknown until y" in lines
    assert lines[-1].startswith("remote calls: ≤ 4 and more not counted yet; price not known")


def test_the_eta_is_the_calls_left_at_the_last_runs_measured_rate():
    assert run_rate(10, "2024-01-01T00:00:00.000+00:00", "2024-01-01T00:00:05.000+00:00") == 2.0
    assert run_rate(0, "2024-01-01T00:00:00+00:00", "2024-01-01T00:00:05+00:00") is None
    assert run_rate(3, "2024-01-01T00:00:05+00:00", "2024-01-01T00:00:05+00:00") is None
    assert run_rate(3, "2024-01-01T00:00:00+00:00", None) is None
    cost = StageCost("summaries", "openai", "gpt-4o-mini", 600, 600, 1, 1, 10, rate_per_s=2.0)
    assert cost.eta_s == 300 and StageCost("s", "openai", "m", 0, 0, 0, 0, rate_per_s=2.0).eta_s is None
    row = next(line for line in cost_lines([cost], {}, "x") if line.lstrip().startswith("summaries"))
    assert "≈ 5 min" in row


def test_a_steps_rate_is_its_last_runs_rows_over_their_commit_times(engine):
    from sqlalchemy import insert

    from pmrag.core.store import graph_extractions
    from pmrag.study.costs import step_rate

    def row(item, run, second):
        return {"step": "decomposition", "item_id": item, "status": "ok", "requested_model": "m",
                "system_sha256": "s", "user_sha256": "u", "input_chars": 1, "input_sha256": "i", "attempts": 1,
                "run_id": run, "created_at": f"2024-01-01T00:00:{second:02d}.000+00:00"}

    assert step_rate(engine, "decomposition") is None
    with engine.begin() as conn:
        conn.execute(insert(graph_extractions), [row("a", "old", 0), row("b", "old", 50),
                                                 row("c", "new", 52), row("d", "new", 53), row("e", "new", 56)])
    assert step_rate(engine, "decomposition") == 2 / 4   # the last run: 3 commits, 2 calls in 4 s


# ------------------------------------------------------------------------------------------- a study

pytestmark = pytest.mark.usefixtures("clean_env")


def tiny_openai_study(root: Path, base_url: str):
    return make_tiny_study(root, f"summarizer: {{backend: openai, base_url: '{base_url}', interval_s: 0}}\n"
                                 f"embedding: {{backend: openai, base_url: '{base_url}', model: e5, batch_size: 2}}\n")


def remote(costs) -> dict[str, StageCost]:
    return {cost.stage: cost for cost in costs.costs}


def test_the_counts_equal_the_requests_the_server_receives_and_nothing_is_missing_after(server, tmp_path):
    study = tiny_openai_study(tmp_path, server.base_url)
    before = remote(study_costs(study, compute=True))
    assert not server.response_requests() and not server.embedding_requests()   # counting calls nothing
    assert before["summaries"].calls == 5 and before["vectors:summary"].bound
    study.get("summaries")
    assert len(server.response_requests()) == before["summaries"].calls
    assert summaries_rate(study.store) > 0 and summaries_rate(study.store, "extractive") is None   # the next ETA

    built = study.representations()
    before_summaries = representations_without_summaries(study, study.chunks())
    for name in SUMMARY_FREE:   # counted before the summaries from the very texts the stage then builds
        assert before_summaries[name].tolist() == built[name].tolist(), name

    counted = remote(study_costs(study, compute=True))   # the summaries made: every embedding counted exactly
    assert counted["summaries"].calls == 0
    for name in ("vectors:raw_text", "vectors:summary", "vectors:embedding_text", "query_vectors"):
        start = len(server.embedding_requests())
        study.get(StageKey.of(name))
        sent = server.embedding_requests()[start:]
        assert len(sent) == counted[name].calls and not counted[name].bound, name
        assert sum(len(request.body["input"]) for request in sent) == counted[name].items, name
        assert sum(len(text) for r in sent for text in r.body["input"]) == counted[name].input_chars, name

    after = remote(study_costs(study))
    assert all(after[name].calls == 0 for name in counted if not name.startswith("graph")), after


def test_the_hashed_stand_in_counts_each_stages_distinct_texts_and_looks_nothing_up(tmp_path, monkeypatch):
    from pmrag.represent.embed import passage_texts_sent
    from pmrag.study import costs

    study = make_tiny_study(tmp_path, "embedding: {backend: hashed-stand-in, stand_in_dim: 16}\n")
    study.get("summaries")
    monkeypatch.setattr(costs, "cached_embedding_keys", lambda *args: pytest.fail("the stand-in is never cached"))
    monkeypatch.setattr(costs, "cache_key", lambda *args: pytest.fail("no key to work out"))
    counted = remote(study_costs(study, compute=True))
    representations = study.representations()
    for name in ("raw_text", "summary", "embedding_text"):
        texts = passage_texts_sent(representations[name].tolist(), study.params.embedding)
        cost = counted[f"vectors:{name}"]
        assert cost.local and not cost.bound and cost.items == len(set(texts)) > 0, name
        assert cost.input_chars == sum(map(len, dict.fromkeys(texts))), name


def test_the_decomposition_and_the_graph_extraction_are_counted_by_their_resume_rule(server, tmp_path):
    from responses_server import Reply

    base = server.base_url
    study = make_tiny_study(tmp_path, f"summarizer: {{backend: openai, base_url: '{base}', interval_s: 0}}\n"
                                      f"embedding: {{backend: openai, base_url: '{base}', model: e5}}\n"
                                      "decomposition: {backend: openai}\ngraph: {extractor: openai}\n"
                                      "retrieval: {retrievers: [raw_text_bm25, raw_text_decomp_bm25]}\n"
                                      "hybrid: {pairings: [[raw_text_bm25, raw_text_decomp_bm25]]}\n"
                                      "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
                                      "diagnostic_hybrid: [raw_text_bm25, raw_text_decomp_bm25, 0.5]}\n")
    server.default = Reply.ok('{"subqueries": ["a part"]}')
    before = remote(study_costs(study, compute=True))
    graph = before["graph"]
    assert graph.bound and graph.calls == 5 + 1 and "5 semantic calls (counted) and ≤ 1 interest calls" in graph.note
    assert before["decomposition"].calls == len(study.evaluation().questions) == 2
    assert before["graph (interest label vectors)"].calls is None
    study.get("decomposition")
    assert len(server.response_requests()) == 2
    assert remote(study_costs(study))["decomposition"].state == "cached"
    study.forget()   # no stage cached: the rows of graph_extractions decide (a rerun resumes from them)
    after = remote(study_costs(study, compute=True))
    assert after["decomposition"].calls == 0 and after["decomposition"].state == "missing"
    assert after["decomposition"].rate_per_s > 0 and after["graph"].calls == 6


def test_status_reads_only_cached_stages_and_says_so(server, tmp_path):
    from pmrag.study.runner import cost_status_lines as status_lines

    from pmrag.study import Study

    tiny_openai_study(tmp_path, server.base_url)
    shutil.rmtree(tmp_path / "out")   # no store yet
    lines = status_lines(tmp_path / "p.yaml")
    assert lines[-1] == ("model calls still to make: not counted, nothing is ingested yet (pmrag study --dry-run "
                         "ingests and chunks, calling no model, and counts them)")
    assert not (tmp_path / "out").exists()
    study = Study.from_params(tmp_path / "p.yaml")
    lines = status_lines(tmp_path / "p.yaml")   # a store, nothing cached: nothing is computed to count
    header = next(line for line in lines if line.startswith("model calls still to make"))
    assert header.endswith(": not available):") and "chunks" in header and "computed" not in header
    assert any(line.split()[:3] == ["summaries", "openai/gpt-4o-mini", "?"] for line in lines)
    study.get("chunks")
    logged = (study.run_dir / "stage_log.jsonl").read_bytes()
    lines = status_lines(tmp_path / "p.yaml")
    assert (study.run_dir / "stage_log.jsonl").read_bytes() == logged   # read, not loaded: nothing logged
    header = next(line for line in lines if line.startswith("model calls still to make"))
    assert header.endswith("(counted without calling a model; ingest, chunks: read from the cache; qrels, summaries, "
                           "representations: not available):")
    assert any(line.split()[:3] == ["summaries", "openai/gpt-4o-mini", "5"] for line in lines)
    assert not server.response_requests() and not server.embedding_requests()


def _study_folder(root: Path, base_url: str, prices: str = "") -> Path:
    from tests.study.test_study_runner import write_notebook

    tiny_openai_study(root, base_url)
    (root / "notebooks").mkdir()
    write_notebook(root / "notebooks" / "01_done.ipynb", "done = True")
    params = root / "p.yaml"
    params.write_text(params.read_text(encoding="utf-8") + "notebooks_dir: notebooks\n" + prices, encoding="utf-8")
    shutil.rmtree(root / "out")   # make_tiny_study made the run folder: the command starts from nothing
    return params


def test_dry_run_prints_the_table_and_calls_nothing(server, tmp_path, capsys):
    from pmrag.cli import main

    params = _study_folder(tmp_path, server.base_url,
                           "prices: {gpt-4o-mini: {input_per_million: 0.15, output_per_million: 0.6}}\n")
    assert main(["study", str(params), "--dry-run", "-q"]) == 0
    out = capsys.readouterr().out
    assert not server.response_requests() and not server.embedding_requests()
    assert "ingest, chunks, qrels: computed (no model call)" in out.splitlines()[0]
    summaries = next(line for line in out.splitlines() if line.lstrip().startswith("summaries"))
    assert "≈ $" in summaries and "no price" not in summaries
    assert "no price for model e5 in prices" in out
    assert out.splitlines()[-1] == "dry run: no model was called; run without --dry-run to make these calls"


def test_max_calls_stops_before_a_stage_that_would_exceed_it_and_a_rerun_resumes(server, tmp_path, capsys):
    from pmrag.cli import main

    params = _study_folder(tmp_path, server.base_url)
    assert main(["study", str(params), "--max-calls", "6", "-q"]) == 3   # summaries 5, then vectors:raw_text 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("pmrag study: error: --max-calls 6: stage vectors:raw_text would make 3 remote call(s) after "
                       "5 in this run; stopped before it, nothing of it was called (what was computed is kept: rerun "
                       "with a larger --max-calls to go on)")
    assert (len(server.response_requests()), len(server.embedding_requests())) == (5, 0)
    assert main(["study", str(params), "--max-calls", "3", "-q"]) == 3   # resumes: vectors:raw_text, not summary
    assert (len(server.response_requests()), len(server.embedding_requests())) == (5, 3)
    assert "stage vectors:summary would make 3 remote call(s) after 3" in capsys.readouterr().err
