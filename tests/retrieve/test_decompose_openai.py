"""Query decomposition by an LLM (pmrag.retrieve.subqueries, backend openai) over real HTTP to the local scripted
Responses server: the sub-queries kept, the requests, the rows of ``graph_extractions`` (step decomposition),
resume, the failure policies on invalid JSON, the remote guard and key redaction."""

import hashlib
import json
import sys
from pathlib import Path

import pytest

from pmrag.core.params import DecompositionSection, EmbeddingSection, SummarizerSection
from pmrag.represent.privacy import RemoteNotAllowed
from pmrag.represent.representations import PROMPTS_DIR
from pmrag.represent.llm import CallError
from pmrag.retrieve.subqueries import (DecompositionStopped, decompose, decompose_questions, decomposition_item_id,
                                       llm_decomposition, load_decomposition_prompts, validate_decomposition_reply)

sys.path.insert(0, str(Path(__file__).parents[1]))
from responses_server import RESPONSE_MODEL, Reply  # noqa: E402
from conftest import extraction_rows, prompt_sha  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"
QUESTION_IDS = ["q1", "q2", "q3"]
QUESTIONS = ["Where did Mel and Sam\ngo hiking last summer?", "What did Jo buy?", "Who baked the cake?"]
REPLIES = [
    '{"subqueries": ["Mel hiking", "Sam  hiking\\ntrip", "mel HIKING", "", "summer trip", "mountain"]}',
    '```json\n{"subqueries": []}\n```',                      # no decomposition needed
    '{"subqueries": ["who baked the cake?", "cake baking"]}',  # the question itself is dropped
]
KEPT = [("Mel hiking", "Sam hiking trip", "summer trip"), (), ("cake baking",)]


pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


def llm(base_url: str, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter": 0, "failure_policy": "retry"}
    values.update(overrides)
    return SummarizerSection(**values)


def run(server, engine, questions=QUESTIONS, max_subqueries=3, **llm_overrides):
    return llm_decomposition(QUESTION_IDS, questions, max_subqueries=max_subqueries,
                             llm=llm(server.base_url, **llm_overrides), prompts="en", engine=engine,
                             allow_remote=False, proxy=None)



# ------------------------------------------------------------------------------------------ success

def test_the_replies_are_cleaned_and_cut_to_max_subqueries(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    result = run(server, engine)
    assert result.subqueries == KEPT
    report = result.report
    assert (report.step, report.status, report.seen, report.ok, report.error, report.calls) == (
        "decomposition", "done", 3, 3, 0, 3)
    assert report.dropped_ids == 3 + 0 + 1                   # q1: a repeat, an empty one, one past the cap
    assert report.line().startswith(f"decomposition run {report.run_id} (openai/gpt-4o-mini): done")


def test_the_requests_carry_the_prompt_files_and_the_question_as_json(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    run(server, engine)
    sent = [r.body for r in server.response_requests()]
    assert len(sent) == 3                                     # one call per question
    prompts = load_decomposition_prompts("en")
    assert sent[0]["instructions"] == (PROMPTS_DIR / "en" / "decompose_system.txt").read_text().rstrip()
    assert sent[0]["input"] == (prompts.user_template + "\n\n"
                                + '{"question": "Where did Mel and Sam go hiking last summer?", "max_subqueries": 3}')
    assert sent[0]["model"] == "gpt-4o-mini" and "temperature" not in sent[0]


@pytest.mark.parametrize("prompts", ["ja", "en"])
def test_both_prompt_sets_hold_the_decomposition_prompts(prompts):
    loaded = load_decomposition_prompts(prompts)
    assert '{"subqueries": [...]}' in loaded.user_template and "max_subqueries" in loaded.user_template
    assert loaded.system


def test_the_openai_backend_is_labelled_with_its_model(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    found, name, provenance = decompose(QUESTION_IDS, QUESTIONS, DecompositionSection(backend="openai",
                                                                                      max_subqueries=3),
                                        llm=llm(server.base_url), prompts="en", engine=engine)
    assert found == KEPT and name == "openai gpt-4o-mini (LLM decomposition)"
    assert provenance["prompt_sha256"]["system"] == prompt_sha(PROMPTS_DIR / "en" / "decompose_system.txt")
    assert provenance["base_url"].startswith("http://127.0.0.1") and provenance["max_subqueries"] == 3


def test_decompose_questions_runs_the_llm_and_reports_on_stderr(server, engine, tmp_path, capsys):
    server.script(*(Reply.ok(text) for text in REPLIES))
    found = decompose_questions(QUESTION_IDS, QUESTIONS, DecompositionSection(backend="openai", max_subqueries=3),
                                embedding=EmbeddingSection(), cache_dir=tmp_path / "cache",
                                llm=llm(server.base_url), prompts="en", engine=engine)
    assert found.subqueries == tuple(KEPT) and found.matrix.shape == (4, 384)
    assert found.label == "openai gpt-4o-mini (LLM decomposition)"
    line = found.provenance["calls"]
    assert line.startswith("decomposition run ") and line.endswith(
        "seen 3, skipped 0 already ok, ok 3, error 0, calls 3; 4 sub-queries dropped (empty, repeated, the "
        "question itself or past max_subqueries)")
    assert line in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ rows and resume

def test_every_call_is_a_row_with_its_provenance(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    result = run(server, engine)
    found = extraction_rows(engine)
    ids = [decomposition_item_id(q, text, 3) for q, text in zip(QUESTION_IDS, QUESTIONS)]
    assert sorted(found) == sorted(ids) and all(r["step"] == "decomposition" for r in found.values())
    assert ids[0] == f"q1:{hashlib.sha256(QUESTIONS[0].encode()).hexdigest()[:16]}:3"
    q1 = found[ids[0]]
    assert q1["status"] == "ok" and q1["error"] is None and q1["attempts"] == 1
    assert q1["run_id"] == result.report.run_id
    assert (q1["requested_model"], q1["response_model"]) == ("gpt-4o-mini", RESPONSE_MODEL)
    assert q1["system_sha256"] == prompt_sha(PROMPTS_DIR / "en" / "decompose_system.txt")
    assert q1["user_sha256"] == prompt_sha(PROMPTS_DIR / "en" / "decompose_user.txt")
    sent = '{"question": "Where did Mel and Sam go hiking last summer?", "max_subqueries": 3}'
    assert (q1["input_chars"], q1["input_sha256"]) == (len(sent), hashlib.sha256(sent.encode()).hexdigest())
    assert json.loads(q1["output"]) == {"subqueries": list(KEPT[0])} and q1["dropped_ids"] == 3
    assert json.loads(found[ids[1]]["output"]) == {"subqueries": []}


def test_a_rerun_reads_the_stored_rows_and_calls_nothing(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    first = run(server, engine)
    before = len(server.response_requests())
    again = run(server, engine)
    assert len(server.response_requests()) == before
    assert again.subqueries == first.subqueries == KEPT
    assert (again.report.skipped, again.report.calls, again.report.dropped_ids) == (3, 0, 4)


def test_a_changed_question_or_cap_is_called_again(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    run(server, engine)
    before = len(server.response_requests())
    server.script(Reply.ok('{"subqueries": ["Jo shopping"]}'))
    edited = run(server, engine, questions=[QUESTIONS[0], "What did Jo buy yesterday?", QUESTIONS[2]])
    calls = server.response_requests()[before:]
    assert len(calls) == 1 and "What did Jo buy yesterday?" in calls[0].body["input"]
    assert edited.subqueries == [KEPT[0], ("Jo shopping",), KEPT[2]] and edited.report.skipped == 2

    before = len(server.response_requests())
    server.script(*(Reply.ok(text) for text in REPLIES))
    capped = run(server, engine, max_subqueries=1)
    assert len(server.response_requests()) == before + 3
    assert capped.subqueries == [("Mel hiking",), (), ("cake baking",)]
    assert len(extraction_rows(engine)) == 3 + 1 + 3                     # older items keep their rows


def test_a_retryable_error_is_retried_within_the_call(server, engine):
    server.script(Reply.error(429), *(Reply.ok(text) for text in REPLIES))
    slept = []
    result = llm_decomposition(QUESTION_IDS, QUESTIONS, max_subqueries=3,
                               llm=llm(server.base_url, backoff_initial_s=0.25, backoff_max_s=1.0), prompts="en",
                               engine=engine, allow_remote=False, proxy=None, sleep=slept.append)
    assert extraction_rows(engine)[decomposition_item_id("q1", QUESTIONS[0], 3)]["attempts"] == 2
    assert result.report.calls == 4 and 0.25 in slept and result.subqueries == KEPT


# ------------------------------------------------------------------------------------------ failures

@pytest.mark.parametrize("policy", ["stop_on_first_error", "retry"])
def test_malformed_json_is_a_failed_call_naming_the_question(server, engine, policy):
    secret_reply = "Mel's secret address is 1 Hill Road"
    server.script(Reply.ok(REPLIES[0]), Reply.ok(secret_reply))
    q2 = decomposition_item_id("q2", QUESTIONS[1], 3)
    if policy == "stop_on_first_error":
        with pytest.raises(DecompositionStopped, match=r"query decomposition stopped at question q2:.*question 'q2': "
                                                       r"the reply is not JSON \(Expecting value at line 1 column 1\)"
                           ) as stopped:
            run(server, engine, failure_policy=policy)
        message = str(stopped.value)
        assert "secret" not in message and "\n" not in message and "1 ok in this run" in message
        assert len(server.response_requests()) == 2 and len(extraction_rows(engine)) == 2
    else:
        server.script(Reply.ok(REPLIES[2]))
        result = run(server, engine, failure_policy=policy)
        assert result.subqueries == [KEPT[0], (), KEPT[2]]    # the failed question: its own list alone
        assert (result.report.ok, result.report.error) == (2, 1)
    row = extraction_rows(engine)[q2]
    assert row["status"] == "error" and row["output"] is None and "secret" not in row["error"]
    assert row["attempts"] == 1                              # invalid JSON is not retried within the call

    before = len(server.response_requests())                # the rerun calls the failed question (and any not reached)
    server.script(*(Reply.ok(text) for text in REPLIES[1:]))
    again = run(server, engine, failure_policy=policy)
    assert again.subqueries == KEPT
    not_reached = 1 if policy == "stop_on_first_error" else 0
    assert len(server.response_requests()) - before == 1 + not_reached


@pytest.mark.parametrize("reply, message", [
    ('not json', "question 'q1': the reply is not JSON (Expecting value at line 1 column 1)"),
    ('["a"]', "question 'q1': the reply is JSON but not an object (list)"),
    ('{"queries": ["a"]}', "question 'q1': key 'subqueries' is missing"),
    ('{"subqueries": "a b"}', "question 'q1': key 'subqueries' must be a list of strings"),
    ('{"subqueries": ["a", 2]}', "question 'q1': key 'subqueries' must be a list of strings"),
    ('{"subqueries": [{"text": "a"}]}', "question 'q1': key 'subqueries' must be a list of strings"),
])
def test_decomposition_replies_are_checked(reply, message):
    with pytest.raises(CallError) as raised:
        validate_decomposition_reply(reply, "q1", "a question", 4)
    assert str(raised.value) == message and not raised.value.retryable


# ------------------------------------------------------------------------------------------ privacy

def test_a_remote_server_is_refused_without_allow_remote(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    remote = llm("https://api.example.com/v1")
    with pytest.raises(RemoteNotAllowed, match="the openai query decomposition would send chat text to "
                                               "api.example.com"):
        llm_decomposition(QUESTION_IDS, QUESTIONS, max_subqueries=3, llm=remote, prompts="en", engine=engine,
                          allow_remote=False, proxy=None)
    assert extraction_rows(engine) == {}


def test_the_api_key_is_never_stored_or_reported(server, engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server.script(Reply.error(400, "bad request, you sent {auth}"), *(Reply.ok(text) for text in REPLIES[1:]))
    found, name, provenance = decompose(QUESTION_IDS, QUESTIONS, DecompositionSection(backend="openai",
                                                                                      max_subqueries=3),
                                        llm=llm(server.base_url), prompts="en", engine=engine)
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # it was sent
    stored = extraction_rows(engine)
    assert "[REDACTED]" in stored[decomposition_item_id("q1", QUESTIONS[0], 3)]["error"]
    assert FAKE_KEY not in json.dumps(list(stored.values()), default=str)
    assert FAKE_KEY not in json.dumps(provenance) and FAKE_KEY not in name
    assert found[0] == ()                                    # the failed call (retry policy): no sub-query
