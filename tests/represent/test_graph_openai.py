"""TOBUGraph's openai extractor (pmrag.represent.extract_llm.OpenAIExtractor) over real HTTP to the local scripted
Responses server: a graph built from scripted semantic and interest replies, the rows of ``graph_extractions``,
resume, the failure policies on invalid JSON, memory ids the model invents, the remote guard, key redaction,
and the store's upgrade from schema 4 to 5."""

import hashlib
import json
import sqlite3
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from pmrag.core import store
from pmrag.core.params import GraphSection, SummarizerSection
from pmrag.core.store import graph_extractions
from pmrag.represent.extract import EXTRACTORS, GraphError, Memory, char_ngram_vectors, make_extractor
from pmrag.represent.extract_llm import (
    GraphExtractionStopped, OpenAIExtractor, load_graph_prompts, merge_interests, validate_interest_reply,
    validate_semantic_reply,
)
from pmrag.represent.graph import build_graph
from pmrag.represent.llm import CallError
from pmrag.represent.privacy import RemoteNotAllowed
from pmrag.represent.representations import PROMPTS_DIR
from conftest import older_store

sys.path.insert(0, str(Path(__file__).parents[1]))
from responses_server import RESPONSE_MODEL, Reply  # noqa: E402

FAKE_KEY = "sk-test-SECRET-0123456789"
START = datetime(2024, 4, 10, 9, 0)


pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


def memory(memory_id: str, lines: list[tuple[str, str]], day: int, summary: str | None = None) -> Memory:
    start = START + timedelta(days=day)
    times = [start + timedelta(minutes=i) for i in range(len(lines))]
    text = "\n".join(f"{t:%Y-%m-%d %H:%M} {speaker}: {body}" for t, (speaker, body) in zip(times, lines))
    return Memory(memory_id, text, times[0], times[-1], tuple(dict.fromkeys(s for s, _ in lines)), summary)


MEMORIES = [
    memory("m1", [("Mel", "Hiking the Blue Ridge trail on Saturday?"), ("Jo", "Yes, new boots!")], 0),
    memory("m2", [("Jo", "Coffee at Café Luna after work")], 1, summary="Jo suggests coffee."),
    memory("m3", [("Mel", "The hike with Sam was great")], 2),
    memory("m4", [("Jo", "Luna's cafe is closed today")], 3),
]


def semantic(people=(), places=(), organisations=(), objects=(), events=(), activities=(), sentiment=None,
             summary=None) -> str:
    return json.dumps({"summary": summary, "people": list(people), "places": list(places),
                       "organisations": list(organisations), "objects": list(objects), "events": list(events),
                       "activities": list(activities), "sentiment": sentiment}, ensure_ascii=False)


SEMANTIC_REPLIES = [
    semantic(people=["Mel", "Jo"], places=["Blue Ridge trail"], objects=["boots"], activities=["hiking"],
             sentiment="positive", summary="Mel and Jo plan a hike."),
    semantic(places=["Café Luna"], activities=["coffee"], sentiment="neutral", summary="the model's own summary"),
    semantic(people=["Sam"], events=["the hike"], activities=["hiking"], sentiment="positive"),
    # wrapped in a Markdown fence, as models often answer
    "```json\n" + semantic(organisations=["Luna's cafe"], sentiment="negative") + "\n```",
]


def interests(*items) -> str:
    return json.dumps({"interests": [{"label": label, "kind": kind, "memory_ids": list(ids)}
                                     for label, kind, ids in items]}, ensure_ascii=False)


INTEREST_REPLIES = [                                       # batches (m1, m2) and (m3, m4)
    interests(("Hiking", "hobby", ["m1", "m2"]), ("Café", "place", ["m2"])),
    interests(("hiking", "activity", ["m3", "m9"]), ("cafe", "place", ["m4"])),   # m9: invented
]


def llm(server, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": server.base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "failure_policy": "retry"}
    values.update(overrides)
    return SummarizerSection(**values)


def extractor(server, engine, graph=None, **llm_overrides) -> OpenAIExtractor:
    params = GraphSection(**{"extractor": "openai", "interest_rule": "recurring", "min_memories": 2,
                             "merge_distance": 0, "interest_batch": 2, **(graph or {})})
    return make_extractor(params, embedder=char_ngram_vectors, llm=llm(server, **llm_overrides), prompts="en",
                          engine=engine)


def rows(engine) -> dict[tuple[str, str], dict]:
    with engine.connect() as conn:
        return {(r["step"], r["item_id"]): dict(r) for r in conn.execute(select(graph_extractions)).mappings()}


def interests_by_label(graph) -> dict[str, list[str]]:
    return {node.label: graph.memories_of(node.node_id) for node in graph.of_kind("interest")}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_text(encoding="utf-8").rstrip().encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------ the graph

def test_a_graph_from_scripted_replies_has_the_models_details_and_interests(server, engine):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    ex = extractor(server, engine)
    graph = build_graph(MEMORIES, ex)

    assert interests_by_label(graph) == {"Hiking": ["m1", "m2", "m3"]}   # Hiking + hiking; m9 dropped
    hiking = graph.node("i:Hiking")
    assert hiking.subkind == "hobby" and hiking.aliases == ("Hiking", "hiking")
    details = {(n.subkind, n.label) for n in graph.neighbours("m:m1", "memory-semantic")}
    assert details >= {("summary", "Mel and Jo plan a hike."), ("person", "Mel"), ("place", "Blue Ridge trail"),
                       ("thing", "boots"), ("activity", "hiking"), ("sentiment", "positive"),
                       ("participant", "Mel"), ("time", "2024-04-10 09:00 – 2024-04-10 09:01")}
    m2 = {(n.subkind, n.label) for n in graph.neighbours("m:m2", "memory-semantic")}
    assert ("summary", "Jo suggests coffee.") in m2 and ("summary", "the model's own summary") not in m2
    assert ("named", "the hike") in {(n.subkind, n.label) for n in graph.neighbours("m:m3", "memory-semantic")}
    assert ("named", "Luna's cafe") in {(n.subkind, n.label) for n in graph.neighbours("m:m4", "memory-semantic")}

    assert ex.reports["semantic"].line().startswith(f"graph semantic run {ex.run_id} (openai/gpt-4o-mini): done")
    assert (ex.reports["semantic"].ok, ex.reports["interest"].ok, ex.reports["interest"].dropped_ids) == (4, 2, 1)
    assert "1 memory ids not in their batch dropped" in ex.reports["interest"].line()
    assert ex.label() == "openai gpt-4o-mini (LLM extraction, the paper's method)"


def test_the_requests_carry_the_prompt_files_and_the_inputs(server, engine):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    build_graph(MEMORIES, extractor(server, engine))
    sent = [r.body for r in server.response_requests()]
    assert len(sent) == 6
    prompts = load_graph_prompts("en")
    assert sent[0]["instructions"] == (PROMPTS_DIR / "en" / "graph_semantic_system.txt").read_text().rstrip()
    assert sent[0]["input"] == prompts["semantic"].user_template + "\n\n" + MEMORIES[0].text
    assert sent[0]["model"] == "gpt-4o-mini" and sent[0]["max_output_tokens"] == 700
    assert "temperature" not in sent[0] and "seed" not in sent[0]
    batch = sent[4]["input"].split("\n\n", 1)[1].split("\n")
    assert sent[4]["instructions"] == prompts["interest"].system and sent[4]["max_output_tokens"] == 4000
    assert [json.loads(line)["id"] for line in batch] == ["m1", "m2"]
    assert json.loads(batch[0])["places"] == ["Blue Ridge trail"]
    assert json.loads(batch[1])["summary"] == "Jo suggests coffee."


def test_every_call_is_a_row_with_its_provenance(server, engine):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    ex = extractor(server, engine)
    build_graph(MEMORIES, ex)
    found = rows(engine)
    assert sorted(step for step, _ in found) == ["interest"] * 2 + ["semantic"] * 4
    m1 = found[("semantic", "m1")]
    assert m1["status"] == "ok" and m1["error"] is None and m1["attempts"] == 1 and m1["run_id"] == ex.run_id
    assert (m1["requested_model"], m1["response_model"]) == ("gpt-4o-mini", RESPONSE_MODEL)
    assert m1["system_sha256"] == sha(PROMPTS_DIR / "en" / "graph_semantic_system.txt")
    assert m1["user_sha256"] == sha(PROMPTS_DIR / "en" / "graph_semantic_user.txt")
    assert m1["input_sha256"] == hashlib.sha256(MEMORIES[0].text.encode()).hexdigest()
    assert m1["input_tokens"] > 0 and m1["output_tokens"] > 0 and m1["created_at"]
    assert json.loads(m1["output"])["places"] == ["Blue Ridge trail"]
    batches = [r for (step, _), r in found.items() if step == "interest"]
    assert sorted(r["dropped_ids"] for r in batches) == [0, 1]
    second = next(r for r in batches if r["dropped_ids"] == 1)
    assert json.loads(second["output"])["interests"][0]["memory_ids"] == ["m3"]   # stored without m9

    provenance = ex.provenance()
    assert (provenance["backend"], provenance["model"], provenance["base_url"]) == (
        "openai", "gpt-4o-mini", server.base_url)
    assert provenance["prompt_sha256"]["interest_user"] == sha(PROMPTS_DIR / "en" / "graph_interest_user.txt")
    assert provenance["interest_batch"] == 2 and provenance["llm"]["interest_max_output_tokens"] == 4000


# ------------------------------------------------------------------------------------------ resume

def test_a_rerun_calls_nothing_for_ok_rows_and_gives_the_same_graph(server, engine):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    first = build_graph(MEMORIES, extractor(server, engine))
    before = len(server.response_requests())
    again = extractor(server, engine)
    assert build_graph(MEMORIES, again) == first
    assert len(server.response_requests()) == before
    assert (again.reports["semantic"].skipped, again.reports["interest"].skipped) == (4, 2)
    assert again.reports["interest"].dropped_ids == 1       # counted from the stored row


def test_a_failed_memory_is_retried_on_the_rerun_and_only_its_batch_is_called_again(server, engine):
    replies = SEMANTIC_REPLIES[:1] + ["not JSON at all"] + SEMANTIC_REPLIES[2:] + INTEREST_REPLIES
    server.script(*(Reply.ok(text) for text in replies))
    ex = extractor(server, engine)
    graph = build_graph(MEMORIES, ex)                       # failure_policy retry: goes on
    assert (ex.reports["semantic"].ok, ex.reports["semantic"].error) == (3, 1)
    assert {n.subkind for n in graph.neighbours("m:m2", "memory-semantic")} == {"summary", "participant", "time"}
    assert rows(engine)[("semantic", "m2")]["status"] == "error"

    before = len(server.response_requests())
    server.script(Reply.ok(SEMANTIC_REPLIES[1]), Reply.ok(INTEREST_REPLIES[0]))
    again = extractor(server, engine)
    graph = build_graph(MEMORIES, again)
    calls = server.response_requests()[before:]
    assert len(calls) == 2 and calls[0].body["input"].endswith(MEMORIES[1].text)
    assert [json.loads(line)["id"] for line in calls[1].body["input"].split("\n\n", 1)[1].split("\n")] == ["m1", "m2"]
    assert (again.reports["semantic"].skipped, again.reports["interest"].skipped) == (3, 1)
    assert rows(engine)[("semantic", "m2")]["status"] == "ok"
    assert ("place", "Café Luna") in {(n.subkind, n.label) for n in graph.neighbours("m:m2", "memory-semantic")}


def test_another_model_or_prompt_set_is_not_taken_from_the_store(server, engine, tmp_path):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    build_graph(MEMORIES, extractor(server, engine))
    before = len(server.response_requests())
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    build_graph(MEMORIES, extractor(server, engine, model="gpt-4.1-mini"))
    assert len(server.response_requests()) == before + 6


def test_a_retryable_error_is_retried_within_the_call(server, engine):
    server.script(Reply.error(429), *(Reply.ok(text) for text in SEMANTIC_REPLIES + INTEREST_REPLIES))
    ex = extractor(server, engine)
    build_graph(MEMORIES, ex)
    assert rows(engine)[("semantic", "m1")]["attempts"] == 2
    assert ex.reports["semantic"].calls == 5 and ex.reports["semantic"].error == 0


# ------------------------------------------------------------------------------------------ failures

@pytest.mark.parametrize("policy", ["stop_on_first_error", "retry"])
def test_invalid_json_is_a_failed_call_under_either_policy(server, engine, policy):
    secret_reply = "Here are the details: Mel's secret address"
    server.script(Reply.ok(secret_reply), *(Reply.ok(text) for text in SEMANTIC_REPLIES[1:] + INTEREST_REPLIES))
    ex = extractor(server, engine, failure_policy=policy)
    if policy == "stop_on_first_error":
        with pytest.raises(GraphExtractionStopped, match=r"stopped at memory m1 .*memory 'm1': the reply is not "
                                                         r"JSON \(Expecting value at line 1 column 1\)") as stopped:
            build_graph(MEMORIES, ex)
        assert "secret" not in str(stopped.value)
        assert len(server.response_requests()) == 1 and ex.reports["semantic"].status == "stopped"
        assert list(rows(engine)) == [("semantic", "m1")]
    else:
        graph = build_graph(MEMORIES, ex)
        assert len(server.response_requests()) == 6 and ex.reports["semantic"].error == 1
        assert interests_by_label(graph) == {"Hiking": ["m1", "m2", "m3"]}   # m1 is named by the interest reply
    row = rows(engine)[("semantic", "m1")]
    assert row["status"] == "error" and row["output"] is None and "secret" not in row["error"]
    assert row["attempts"] == 1                            # invalid JSON is not retried within the call


def test_an_invalid_interest_reply_under_retry_adds_no_interest_from_its_batch(server, engine):
    server.script(*(Reply.ok(text) for text in SEMANTIC_REPLIES), Reply.ok('{"interests": {"label": "x"}}'),
                  Reply.ok(INTEREST_REPLIES[1]))
    graph = build_graph(MEMORIES, extractor(server, engine))
    assert interests_by_label(graph) == {}                  # hiking: only m3 left, below min_memories 2
    error = next(r["error"] for (step, _), r in rows(engine).items() if step == "interest" and r["status"] == "error")
    assert error.startswith("interest batch batch-") and error.endswith("key 'interests' must be a list of objects")


@pytest.mark.parametrize("reply, message", [
    ('[1, 2]', "memory 'm1': the reply is JSON but not an object (list)"),
    ('{"people": []}', "memory 'm1': key 'places' is missing"),
    (semantic().replace('"people": []', '"people": "Mel"'), "memory 'm1': key 'people' must be a list of strings"),
    (semantic().replace('"objects": []', '"objects": [3]'), "memory 'm1': key 'objects' must be a list of strings"),
    (semantic().replace('"sentiment": null', '"sentiment": 1'), "memory 'm1': key 'sentiment' must be a string or null"),
])
def test_semantic_replies_are_checked_key_by_key(reply, message):
    with pytest.raises(CallError) as raised:
        validate_semantic_reply(reply, "m1")
    assert str(raised.value) == message and not raised.value.retryable


def test_a_semantic_reply_is_normalised_and_may_omit_its_summary():
    reply = json.loads(semantic(people=[" Mel ", "Mel", ""], sentiment="  "))
    del reply["summary"]
    checked = validate_semantic_reply(json.dumps(reply), "m1")
    assert checked["people"] == ["Mel"] and checked["summary"] is None and checked["sentiment"] is None


@pytest.mark.parametrize("reply, message", [
    ('{}', "interest batch b: key 'interests' is missing"),
    ('{"interests": ["x"]}', "interest batch b: interests[0] is not an object"),
    ('{"interests": [{"label": "x", "kind": "hobby"}]}', "interest batch b: interests[0]: key 'memory_ids' is missing"),
    ('{"interests": [{"label": " ", "kind": "hobby", "memory_ids": []}]}',
     "interest batch b: interests[0]: key 'label' must be a non-empty string"),
    ('{"interests": [{"label": "x", "kind": 2, "memory_ids": []}]}', "interest batch b: interests[0]: key 'kind' must be a string"),
])
def test_interest_replies_are_checked_key_by_key(reply, message):
    with pytest.raises(CallError) as raised:
        validate_interest_reply(reply, "b", ["m1"])
    assert str(raised.value) == message


def test_invented_memory_ids_are_dropped_and_counted_and_an_unknown_kind_is_other():
    reply = interests(("Cafés", "Location", ["m1", "m7", "m2", "m7"]), ("Ghost", "hobby", ["m8"]))
    checked, dropped = validate_interest_reply(reply, "b", ["m1", "m2"])
    assert checked == {"interests": [{"label": "Cafés", "kind": "other", "memory_ids": ["m1", "m2"]}]}
    assert dropped == 3


def test_interests_of_batches_merge_by_normalised_label_then_min_memories_applies():
    replies = [{"interests": [{"label": "Ｋａｍａｋｕｒａ", "kind": "place", "memory_ids": ["a", "b"]},
                              {"label": "tea", "kind": "preference", "memory_ids": ["a"]}]},
               {"interests": [{"label": "kamakura ", "kind": "place", "memory_ids": ["c"]},
                              {"label": "coffee", "kind": "preference", "memory_ids": ["c", "d"]}]}]
    params = GraphSection(extractor="openai", interest_rule="recurring", min_memories=2, merge_distance=0)
    merged = merge_interests(replies, params, char_ngram_vectors)
    assert [(i.label, i.kind, i.memory_ids, i.aliases) for i in merged] == [
        ("Ｋａｍａｋｕｒａ", "place", ("a", "b", "c"), ("Ｋａｍａｋｕｒａ", "kamakura ")),
        ("coffee", "preference", ("c", "d"), ("coffee",)),
    ]
    # clustering as offline: with a wide merge distance the two become one, labelled by the most shared
    wide = merge_interests(replies, params.model_copy(update={"merge_distance": 2.0}), char_ngram_vectors)
    assert [(i.label, i.memory_ids) for i in wide] == [("Ｋａｍａｋｕｒａ", ("a", "b", "c", "d"))]
    # per memory (002 §2.3): an interest of one memory is kept, and no min_memories applies
    own = merge_interests(replies, params.model_copy(update={"interest_rule": "per_memory"}), char_ngram_vectors)
    assert [(i.label, i.memory_ids) for i in own] == [("Ｋａｍａｋｕｒａ", ("a", "b", "c")), ("coffee", ("c", "d")),
                                                      ("tea", ("a",))]


def test_the_interest_prompts_let_an_interest_hold_one_memory():
    prompts = load_graph_prompts("en")["interest"]
    assert "may concern a single memory" in prompts.user_template and "at least two" not in prompts.user_template


# ------------------------------------------------------------------------------------------ privacy, refusals

def test_a_remote_server_is_refused_without_allow_remote(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    params = GraphSection(extractor="openai")
    remote = SummarizerSection(backend="openai", base_url="https://api.example.com/v1")
    with pytest.raises(RemoteNotAllowed, match="the openai graph extractor would send chat text to api.example.com"):
        make_extractor(params, embedder=char_ngram_vectors, llm=remote, engine=engine)
    allowed = make_extractor(params, embedder=char_ngram_vectors, llm=remote, engine=engine, allow_remote=True)
    assert allowed.provenance()["base_url"] == "https://api.example.com/v1"


def test_the_api_key_is_never_stored(server, engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    server.script(Reply.error(400, "bad request, you sent {auth}"),
                  *(Reply.ok(text) for text in SEMANTIC_REPLIES[1:] + INTEREST_REPLIES))
    ex = extractor(server, engine)
    build_graph(MEMORIES, ex)
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {FAKE_KEY}"   # it was sent
    found = rows(engine)
    assert "[REDACTED]" in found[("semantic", "m1")]["error"]
    assert FAKE_KEY not in json.dumps(list(found.values()), default=str)
    assert FAKE_KEY not in json.dumps(ex.provenance())


def test_a_user_password_in_the_base_url_stays_out_of_the_provenance(engine):
    params = GraphSection(extractor="openai")
    local = SummarizerSection(backend="openai", base_url="http://user:hunter2@127.0.0.1:9/v1")
    ex = make_extractor(params, embedder=char_ngram_vectors, llm=local, engine=engine)
    assert ex.provenance()["base_url"] == "http://127.0.0.1:9/v1"
    assert "hunter2" not in json.dumps(ex.provenance())


@pytest.mark.parametrize("missing, message", [("llm", "needs the summarizer section"), ("engine", "needs the study store")])
def test_the_openai_backend_refuses_without_its_connection_or_store(engine, missing, message):
    given = {"llm": SummarizerSection(backend="openai", base_url="http://127.0.0.1:9/v1"), "engine": engine}
    del given[missing]
    with pytest.raises(GraphError, match=message):
        make_extractor(GraphSection(extractor="openai"), embedder=char_ngram_vectors, **given)


def test_the_offline_backend_ignores_the_connection_arguments(engine):
    offline = make_extractor(GraphSection(), embedder=char_ngram_vectors, llm=SummarizerSection(), engine=engine,
                             prompts="en", allow_remote=True, progress=True)
    assert offline.backend == "offline" and set(EXTRACTORS.names()) == {"offline", "openai"}


def test_a_prompt_folder_without_the_graph_prompts_is_a_one_line_error(tmp_path):
    (tmp_path / "summary_system.txt").write_text("x")
    with pytest.raises(GraphError, match="graph prompts: .*missing graph_semantic_system.txt"):
        load_graph_prompts(str(tmp_path))


def test_graph_params_take_openai_and_an_interest_batch():
    assert GraphSection(extractor="openai", interest_batch=10).interest_batch == 10
    assert GraphSection().interest_batch == 50
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        GraphSection(interest_batch=0)


# ------------------------------------------------------------------------------------------ the store

def test_a_version_4_store_is_upgraded_in_place_and_keeps_its_data(tmp_path, server):
    path = older_store(tmp_path / "old.sqlite", 4,        # a version-4 store: no graph_extractions
                       "INSERT INTO questions (question_id, text, type) VALUES ('q1', 'where?', 'factoid')",
                       "INSERT INTO graph_nodes VALUES ('g', 'm:a', 'memory', 'chunk', 'a', '[]')",
                       "DROP TABLE graph_extractions")
    engine = store.open_store(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION >= 5
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "graph_extractions" in tables
        assert conn.execute("SELECT text FROM questions").fetchall() == [("where?",)]
        assert conn.execute("SELECT node_id FROM graph_nodes").fetchall() == [("m:a",)]
    server.script(Reply.ok(SEMANTIC_REPLIES[0]))
    extractor(server, engine).extract(MEMORIES[:1])
    assert rows(engine)[("semantic", "m1")]["status"] == "ok"
