"""The answer step (pmrag.evaluate.answers): contexts with short ids, replies parsed and validated (an id not in the
context refused and counted, malformed replies as one-line errors), the extractive stand-in, the openai backend
over real HTTP to the local fake server, resume, and the per-question scores and tables."""

import json
import math
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest

from pmrag.core.params import AnswersSection, BootstrapSection, SummarizerSection
from pmrag.evaluate.answers import (NO_ANSWER, AnswerError, AnswerJob, AnswerSet, AnswersStopped, ContextItem,
                                    ExtractiveAnswerer, answer_input, answer_rows, answer_tables, answerer_label,
                                    context_items, extractive_answer, graph_memory_texts, make_answerer, run_answers,
                                    sentences, validate_answer_reply)
from pmrag.represent.graph import Edge, MemoryGraph, Node
from pmrag.represent.llm import CallError
from responses_server import Reply

SECRET_CHAT = "秘密の会話テキスト"
QUESTION = "When did Caroline go to the support group?"
CONTEXT = (ContextItem("M1", "c1", "Melanie painted a lake.\nShe likes pottery."),
           ContextItem("M2", "c2", "Caroline went to the support group on 7 May. It was moving."))


# ------------------------------------------------------------------------------------------- contexts

def test_context_items_number_each_chunk_once_in_order_and_cut_its_text():
    items = context_items(["b", "a", "b"], {"a": "x" * 10, "b": "short"}, max_chars=4)
    assert [(c.ref, c.chunk_id, c.text) for c in items] == [("M1", "b", "shor"), ("M2", "a", "xxxx")]
    with pytest.raises(AnswerError, match="chunk 'z' has no text"):
        context_items(["z"], {}, 10)


def test_graph_memories_carry_their_semantic_details_first():
    graph = MemoryGraph((Node("m:c1", "memory", "chunk", "c1"), Node("s:c1:0", "semantic", "place", "Tokyo"),
                         Node("s:c1:1", "semantic", "person", "Ann\nLee")),
                        (Edge("m:c1", "s:c1:0", "memory-semantic"), Edge("m:c1", "s:c1:1", "memory-semantic")))
    texts = graph_memory_texts(graph, {"c1": "A: hello", "c9": "B: bye"})
    assert texts == {"c1": "place: Tokyo\nperson: Ann Lee\nA: hello", "c9": "B: bye"}


def test_the_input_is_one_json_line_of_the_question_and_the_context():
    text = answer_input("When\ndid it happen?", CONTEXT)
    assert "\n" not in text
    assert json.loads(text) == {"question": "When did it happen?",
                                "context": [{"id": "M1", "text": CONTEXT[0].text}, {"id": "M2", "text": CONTEXT[1].text}]}


# ------------------------------------------------------------------------------------------- replies

def test_citations_outside_the_context_are_refused_and_counted_repeats_kept_once():
    output, refused = validate_answer_reply(
        '```json\n{"answer": " 7 May ", "citations": ["M2", "M9", "M2", "c1"]}\n```', "q1", ["M1", "M2"])
    assert output == {"answer": "7 May", "citations": ["M2"], "refused": ["M9", "c1"]} and refused == 2
    assert validate_answer_reply('{"answer": "x", "citations": []}', "q1", ["M1"]) == (
        {"answer": "x", "citations": [], "refused": []}, 0)


@pytest.mark.parametrize("reply, words", [
    (f"{SECRET_CHAT} is the answer", "the reply is not JSON"),
    ('["M1"]', "not an object"),
    ('{"citations": ["M1"]}', "key 'answer' is missing"),
    (f'{{"answer": "{SECRET_CHAT}"}}', "key 'citations' is missing"),
    ('{"answer": 7, "citations": []}', "key 'answer' must be a string"),
    (f'{{"answer": "{SECRET_CHAT}", "citations": "M1"}}', "key 'citations' must be a list of strings"),
    ('{"answer": "x", "citations": [1]}', "key 'citations' must be a list of strings"),
])
def test_malformed_replies_are_one_line_errors_naming_the_question_never_the_text(reply, words):
    with pytest.raises(CallError) as caught:
        validate_answer_reply(reply, "q7", ["M1"])
    message = str(caught.value)
    assert "question 'q7'" in message and words in message and "\n" not in message
    assert SECRET_CHAT not in message and not caught.value.retryable


# ------------------------------------------------------------------------------------------- the stand-in

def test_the_stand_in_cites_the_sentence_sharing_most_content_words():
    reply = extractive_answer(QUESTION, CONTEXT)
    assert reply == {"answer": "Caroline went to the support group on 7 May.", "citations": ["M2"]}
    assert extractive_answer("Unrelated zebra?", CONTEXT) == {"answer": NO_ANSWER, "citations": []}
    assert extractive_answer(QUESTION, ()) == {"answer": NO_ANSWER, "citations": []}


def test_the_stand_in_is_deterministic_and_breaks_ties_by_order():
    tied = (ContextItem("M1", "a", "group one"), ContextItem("M2", "b", "group two"))
    assert extractive_answer("group?", tied) == extractive_answer("group?", tied) == {"answer": "group one",
                                                                                       "citations": ["M1"]}
    client = ExtractiveAnswerer()
    assert client.call(answer_input(QUESTION, CONTEXT)).text == client.call(answer_input(QUESTION, CONTEXT)).text
    assert sentences("一つ目。二つ目！\nthird. fourth") == ["一つ目。", "二つ目！", "third.", "fourth"]


def test_a_stand_in_is_labelled_as_one():
    assert "stand-in" in answerer_label(AnswersSection()) and "not an LLM" in answerer_label(AnswersSection())
    assert answerer_label(AnswersSection(backend="openai"), "gpt-4o-mini") == "openai gpt-4o-mini (LLM answers)"


# ------------------------------------------------------------------------------------------- the openai backend

JOBS = [AnswerJob("bm25", f"q{i}", QUESTION, CONTEXT) for i in range(4)]


def cite_route(body):
    """The server's answer: cites the last context id, and an id that is not there."""
    payload = json.loads(body["input"].rsplit("\n", 1)[-1])
    return Reply.ok(json.dumps({"answer": "7 May", "citations": [payload["context"][-1]["id"], "M99"]}))


def openai_llm(server, **extra):
    return SummarizerSection(backend="openai", base_url=server.base_url, interval_s=0.0, **extra)


@pytest.mark.usefixtures("clean_env")
def test_the_openai_answerer_over_http_refuses_unknown_ids_and_resumes_only_failed_items(server, engine):
    server.route = cite_route
    server.script(Reply.ok("not json"), Reply.ok(json.dumps({"answer": "x"})))
    llm = openai_llm(server, failure_policy="retry")
    client = make_answerer(AnswersSection(backend="openai"), llm, "en")
    answers, report = run_answers(JOBS, client, llm=llm, engine=engine, sleep=lambda s: None)
    assert answers["status"].tolist() == ["error", "error", "ok", "ok"]
    assert answers["cited"].tolist()[2:] == [("c2",), ("c2",)] and answers["refused"].tolist()[2:] == [("M99",)] * 2
    assert answers["answer"].tolist()[:2] == ["", ""] and answers["cited"].tolist()[:2] == [(), ()]
    assert (report.ok, report.error, report.dropped_ids) == (2, 2, 2)
    assert "2 cited ids refused (not in the context)" in report.line()
    rows = pd.read_sql("SELECT item_id, status, error FROM graph_extractions WHERE step = 'answers'", engine)
    errors = sorted(rows["error"].dropna())
    assert errors[0].startswith("question 'q0': the reply is not JSON") and "key 'citations' is missing" in errors[1]
    sent = json.loads(server.response_requests()[0].body["input"].rsplit("\n", 1)[-1])
    assert sent["question"] == QUESTION and [c["id"] for c in sent["context"]] == ["M1", "M2"]

    again, second = run_answers(JOBS, client, llm=llm, engine=engine, sleep=lambda s: None)
    assert (second.skipped, second.ok, second.error) == (2, 2, 0) and len(server.response_requests()) == 6
    assert again["status"].tolist() == ["ok"] * 4 and again["refused"].tolist() == [("M99",)] * 4


@pytest.mark.usefixtures("clean_env")
def test_stop_on_first_error_stops_the_answers_naming_the_item(server, engine):
    server.script(Reply.ok("[]"))
    llm = openai_llm(server)
    with pytest.raises(AnswersStopped, match=r"answers stopped at bm25\|q0\|.*not an object"):
        run_answers(JOBS[:2], make_answerer(AnswersSection(backend="openai"), llm, "en"), llm=llm, engine=engine,
                    sleep=lambda s: None)


KILLED_SCRIPT = """
import sys
from pmrag.core.params import AnswersSection, SummarizerSection
from pmrag.core.store import open_store
from pmrag.evaluate.answers import AnswerJob, ContextItem, make_answerer, run_answers
db, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
context = (ContextItem("M1", "c1", "one"), ContextItem("M2", "c2", "two"))
jobs = [AnswerJob("bm25", f"q{i:02d}", "which?", context) for i in range(n)]
llm = SummarizerSection(backend="openai", base_url=url, interval_s=0.0)
run_answers(jobs, make_answerer(AnswersSection(backend="openai"), llm, "en"), llm=llm, engine=open_store(db))
"""


@pytest.mark.integration
@pytest.mark.usefixtures("clean_env")
def test_a_run_killed_mid_way_resumes_calling_only_the_answers_it_lacks(server, tmp_path):
    """kill -9 while answering: the committed answers stay, and a rerun calls the model only for the others."""
    from pmrag.core.store import open_store

    n, db = 10, tmp_path / "store.sqlite"
    server.route = cite_route
    server.delay_s = 0.3
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SCRIPT, str(db), server.base_url, str(n)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, committed = time.monotonic() + 30, 0
        while time.monotonic() < deadline and proc.poll() is None and committed < 2:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                    committed = conn.execute("SELECT count(*) FROM graph_extractions WHERE status = 'ok'").fetchone()[0]
            except sqlite3.OperationalError:   # not created yet
                committed = 0
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.kill()                                   # SIGKILL: nothing is cleaned up
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()

    engine = open_store(db)
    kept = pd.read_sql("SELECT item_id FROM graph_extractions WHERE status = 'ok'", engine)["item_id"].tolist()
    assert 2 <= len(kept) < n
    before = len(server.response_requests())
    server.delay_s = 0.0
    context = (ContextItem("M1", "c1", "one"), ContextItem("M2", "c2", "two"))
    jobs = [AnswerJob("bm25", f"q{i:02d}", "which?", context) for i in range(n)]
    llm = openai_llm(server)
    answers, report = run_answers(jobs, make_answerer(AnswersSection(backend="openai"), llm, "en"), llm=llm,
                                  engine=engine, sleep=lambda s: None)
    assert (report.skipped, report.ok, report.error) == (len(kept), n - len(kept), 0)
    assert len(server.response_requests()) - before == n - len(kept)
    assert answers["status"].eq("ok").all() and answers["cited"].tolist() == [("c2",)] * n


# ------------------------------------------------------------------------------------------- scores and tables

def scored_answers():
    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3"], "type": ["single-hop", "multi-hop", "contextual"],
                              "answer": ["7 May", "pottery, camping", None]})
    qrels = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q3"], "chunk_id": ["c2", "c3", "c1", "c1"],
                          "relevance": [2, 1, 2, 2]})
    answers = pd.DataFrame({
        "method": ["a"] * 3 + ["b"] * 3, "question_id": ["q1", "q2", "q3"] * 2,
        "status": ["ok", "ok", "ok", "ok", "error", "ok"],
        "answer": ["on 7 May", "camping", "x", "No information available", "", "y"],
        "cited": [("c2", "c3"), ("c9",), ("c1",), (), (), ("c1",)],
        "refused": [(), ("M7",), (), (), (), ()], "n_context": [2, 1, 1, 0, 0, 1]})
    contexts = {"a": {"q1": ("c2", "c3"), "q2": ("c9",), "q3": ("c1",)}, "b": {"q1": (), "q2": (), "q3": ("c1",)}}
    return answers, contexts, questions, qrels


def test_answer_rows_score_citations_against_primary_and_every_evidence_chunk():
    rows = answer_rows(*scored_answers()).set_index(["method", "question_id"])
    q1 = rows.loc[("a", "q1")]
    assert (q1["cited_precision"], q1["cited_recall"], q1["citation_precision"], q1["citation_recall"]) == (
        0.5, 1.0, 1.0, 1.0)                                     # c3 is supporting evidence, not primary
    assert math.isclose(q1["answer_f1"], 0.8) and q1["set_recall"] == 1.0
    assert rows.loc[("a", "q2"), "answer_f1"] == 0.5 and rows.loc[("a", "q2"), "n_refused"] == 1
    assert math.isnan(rows.loc[("a", "q3"), "answer_f1"])        # not a LoCoMo category: no accuracy
    b = rows.loc["b"]
    assert b["failed"].tolist() == [False, True, False] and b.loc["q1", "cited_precision"] == 0.0
    assert b.loc["q2", "answer_f1"] == 0.0 and b.loc["q3", "cited_f1"] == 1.0


def test_answer_tables_give_intervals_differences_and_counts_each_naming_the_answerer():
    answers, contexts, questions, qrels = scored_answers()
    rows = answer_rows(answers, contexts, questions, qrels)
    value = AnswerSet(answers, rows, ("a", "b"), "extractive stand-in, not an LLM", "")
    tables = answer_tables(value, BootstrapSection(n_resamples=200))
    assert all((frame["answerer"] == "extractive stand-in, not an LLM").all() for frame in tables.values())
    f1 = tables["cis"].set_index(["retriever", "metric"]).loc[("a", "answer_f1")]
    assert math.isclose(f1["mean"], (0.8 + 0.5) / 2)          # over the two questions with an accuracy
    assert tables["cis"]["retriever"].drop_duplicates().tolist() == ["a", "b"]
    assert set(tables["differences"]["metric"]) == {"answer_f1", "cited_f1"}
    assert tables["by_type"]["metric"].eq("answer_f1").all()
    counts = tables["counts"].set_index("retriever")
    assert counts.loc["b", "failed"] == 1 and counts.loc["a", "refused"] == 1 and counts.loc["a", "questions"] == 3


# ------------------------------------------------------------------------------------------- params

@pytest.mark.parametrize(("value", "says"), [
    ("[nope]", "nope is neither a role"),
    ("[summary_bm25_char2]", "summary_bm25_char2 is neither a role"),
    ("[RAGv1, RAGv1]", "names RAGv1 more than once"),
    ("[]", "answers.retrievers"),
])
def test_answers_retrievers_are_roles_set_methods_or_listed_retrievers(tmp_path, value, says):
    from conftest import params_error, write_file

    path = write_file(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\n" + f"answers: {{retrievers: {value}}}\n")
    message = params_error(path)
    assert message.startswith(str(path)) and "\n" not in message, message
    assert "answers.retrievers" in message and says in message, message


def test_the_answers_section_loads_roles_and_listed_retrievers(tmp_path):
    from conftest import write_file
    from pmrag.study.params import load_params

    params = load_params(write_file(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nanswers: "
                                              "{enabled: true, retrievers: [graph, raw_text_bm25, RAGv3], k: 3}\n"))
    assert params.answers.retrievers == ("graph", "raw_text_bm25", "RAGv3") and params.answers.k == 3
    from pmrag.study.costs import stage_model

    assert stage_model(params, "answers") == ("extractive", "extractive-answer-v1")
    assert stage_model(params.model_copy(update={"answers": params.answers.model_copy(update={"backend": "openai"})}),
                       "answers") == ("openai", params.summarizer.model)
