"""Question candidates proposed by a model (pmrag.annotate.propose) over real HTTP to the local scripted Responses
server: batches, the requests, the stored candidates and their origin, resume, malformed replies, retries, the
remote guard and key redaction."""

import hashlib
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from pmrag.annotate.candidates import candidate_id, read_candidates, read_hints
from pmrag.annotate.propose import (ProposalError, ProposalStopped, load_proposal_prompts, message_batches,
                                    prompt_sha256, propose_candidates, validate_proposal_reply)
from pmrag.core.params import CandidatesSection, StudyParams, SummarizerSection
from pmrag.core.store import stored_messages
from pmrag.represent.llm import CallError
from pmrag.represent.privacy import RemoteNotAllowed
from pmrag.represent.representations import PROMPTS_DIR

sys.path.insert(0, str(Path(__file__).parents[1]))
from responses_server import RESPONSE_MODEL, Reply  # noqa: E402
from conftest import extraction_rows  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"
TYPES = ("named_entity", "contextual", "aggregate")

pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


def fill(engine, per_source=6):
    """Two sources of ``per_source`` messages each, stored as an ingest stores them."""
    from pmrag.core.records import MessageRecord, SourceBatch
    from pmrag.ingest import store as ingest_store

    start = datetime(2024, 5, 1, 9, 0)
    for source in ("family", "friends"):
        records = [MessageRecord(source=source, source_order=i, occurred_at=start + timedelta(minutes=7 * i),
                                 sender=("Aki", "Ben")[i % 2], type="text", text=f"{source} message {i}: tennis at 3")
                   for i in range(per_source)]
        batch = SourceBatch(path=f"{source}.json", format="line-json", records_read=len(records))
        batch.messages = records
        ingest_store.store_batch(engine, batch, f"sha-{source}")
    return engine


def summarizer(base_url: str, **overrides) -> SummarizerSection:
    values = {"backend": "extractive", "base_url": base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "failure_policy": "retry"}
    values.update(overrides)
    return SummarizerSection(**values)


def reply(*questions) -> str:
    return json.dumps({"questions": list(questions)}, ensure_ascii=False)


def question(text="Where did Aki play tennis?", type_="named_entity", evidence=None):
    return {"question": text, "type": type_,
            "evidence": [{"time": "2024-05-01 09:07", "speaker": "Ben", "excerpt": "tennis at 3"}]
            if evidence is None else evidence}


def run(server, engine, section=None, limit=None, **overrides):
    section = section or CandidatesSection(batch_chars=400)
    return propose_candidates(engine, section, summarizer=summarizer(server.base_url, **overrides), prompts="en",
                              limit=limit)


# ------------------------------------------------------------------------------------------ batches

def test_batches_fit_never_span_sources_and_are_named_by_their_content(engine):
    messages = stored_messages(fill(engine))
    batches = message_batches(messages, 400)
    assert [b.source for b in batches] == ["family"] * 2 + ["friends"] * 2
    assert sum(b.n_messages for b in batches) == 12 and all(b.n_cut == 0 for b in batches)
    assert all(len(b.messages_json) - 2 <= 400 for b in batches)       # the list's brackets are not counted
    first = json.loads(batches[0].messages_json)
    assert first[0] == {"time": "2024-05-01 09:00", "speaker": "Aki", "text": "family message 0: tennis at 3"}
    digest = hashlib.sha256(batches[0].messages_json.encode()).hexdigest()[:16]
    assert batches[0].batch_id == f"batch_{digest}"
    assert [b.batch_id for b in message_batches(messages, 400)] == [b.batch_id for b in batches]
    assert len({b.batch_id for b in batches}) == 4
    assert [b.n_messages for b in message_batches(messages, 10_000)] == [6, 6]


def test_a_message_longer_than_a_batch_goes_alone_cut_to_fit():
    messages = pd.DataFrame({"source": ["s"] * 3, "occurred_at": pd.to_datetime(["2024-01-01 10:00"] * 3),
                             "time_unknown": [False, True, False], "sender": ["A", "B", "A"],
                             "text": ["short", "改行\n" * 200, "short too"]})
    batches = message_batches(messages, 200)
    assert [b.n_messages for b in batches] == [1, 1, 1] and [b.n_cut for b in batches] == [0, 1, 0]
    long = json.loads(batches[1].messages_json)[0]
    assert len(batches[1].messages_json) - 2 <= 200 and long["time"] == "2024-01-01"   # no time: the date alone
    assert long["text"] and ("改行\n" * 200).startswith(long["text"])


def test_the_input_names_types_cap_and_messages(engine):
    batch = message_batches(stored_messages(fill(engine)), 400)[0]
    sent = json.loads(batch.input(["a", "b"], 3))
    assert sent["types"] == ["a", "b"] and sent["max_questions"] == 3
    assert sent["messages"] == json.loads(batch.messages_json)


# ------------------------------------------------------------------------------------------ replies

def test_a_reply_is_cleaned_capped_and_its_hints_read():
    text = reply(question(evidence=[{"time": "2024-05-01 09:07", "speaker": " Ben ", "excerpt": "tennis at 3"},
                                    {"time": "2024-05-01", "speaker": None, "excerpt": None},
                                    {"time": None, "speaker": None, "excerpt": "  "}]),
                 question(text="where did Aki  play tennis?"),                       # a repeat
                 question(text="How often did they play?", type_="aggregate", evidence=[]),
                 question(text="One too many?"))
    found, dropped = validate_proposal_reply(f"```json\n{text}\n```", "batch_x", TYPES, 2)
    assert found == {"questions": [
        {"text": "Where did Aki play tennis?", "type": "named_entity", "hints": [
            {"time_from": "2024-05-01 09:07:00", "time_to": None, "speaker": "Ben", "excerpt": "tennis at 3"},
            {"time_from": "2024-05-01 00:00:00", "time_to": "2024-05-01 23:59:59", "speaker": None,
             "excerpt": None}]},
        {"text": "How often did they play?", "type": "aggregate", "hints": []}]}
    assert dropped == 1 + 1 + 1          # an empty hint, a repeated question, one past the cap


@pytest.mark.parametrize("text, message", [
    ("Sure! Here are questions about Aki's secret", "batch batch_x: the reply is not JSON"),
    ('["a"]', "batch batch_x: the reply is JSON but not an object (list)"),
    ('{"qs": []}', "batch batch_x: key 'questions' is missing"),
    ('{"questions": [], "note": "Aki secret"}', "batch batch_x: key 'note' is unknown"),
    ('{"questions": {"a": 1}}', "batch batch_x: key 'questions' must be a list"),
    (reply("Aki secret"), "batch batch_x: key 'questions[0]' must be an object"),
    (reply({"question": "q?", "type": "contextual"}), "batch batch_x: key 'questions[0].evidence' is missing"),
    (reply({**question(), "answer": "Aki secret"}), "batch batch_x: key 'questions[0].answer' is unknown"),
    (reply({**question(), "question": ""}), "batch batch_x: key 'questions[0].question' must be a non-empty"),
    (reply(question(type_="secret_type")), "batch batch_x: key 'questions[0].type' must be one of candidates.types"),
    (reply(question(evidence="Aki secret")), "batch batch_x: key 'questions[0].evidence' must be a list"),
    (reply(question(evidence=[{"time": "yesterday, Aki secret"}])),
     "batch batch_x: key 'questions[0].evidence[0].time' must be YYYY-MM-DD"),
    (reply(question(evidence=[{"time": "2024-13-01"}])), "batch batch_x: key 'questions[0].evidence[0].time'"),
    (reply(question(evidence=[{"speaker": 3}])),
     "batch batch_x: key 'questions[0].evidence[0].speaker' must be a string or null"),
    (reply(question(evidence=[{"quote": "Aki secret"}])),
     "batch batch_x: key 'questions[0].evidence[0].quote' is unknown"),
])
def test_malformed_replies_are_one_line_errors_naming_batch_and_key(text, message):
    with pytest.raises(CallError) as raised:
        validate_proposal_reply(text, "batch_x", TYPES, 5)
    error = str(raised.value)
    assert error.startswith(message) and "\n" not in error and "secret" not in error.replace("secret_type", "")
    assert "Aki" not in error and not raised.value.retryable


# ------------------------------------------------------------------------------------------ runs

def test_proposals_are_stored_with_their_origin(server, engine):
    fill(engine)
    server.script(Reply.ok(reply(question())), Reply.ok(reply()),
                  Reply.ok(reply(question("How many messages mention tennis?", "aggregate", []))), Reply.ok(reply()))
    result = run(server, engine)
    assert (result.n_batches, result.n_selected) == (4, 4)
    assert (result.report.ok, result.report.error, result.report.calls, result.report.skipped) == (4, 0, 4, 0)
    assert (result.candidates.read, result.candidates.stored, result.candidates.already_present) == (2, 2, 0)
    stored = read_candidates(engine).set_index("candidate_id")
    prompts = load_proposal_prompts("en")
    first = stored.loc[candidate_id("model", "Where did Aki play tennis?")]
    batches = message_batches(stored_messages(engine), 400)
    assert (first["origin"], first["model"], first["status"], first["type"]) == (
        "model", RESPONSE_MODEL, "proposed", "named_entity")
    assert first["batch"] == batches[0].batch_id and first["prompt_sha256"] == prompt_sha256(prompts)
    assert stored.loc[candidate_id("model", "How many messages mention tennis?"), "batch"] == batches[2].batch_id
    hints = read_hints(engine, [first.name])
    assert hints[["time_from", "speaker", "excerpt"]].values.tolist() == [
        [pd.Timestamp("2024-05-01 09:07"), "Ben", "tennis at 3"]]
    rows = extraction_rows(engine)
    assert sorted(rows) == sorted(b.batch_id for b in batches)
    assert all(r["step"] == "question_candidates" and r["status"] == "ok" for r in rows.values())
    sent = server.response_requests()[0].body
    assert sent["instructions"] == (PROMPTS_DIR / "en" / "question_candidates_system.txt").read_text().rstrip()
    assert sent["input"] == prompts.user_template + "\n\n" + batches[0].input(TYPES, 5)
    assert sent["model"] == "gpt-4o-mini" and sent["max_output_tokens"] == 2000
    lines = result.lines()
    assert lines[0] == "batches: 4 of 4; called 4 (ok 4, failed 0), resumed 0, API calls 4"
    assert lines[2] == "proposed by gpt-4o-mini: questions read 2, stored 2, already present 0, rejected 0"


def test_a_rerun_resumes_without_a_call_and_stores_nothing_twice(server, engine):
    fill(engine)
    server.script(Reply.ok(reply(question())), Reply.ok(reply()))
    run(server, engine, limit=2)
    before = len(server.response_requests())
    again = run(server, engine, limit=2)
    assert len(server.response_requests()) == before == 2
    assert (again.report.skipped, again.report.calls) == (2, 0)
    assert (again.candidates.read, again.candidates.stored, again.candidates.already_present) == (1, 0, 1)
    assert len(read_candidates(engine)) == 1


def test_limit_takes_the_first_batches(server, engine):
    fill(engine)
    result = run(server, engine, limit=1)       # the default reply is not JSON: a failed call under retry
    assert (result.n_selected, result.report.seen, result.report.error) == (1, 1, 1)
    with pytest.raises(ProposalError, match="--limit: an integer ≥ 1, got 0"):
        run(server, engine, limit=0)


@pytest.mark.parametrize("policy", ["retry", "stop_on_first_error"])
def test_malformed_replies_are_recorded_as_errors_and_called_again(server, engine, policy):
    fill(engine)
    replies = [Reply.ok(reply(question())), Reply.ok(reply(question(type_="gossip"))),
               Reply.ok("Aki's secret, not JSON"), Reply.ok(reply(question(evidence=[{"time": "noon"}])))]
    server.script(*(replies if policy == "retry" else replies[:2]))      # a stop leaves the others unasked
    batches = message_batches(stored_messages(engine), 400)
    if policy == "retry":
        result = run(server, engine)
        assert (result.report.ok, result.report.error, result.report.calls) == (1, 3, 4)
    else:
        with pytest.raises(ProposalStopped, match=rf"question proposal stopped at batch {batches[1].batch_id} .*"
                                                  r"key 'questions\[0\].type' must be one of") as stopped:
            run(server, engine, failure_policy=policy)
        assert "\n" not in str(stopped.value) and len(server.response_requests()) == 2
    assert len(read_candidates(engine)) == 1          # the ok batch's candidate is stored, even on a stop
    rows = extraction_rows(engine)
    errors = [rows[b.batch_id]["error"] for b in batches[1:] if b.batch_id in rows]
    assert all(e and "\n" not in e and "secret" not in e and e.startswith(f"batch batch_") for e in errors)
    assert all(rows[b.batch_id]["attempts"] == 1 for b in batches[1:] if b.batch_id in rows)   # not retried
    before = len(server.response_requests())
    server.script(*(Reply.ok(reply()) for _ in range(3)))
    again = run(server, engine, failure_policy=policy)
    assert len(server.response_requests()) - before == 3 and again.report.skipped == 1
    assert again.report.error == 0


def test_a_refused_request_is_retried(server, engine):
    fill(engine)
    server.script(Reply.error(429), Reply.error(503), Reply.ok(reply(question())))
    result = run(server, engine, limit=1)
    rows = extraction_rows(engine)
    assert rows[message_batches(stored_messages(engine), 400)[0].batch_id]["attempts"] == 3
    assert (result.report.ok, result.report.calls, result.candidates.stored) == (1, 3, 1)


def test_the_candidates_section_overrides_the_summarizers_model_and_server(server, engine):
    fill(engine)
    server.script(Reply.ok(reply(question())))
    result = propose_candidates(engine, CandidatesSection(model="my-model", base_url=server.base_url,
                                                          batch_chars=10_000, questions_per_batch=2,
                                                          types=["place", "named_entity"]),
                                summarizer=summarizer("http://127.0.0.1:9/v1", model="other"), prompts="ja", limit=1)
    body = server.response_requests()[0].body
    assert body["model"] == "my-model" and json.loads(body["input"].rsplit("\n\n", 1)[1])["types"] == [
        "place", "named_entity"]
    assert result.provenance["model"] == "my-model" and result.candidates.stored == 1


def test_an_empty_store_is_an_error(server, engine):
    with pytest.raises(ProposalError, match="no message"):
        run(server, engine)


@pytest.mark.parametrize("prompts", ["ja", "en"])
def test_both_prompt_sets_hold_the_proposal_prompts(prompts):
    loaded = load_proposal_prompts(prompts)
    assert '{"questions": [...]}' in loaded.user_template and "max_questions" in loaded.user_template
    assert '"excerpt"' in loaded.user_template and loaded.system


# ------------------------------------------------------------------------------------------ privacy

def test_nothing_is_sent_to_a_remote_server_without_allow_remote(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    fill(engine)
    with pytest.raises(RemoteNotAllowed, match="the openai question proposer would send chat text to api.example.com"):
        propose_candidates(engine, CandidatesSection(base_url="https://api.example.com/v1"),
                           summarizer=summarizer(None), prompts="en")
    assert extraction_rows(engine) == {} and read_candidates(engine).empty


def test_the_api_key_is_never_stored(server, engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    fill(engine)
    server.script(Reply.error(400, "bad request, you sent {auth}"),
                  Reply.ok(reply(question(text="Is {key} a key?", evidence=[{"excerpt": "{key_json}"}])),
                           model="model-{key}"))
    result = run(server, engine, limit=2)
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # it was sent
    rows = extraction_rows(engine)
    candidates, hints = read_candidates(engine), read_hints(engine)
    dumped = json.dumps([list(rows.values()), candidates.to_dict("records"), hints.to_dict("records")], default=str)
    assert FAKE_KEY not in dumped and "[REDACTED]" in dumped
    assert FAKE_KEY not in json.dumps(result.provenance) and all(FAKE_KEY not in line for line in result.lines())


def test_the_params_section_is_declared_and_checked():
    params = StudyParams(run="r", dataset={"synthetic": {"enabled": True}})
    assert params.candidates.types == TYPES and params.candidates.model is None
    llm = params.candidates.llm(params.summarizer)
    assert (llm.model, llm.base_url, llm.max_output_tokens) == ("gpt-4o-mini", None, 2000)
    with pytest.raises(ValueError, match="listed twice"):
        CandidatesSection(types=["a", "a"])
    with pytest.raises(ValueError):
        CandidatesSection(base_url="ftp://x")


def test_a_question_proposed_again_from_another_batch_has_its_new_hints_merged(server, engine):
    fill(engine)
    again = question(evidence=[{"time": "2024-05-01 09:07", "speaker": "Ben", "excerpt": "tennis at 3"},
                               {"time": None, "speaker": "Aki", "excerpt": "friends message 2"}])
    other_type = question("Where did Aki play tennis?", "contextual")
    server.script(Reply.ok(reply(question())), Reply.ok(reply(again)), Reply.ok(reply(other_type)),
                  Reply.ok(reply(question())))
    result = run(server, engine)
    report = result.candidates
    assert (report.read, report.stored, report.already_present, report.merged, report.rejected) == (4, 1, 1, 1, 1)
    assert result.lines()[2] == ("proposed by gpt-4o-mini: questions read 4, stored 1, already present 1, "
                                 "merged 1, rejected 1")
    batches = message_batches(stored_messages(engine), 400)
    cid = candidate_id("model", "Where did Aki play tennis?")
    stored = read_candidates(engine).set_index("candidate_id")
    assert len(stored) == 1 and stored.loc[cid, ["batch", "type"]].tolist() == [batches[0].batch_id, "named_entity"]
    hints = read_hints(engine, [cid])
    assert hints[["hint", "speaker", "excerpt", "batch"]].values.tolist() == [
        [0, "Ben", "tennis at 3", batches[0].batch_id], [1, "Aki", "friends message 2", batches[1].batch_id]]
    rerun = run(server, engine)                         # nothing new: every call resumed, every proposal present
    assert (rerun.candidates.stored, rerun.candidates.already_present, rerun.candidates.merged) == (0, 3, 0)
    assert len(read_hints(engine, [cid])) == 2
