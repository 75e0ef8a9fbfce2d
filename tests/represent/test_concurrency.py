"""Model calls in flight at once (``concurrency``) over real HTTP to the local fake server: the same stored results
at any concurrency, Retry-After honoured, the calls in flight lowered while the server refuses and raised again, a
stop that names the first failed item, and the progress a run reports."""

import json
import time

import pandas as pd
import pytest
from sqlalchemy import select

from pmrag.core.params import SummarizerSection
from pmrag.core.store import graph_extractions, open_store, read_table
from pmrag.represent.llm import (CallPolicy, ExtractionStore, LLMStep, ResponsesClient, StepItem, StepStopped,
                                 reply_object, run_step)
from pmrag.represent.summarize import make_summarizer, summaries_identity, summarize_chunks
from responses_server import Reply, ResponsesServer

pytestmark = pytest.mark.usefixtures("clean_env")

CHUNKS = [(f"c{i:02d}", f"2024-05-{1 + i % 28:02d} 10:00 Aki: message number {i} " + "x" * (i * 7 % 40))
          for i in range(16)]


def settings(server, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": server.base_url, "interval_s": 0.0, "timeout_s": 10.0,
              "failure_policy": "retry", "max_retries": 2, "backoff_initial_s": 0.0, "backoff_max_s": 0.0}
    return SummarizerSection(**{**values, **overrides})


def words_of(body) -> Reply:
    """A JSON reply made from the request's input alone (whatever the order of the requests)."""
    text = (body or {}).get("input", "")
    return Reply.ok(json.dumps({"words": sorted(set(text.split()))[:5]}))


def check_words(text: str, item: StepItem) -> dict:
    return {"words": reply_object(text, f"item {item.item_id!r}")["words"]}


class WordsStopped(StepStopped):
    pass


WORDS = LLMStep("words", "words", ("summary_system", "summary_user"), check_words, stopped=WordsStopped)


def words_run(server, engine, items, **overrides):
    llm = settings(server, **overrides)
    client = ResponsesClient(llm, load_prompts())
    return run_step(WORDS, items, client=client, store=ExtractionStore(engine), policy=CallPolicy(llm))


def load_prompts():
    from pmrag.represent.summarize import load_prompts as summary_prompts

    return summary_prompts("en")


def stored(engine) -> tuple[pd.DataFrame, pd.DataFrame]:
    summaries = read_table(engine, "summaries", ("chunk_id",))[["chunk_id", "status", "summary", "input_sha256",
                                                                  "attempts", "requested_model", "response_model"]]
    with engine.connect() as conn:
        c = graph_extractions.c
        rows = conn.execute(select(c.step, c.item_id, c.status, c.output, c.input_sha256, c.attempts)
                            .order_by(c.step, c.item_id)).all()
    return summaries, pd.DataFrame(rows, columns=["step", "item_id", "status", "output", "input_sha256", "attempts"])


@pytest.mark.parametrize("latency", [(0.0, 0.02)])
def test_concurrency_1_and_8_store_the_same_results_and_identities(tmp_path, latency):
    results = {}
    for concurrency in (1, 8):
        engine = open_store(tmp_path / f"store{concurrency}.sqlite")
        with ResponsesServer(latency_s=latency, seed=concurrency, route=words_of) as server:
            params = settings(server, concurrency=concurrency)
            report = summarize_chunks(engine, CHUNKS, make_summarizer(params, "en"), params, progress=False)
            items = [StepItem(cid, text) for cid, text in CHUNKS]
            outputs = words_run(server, engine, items, concurrency=concurrency).outputs
            results[concurrency] = (stored(engine), list(outputs.items()), server.most_in_flight)
        assert (report.ok, report.error, report.calls) == (16, 0, 16)
    (summaries_1, rows_1), outputs_1, most_1 = results[1]
    (summaries_8, rows_8), outputs_8, most_8 = results[8]
    pd.testing.assert_frame_equal(summaries_1, summaries_8)
    pd.testing.assert_frame_equal(rows_1, rows_8)
    assert summaries_identity(summaries_1) == summaries_identity(summaries_8)
    assert outputs_1 == outputs_8 and [k for k, _ in outputs_8] == [cid for cid, _ in CHUNKS]   # the items' order
    assert most_1 == 1 and most_8 > 1


def test_a_retry_after_is_waited_instead_of_the_backoff(server, engine):
    server.script(Reply.error(429, headers={"Retry-After": "0.3"}), *[Reply.ok()] * 3)
    sleeps = []
    params = settings(server, backoff_initial_s=5.0, backoff_max_s=5.0)
    policy = CallPolicy(params, sleeps.append)
    from pmrag.represent.summarize import SUMMARY
    from pmrag.represent.llm import SummaryStore

    result = run_step(SUMMARY, [StepItem(cid, text) for cid, text in CHUNKS[:3]], client=make_summarizer(params),
                      store=SummaryStore(engine), policy=policy)
    assert sleeps and abs(sleeps[0] - 0.3) < 0.05                   # not the 5 s backoff
    assert (result.report.ok, result.report.calls) == (3, 4)


def test_the_backoff_jitter_is_deterministic_per_item_and_attempt(server, engine):
    from pmrag.represent.calls import jitter_fraction

    server.script(Reply.error(503), Reply.error(503), *[Reply.ok()] * 3)
    sleeps = []
    params = settings(server, backoff_initial_s=1.0, backoff_max_s=8.0, backoff_jitter=0.25)
    summarize_chunks(engine, CHUNKS[:3], make_summarizer(params), params, progress=False, sleep=sleeps.append)
    cid = CHUNKS[0][0]
    assert sleeps == [1.0 * (1 - 0.25 * jitter_fraction(cid, 1)), 2.0 * (1 - 0.25 * jitter_fraction(cid, 2))]


def test_refusals_lower_the_calls_in_flight_and_successes_raise_them_again(engine):
    refused = {"left": 6}

    def route(body):
        if refused["left"] > 0:
            refused["left"] -= 1
            return Reply.error(503)
        return None

    with ResponsesServer(latency_s=(0.005, 0.01), route=route) as server:
        params = settings(server, concurrency=8, max_retries=6)
        policy = CallPolicy(params)
        from pmrag.represent.summarize import SUMMARY
        from pmrag.represent.llm import SummaryStore

        items = [StepItem(f"c{i:03d}", f"text {i}") for i in range(60)]
        result = run_step(SUMMARY, items, client=make_summarizer(params), store=SummaryStore(engine), policy=policy)
    limiter = policy.limiter
    assert (result.report.ok, result.report.error) == (60, 0)
    assert limiter.refusals == 6 and limiter.lowest < 8                # lowered while refused
    assert limiter.limit > limiter.lowest                               # raised again as calls succeeded


def test_stop_on_first_error_at_concurrency_names_the_first_failed_item_and_starts_no_more(engine):
    failing = {"c03", "c05"}

    def route(body):
        return Reply.error(400, "bad") if any(f"number {cid[1:].lstrip('0') or '0'} " in body.get("input", "")
                                               for cid in failing) else None

    with ResponsesServer(latency_s=(0.01, 0.02), route=route) as server:
        params = settings(server, concurrency=4, failure_policy="stop_on_first_error")
        with pytest.raises(StepStopped) as stopped:
            summarize_chunks(engine, CHUNKS, make_summarizer(params), params, progress=False)
        requests = len(server.response_requests())
    assert stopped.value.item_id == "c03" and stopped.value.report.status == "stopped"
    assert requests < len(CHUNKS)                                       # nothing started after the stop
    rows = read_table(engine, "summaries", ("chunk_id",))
    assert len(rows) == requests and "c03" in set(rows.loc[rows["status"] == "error", "chunk_id"])


def test_progress_reports_items_done_left_rate_eta_and_the_calls_in_flight(server, engine):
    seen = []
    params = settings(server, concurrency=2)
    from pmrag.represent.summarize import SUMMARY
    from pmrag.represent.llm import SummaryStore

    run_step(SUMMARY, [StepItem(cid, text) for cid, text in CHUNKS[:4]], client=make_summarizer(params),
             store=SummaryStore(engine), policy=CallPolicy(params), on_progress=seen.append)
    assert [p.done for p in seen] == [1, 2, 3, 4] and all(p.total == 4 for p in seen)
    last = seen[-1]
    assert (last.ok, last.error, last.called) == (4, 0, 4) and last.rate_per_s > 0 and last.eta_s == 0
    assert last.concurrency == 2 and last.waiting is None
    assert last.line().startswith("summaries: 4/4 (ok 4, error 0), ") and ", 2 in flight" in last.line()


def test_an_offline_summarizer_ignores_the_concurrency(engine):
    params = SummarizerSection(concurrency=8)
    started = time.perf_counter()
    report = summarize_chunks(engine, CHUNKS, make_summarizer(params, "en"), params, progress=False)
    assert (report.ok, report.calls) == (16, 0) and time.perf_counter() - started < 5


# ------------------------------------------------------------------------------------------ the openai embedder

def embed_all(server, tmp_path, name, texts, **options):
    from pmrag.represent.embed import EmbeddingCache, OpenAIEmbedder, embed_with_cache

    embedder = OpenAIEmbedder(model="fake-embed", base_url=server.base_url, batch_size=3, **options)
    with EmbeddingCache(tmp_path / f"{name}.sqlite") as cache:
        return embed_with_cache(embedder, texts, "passage", cache, progress=False), embedder


def test_embedding_batches_in_flight_at_once_give_the_same_vectors_in_the_same_order(tmp_path):
    texts = [f"text number {i}" for i in range(24)]
    found = {}
    for concurrency in (1, 4):
        with ResponsesServer(latency_s=(0.0, 0.02), seed=concurrency) as server:
            matrix, _ = embed_all(server, tmp_path, f"c{concurrency}", texts, concurrency=concurrency)
            found[concurrency] = (matrix, server.most_in_flight, len(server.embedding_requests()))
    assert (found[1][0] == found[4][0]).all() and found[1][0].shape == (24, 8)
    assert (found[1][1], found[1][2]) == (1, 8) and found[4][1] > 1 and found[4][2] == 8


def test_the_embedder_retries_a_refusal_after_its_retry_after_and_lowers_the_batches_in_flight(tmp_path):
    sleeps = []
    with ResponsesServer() as server:
        server.script_embeddings(Reply.error(429, headers={"Retry-After": "0.25"}), Reply.error(503))
        matrix, embedder = embed_all(server, tmp_path, "r", [f"t{i}" for i in range(9)], concurrency=4,
                                     sleep=sleeps.append)
        requests = len(server.embedding_requests())
    assert matrix.shape == (9, 8) and requests == 3 + 2
    assert 0.25 in sleeps                                              # the Retry-After, not the 0.5 s backoff
    assert embedder.limiter.refusals == 2 and embedder.limiter.lowest < 4


def test_the_embedder_gives_up_after_max_retries_with_one_line(tmp_path):
    from pmrag.core.errors import PmragError

    sleeps = []
    with ResponsesServer() as server:
        server.script_embeddings(*[Reply.error(503)] * 3)
        with pytest.raises(PmragError, match=r"embedding request to 127\.0\.0\.1:\d+ \(model 'fake-embed', 2 texts\) "
                                             r"failed: Error code: 503") as raised:
            embed_all(server, tmp_path, "g", ["a", "b"], max_retries=2, sleep=sleeps.append)
    assert "\n" not in str(raised.value) and len(sleeps) == 2
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0      # the SDK's backoff, less its jitter


def test_the_embedding_section_sets_the_openai_embedders_bounds(server):
    from pmrag.core.params import EmbeddingSection
    from pmrag.represent.embed import make_embedder

    embedder = make_embedder(EmbeddingSection(backend="openai", base_url=server.base_url, concurrency=3,
                                              requests_per_minute=600))
    assert (embedder.limiter.maximum, embedder.limiter.budget.spacing) == (3, 0.1)


def test_a_run_inside_reporting_progress_reports_to_its_listener_an_offline_one_does_not(server, engine):
    from pmrag.represent.llm import reporting_progress

    heard = []
    params = settings(server)
    with reporting_progress(heard.append):
        summarize_chunks(engine, CHUNKS[:3], make_summarizer(params), params, progress=False)
        summarize_chunks(engine, CHUNKS[3:6], make_summarizer(SummarizerSection(), "en"), SummarizerSection(),
                         progress=False)
    summarize_chunks(engine, CHUNKS[6:8], make_summarizer(params), params, progress=False)
    assert [p.done for p in heard] == [1, 2, 3] and {p.title for p in heard} == {"summaries"}


def test_the_embedding_progress_bar_shows_the_batches_in_flight_and_a_rate_limits_wait(tmp_path, capsys):
    import numpy as np

    from pmrag.represent.calls import Limiter
    from pmrag.represent.embed import EmbeddingCache, embed_with_cache

    class Budgeted:
        """Waits on its budget as the openai embedder does; the clock stands still, so the wait is still on."""

        model_id, batch_size = "stub/budgeted", 1
        limiter = Limiter(2, requests_per_minute=60, sleep=lambda s: None, clock=lambda: 0.0)

        def embed(self, texts, kind):
            self.limiter.wait()
            return np.ones((len(texts), 3), dtype=np.float32)

    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        embed_with_cache(Budgeted(), ["a", "b", "c"], "passage", cache, progress=True)
    bar = capsys.readouterr().err
    assert "3/3" in bar and "in_flight=2" in bar and "waiting=budget" in bar
