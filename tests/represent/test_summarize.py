"""Chunk summaries: the openai backend over real HTTP to a local scripted server, the extractive stand-in,
retries and failure policies, resume after a failure and after SIGKILL, the remote guard and key redaction."""

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import openai
import pandas as pd
import pytest
from pydantic import ValidationError

from pmrag.represent import privacy
from sqlalchemy import select

from pmrag.core.params import StudyParams, SummarizerSection
from pmrag.core.store import read_table, summaries, summary_runs
from pmrag.represent.llm import ResponsesClient
from pmrag.represent.summarize import (
    EXTRACTIVE_MODEL, ExtractiveSummarizer, SummarizationStopped, load_prompts, make_summarizer, summarize_chunks,
    summary_provenance,
)

from conftest import invalid_key

sys.path.insert(0, str(Path(__file__).parents[1]))
from responses_server import RESPONSE_MODEL, Reply, default_text  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"


pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


def params_for(server, **overrides):
    values = {"backend": "openai", "base_url": server.base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_jitter": 0}   # the exact doubling (the default jitter: test_concurrency)
    values.update(overrides)
    return SummarizerSection(**values)


def run(engine, chunks, params, sleep=None):
    sleep = sleep if sleep is not None else Sleeps()
    return summarize_chunks(engine, chunks, make_summarizer(params), params, progress=False, sleep=sleep)


def rows(engine, table=summaries):
    """Rows straight from SQL (pandas would turn NULL into NaN)."""
    with engine.connect() as conn:
        found = [dict(r) for r in conn.execute(select(table)).mappings()]
    return {r["chunk_id"]: r for r in found} if table is summaries else found


def make_chunks(n, prefix="c"):
    return [(f"{prefix}{i:02d}", f"2024-04-10 09:{i:02d} 山田: チャンク{i}の本文です") for i in range(n)]


def provenance(engine):
    return summary_provenance(read_table(engine, "summaries"))



# ------------------------------------------------------------------------------------------ params, prompts

def test_params_are_validated_up_front():
    defaults = SummarizerSection()
    assert defaults.max_output_tokens == 700 and defaults.interval_s == 0.2
    assert (defaults.max_retries, defaults.backoff_initial_s, defaults.backoff_max_s, defaults.backoff_jitter) == (
        2, 0.5, 8.0, 0.25)   # the SDK's
    assert [defaults.backoff_s(k) for k in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    for bad, key in [({"backend": "gpt"}, "backend"), ({"failure_policy": "ignore"}, "failure_policy"),
                     ({"timeout_s": 0}, "timeout_s"), ({"max_output_tokens": True}, "max_output_tokens"),
                     ({"max_input_chars": 0}, "max_input_chars"), ({"max_retries": -1}, "max_retries"),
                     ({"backoff_initial_s": 5, "backoff_max_s": 1}, "backoff_max_s"),
                     ({"allow_remote": True}, "allow_remote"),      # not the section's: the study's top-level key
                     ({"base_url": "api.openai.com"}, "base_url"), ({"model": ""}, "model"),
                     ({"interval_s": -0.1}, "interval_s")]:
        with pytest.raises(ValidationError) as info:
            SummarizerSection(**bad)
        assert invalid_key(info.value) == key, bad
    with pytest.raises(ValidationError) as info:
        StudyParams.model_validate({"run": "r", "dataset": {"inputs": ["a.json"]}, "allow_remote": "yes"})
    assert invalid_key(info.value) == "allow_remote"
    with pytest.raises(ValidationError) as info:
        SummarizerSection.model_validate({"temperature": 0})
    assert invalid_key(info.value) == "temperature"
    assert SummarizerSection(backoff_initial_s=1, backoff_max_s=5).backoff_s(3) == 5


def test_prompt_sets_load_and_render_the_blank_line(tmp_path):
    ja, en = load_prompts("ja"), load_prompts("en")
    assert "固有名詞" in ja.system and "200〜500" in ja.user_template
    assert "proper names" in en.system
    for prompts in (ja, en):
        assert prompts.user_template == prompts.user_template.rstrip() and prompts.system == prompts.system.rstrip()
        assert prompts.render_input("本文") == prompts.user_template + "\n\n本文"
    (tmp_path / "summary_system.txt").write_text("sys\n", encoding="utf-8")
    (tmp_path / "summary_user.txt").write_text("user\n\n", encoding="utf-8")
    assert tuple(load_prompts(tmp_path)) == ("sys", "user")


# ------------------------------------------------------------------------------------------ openai backend

def test_provenance_is_stored_and_the_request_is_exactly_the_papers(server, engine):
    long_text = "\n".join(f"2024-04-10 10:{i % 60:02d} 佐藤: {'長いメモ' * 30}{i}" for i in range(80))
    assert len(long_text) > 7000
    chunks = [("a", "2024-04-10 09:00 山田: おはよう"), ("b", long_text), ("c", "2024-04-10 11:00 佐藤: 了解")]
    params = params_for(server, interval_s=0.2)
    sleeps = Sleeps()
    report = run(engine, chunks, params, sleeps)

    assert (report.status, report.seen, report.ok, report.error, report.skipped, report.calls) == ("done", 3, 3, 0, 0, 3)
    assert sleeps == [0.2, 0.2]                      # the interval between calls, not before the first
    prompts = load_prompts("ja")
    sent = [r.body for r in server.response_requests()]
    assert len(sent) == 3
    stored = rows(engine)
    for (chunk_id, raw), body in zip(chunks, sent):
        expected_input = raw[:7000]
        assert body["input"] == prompts.user_template + "\n\n" + expected_input
        assert body["instructions"] == prompts.system
        assert body["model"] == "gpt-4o-mini" and body["max_output_tokens"] == 700
        assert not {"temperature", "top_p", "seed"} & set(body)
        row = stored[chunk_id]
        assert row["status"] == "ok" and row["error"] is None
        assert row["backend"] == "openai" and row["requested_model"] == "gpt-4o-mini"
        assert row["response_model"] == RESPONSE_MODEL
        assert row["sdk_version"] == openai.__version__
        assert row["input_chars"] == len(expected_input) <= 7000
        assert row["input_sha256"] == hashlib.sha256(expected_input.encode("utf-8")).hexdigest()
        assert row["summary"] == default_text(body["input"])
        assert row["input_tokens"] == max(1, len(body["input"]) // 2) and row["output_tokens"] == len(row["summary"])
        assert row["attempts"] == 1 and row["latency_s"] > 0 and row["run_id"] == report.run_id
    assert stored["b"]["input_chars"] == 7000

    [run_row] = rows(engine, summary_runs)
    assert (run_row["status"], run_row["n_ok"], run_row["n_error"]) == ("done", 3, 0)
    assert run_row["sdk_version"] == openai.__version__ and run_row["finished_at"] >= run_row["started_at"]
    recorded = json.loads(run_row["params"])
    assert recorded["model"] == "gpt-4o-mini" and recorded["base_url"] == server.base_url
    assert recorded["prompt_sha256"]["system"] == hashlib.sha256(prompts.system.encode()).hexdigest()

    prov = provenance(engine)
    assert prov[["backend", "response_model", "status", "chunks"]].values.tolist() == [["openai", RESPONSE_MODEL, "ok", 3]]


def test_stop_on_first_error_retries_a_retryable_error_then_records_the_failure_and_raises(server, engine):
    server.script(Reply.ok(), *[Reply.error(500, "upstream exploded")] * 3)
    chunks = make_chunks(4)
    sleeps = Sleeps()
    with pytest.raises(SummarizationStopped, match=r"chunk c01.*500.*upstream exploded") as info:
        run(engine, chunks, params_for(server, interval_s=0.2), sleeps)
    assert info.value.chunk_id == "c01"
    assert sleeps == [0.2, 0.5, 1.0]          # the interval before c01, then the default backoff: 0.5 s doubling
    stored = rows(engine)
    assert set(stored) == {"c00", "c01"}
    assert (stored["c00"]["status"], stored["c00"]["attempts"]) == ("ok", 1)
    assert (stored["c01"]["status"], stored["c01"]["attempts"], stored["c01"]["summary"]) == ("error", 3, None)
    assert "InternalServerError" in stored["c01"]["error"]
    assert len(server.response_requests()) == 1 + 3      # 1 attempt + max_retries (2) retries, then the stop
    runs = read_table(engine, "summary_runs")
    assert runs[["status", "n_ok", "n_error"]].values.tolist() == [["stopped", 1, 1]]


def test_stop_on_first_error_goes_on_when_a_retry_succeeds(server, engine):
    server.script(Reply.error(429), Reply.hang(2.0), Reply.ok("三度目の正直"))   # chunk 0: ok on its last retry
    sleeps = Sleeps()
    report = run(engine, make_chunks(3), params_for(server, timeout_s=0.5), sleeps)
    assert sleeps == [0.5, 1.0]
    stored = rows(engine)
    assert (stored["c00"]["status"], stored["c00"]["attempts"], stored["c00"]["summary"]) == ("ok", 3, "三度目の正直")
    assert [(stored[c]["status"], stored[c]["attempts"]) for c in ("c01", "c02")] == [("ok", 1), ("ok", 1)]
    assert (report.status, report.ok, report.error, report.calls) == ("done", 3, 0, 5)
    assert len(server.response_requests()) == 5
    assert read_table(engine, "summary_runs")[["status", "n_ok", "n_error"]].values.tolist() == [["done", 3, 0]]


@pytest.mark.parametrize("reply, error", [(Reply.error(400, "bad request"), "400"),
                                          (Reply.malformed(), "malformed response")])
def test_stop_on_first_error_stops_at_once_on_an_error_that_is_not_retryable(server, engine, reply, error):
    server.script(Reply.ok(), reply)
    sleeps = Sleeps()
    with pytest.raises(SummarizationStopped, match=rf"chunk c01.*{error}") as info:
        run(engine, make_chunks(4), params_for(server), sleeps)
    assert info.value.chunk_id == "c01"
    assert sleeps == []
    stored = rows(engine)
    assert set(stored) == {"c00", "c01"}
    assert (stored["c01"]["status"], stored["c01"]["attempts"], stored["c01"]["summary"]) == ("error", 1, None)
    assert error in stored["c01"]["error"]
    assert len(server.response_requests()) == 2
    assert read_table(engine, "summary_runs")[["status", "n_ok", "n_error"]].values.tolist() == [["stopped", 1, 1]]


def test_retry_policy_backs_off_counts_attempts_and_moves_on(server, engine):
    server.script(
        Reply.error(429), Reply.error(500), Reply.hang(2.0), Reply.ok("三度目の正直"),   # chunk 0: ok on attempt 4
        Reply.error(503), Reply.error(500), Reply.error(502), Reply.error(500),         # chunk 1: gives up after 3 retries
    )
    params = params_for(server, failure_policy="retry", timeout_s=0.5, max_retries=3, backoff_initial_s=1.0,
                        backoff_max_s=3.0, backoff_jitter=0)
    sleeps = Sleeps()
    report = run(engine, make_chunks(3), params, sleeps)
    assert sleeps == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]           # initial * 2**k, capped at backoff_max_s (no jitter)
    stored = rows(engine)
    assert (stored["c00"]["status"], stored["c00"]["attempts"], stored["c00"]["summary"]) == ("ok", 4, "三度目の正直")
    assert (stored["c01"]["status"], stored["c01"]["attempts"]) == ("error", 4)
    assert "500" in stored["c01"]["error"]
    assert (stored["c02"]["status"], stored["c02"]["attempts"]) == ("ok", 1)
    assert (report.status, report.ok, report.error, report.calls) == ("done", 2, 1, 9)
    assert len(server.response_requests()) == 9
    assert read_table(engine, "summary_runs")[["status", "n_ok", "n_error"]].values.tolist() == [["done", 2, 1]]
    prov = provenance(engine).set_index("status")
    assert prov.loc["ok", "attempts_max"] == 4 and prov.loc["ok", "retried_chunks"] == 1
    assert prov.loc["error", "chunks"] == 1


def test_retry_policy_defaults_to_two_retries_and_caps_the_backoff_at_eight_seconds(server, engine):
    server.script(*[Reply.error(500)] * 3, Reply.ok())                 # c00: 3 attempts, then c01 ok
    sleeps = Sleeps()
    report = run(engine, make_chunks(2), params_for(server, failure_policy="retry"), sleeps)
    assert sleeps == [0.5, 1.0]
    stored = rows(engine)
    assert [(stored[c]["status"], stored[c]["attempts"]) for c in ("c00", "c01")] == [("error", 3), ("ok", 1)]
    assert (report.status, report.ok, report.error, report.calls) == ("done", 1, 1, 4)

    server.script(*[Reply.error(503)] * 7)
    sleeps = Sleeps()
    report = run(engine, [("long", "2024-04-10 10:00 山田: 長い障害")], params_for(server, failure_policy="retry",
                                                                             max_retries=6), sleeps)
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert (rows(engine)["long"]["status"], rows(engine)["long"]["attempts"]) == ("error", 7)
    assert (report.error, report.calls) == (1, 7) and len(server.response_requests()) == 4 + 7


def test_malformed_json_and_client_errors_are_not_retried(server, engine):
    server.script(Reply.malformed(), Reply.error(400, "bad request"), Reply.ok(""), Reply.ok("fine"))
    sleeps = Sleeps()
    report = run(engine, make_chunks(4), params_for(server, failure_policy="retry"), sleeps)
    stored = rows(engine)
    assert (stored["c00"]["status"], stored["c00"]["attempts"]) == ("error", 1)
    assert stored["c00"]["error"].startswith("malformed response")
    assert (stored["c01"]["status"], stored["c01"]["attempts"]) == ("error", 1) and "400" in stored["c01"]["error"]
    assert (stored["c02"]["status"], stored["c02"]["attempts"]) == ("error", 1) and "empty output_text" in stored["c02"]["error"]
    assert stored["c03"]["status"] == "ok"
    assert sleeps == [] and len(server.response_requests()) == 4
    assert (report.ok, report.error) == (1, 3)


def test_resume_after_a_failure_completes_only_the_missing_chunks(server, engine):
    chunks = make_chunks(5)
    server.script(Reply.ok(), Reply.ok(), *[Reply.error(500)] * 3)
    with pytest.raises(SummarizationStopped):
        run(engine, chunks, params_for(server))
    first = rows(engine)
    assert [first[c]["status"] for c in sorted(first)] == ["ok", "ok", "error"]
    assert first["c02"]["attempts"] == 3

    report = run(engine, chunks, params_for(server))
    assert (report.seen, report.skipped, report.ok, report.error, report.skipped_mismatched) == (5, 2, 3, 0, 0)
    final = rows(engine)
    assert len(read_table(engine, "summaries")) == 5 and all(r["status"] == "ok" for r in final.values())
    assert final["c00"]["run_id"] == final["c01"]["run_id"] == first["c00"]["run_id"] != report.run_id
    assert final["c02"]["run_id"] == report.run_id and final["c02"]["attempts"] == 1
    assert len(server.response_requests()) == 5 + 3
    runs = read_table(engine, "summary_runs", order_by=["started_at"])
    assert runs[["status", "n_ok", "n_error"]].values.tolist() == [["stopped", 2, 1], ["done", 3, 0]]
    assert runs["n_ok"].sum() == 5


KILLED_SCRIPT = """
import json, sys
from pmrag.core.store import open_store
from pmrag.core.params import SummarizerSection
from pmrag.represent.summarize import make_summarizer, summarize_chunks
db, url, chunks_path, concurrency = sys.argv[1:5]
chunks = [tuple(c) for c in json.loads(open(chunks_path, encoding="utf-8").read())]
params = SummarizerSection(backend="openai", base_url=url, interval_s=0.0, concurrency=int(concurrency))
summarize_chunks(open_store(db), chunks, make_summarizer(params), params, progress=False)
"""


@pytest.mark.integration
@pytest.mark.parametrize("concurrency", [1, 4])   # at 4: at most the four chunks in flight are lost
def test_sigkill_loses_at_most_the_chunk_in_flight_and_resume_redoes_nothing(server, engine, tmp_path, concurrency):
    n = 12
    chunks = make_chunks(n, prefix="k")
    chunks_path = tmp_path / "chunks.json"
    chunks_path.write_text(json.dumps(chunks, ensure_ascii=False), encoding="utf-8")
    db = tmp_path / "store.sqlite"
    server.delay_s = 0.3
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SCRIPT, str(db), server.base_url, str(chunks_path),
                             str(concurrency)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        committed = 0
        while time.monotonic() < deadline and proc.poll() is None:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                try:
                    committed = conn.execute("SELECT count(*) FROM summaries WHERE status='ok'").fetchone()[0]
                except sqlite3.OperationalError:   # not created yet
                    committed = 0
            if committed >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.kill()                                      # SIGKILL: no cleanup runs
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()

    before = {c: r["run_id"] for c, r in rows(engine).items()}
    assert 2 <= len(before) < n and all(r["status"] == "ok" for r in rows(engine).values())
    [killed_run] = rows(engine, summary_runs)
    assert killed_run["status"] == "running" and killed_run["finished_at"] is None   # how a killed run looks
    requests_before = len(server.response_requests())

    server.delay_s = 0.0
    report = run(engine, chunks, SummarizerSection(backend="openai", base_url=server.base_url, interval_s=0.0))
    after = rows(engine)
    assert len(read_table(engine, "summaries")) == n and all(r["status"] == "ok" for r in after.values())
    assert {c: after[c]["run_id"] for c in before} == before                          # earlier rows not redone
    assert (report.skipped, report.ok) == (len(before), n - len(before))
    assert len(server.response_requests()) - requests_before == n - len(before)


# ------------------------------------------------------------------------------------------ privacy

def test_remote_base_url_is_refused_without_allow_remote_and_nothing_is_sent(monkeypatch):
    def no_client(*args, **kwargs):
        raise AssertionError("a client was created")

    monkeypatch.setattr(openai, "OpenAI", no_client)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    for base_url in ("https://api.openai.com/v1", None):   # None resolves to OpenAI's public endpoint
        params = SummarizerSection(backend="openai", base_url=base_url)
        with pytest.raises(privacy.RemoteNotAllowed, match="set .allow_remote: true. in the params"):
            make_summarizer(params)
        with pytest.raises(AssertionError, match="a client was created"):   # allowed: only the guard stood in the way
            make_summarizer(params, allow_remote=True)
    assert isinstance(make_summarizer(SummarizerSection()), ExtractiveSummarizer)   # the default sends nothing
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.invalid/v1")
    with pytest.raises(privacy.RemoteNotAllowed, match="example.invalid"):
        ResponsesClient(SummarizerSection(backend="openai"), load_prompts("ja"))


def test_the_api_key_never_reaches_the_store_even_when_echoed(server, engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server.script(Reply.error(500, "invalid key {auth}"), Reply.error(401, "key {auth} rejected"), Reply.ok())
    report = run(engine, make_chunks(3), params_for(server, failure_policy="retry", max_retries=0))
    assert (report.ok, report.error) == (1, 2)
    server.script(*[Reply.error(500, "still {auth}")] * 3)                  # the retries fail too
    with pytest.raises(SummarizationStopped) as info:
        run(engine, [("z", "2024-04-10 09:00 山田: ok")], params_for(server))
    assert FAKE_KEY not in str(info.value) and "[REDACTED]" in str(info.value)

    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # it was sent and echoed
    dump = "\n".join(read_table(engine, t).to_csv() for t in ("summaries", "summary_runs"))
    assert "[REDACTED]" in dump
    assert FAKE_KEY not in dump and "SECRET" not in dump


# ------------------------------------------------------------------------------------------ extractive

def realistic_chunk(n_lines=36, start=datetime(2024, 7, 12, 19, 0)):
    lines = [
        ("さくら", "卒業旅行どこにする？"), ("健太", "沖縄行きたい！"), ("山田", "いいね"),
        ("さくら", "「美ら海水族館」は絶対行きたい"), ("健太", "[スタンプ]"),
        ("山田", "レンタカー借りたほうが移動ラクだよね"), ("さくら", "うん"),
        ("健太", "ホテルはオーシャンビューのところ予約しとく"), ("山田", "[写真]"),
        ("さくら", "8月の2週目ならバイト休めるよ"), ("健太", "了解"), ("山田", "飛行機はPeachが安いらしい"),
        ("さくら", "w"), ("健太", "国際通りで紅芋タルト買おう"), ("山田", "古宇利島のカフェも調べとく"),
        ("さくら", "ありがとう"), ("健太", "予算は一人5万円くらいで"), ("山田", "おけ"),
        ("さくら", "シュノーケリングのツアー申し込む？"), ("健太", "やりたい！青の洞窟のやつ"),
        ("山田", "日焼け止め忘れないように"), ("さくら", "[スタンプ]"), ("健太", "集合は羽田空港の第1ターミナルね"),
        ("山田", "はーい"), ("さくら", "楽しみすぎる"), ("健太", "美ら海の予約は山田に任せた"),
        ("山田", "了解、チケットはネットで買っとく"), ("さくら", "おやすみ"), ("健太", "おやすみー"),
        ("山田", "ホテルのキャンセル期限だけ確認しといて"), ("さくら", "りょ"), ("健太", "雨だったら首里城にしよう"),
        ("山田", "いいね"), ("さくら", "水着新しいの買う"), ("健太", "笑"), ("山田", "じゃあまた明日"),
    ]
    return "\n".join(
        f"{(start + timedelta(minutes=3 * i)).isoformat(sep=' ', timespec='minutes')} {sender}: {text}"
        for i, (sender, text) in enumerate(lines[:n_lines])
    )


def test_extractive_summary_is_deterministic_bounded_and_keeps_names_and_terms():
    raw = realistic_chunk()
    summary = ExtractiveSummarizer().digest(raw)
    assert summary == ExtractiveSummarizer().digest(raw) == make_summarizer(SummarizerSection(backend="extractive")).digest(raw)
    assert 200 <= len(summary) <= 500
    for participant in ("さくら", "健太", "山田"):
        assert participant in summary
    for term in ("美ら海水族館", "レンタカー", "オーシャンビュー", "Peach", "2024-07-12"):
        assert term in summary
    assert "[スタンプ]" not in summary and "[写真]" not in summary
    short = ExtractiveSummarizer().digest(realistic_chunk(6))
    assert 0 < len(short) < len(summary)
    assert len(ExtractiveSummarizer().digest(realistic_chunk() * 5)) <= 500


def test_extractive_runs_through_the_batch_runner_without_sleeping(engine, capsys):
    chunks = [("x1", realistic_chunk()), ("x2", realistic_chunk(10))]
    params = SummarizerSection(backend="extractive")
    sleeps = Sleeps()
    report = run(engine, chunks, params, sleeps)
    assert (report.ok, report.calls, sleeps) == (2, 0, [])
    stored = rows(engine)
    assert {r["backend"] for r in stored.values()} == {"extractive"}
    assert {r["requested_model"] for r in stored.values()} == {EXTRACTIVE_MODEL}
    assert {r["response_model"] for r in stored.values()} == {EXTRACTIVE_MODEL}
    assert all(r["sdk_version"] is None and r["input_tokens"] is None for r in stored.values())
    assert read_table(engine, "summary_runs").iloc[0]["backend"] == "extractive"

    # A rerun skips them; with a different input cut it says the skipped rows came from other input.
    again = summarize_chunks(engine, chunks, make_summarizer(params), params, progress=True)
    assert (again.skipped, again.skipped_mismatched, again.ok) == (2, 0, 0)
    assert "summaries (extractive)" in capsys.readouterr().err
    shorter = SummarizerSection(backend="extractive", max_input_chars=100)
    again = run(engine, chunks, shorter)
    assert (again.skipped, again.skipped_mismatched, again.ok) == (2, 2, 0)
    assert "2 skipped rows came from another model or input" in again.line()


def test_a_stand_ins_rows_are_committed_a_batch_at_a_time_and_all_of_them(engine, monkeypatch):
    """The extractive stand-in costs nothing to redo: its rows go in STAND_IN_COMMIT at a time (one transaction per
    chunk took half the summaries stage at the paper's scale), the last short batch included."""
    from pmrag.represent import llm

    batches = []
    record = llm.SummaryStore.record
    monkeypatch.setattr(llm, "STAND_IN_COMMIT", 2)
    monkeypatch.setattr(llm.SummaryStore, "record",
                        lambda self, run_, calls, counts: (batches.append(len(calls)), record(self, run_, calls, counts)))
    report = run(engine, [(f"x{i}", realistic_chunk(i + 3)) for i in range(5)], SummarizerSection(backend="extractive"))
    assert report.ok == 5 and batches == [2, 2, 1] and len(rows(engine)) == 5
    assert read_table(engine, "summary_runs").iloc[0][["n_ok", "status"]].tolist() == [5, "done"]


def test_a_pure_stand_ins_many_calls_run_in_worker_processes_and_store_the_same_rows(engine, monkeypatch):
    """Above STAND_IN_PARALLEL_CHARS the extractive stand-in's calls run in two worker processes, a block of
    STAND_IN_COMMIT items each; the rows, their commits and the outputs are those of the calls in this process."""
    from pmrag.core import parallel
    from pmrag.represent import llm

    chunks = [(f"x{i}", realistic_chunk(3 + i % 40)) for i in range(9)]
    section = SummarizerSection(backend="extractive")
    monkeypatch.setattr(llm, "STAND_IN_COMMIT", 2)
    batches, maps = [], []
    record, ordered_map = llm.SummaryStore.record, parallel.ordered_map
    monkeypatch.setattr(llm.SummaryStore, "record",
                        lambda self, run_, calls, counts: (batches.append([c.item_id for c in calls]),
                                                           record(self, run_, calls, counts)))
    monkeypatch.setattr(parallel, "ordered_map",
                        lambda function, calls, workers: (maps.append((len(calls), workers)),
                                                          ordered_map(function, calls, workers))[1])
    kept = ("chunk_id", "status", "summary", "backend", "requested_model", "input_chars", "input_sha256", "error")

    def stored():
        return {cid: tuple(row[k] for k in kept) for cid, row in rows(engine).items()}

    assert run(engine, chunks, section).ok == 9 and not maps   # 9 short chunks: under the threshold, here
    here, here_batches = stored(), batches[:]
    with engine.begin() as conn:
        conn.execute(summaries.delete())
    batches.clear()
    monkeypatch.setattr(llm, "STAND_IN_PARALLEL_CHARS", 1)
    report = run(engine, chunks, section)
    assert maps == [(5, llm.STAND_IN_WORKERS)]   # 9 items in blocks of 2, two workers
    assert report.ok == 9 and stored() == here and batches == here_batches == [
        ["x0", "x1"], ["x2", "x3"], ["x4", "x5"], ["x6", "x7"], ["x8"]]
    assert all(row[1] == "ok" and row[2] for row in here.values())


def test_a_model_calls_rows_are_committed_one_by_one(server, engine, monkeypatch):
    from pmrag.represent import llm

    batches = []
    record = llm.SummaryStore.record
    monkeypatch.setattr(llm.SummaryStore, "record",
                        lambda self, run_, calls, counts: (batches.append(len(calls)), record(self, run_, calls, counts)))
    assert run(engine, make_chunks(3), params_for(server)).ok == 3
    assert batches == [1, 1, 1]


def test_the_summaries_identity_reads_a_failed_chunk_without_summary():
    from pmrag.represent.summarize import summaries_identity

    ok = pd.DataFrame({"chunk_id": ["a", "b"], "status": ["ok", "ok"], "summary": ["s1", "s2"]})
    failed = ok.assign(status=["ok", "error"], summary=["s1", None])
    assert summaries_identity(failed) != summaries_identity(ok)
    assert summaries_identity(failed) == summaries_identity(failed.assign(summary=["s1", float("nan")]))
    assert summaries_identity(ok) == summaries_identity(ok.copy())
