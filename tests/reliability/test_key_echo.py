"""A hostile server that echoes the API key it was sent: no byte of the key may reach the store, a stage result,
a file of the run, stderr or a returned value.

The local Responses server (tests/responses_server.py) answers every LLM step (summaries, TOBUGraph's semantic,
interest and relevance calls, decomposition) with replies that carry the request's ``Authorization`` header in
every spelling its ``echo`` knows (whole, percent-encoded, JSON-escaped, cut by a line break, cut short), in the
reply's text, inside the JSON values the step parses, in the model the response reports and in error messages.
The embeddings server here does the same in the fields of an Embeddings API response.  Each step runs over real
HTTP; the study test builds the stages of a tiny study with every LLM backend pointed at the echoing server."""

import json
import pickle
import re
import sys
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pmrag.core.errors import PmragError
from pmrag.core.params import DEFAULT_RETRIEVERS, GraphSection, SummarizerSection
from pmrag.core.store import read_table
from pmrag.represent.embed import EmbeddingCache, OpenAIEmbedder, embed_with_cache
from pmrag.represent.extract import Memory, char_ngram_vectors, make_extractor
from pmrag.represent.graph import build_graph
from pmrag.represent.llm import ResponsesClient
from pmrag.represent.representations import PROMPTS_DIR
from pmrag.represent.summarize import load_prompts, summarize_chunks
from pmrag.retrieve.graph_relevance_llm import llm_interest_relevance
from pmrag.retrieve.subqueries import llm_decomposition

sys.path.insert(0, str(Path(__file__).parents[1]))
from conftest import extraction_rows, make_tiny_study  # noqa: E402
from responses_server import Reply  # noqa: E402

KEY = "sk-echo-Zq8Xv2Lm9Pw4Rt6Ny1Kb3Hd5Jf7Gc0Ua"
RANDOM_PART = KEY.removeprefix("sk-echo-")

pytestmark = pytest.mark.usefixtures("clean_env")   # server, engine: tests/conftest.py


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


def leaks(data: bytes | str) -> list[str]:
    """The spellings of the key found in ``data``: any 12 consecutive characters of its random part as they
    are, or 8 of them percent-encoded or JSON-escaped."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    data_lower = data.lower()
    found = [f"raw {RANDOM_PART[i:i + 12]!r}" for i in range(len(RANDOM_PART) - 11)
             if RANDOM_PART[i:i + 12].encode() in data]
    for i in range(len(RANDOM_PART) - 7):
        part = RANDOM_PART[i:i + 8]
        if "".join(f"%{b:02x}" for b in part.encode()).encode() in data_lower:
            found.append(f"percent-encoded {part!r}")
        if "".join(f"\\u{ord(c):04x}" for c in part).encode() in data_lower:
            found.append(f"JSON-escaped {part!r}")
    return found


def test_leaks_finds_every_spelling_the_server_echoes():
    from responses_server import echo

    for form in ("{auth}", "{key}", "{key_url}", "{key_json}", "{key_split}", "{key_split_json}", "{key_cut}"):
        assert leaks(echo(f"x {form} y", f"Bearer {KEY}")), form
    assert leaks("x [REDACTED] y Bearer [REDACTED]") == []


def files_leaking(folder: Path) -> dict[str, list[str]]:
    """Every file under ``folder`` (the store, its journal, stage results, logs, caches) whose bytes leak."""
    return {str(path.relative_to(folder)): found for path in sorted(folder.rglob("*"))
            if path.is_file() and (found := leaks(path.read_bytes()))}


# ------------------------------------------------------------------------------------------ the echoing server

TEXT_ECHO = "会話の要約。the server saw {auth}; key {key}, {key_url}, {key_json}, {key_split}, cut {key_cut}."
TEXT_REDACTED = ("会話の要約。the server saw Bearer [REDACTED]; key [REDACTED], [REDACTED], [REDACTED], [REDACTED], "
                 "cut [REDACTED].")
MODEL_ECHO = "gpt-4o-mini {key}"


def semantic_echo() -> str:
    """A semantic reply (002 §2.2) with the key in every value (JSON-escaped forms only: a JSON string holds no
    raw line break)."""
    return json.dumps({"summary": "a talk {key}", "people": ["Aki {key}", "{key_json}"], "places": ["{key_url}"],
                       "organisations": ["{auth}"], "objects": ["{key_split_json}"], "events": [],
                       "activities": ["cooking {key_cut}"], "sentiment": "calm {key}"})


def interest_echo(body: dict) -> str:
    """An interest reply linking every memory of the batch (read from its input) to interests named by the key,
    and to a memory id that is the key."""
    ids = re.findall(r'"id": "([^"]+)"', body["input"])
    return json.dumps({"interests": [
        {"label": "cooking {key}", "kind": "hobby", "memory_ids": ids},
        {"label": "{key_json}", "kind": "place", "memory_ids": ids},
        {"label": "family {key_split_json}", "kind": "other {key}", "memory_ids": [*ids, "{key}"]}]})


RELEVANCE_ECHO = json.dumps({"interests": [1, "{key}", "{key_json}"]})
DECOMPOSITION_ECHO = json.dumps({"subqueries": ["{key}", "trip {key_json}", "hike {key_split_json}", "{key_url}",
                                                "meal {key_cut}", "Authorization: {auth}"]})
DECOMPOSITION_REDACTED = ("[REDACTED]", "trip [REDACTED]", "hike [REDACTED]", "meal [REDACTED]",
                          "Authorization: [REDACTED]")

STEP_SYSTEM_FILES = {"summary": "summary_system", "semantic": "graph_semantic_system",
                     "interest": "graph_interest_system", "relevance": "graph_relevance_system",
                     "decomposition": "decompose_system"}
STEP_OF_SYSTEM = {(PROMPTS_DIR / lang / f"{name}.txt").read_text(encoding="utf-8").lstrip("\ufeff").rstrip(): step
                  for lang in ("ja", "en") for step, name in STEP_SYSTEM_FILES.items()}


def echoing(body: dict) -> Reply:
    """The echoing reply for a request, by the step its system prompt names."""
    step = STEP_OF_SYSTEM[body["instructions"]]
    text = {"summary": TEXT_ECHO, "semantic": semantic_echo(), "relevance": RELEVANCE_ECHO,
            "decomposition": DECOMPOSITION_ECHO}.get(step) or interest_echo(body)
    return Reply.ok(text, model=MODEL_ECHO)


def llm(server, **overrides) -> SummarizerSection:
    values = {"backend": "openai", "base_url": server.base_url, "interval_s": 0.0, "timeout_s": 5.0,
              "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "failure_policy": "retry", "max_retries": 0}
    return SummarizerSection(**{**values, **overrides})


def assert_no_key(*, values=(), folder: Path | None = None, err: str = ""):
    for value in values:
        assert leaks(pickle.dumps(value)) == [], value
    if folder is not None:
        assert files_leaking(folder) == {}
    assert leaks(err) == [], err


# ------------------------------------------------------------------------------------------ each step

def test_the_client_returns_a_redacted_reply(server, key):
    server.script(Reply.ok(TEXT_ECHO, model=MODEL_ECHO))
    client = ResponsesClient(llm(server), load_prompts("ja"))
    reply = client.call("山田: こんにちは")
    assert server.response_requests()[0].headers["authorization"] == f"Bearer {KEY}"     # sent, then echoed
    assert (reply.text, reply.response_model) == (TEXT_REDACTED, "gpt-4o-mini [REDACTED]")
    assert client.secrets == (KEY,) and leaks(json.dumps(client.provenance())) == []


def test_a_loopback_client_without_a_key_names_no_secret(server):
    assert ResponsesClient(llm(server), load_prompts("ja")).secrets == ()


def test_summaries_hold_no_key_of_an_echoing_server(server, engine, key, tmp_path, capfd):
    server.route = echoing
    server.script(Reply.error(500, "upstream saw {auth} ({key_json})"))            # the first chunk fails
    chunks = [(f"c{i}", f"2024-04-10 09:0{i} 山田: 話 {i}") for i in range(3)]
    report = summarize_chunks(engine, chunks, ResponsesClient(llm(server), load_prompts("ja")), llm(server),
                              progress=False)
    print(report.line(), file=sys.stderr)
    table = read_table(engine, "summaries", ("chunk_id",)).set_index("chunk_id")
    assert (report.ok, report.error) == (2, 1)
    assert table.loc["c0", "error"].startswith("InternalServerError: ") and "[REDACTED]" in table.loc["c0", "error"]
    assert table.loc["c1", "summary"] == TEXT_REDACTED                               # made from the redacted text
    assert table.loc["c1", "response_model"] == "gpt-4o-mini [REDACTED]"
    runs = read_table(engine, "summary_runs", ("run_id",))
    assert_no_key(values=[table, runs, report], folder=tmp_path, err=capfd.readouterr().err)


AT = datetime(2024, 4, 10, 9, 0)
MEMORIES = [Memory(f"m{i}", f"2024-04-1{i} 09:00 Aki: 料理の話 {i}", AT + timedelta(days=i), AT + timedelta(days=i),
                   ("Aki",), None) for i in range(3)]


def test_graph_extraction_holds_no_key_of_an_echoing_server(server, engine, key, tmp_path, capfd):
    server.route = echoing
    params = GraphSection(extractor="openai", min_memories=2, merge_distance=0, interest_batch=2)
    extractor = make_extractor(params, embedder=char_ngram_vectors, llm=llm(server), prompts="ja", engine=engine)
    graph = build_graph(MEMORIES, extractor)
    for report in extractor.reports.values():
        print(report.line(), file=sys.stderr)
    labels = {node.label for node in graph.nodes}
    assert {"cooking [REDACTED]", "[REDACTED]", "family [REDACTED]"} <= labels            # interests
    assert {"Aki [REDACTED]", "cooking [REDACTED]"} <= labels                             # semantic nodes
    assert extractor.reports["interest"].dropped_ids == 2                # the key as a memory id: invented, dropped
    rows = extraction_rows(engine)
    assert {row["response_model"] for row in rows.values()} == {"gpt-4o-mini [REDACTED]"}
    assert_no_key(values=[graph, extractor.provenance(), rows, extractor.reports], folder=tmp_path,
                  err=capfd.readouterr().err)


def test_relevance_holds_no_key_of_an_echoing_server(server, engine, key, tmp_path, capfd):
    server.route = echoing
    result = llm_interest_relevance(["q1"], ["What did Aki cook?"], ["cooking", "family"], llm=llm(server),
                                    prompts="ja", engine=engine, allow_remote=False, proxy=None)
    print(result.reports.line(), file=sys.stderr)
    assert result.matrix.tolist() == [[1.0, 0.0]] and result.reports.dropped_ids == 2    # the key names nothing
    assert_no_key(values=[result, extraction_rows(engine)], folder=tmp_path, err=capfd.readouterr().err)


def test_decomposition_holds_no_key_of_an_echoing_server(server, engine, key, tmp_path, capfd):
    server.route = echoing
    result = llm_decomposition(["q1"], ["What did Aki cook on the trip?"], max_subqueries=10, llm=llm(server),
                               prompts="en", engine=engine, allow_remote=False, proxy=None)
    print(result.report.line(), file=sys.stderr)
    assert result.subqueries == [DECOMPOSITION_REDACTED]          # the sub-queries are made from the redacted text
    assert result.report.dropped_ids == 1                         # the percent-encoded key: a repeat once redacted
    assert_no_key(values=[result, extraction_rows(engine)], folder=tmp_path, err=capfd.readouterr().err)


# ------------------------------------------------------------------------------------------ embeddings

class EchoingEmbeddings:
    """An Embeddings API on 127.0.0.1 that echoes the request's key, by ``mode``: ``fields`` (the model, an extra
    field and usage of a good response), ``error`` (a 401 whose message is the header), ``vector`` (the key as an
    embedding), ``index`` (the key as an index)."""

    def __init__(self, mode: str):
        server = self
        self.mode = mode

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ")
                status = 200
                data = [{"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0]}
                        for i, text in enumerate(body["input"])]
                if server.mode == "vector":
                    data[0]["embedding"] = [token, 1.0]
                if server.mode == "index":
                    data[0]["index"] = token
                payload = {"object": "list", "data": data, "model": f"{body['model']} {auth}", "echo": auth,
                           "usage": {"prompt_tokens": 1, "total_tokens": 1, "key": token}}
                if server.mode == "error":
                    status, payload = 401, {"error": {"message": f"Incorrect API key provided: {auth}",
                                                      "type": "invalid_request_error", "code": token}}
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def embeddings_server():
    server = EchoingEmbeddings("fields")
    yield server
    server.stop()


def test_embeddings_read_only_vectors_from_an_echoing_server(embeddings_server, key, tmp_path):
    embedder = OpenAIEmbedder(model="e5-passage", base_url=embeddings_server.base_url, max_retries=0)
    with EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite") as cache:
        vectors = embed_with_cache(embedder, ["ab", "abcd"], "passage", cache, progress=False)
    assert vectors.tolist() == [[2.0, 1.0], [4.0, 1.0]]
    assert embedder.secrets == (KEY,) and leaks(embedder.model_id) == []
    assert_no_key(values=[vectors], folder=tmp_path)


@pytest.mark.parametrize("mode, message", [
    ("error", "failed: Error code: 401 - Incorrect API key provided: Bearer [REDACTED]"),
    ("vector", "is malformed: an embedding is not a list of numbers"),
    ("index", "is malformed: 'data' is not a list of indexed embeddings"),
])
def test_an_embedding_error_quotes_no_key_of_an_echoing_server(embeddings_server, key, mode, message):
    embeddings_server.mode = mode
    embedder = OpenAIEmbedder(model="e5-passage", base_url=embeddings_server.base_url, max_retries=0)
    with pytest.raises(PmragError) as raised:
        embedder.embed(["ab", "abcd"], "passage")
    text = str(raised.value)
    assert message in text and "\n" not in text and leaks(text) == [], text


# ------------------------------------------------------------------------------------------ the study

@pytest.mark.integration
def test_a_study_with_every_llm_step_on_an_echoing_server_stores_no_key(server, key, tmp_path, capfd):
    server.route = echoing
    connection = (f"{{backend: openai, base_url: '{server.base_url}', interval_s: 0, timeout_s: 10, "
                  f"failure_policy: retry, max_retries: 0}}")
    study = make_tiny_study(tmp_path, f"summarizer: {connection}\n"
                                      "graph: {extractor: openai, relevance: openai, min_memories: 2}\n"
                                      "decomposition: {backend: openai, max_subqueries: 10}\n"
                                      f"retrieval: {{retrievers: [{', '.join(DEFAULT_RETRIEVERS)}, "
                                      "embedding_text_decomp_bm25]}\n")
    values = [study.summaries(), study.graph(), study.interest_relevance(), study.get("decomposition")]
    steps = {STEP_OF_SYSTEM[request.body["instructions"]] for request in server.response_requests()}
    assert steps == set(STEP_SYSTEM_FILES)                               # every LLM step called the server
    assert set(values[0]["summary"]) == {TEXT_REDACTED}
    assert set(values[3].subqueries) == {DECOMPOSITION_REDACTED}
    assert list(study.run_dir.glob("stages/*.pkl"))
    assert_no_key(values=values, folder=tmp_path, err="".join(capfd.readouterr()))
