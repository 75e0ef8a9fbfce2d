"""The LLM step (pmrag.represent.llm): a toy step run by run_step over real HTTP to the local scripted Responses
server: retries then success, the failure policies, resume, a malformed reply's one-line error, the provenance
row, key redaction; and the pieces: prompts from files, the client's guard, the policy's waits, the report line,
an offline backend that is neither paced nor counted."""

import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path

import openai
import pytest

from pmrag.core.errors import PmragError
from pmrag.core.params import SummarizerSection
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, Reply, ResponsesClient, StepItem,
                                 StepReport, StepStopped, client_secrets, load_step_prompts, public_url, redacted,
                                 reply_object, run_step)
from pmrag.represent.privacy import RemoteNotAllowed

sys.path.insert(0, str(Path(__file__).parents[1]))
from conftest import extraction_rows  # noqa: E402
from responses_server import RESPONSE_MODEL, Reply as Scripted  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"
SECRET = "the neighbour's door code is 4711"

pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


class ToyStopped(StepStopped):
    """The toy step's stop (the base message)."""


def check_toy(text: str, item: StepItem) -> tuple[dict, int]:
    """A toy reply: ``{"words": [...]}``, strings; words not in the item's context are dropped and counted."""
    reply = reply_object(text, f"item {item.item_id!r}")
    words = reply.get("words")
    if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
        raise CallError(f"item {item.item_id!r}: key 'words' must be a list of strings", retryable=False)
    kept = [word for word in words if word in item.context]
    return {"words": kept}, len(words) - len(kept)


TOY = LLMStep("toy", "toy step", ("toy_system", "toy_user"), check_toy, noun="toy item",
              dropped="words not offered dropped", stopped=ToyStopped)


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def prompt_set(tmp_path):
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "toy_system.txt").write_text("\ufeffYou pick words.\n", encoding="utf-8")
    (folder / "toy_user.txt").write_text("Pick the words that matter.\n\n", encoding="utf-8")
    return str(folder)


def settings(server, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": server.base_url, "interval_s": 0.25, "timeout_s": 5.0,
              "backoff_initial_s": 0.5, "backoff_max_s": 8.0, "backoff_jitter": 0, "failure_policy": "retry"}
    values.update(overrides)   # no jitter: the waits are the exact doubling (the jitter: test_concurrency)
    return SummarizerSection(**values)


def toy_run(server, engine, prompt_set, items, sleeps=None, **overrides):
    llm = settings(server, **overrides)
    prompts = load_step_prompts(prompt_set, {TOY.name: TOY.prompt_files}, "toy prompts")[TOY.name]
    client = ResponsesClient(llm, prompts, sender="the toy step")
    return run_step(TOY, items, client=client, store=ExtractionStore(engine),
                    policy=CallPolicy(llm, sleeps if sleeps is not None else Sleeps()))


def words(*found) -> str:
    return json.dumps({"words": list(found)})


ITEMS = [StepItem("a", "alpha text", ("x", "y")), StepItem("b", "beta text", ("y",)), StepItem("c", "gamma", ("z",))]


# ------------------------------------------------------------------------------------------ run_step

def test_a_retryable_error_is_retried_after_the_backoff_then_succeeds(server, engine, prompt_set):
    server.script(Scripted.error(429), Scripted.error(500), Scripted.ok(words("x", "q")), Scripted.ok(words("y")),
                  Scripted.ok(words("z")))
    sleeps = Sleeps()
    result = toy_run(server, engine, prompt_set, ITEMS, sleeps)
    assert sleeps == [0.5, 1.0, 0.25, 0.25]          # backoff before each retry, the interval before the next items
    assert result.outputs == {"a": {"words": ["x"]}, "b": {"words": ["y"]}, "c": {"words": ["z"]}}
    rows = extraction_rows(engine)
    assert [rows[i]["attempts"] for i in "abc"] == [3, 1, 1] and rows["a"]["dropped_ids"] == 1
    report = result.report
    assert (report.status, report.seen, report.ok, report.error, report.calls, report.dropped_ids) == (
        "done", 3, 3, 0, 5, 1)
    assert report.line() == (f"toy step run {report.run_id} (openai/gpt-4o-mini): done; seen 3, skipped 0 already "
                             f"ok, ok 3, error 0, calls 5; 1 words not offered dropped")


def test_retries_stop_at_max_retries_and_the_retry_policy_goes_on(server, engine, prompt_set):
    server.script(*[Scripted.error(503)] * 3, Scripted.ok(words("y")), Scripted.ok(words("z")))
    sleeps = Sleeps()
    result = toy_run(server, engine, prompt_set, ITEMS, sleeps, max_retries=2)
    rows = extraction_rows(engine)
    assert (rows["a"]["status"], rows["a"]["attempts"], rows["a"]["output"]) == ("error", 3, None)
    assert rows["a"]["error"].startswith("InternalServerError: ") and "503" in rows["a"]["error"]
    assert "a" not in result.outputs and (result.report.ok, result.report.error) == (2, 1)
    assert sleeps == [0.5, 1.0, 0.25, 0.25] and len(server.response_requests()) == 5


def test_stop_on_first_error_records_the_item_and_raises_the_steps_stop_with_the_report(server, engine, prompt_set):
    server.script(Scripted.ok(words("x")), Scripted.error(400, "bad request"))
    with pytest.raises(ToyStopped) as stopped:
        toy_run(server, engine, prompt_set, ITEMS, failure_policy="stop_on_first_error")
    error = stopped.value
    assert str(error).startswith(f"toy stopped at toy item b (run {error.run_id}, 1 ok in this run): "
                                 f"BadRequestError: Error code: 400")
    assert str(error).endswith("rerun to resume (calls already ok are not made again), or set "
                               "'summarizer.failure_policy: retry'")
    assert (error.step, error.item_id, error.n_ok) == ("toy", "b", 1)
    assert (error.report.status, error.report.seen, error.report.ok, error.report.error) == ("stopped", 2, 1, 1)
    rows = extraction_rows(engine)
    assert sorted(rows) == ["a", "b"] and (rows["b"]["status"], rows["b"]["attempts"]) == ("error", 1)
    assert len(server.response_requests()) == 2               # c was never called


def test_a_rerun_skips_ok_items_and_calls_failed_and_changed_ones(server, engine, prompt_set):
    server.script(Scripted.ok(words("x", "y")), Scripted.ok("no JSON here"), Scripted.ok(words("q")))
    first = toy_run(server, engine, prompt_set, ITEMS)
    assert (first.report.ok, first.report.error) == (2, 1)

    before = len(server.response_requests())
    server.script(Scripted.ok(words("y")), Scripted.ok(words("z")))
    changed = [ITEMS[0], ITEMS[1], StepItem("c", "gamma, edited", ("z",))]
    again = toy_run(server, engine, prompt_set, changed)
    sent = [r.body["input"] for r in server.response_requests()[before:]]
    assert [text.rsplit("\n\n", 1)[1] for text in sent] == ["beta text", "gamma, edited"]
    assert again.outputs == {"a": {"words": ["x", "y"]}, "b": {"words": ["y"]}, "c": {"words": ["z"]}}
    assert (again.report.skipped, again.report.ok, again.report.calls) == (1, 2, 2)
    assert again.report.dropped_ids == 0                       # a's stored row dropped nothing
    rows = extraction_rows(engine)
    assert rows["a"]["run_id"] == first.report.run_id and rows["b"]["run_id"] == again.report.run_id


def test_another_model_or_prompt_is_not_resumed_from(server, engine, prompt_set, tmp_path):
    server.script(Scripted.ok(words("x")))
    toy_run(server, engine, prompt_set, ITEMS[:1])
    server.script(Scripted.ok(words("x")))
    assert toy_run(server, engine, prompt_set, ITEMS[:1], model="gpt-4.1-mini").report.calls == 1
    (Path(prompt_set) / "toy_user.txt").write_text("Pick other words.\n", encoding="utf-8")
    server.script(Scripted.ok(words("x")))
    assert toy_run(server, engine, prompt_set, ITEMS[:1]).report.calls == 1
    assert len(server.response_requests()) == 3


def test_a_malformed_reply_is_a_one_line_error_without_the_reply(server, engine, prompt_set):
    server.script(Scripted.ok(f"Sure!\n{SECRET}\n{{"), Scripted.ok(json.dumps({"words": SECRET})))
    result = toy_run(server, engine, prompt_set, ITEMS[:2])
    rows = extraction_rows(engine)
    assert rows["a"]["error"] == "item 'a': the reply is not JSON (Expecting value at line 1 column 1)"
    assert rows["b"]["error"] == "item 'b': key 'words' must be a list of strings"
    assert [rows[i]["attempts"] for i in "ab"] == [1, 1]       # not retried
    assert rows["a"]["response_model"] == RESPONSE_MODEL       # the call itself answered
    assert SECRET not in json.dumps(list(rows.values()), default=str) and SECRET not in result.report.line()


def test_the_row_records_the_calls_provenance(server, engine, prompt_set):
    server.script(Scripted.ok(words("y", "x")))
    result = toy_run(server, engine, prompt_set, ITEMS[:1])
    row = extraction_rows(engine)["a"]
    sha = lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest()   # noqa: E731
    sent = server.response_requests()[0].body
    assert sent["instructions"] == "You pick words." and sent["input"] == "Pick the words that matter.\n\nalpha text"
    assert sent["model"] == "gpt-4o-mini" and sent["max_output_tokens"] == 700 and "temperature" not in sent
    assert {k: row[k] for k in ("step", "item_id", "status", "requested_model", "response_model", "sdk_version",
                                "system_sha256", "user_sha256", "input_chars", "input_sha256", "output", "error",
                                "dropped_ids", "attempts", "run_id")} == {
        "step": "toy", "item_id": "a", "status": "ok", "requested_model": "gpt-4o-mini",
        "response_model": RESPONSE_MODEL, "sdk_version": openai.__version__,
        "system_sha256": sha("You pick words."), "user_sha256": sha("Pick the words that matter."),
        "input_chars": len("alpha text"), "input_sha256": sha("alpha text"), "output": '{"words": ["y", "x"]}',
        "error": None, "dropped_ids": 0, "attempts": 1, "run_id": result.report.run_id}
    assert row["input_tokens"] == len(sent["input"]) // 2 and row["output_tokens"] == len(words("y", "x"))
    assert row["latency_s"] > 0 and datetime.fromisoformat(row["created_at"]).tzinfo is not None


def test_the_api_key_is_redacted_from_rows_stops_and_reports(server, engine, prompt_set, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server.script(Scripted.error(500, "upstream saw {auth}"), Scripted.error(401, "key {auth} rejected"))
    with pytest.raises(ToyStopped) as stopped:
        toy_run(server, engine, prompt_set, ITEMS, failure_policy="stop_on_first_error", max_retries=1)
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # sent, and echoed
    assert FAKE_KEY not in str(stopped.value) and "[REDACTED]" in str(stopped.value) and "\n" not in str(stopped.value)
    row = extraction_rows(engine)["a"]
    assert "[REDACTED]" in row["error"] and FAKE_KEY not in json.dumps(row, default=str)
    assert FAKE_KEY not in stopped.value.report.line()


class Offline:
    """A backend with no API: its calls are neither paced nor counted."""

    backend, requested_model, sdk_version, calls_api = "offline", "echo-v1", None, False

    def __init__(self):
        self.prompts = load_step_prompts("en", {"s": ("summary_system", "summary_user")})["s"]

    def call(self, text):
        return Reply(json.dumps({"words": text.split()}), "echo-v1")

    def provenance(self):
        return {}


def test_an_offline_backend_is_neither_paced_nor_counted(engine):
    sleeps = Sleeps()
    result = run_step(TOY, ITEMS, client=Offline(), store=ExtractionStore(engine),
                      policy=CallPolicy(SummarizerSection(interval_s=5.0), sleeps))
    assert sleeps == [] and (result.report.calls, result.report.ok) == (0, 3)
    assert result.outputs["c"] == {"words": []} and result.report.dropped_ids == 5
    assert result.report.line().startswith(f"toy step run {result.report.run_id} (offline/echo-v1): done")


CLIENT_SECRET = "sk-client-named-0123456789"


class Echoing(Offline):
    """An offline backend that names a secret of its own and echoes it in its reply's text and model."""

    secrets = (CLIENT_SECRET,)

    def call(self, text):
        return Reply(json.dumps({"words": [CLIENT_SECRET, text.split()[0]]}), f"echo {CLIENT_SECRET}")


def test_a_reply_is_redacted_before_the_check_reads_it(engine):
    items = [StepItem("a", "alpha text", ("alpha", "[REDACTED]"))]   # the check keeps the words offered
    result = run_step(TOY, items, client=Echoing(), store=ExtractionStore(engine),
                      policy=CallPolicy(SummarizerSection()))
    assert result.outputs == {"a": {"words": ["[REDACTED]", "alpha"]}} and result.report.dropped_ids == 0
    row = extraction_rows(engine)["a"]
    assert row["response_model"] == "echo [REDACTED]" and CLIENT_SECRET not in json.dumps(row, default=str)


def test_a_stored_output_holding_the_key_is_redacted_when_a_rerun_resumes_it(engine, monkeypatch):
    from sqlalchemy import update

    from pmrag.core.store import graph_extractions

    policy = CallPolicy(SummarizerSection())
    run_step(TOY, ITEMS[:1], client=Offline(), store=ExtractionStore(engine), policy=policy)
    with engine.begin() as conn:   # a row written before replies were redacted
        conn.execute(update(graph_extractions).values(output=json.dumps({"words": [FAKE_KEY, "x"]})))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    again = run_step(TOY, ITEMS[:1], client=Offline(), store=ExtractionStore(engine), policy=policy)
    assert again.report.skipped == 1 and again.outputs == {"a": {"words": ["[REDACTED]", "x"]}}


def test_redacted_replaces_secrets_in_the_text_and_the_model_and_keeps_the_counts(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert redacted(Reply(f"a {FAKE_KEY}", f"m {FAKE_KEY}", 3, 4)) == Reply("a [REDACTED]", "m [REDACTED]", 3, 4)
    assert redacted(Reply(f"b {CLIENT_SECRET}", None), [CLIENT_SECRET]) == Reply("b [REDACTED]", None)
    assert client_secrets(Offline()) == () and client_secrets(Echoing()) == (CLIENT_SECRET,)


def test_the_report_line_is_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    report = StepReport(step="s", title="summaries", run_id="r1", backend="openai", requested_model=f"m-{FAKE_KEY}",
                        status="done", seen=0, skipped=0, ok=0, error=0, calls=0, started_at="t0", finished_at="t1")
    assert "(openai/m-[REDACTED])" in report.line() and FAKE_KEY not in report.line()


# ------------------------------------------------------------------------------------------ the pieces

def test_the_policy_waits_nothing_first_then_the_interval_then_the_backoff():
    sleeps = Sleeps()
    policy = CallPolicy(SummarizerSection(interval_s=0.2, backoff_initial_s=1.0, backoff_max_s=3.0, max_retries=3,
                                          backoff_jitter=0),
                        sleeps)
    for attempt in (0, 0, 1, 2, 3, 0):
        policy.before(attempt)
    assert sleeps == [0.2, 1.0, 2.0, 3.0, 0.2] and policy.calls == 6
    assert policy.retries(CallError("x", retryable=True), 3) and not policy.retries(CallError("x", True), 4)
    assert not policy.retries(CallError("x", retryable=False), 1)
    assert policy.stops and not CallPolicy(SummarizerSection(failure_policy="retry")).stops


def test_a_zero_wait_is_not_slept():
    sleeps = Sleeps()
    policy = CallPolicy(SummarizerSection(interval_s=0.0), sleeps)
    policy.before(0)
    policy.before(0)
    assert sleeps == []


def test_the_report_line_names_counts_and_mismatches_only():
    report = StepReport(step="s", title="summaries", run_id="r1", backend="extractive", requested_model="m",
                        status="done", seen=3, skipped=2, ok=1, error=0, calls=0, started_at="t0", finished_at="t1",
                        skipped_mismatched=2)
    assert report.line() == ("summaries run r1 (extractive/m): done; seen 3, skipped 2 already ok, ok 1, error 0, "
                             "calls 0; 2 skipped rows came from another model or input")


def test_step_prompts_come_from_files_and_a_missing_or_empty_one_is_one_line(prompt_set):
    loaded = load_step_prompts(prompt_set, {"toy": ("toy_system", "toy_user")})["toy"]
    assert loaded == ("You pick words.", "Pick the words that matter.")        # BOM and trailing blank lines gone
    assert loaded.render_input("in") == "Pick the words that matter.\n\nin"
    with pytest.raises(ValueError, match=r"^toy prompts: prompt set .*: missing nothing\.txt in "):
        load_step_prompts(prompt_set, {"toy": ("toy_system", "nothing")}, "toy prompts", ValueError)
    (Path(prompt_set) / "toy_user.txt").write_text(" \n\n", encoding="utf-8")
    with pytest.raises(PmragError, match=r"^prompts: toy_user\.txt of prompt set .* is empty$"):
        load_step_prompts(prompt_set, {"toy": ("toy_system", "toy_user")})
    with pytest.raises(PmragError, match="no folder"):
        load_step_prompts(str(Path(prompt_set) / "absent"), {"toy": ("toy_system", "toy_user")})


@pytest.mark.parametrize("text, message", [
    ('```json\n{"a": 1}\n```', None),
    ('{"a": 1}', None),
    ('[1]', "item 'z': the reply is JSON but not an object (list)"),
    ('{"a": ', "item 'z': the reply is not JSON (Expecting value at line 1 column 6)"),   # stripped
])
def test_a_reply_object_is_one_json_object_in_an_optional_fence(text, message):
    if message is None:
        assert reply_object(text, "item 'z'") == {"a": 1}
    else:
        with pytest.raises(CallError) as raised:
            reply_object(text, "item 'z'")
        assert str(raised.value) == message and not raised.value.retryable


def test_the_client_refuses_a_remote_server_before_it_exists(monkeypatch, prompt_set):
    def no_client(*args, **kwargs):
        raise AssertionError("a client was created")

    monkeypatch.setattr(openai, "OpenAI", no_client)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    prompts = load_step_prompts(prompt_set, {"toy": ("toy_system", "toy_user")})["toy"]
    remote = SummarizerSection(backend="openai", base_url="https://api.example.com/v1")
    with pytest.raises(RemoteNotAllowed, match="^the toy step would send chat text to api.example.com"):
        ResponsesClient(remote, prompts, sender="the toy step")
    with pytest.raises(AssertionError, match="a client was created"):
        ResponsesClient(remote, prompts, sender="the toy step", allow_remote=True)


def test_a_loopback_client_needs_no_key_and_its_provenance_has_no_password(prompt_set):
    prompts = load_step_prompts(prompt_set, {"toy": ("toy_system", "toy_user")})["toy"]
    client = ResponsesClient(SummarizerSection(backend="openai", base_url="http://user:hunter2@127.0.0.1:9/v1"),
                             prompts)
    assert client.provenance() == {"base_url": "http://127.0.0.1:9/v1", "prompt_sha256": prompts.sha256()}
    assert public_url("https://u:p@[::1]:8443/v1?x=1#f") == "https://[::1]:8443/v1"
    assert (client.backend, client.requested_model, client.calls_api) == ("openai", "gpt-4o-mini", True)


def test_each_steps_stop_message_names_the_step_and_the_item_as_it_says():
    from pmrag.evaluate.answer_judge import ANSWER_JUDGE, JudgeStopped
    from pmrag.represent.extract_llm import SEMANTIC, GraphExtractionStopped

    judge = JudgeStopped(ANSWER_JUDGE, "judge|q1|ab", "boom", "r1", 2)
    assert str(judge) == ("answer judge stopped at judge|q1|ab (run r1, 2 ok in this run): boom; rerun to resume (calls "
                          "already ok are not made again), or set 'summarizer.failure_policy: retry'")
    graph = GraphExtractionStopped(SEMANTIC, "c1", "boom", "r1", 0)
    assert str(graph).startswith("graph extraction (semantic) stopped at memory c1 (run r1, 0 ok in this run): boom;")
