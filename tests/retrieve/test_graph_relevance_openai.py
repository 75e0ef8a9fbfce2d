"""TOBUGraph's interest relevance by an LLM (pmrag.retrieve.graph_relevance_llm) over real HTTP to the local scripted
Responses server: r(q, i) of scripted choices (order, unknown labels, numbers, an empty choice), the requests, the
rows of ``graph_extractions``, resume, the failure policies on invalid JSON, the remote guard and key redaction."""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from pmrag.core.params import GraphSection, SummarizerSection
from pmrag.represent.extract import GraphError
from pmrag.represent.extract_llm import GraphExtractionStopped, load_graph_prompts
from pmrag.represent.llm import CallError
from pmrag.represent.privacy import RemoteNotAllowed
from pmrag.represent.representations import PROMPTS_DIR
from pmrag.retrieve.graph_interest import choose_interests
from pmrag.retrieve.graph_relevance_llm import (RELEVANCE_PROMPT_FILES, choice_relevance, llm_interest_relevance,
                                                relevance_item_id, validate_relevance_reply)

sys.path.insert(0, str(Path(__file__).parents[1]))
from responses_server import RESPONSE_MODEL, Reply  # noqa: E402
from conftest import extraction_rows, prompt_sha  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"
LABELS = ["Hiking", "Café Luna", "Sam", "boots"]
QUESTION_IDS = ["q1", "q2", "q3", "q4"]
QUESTIONS = ["Where did we go hiking?", "Who came on the hike\nwith Mel?", "What is the weather like?",
             "Which boots did Jo buy?"]
REPLIES = [
    '{"interests": ["café luna", "Hiking", "Mars"]}',          # labels, normalised; Mars is not in the list
    '{"interests": [3, 1, 2]}',                                # numbers (1-based, as sent)
    '{"interests": []}',                                       # nothing relevant
    '```json\n{"interests": [7, "4", "2. Café Luna", 4]}\n```',  # 7 out of range; "4"; a list line; a repeat
]


pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


def llm(base_url: str, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter": 0, "failure_policy": "retry"}
    values.update(overrides)
    return SummarizerSection(**values)


def relevance(server, engine, question_ids=QUESTION_IDS, questions=QUESTIONS, labels=LABELS, **llm_overrides):
    return llm_interest_relevance(question_ids, questions, labels, llm=llm(server.base_url, **llm_overrides),
                                  prompts="en", engine=engine, allow_remote=False, proxy=None)



# ------------------------------------------------------------------------------------------ r(q, i)

def test_the_matrix_keeps_the_models_order_and_drops_and_counts_what_is_not_in_the_list(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    result = relevance(server, engine)
    assert result.matrix.dtype == np.float64 and result.matrix.shape == (4, 4)
    np.testing.assert_allclose(result.matrix, [
        [1 / 2, 1.0, 0.0, 0.0],            # café luna first, Hiking second; Mars dropped
        [2 / 3, 1 / 3, 1.0, 0.0],          # 3, 1, 2
        [0.0, 0.0, 0.0, 0.0],              # an empty choice
        [0.0, 1 / 2, 0.0, 1.0],            # "4", then "2. Café Luna"; 7 dropped, the repeated 4 keeps its place
    ])
    report = result.reports
    assert (report.step, report.status, report.seen, report.ok, report.error, report.calls) == (
        "relevance", "done", 4, 4, 0, 4)
    assert report.dropped_ids == 2
    assert result.reports.line().startswith(f"graph relevance run {report.run_id} (openai/gpt-4o-mini): done")
    assert result.reports.line().endswith("; 2 chosen interests not in the list dropped")


def test_a_threshold_of_one_over_n_keeps_the_whole_choice_and_a_cap_its_first_interests():
    matrix = choice_relevance([[2, 0, 1], [1]], 4)
    assert choose_interests(matrix, 1 / 3, 10).tolist() == [[True, True, True, False], [False, True, False, False]]
    assert choose_interests(matrix, 0.0, 2).tolist() == [[True, False, True, False], [False, True, False, False]]
    assert choose_interests(matrix, 0.5, 10)[0].tolist() == [True, False, True, False]   # 1/3 < 0.5


def test_the_requests_carry_the_prompt_files_the_question_and_every_label_numbered(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    relevance(server, engine)
    sent = [r.body for r in server.response_requests()]
    assert len(sent) == 4                                     # one call per question
    prompts = load_graph_prompts("en", RELEVANCE_PROMPT_FILES)["relevance"]
    assert sent[0]["instructions"] == (PROMPTS_DIR / "en" / "graph_relevance_system.txt").read_text().rstrip()
    assert sent[1]["input"] == (prompts.user_template + "\n\n" + "Who came on the hike with Mel?\n\n"
                                "1. Hiking\n2. Café Luna\n3. Sam\n4. boots")
    assert sent[0]["model"] == "gpt-4o-mini" and sent[0]["max_output_tokens"] == 700
    assert "temperature" not in sent[0] and "seed" not in sent[0]


@pytest.mark.parametrize("prompts", ["ja", "en"])
def test_both_prompt_sets_hold_the_relevance_prompts(prompts):
    loaded = load_graph_prompts(prompts, RELEVANCE_PROMPT_FILES)["relevance"]
    assert '{"interests": [...]}' in loaded.user_template and loaded.system


def test_a_graph_without_interests_calls_nothing(server, engine):
    result = relevance(server, engine, labels=[])
    assert result.matrix.shape == (4, 0) and server.response_requests() == []
    assert result.reports.seen == 0 and extraction_rows(engine) == {}


def test_questions_must_pair_with_texts_and_be_unique(server, engine):
    with pytest.raises(GraphError, match="2 question ids for 1 question texts"):
        relevance(server, engine, question_ids=["q1", "q2"], questions=["x"])
    with pytest.raises(GraphError, match="interest relevance: question 'q1' is given twice"):
        relevance(server, engine, question_ids=["q1", "q1"], questions=["x", "y"])


# ------------------------------------------------------------------------------------------ rows and resume

def test_every_call_is_a_row_with_its_provenance(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    result = relevance(server, engine)
    found = extraction_rows(engine)
    ids = [relevance_item_id(q, text, LABELS) for q, text in zip(QUESTION_IDS, QUESTIONS)]
    assert sorted(found) == sorted(ids) and all(r["step"] == "relevance" for r in found.values())
    listing = hashlib.sha256(json.dumps(LABELS, ensure_ascii=False).encode()).hexdigest()[:16]
    assert ids[0] == f"q1:{hashlib.sha256(QUESTIONS[0].encode()).hexdigest()[:16]}:{listing}"
    q1 = found[ids[0]]
    assert q1["status"] == "ok" and q1["error"] is None and q1["attempts"] == 1
    assert q1["run_id"] == result.reports.run_id
    assert (q1["requested_model"], q1["response_model"]) == ("gpt-4o-mini", RESPONSE_MODEL)
    assert q1["system_sha256"] == prompt_sha(PROMPTS_DIR / "en" / "graph_relevance_system.txt")
    assert q1["user_sha256"] == prompt_sha(PROMPTS_DIR / "en" / "graph_relevance_user.txt")
    sent = "Where did we go hiking?\n\n1. Hiking\n2. Café Luna\n3. Sam\n4. boots"
    assert (q1["input_chars"], q1["input_sha256"]) == (len(sent), hashlib.sha256(sent.encode()).hexdigest())
    assert json.loads(q1["output"]) == {"numbers": [2, 1], "labels": ["Café Luna", "Hiking"]}
    assert q1["dropped_ids"] == 1 and q1["input_tokens"] > 0 and q1["output_tokens"] > 0
    assert json.loads(found[ids[2]]["output"]) == {"numbers": [], "labels": []}


def test_a_rerun_calls_nothing_and_gives_the_same_matrix(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    first = relevance(server, engine)
    before = len(server.response_requests())
    again = relevance(server, engine)
    assert len(server.response_requests()) == before
    np.testing.assert_array_equal(again.matrix, first.matrix)
    assert (again.reports.skipped, again.reports.calls, again.reports.dropped_ids) == (4, 0, 2)


def test_a_changed_label_list_or_question_is_called_again(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    relevance(server, engine)
    before = len(server.response_requests())
    server.script(*(Reply.ok('{"interests": [1]}') for _ in QUESTIONS))
    changed = relevance(server, engine, labels=["Sam", *LABELS[:3]])     # another graph: every question again
    assert len(server.response_requests()) == before + 4 and changed.reports.skipped == 0
    assert changed.matrix[:, 0].tolist() == [1.0] * 4

    before = len(server.response_requests())
    server.script(Reply.ok('{"interests": ["boots"]}'))
    edited = relevance(server, engine, questions=[*QUESTIONS[:3], "Which shoes did Jo buy?"])
    calls = server.response_requests()[before:]
    assert len(calls) == 1 and "Which shoes did Jo buy?" in calls[0].body["input"]
    assert edited.matrix[3].tolist() == [0, 0, 0, 1.0] and edited.reports.skipped == 3
    assert len(extraction_rows(engine)) == 4 + 4 + 1                     # older items keep their rows


def test_another_model_is_not_taken_from_the_store(server, engine):
    server.script(*(Reply.ok(text) for text in REPLIES))
    relevance(server, engine)
    before = len(server.response_requests())
    server.script(*(Reply.ok(text) for text in REPLIES))
    relevance(server, engine, model="gpt-4.1-mini")
    assert len(server.response_requests()) == before + 4


def test_a_retryable_error_is_retried_within_the_call(server, engine):
    server.script(Reply.error(429), *(Reply.ok(text) for text in REPLIES))
    slept = []
    result = llm_interest_relevance(QUESTION_IDS, QUESTIONS, LABELS, llm=llm(server.base_url, backoff_initial_s=0.25,
                                                                             backoff_max_s=1.0),
                                    prompts="en", engine=engine, allow_remote=False, proxy=None, sleep=slept.append)
    assert extraction_rows(engine)[relevance_item_id("q1", QUESTIONS[0], LABELS)]["attempts"] == 2
    assert result.reports.calls == 5 and result.reports.error == 0 and 0.25 in slept
    assert result.matrix[0].tolist() == [0.5, 1.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------ failures

@pytest.mark.parametrize("policy", ["stop_on_first_error", "retry"])
def test_invalid_json_is_a_failed_call_under_either_policy(server, engine, policy):
    secret_reply = "The relevant one is Mel's secret address"
    server.script(Reply.ok(REPLIES[0]), Reply.ok(secret_reply))
    q2 = relevance_item_id("q2", QUESTIONS[1], LABELS)
    if policy == "stop_on_first_error":
        with pytest.raises(GraphExtractionStopped, match=r"stopped at question q2:.*question 'q2': the reply is not "
                                                         r"JSON \(Expecting value at line 1 column 1\)") as stopped:
            relevance(server, engine, failure_policy=policy)
        assert "secret" not in str(stopped.value) and "\n" not in str(stopped.value)
        assert len(server.response_requests()) == 2 and len(extraction_rows(engine)) == 2
    else:
        server.script(*(Reply.ok(text) for text in REPLIES[2:]))
        result = relevance(server, engine, failure_policy=policy)
        assert len(server.response_requests()) == 4
        assert (result.reports.ok, result.reports.error) == (3, 1)
        assert result.matrix[1].tolist() == [0.0] * 4            # no choice: reaches nothing
        assert result.matrix[0].tolist() == [0.5, 1.0, 0.0, 0.0]
    row = extraction_rows(engine)[q2]
    assert row["status"] == "error" and row["output"] is None and "secret" not in row["error"]
    assert row["attempts"] == 1                              # invalid JSON is not retried within the call

    before = len(server.response_requests())                # the rerun calls the failed question (and any not reached)
    server.script(*(Reply.ok(text) for text in REPLIES[1:]))
    again = relevance(server, engine, failure_policy=policy)
    assert server.response_requests()[before].body["input"].split("\n\n")[1] == "Who came on the hike with Mel?"
    assert again.matrix[1].tolist() == [2 / 3, 1 / 3, 1.0, 0.0]
    not_reached = 2 if policy == "stop_on_first_error" else 0
    assert len(server.response_requests()) - before == 1 + not_reached and again.reports.skipped == 3 - not_reached


@pytest.mark.parametrize("reply, message", [
    ('[1]', "question 'q1': the reply is JSON but not an object (list)"),
    ('{"chosen": [1]}', "question 'q1': key 'interests' is missing"),
    ('{"interests": "Hiking"}', "question 'q1': key 'interests' must be a list of labels (strings) or numbers (integers)"),
    ('{"interests": [1.0]}', "question 'q1': key 'interests' must be a list of labels (strings) or numbers (integers)"),
    ('{"interests": [true]}', "question 'q1': key 'interests' must be a list of labels (strings) or numbers (integers)"),
    ('{"interests": [{"label": "Hiking"}]}',
     "question 'q1': key 'interests' must be a list of labels (strings) or numbers (integers)"),
])
def test_relevance_replies_are_checked(reply, message):
    with pytest.raises(CallError) as raised:
        validate_relevance_reply(reply, "q1", LABELS)
    assert str(raised.value) == message and not raised.value.retryable


def test_a_label_that_looks_like_a_number_is_the_label_first():
    labels = ["2024", "Hiking"]
    assert validate_relevance_reply('{"interests": ["2024", "2", "0", "3. Hiking", "2. hiking"]}', "q", labels) == (
        {"numbers": [1, 2], "labels": ["2024", "Hiking"]}, 2)      # "0" and "3. Hiking" name nothing


def test_a_numeral_names_the_same_interest_as_an_integer_or_a_string():
    labels = ["3", "Hiking", "boots"]                      # an interest labelled "3" is number 1
    for reply in ('{"interests": [3]}', '{"interests": ["3"]}', '{"interests": ["3."]}'):
        assert validate_relevance_reply(reply, "q", labels) == ({"numbers": [3], "labels": ["boots"]}, 0)
    assert validate_relevance_reply('{"interests": [1, "1. 3"]}', "q", labels) == ({"numbers": [1], "labels": ["3"]}, 0)
    assert validate_relevance_reply('{"interests": [2024]}', "q", ["2024", "Hiking"]) == (
        {"numbers": [1], "labels": ["2024"]}, 0)            # out of range: the label it spells


# ------------------------------------------------------------------------------------------ privacy, params

def test_a_remote_server_is_refused_without_allow_remote(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    remote = llm("https://api.example.com/v1")
    with pytest.raises(RemoteNotAllowed, match="the openai interest relevance would send chat text to api.example.com"):
        llm_interest_relevance(QUESTION_IDS, QUESTIONS, LABELS, llm=remote, prompts="en", engine=engine,
                               allow_remote=False, proxy=None)
    assert extraction_rows(engine) == {}
    allowed = llm_interest_relevance([], [], LABELS, llm=remote, prompts="en", engine=engine, allow_remote=True,
                                     proxy=None)                 # no question: permitted, and nothing is sent
    assert allowed.matrix.shape == (0, 4)


def test_the_api_key_is_never_stored(server, engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server.script(Reply.error(400, "bad request, you sent {auth}"), *(Reply.ok(text) for text in REPLIES[1:]))
    result = relevance(server, engine)
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # it was sent
    found = extraction_rows(engine)
    assert "[REDACTED]" in found[relevance_item_id("q1", QUESTIONS[0], LABELS)]["error"]
    assert FAKE_KEY not in json.dumps(list(found.values()), default=str)
    assert FAKE_KEY not in result.reports.line()


def test_graph_params_take_the_relevance_method():
    assert GraphSection().relevance == "offline"
    assert GraphSection(relevance="openai").relevance == "openai"
    with pytest.raises(ValidationError, match="'offline' or 'openai'"):
        GraphSection(relevance="bm25")
