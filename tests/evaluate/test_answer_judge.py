"""The optional LLM judge of the answers (pmrag.evaluate.answer_judge): replies validated (malformed ones as one-line
errors), which answers are judged (none without a gold text), verdicts in the per-question rows and the tables,
and the openai backend over real HTTP to the local fake server: resume and the cost table's count."""

import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from pmrag.core.params import AnswersSection, BootstrapSection, SummarizerSection
from pmrag.evaluate.answer_judge import (judge_input, judge_jobs, judge_label, judge_llm, judged_questions,
                                         make_judge, run_judge, validate_judge_reply)
from pmrag.evaluate.answers import (AnswerJob, AnswerSet, ContextItem, answer_rows, answer_tables, judge_answers,
                                    known_answers, step_items)
from pmrag.represent.llm import CallError, Done, input_sha256
from responses_server import Reply

SECRET_CHAT = "秘密の会話テキスト"
QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "text": ["When?", "What?", "Who?", "Why?"],
                          "type": ["single-hop", "multi-hop", "contextual", "adversarial"],
                          "answer": ["7 May", "pottery, camping", None, "a trap answer"]})
ANSWERS = pd.DataFrame({"method": ["a"] * 4 + ["b"] * 4, "question_id": ["q1", "q2", "q3", "q4"] * 2,
                        "status": ["ok", "ok", "ok", "ok", "ok", "error", "ok", "ok"],
                        "answer": ["on 7 May", "camping", "x", "No information available", "on 7 May", "", "y", "z"]})


# ------------------------------------------------------------------------------------------- replies

def test_a_verdict_is_a_json_object_with_a_boolean():
    assert validate_judge_reply('```json\n{"correct": true}\n```', "q1") == {"correct": True}
    assert validate_judge_reply('{"correct": false, "why": "another date"}', "q1") == {"correct": False}


@pytest.mark.parametrize("reply, words", [
    (f"{SECRET_CHAT} is correct", "the reply is not JSON"),
    ("[true]", "not an object"),
    (f'{{"verdict": "{SECRET_CHAT}"}}', "key 'correct' is missing"),
    ('{"correct": "true"}', "key 'correct' must be true or false"),
    ('{"correct": 1}', "key 'correct' must be true or false"),
])
def test_malformed_verdicts_are_one_line_errors_naming_the_question_never_the_text(reply, words):
    with pytest.raises(CallError) as caught:
        validate_judge_reply(reply, "q7")
    message = str(caught.value)
    assert "question 'q7'" in message and words in message and "\n" not in message
    assert SECRET_CHAT not in message and not caught.value.retryable


# ------------------------------------------------------------------------------------------- which answers

def test_only_answers_with_a_gold_text_are_judged_a_failed_answer_without_a_call_and_repeats_once():
    assert judged_questions(QUESTIONS) == {"q1", "q2"}          # no gold text (q3), adversarial (q4)
    assert judged_questions(QUESTIONS.drop(columns="answer")) == set()
    jobs = judge_jobs(ANSWERS, QUESTIONS)
    assert set(jobs.keys) == {("a", "q1"), ("a", "q2"), ("b", "q1"), ("b", "q2")}
    assert jobs.keys[("b", "q2")] is None                        # the answer call failed: incorrect, no call
    assert jobs.keys[("a", "q1")] == jobs.keys[("b", "q1")] and len(jobs.items) == 2   # the same answer: one call
    assert json.loads(jobs.items[0].text) == {"question": "When?", "gold_answer": "7 May", "answer": "on 7 May"}
    assert "\n" not in judge_input("a\nb", "c\nd", "e\nf")


def test_the_judge_takes_its_own_model_and_the_answers_concurrency():
    summarizer = SummarizerSection(model="gpt-4o-mini", concurrency=2)
    assert (judge_llm(AnswersSection(), summarizer).model, judge_llm(AnswersSection(), summarizer).concurrency) == (
        "gpt-4o-mini", 2)
    chosen = judge_llm(AnswersSection(judge="openai", judge_model="gpt-4o", concurrency=8), summarizer)
    assert (chosen.model, chosen.concurrency) == ("gpt-4o", 8)
    assert judge_label("gpt-4o") == "openai gpt-4o (LLM judge: same fact as the gold answer)"


def test_the_answers_a_judge_reads_are_known_without_a_call_only_when_every_one_is():
    context = (ContextItem("M1", "c1", "We met on 7 May.  It rained."),)
    jobs = [AnswerJob("a", "q1", "When did we meet?", context), AnswerJob("b", "q1", "Unrelated zebra?", context)]
    assert known_answers(jobs)["answer"].tolist() == ["We met on 7 May.", "No information available"]
    items = step_items(jobs)
    stored = {item.item_id: Done(json.dumps({"answer": f"stored {i}", "citations": []}), input_sha256(item.text))
              for i, item in enumerate(items)}
    frame = known_answers(jobs, stored)
    assert frame.columns.tolist() == ["method", "question_id", "status", "answer"]
    assert frame["answer"].tolist() == ["stored 0", "stored 1"] and frame["status"].eq("ok").all()
    assert known_answers(jobs, {items[0].item_id: stored[items[0].item_id]}) is None          # one not answered yet
    assert known_answers(jobs, {**stored, items[1].item_id: Done("{}", "another input")}) is None


# ------------------------------------------------------------------------------------------- rows and tables

def judged_rows(verdicts):
    qrels = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "chunk_id": ["c1"] * 4, "relevance": [2] * 4})
    contexts = {m: {q: ("c1",) for q in QUESTIONS["question_id"]} for m in ("a", "b")}
    answers = ANSWERS.assign(cited=[("c1",)] * 8, refused=[()] * 8, n_context=1)
    return answers, answer_rows(answers, contexts, QUESTIONS, qrels, verdicts)


def test_verdicts_land_in_the_rows_nan_without_a_gold_text_and_a_failed_call_is_counted():
    _, rows = judged_rows({("a", "q1"): 1.0, ("a", "q2"): float("nan"), ("b", "q1"): 1.0, ("b", "q2"): 0.0})
    rows = rows.set_index(["method", "question_id"])
    assert rows.loc[("a", "q1"), "judge_correct"] == 1.0 and rows.loc[("b", "q2"), "judge_correct"] == 0.0
    assert math.isnan(rows.loc[("a", "q3"), "judge_correct"]) and math.isnan(rows.loc[("a", "q4"), "judge_correct"])
    assert rows["judge_failed"][rows["judge_failed"]].index.tolist() == [("a", "q2")]   # NaN from a failed call
    assert not AnswerSet(ANSWERS, rows.reset_index().assign(failed=False), ("a", "b"), "", "").finished()
    _, unjudged = judged_rows(None)
    assert unjudged["judge_correct"].isna().all() and not unjudged["judge_failed"].any()


def test_judged_tables_give_intervals_and_differences_and_name_the_judge():
    answers, rows = judged_rows({("a", "q1"): 1.0, ("a", "q2"): 1.0, ("b", "q1"): 1.0, ("b", "q2"): 0.0})
    value = AnswerSet(answers, rows, ("a", "b"), "stand-in", "", judge_label("gpt-4o"))
    assert "judge_correct" in value.metrics() and not value.finished()   # b's answer to q2 failed
    assert AnswerSet(answers, rows.assign(failed=False), ("a", "b"), "stand-in", "").finished()
    tables = answer_tables(value, BootstrapSection(n_resamples=200))
    assert all((frame["judge"] == judge_label("gpt-4o")).all() for frame in tables.values())
    cis = tables["cis"].set_index(["retriever", "metric"])
    assert cis.loc[("a", "judge_correct"), "mean"] == 1.0 and cis.loc[("b", "judge_correct"), "mean"] == 0.5
    assert set(tables["differences"]["metric"]) == {"answer_f1", "judge_correct", "cited_f1"}
    assert tables["counts"]["judge_failed"].tolist() == [0, 0]
    off = AnswerSet(answers, judged_rows(None)[1], ("a", "b"), "stand-in", "")
    assert "judge_correct" not in off.metrics() and "judge" not in answer_tables(off, BootstrapSection(
        n_resamples=50))["cis"]


# ------------------------------------------------------------------------------------------- the openai backend

def test_the_judges_section_keys_are_validated(tmp_path):
    from conftest import params_error, write_file

    path = write_file(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nanswers: {judge: gpt}\n")
    message = params_error(path)
    assert message.startswith(str(path)) and "\n" not in message and "answers.judge" in message, message


@pytest.mark.usefixtures("clean_env")
def test_the_judge_refuses_a_remote_server_unless_allowed(monkeypatch):
    from pmrag.represent.privacy import RemoteNotAllowed

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-placeholder")

    remote = SummarizerSection(backend="openai", base_url="https://api.example.com/v1")
    with pytest.raises(RemoteNotAllowed, match="the openai answer judge would send chat text to api.example.com"):
        make_judge(remote, "en")
    assert make_judge(remote, "en", allow_remote=True).requested_model == remote.model


def verdict_route(body):
    """The server's verdict: correct when the answer contains the gold answer."""
    payload = json.loads(body["input"].rsplit("\n", 1)[-1])
    return Reply.ok(json.dumps({"correct": payload["gold_answer"] in payload["answer"]}))


@pytest.mark.usefixtures("clean_env")
def test_the_openai_judge_over_http_resumes_only_missing_verdicts_and_the_cost_table_counts_them(
        server, engine, tmp_path, monkeypatch):
    from conftest import write_file
    from pmrag.study import costs
    from pmrag.study.params import load_params

    server.route = verdict_route
    server.script(Reply.ok(f'{{"verdict": "{SECRET_CHAT}"}}'))
    llm = SummarizerSection(backend="openai", base_url=server.base_url, interval_s=0.0, failure_policy="retry")
    section = AnswersSection(judge="openai")
    verdicts, label, line = judge_answers(ANSWERS, QUESTIONS, section=section, llm=llm, prompts="en", engine=engine,
                                          sleep=lambda s: None)
    assert label == judge_label(llm.model) and "ok 1, error 1" in line
    assert math.isnan(verdicts[("a", "q1")]) and verdicts[("a", "q2")] == 0.0 and verdicts[("b", "q2")] == 0.0
    error = pd.read_sql("SELECT error FROM graph_extractions WHERE step = 'answer_judge' AND status = 'error'",
                        engine)["error"].tolist()
    assert len(error) == 1 and error[0].startswith("question 'q1': key 'correct' is missing")
    assert SECRET_CHAT not in error[0]

    params = load_params(write_file(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nrepresentations: "
                                              "{prompts: en}\nanswers: {enabled: true, judge: openai}\n"))
    study = SimpleNamespace(params=params, store=engine)
    inputs = SimpleNamespace(get=lambda name: SimpleNamespace(questions=QUESTIONS) if name == "qrels" else None)
    bound = costs._answer_judge(study, "answers (judge)", inputs)[0]
    assert bound.bound and bound.calls == 2 * len(params.answers.retrievers)   # q1, q2 × every retriever
    monkeypatch.setattr(costs, "_known_answers", lambda study, inputs: (QUESTIONS, ANSWERS))
    assert costs._answer_judge(study, "answers (judge)", inputs)[0].calls == 1   # the failed verdict only

    again, second = run_judge(ANSWERS, QUESTIONS, make_judge(llm, "en"), llm=llm, engine=engine, sleep=lambda s: None)
    assert (second.skipped, second.ok, second.error) == (1, 1, 0) and len(server.response_requests()) == 3
    assert again == {("a", "q1"): 1.0, ("a", "q2"): 0.0, ("b", "q1"): 1.0, ("b", "q2"): 0.0}
    assert costs._answer_judge(study, "answers (judge)", inputs)[0].calls == 0
    from pmrag.core.names import StageKey

    cached = costs._stage_costs(study, StageKey("answers"), inputs, cached=True)
    assert [(c.stage, c.model, c.calls) for c in cached] == [
        ("answers", "extractive-answer-v1", 0), ("answers (judge)", params.summarizer.model, 0)]
    params_off = params.model_copy(update={"answers": params.answers.model_copy(update={"judge": "none"})})
    assert costs._answer_judge(SimpleNamespace(params=params_off, store=engine), "x", inputs) == []
