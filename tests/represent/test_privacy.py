"""Privacy: no chat text leaves through a proxy, executed notebooks keep no widget state, the
kernel's "without encryption" warning (and a KeyboardInterrupt at shutdown) does not reach the terminal, and
redaction finds a key in every spelling and a credential in every header form while ordinary text stays.

The model clients talk real HTTP to fake servers on 127.0.0.1 (tests/responses_server.py for the Responses
API, a tiny embeddings endpoint here) while every proxy variable of the environment points at a fake proxy,
also on 127.0.0.1, that records every connection it gets.  Remote hosts are ``*.invalid`` (RFC 2606: never
resolvable), so no chat text here can leave the machine."""

import json
import os
import socketserver
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest

from pmrag.core.errors import PmragError
from pmrag.core.params import EmbeddingSection, SummarizerSection
from pmrag.represent.embed import OpenAIEmbedder, make_embedder
from pmrag.represent.llm import CallError
from pmrag.represent import privacy
from pmrag.represent.privacy import RemoteNotAllowed
from pmrag.represent.summarize import make_summarizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import make_tiny_study  # noqa: E402
from responses_server import ResponsesServer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FAKE_KEY = "sk-test-PROXY-SECRET-0123456789"
REMOTE = "api.example.invalid"
PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


# --------------------------------------------------------------------------------------- fake servers

class FakeProxy:
    """A TCP server on 127.0.0.1 that records the head (request line and headers) of every connection it
    accepts and answers ``502 Bad Gateway``: a stand-in for a proxy the user did not mean to send chats to."""

    def __init__(self):
        self.heads: list[bytes] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.settimeout(2)
                head = b""
                try:
                    while b"\r\n\r\n" not in head and len(head) < 65536:
                        data = self.request.recv(4096)
                        if not data:
                            break
                        head += data
                except OSError:
                    pass
                proxy.heads.append(head)
                try:
                    self.request.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def request_lines(self) -> list[str]:
        return [head.split(b"\r\n", 1)[0].decode("latin-1") for head in self.heads]

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


class LoopbackHTTP:
    """A tiny OpenAI-compatible server on 127.0.0.1: ``POST /v1/embeddings`` answers one 2-d vector per input
    (``[characters, 1]``); any other path answers ``redirect`` (a 307 to that URL) when set, else 404.  Records
    each request's path and headers."""

    def __init__(self, redirect: str | None = None):
        self.requests: list[tuple[str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append((self.path, dict(self.headers.items())))
                if self.path.endswith("/embeddings"):
                    data = [{"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0]}
                            for i, text in enumerate(body["input"])]
                    payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                                          "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                    self.send_response(200)
                elif redirect:
                    payload = b"{}"
                    self.send_response(307)
                    self.send_header("Location", redirect)
                else:
                    payload = b'{"error": {"message": "no route"}}'
                    self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def env_proxy(monkeypatch):
    """A fake proxy that every proxy variable of the environment names (NO_PROXY empty), and a fake API key."""
    proxy = FakeProxy()
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, proxy.url)
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield proxy
    proxy.stop()


@pytest.fixture
def named_proxy():
    proxy = FakeProxy()
    yield proxy
    proxy.stop()


@pytest.fixture
def responses():
    server = ResponsesServer().start()
    yield server
    server.stop()


@pytest.fixture
def embeddings():
    server = LoopbackHTTP()
    yield server
    server.stop()


def summarizer_for(base_url: str, **kwargs):
    section = SummarizerSection(backend="openai", base_url=base_url, timeout_s=3, max_retries=0)
    return make_summarizer(section, "ja", **kwargs)


def embedder_for(base_url: str, **kwargs):
    return make_embedder(EmbeddingSection(backend="openai", base_url=base_url, model="e5-passage", timeout_s=3),
                         **kwargs)


def authorization(headers: dict) -> str | None:
    return {name.lower(): value for name, value in headers.items()}.get("authorization")


# ------------------------------------------------------------------------------------------- proxies

@pytest.mark.parametrize("allow_remote, use_named_proxy", [(False, False), (True, False), (True, True), (False, True)])
def test_loopback_calls_never_go_through_a_proxy(env_proxy, named_proxy, responses, embeddings, allow_remote,
                                                 use_named_proxy):
    options = {"allow_remote": allow_remote, **({"proxy": named_proxy.url} if use_named_proxy else {})}
    result = summarizer_for(responses.base_url, **options).call("家族の予定の話")
    vectors = embedder_for(embeddings.base_url, **options).embed(["夕飯", "旅行"], "passage")

    assert result.text.startswith("要約")
    assert vectors.tolist() == [[2.0, 1.0], [2.0, 1.0]]
    assert env_proxy.heads == [] and named_proxy.heads == []   # no connection at all: no text, no key
    # the key went straight to the loopback servers, and only there
    assert [authorization(r.headers) for r in responses.response_requests()] == [f"Bearer {FAKE_KEY}"]
    assert [authorization(headers) for _, headers in embeddings.requests] == [f"Bearer {FAKE_KEY}"]


def test_a_remote_call_goes_through_the_named_proxy_only(env_proxy, named_proxy):
    summarizer = summarizer_for(f"http://{REMOTE}/v1", allow_remote=True, proxy=named_proxy.url)
    with pytest.raises(CallError):          # the fake proxy answers 502
        summarizer.call("家族の予定の話")
    embedder = OpenAIEmbedder("e5-passage", base_url=f"http://{REMOTE}/v1", allow_remote=True, timeout_s=3,
                              max_retries=0, proxy=named_proxy.url)
    with pytest.raises(PmragError):
        embedder.embed(["夕飯"], "passage")

    assert named_proxy.request_lines() == [f"POST http://{REMOTE}/v1/responses HTTP/1.1",
                                           f"POST http://{REMOTE}/v1/embeddings HTTP/1.1"]
    assert env_proxy.heads == []


def test_an_https_remote_call_tunnels_through_the_named_proxy_without_showing_it_the_key(env_proxy, named_proxy):
    summarizer = summarizer_for(f"https://{REMOTE}/v1", allow_remote=True, proxy=named_proxy.url)
    with pytest.raises(CallError):
        summarizer.call("家族の予定の話")

    assert named_proxy.request_lines() == [f"CONNECT {REMOTE}:443 HTTP/1.1"]
    assert FAKE_KEY.encode() not in b"".join(named_proxy.heads)
    assert env_proxy.heads == []


def test_a_remote_call_without_a_named_proxy_ignores_the_environments(env_proxy):
    summarizer = summarizer_for(f"http://{REMOTE}/v1", allow_remote=True)
    with pytest.raises(CallError, match="Connection error"):
        summarizer.call("家族の予定の話")
    embedder = OpenAIEmbedder("e5-passage", base_url=f"http://{REMOTE}/v1", allow_remote=True, timeout_s=3,
                              max_retries=0)
    with pytest.raises(PmragError, match="Connection error"):
        embedder.embed(["夕飯"], "passage")

    assert env_proxy.heads == []


def test_a_loopback_server_cannot_redirect_a_call_off_the_machine(env_proxy):
    server = LoopbackHTTP(redirect=f"http://{REMOTE}/v1/responses")
    try:
        with pytest.raises(RemoteNotAllowed, match=REMOTE):
            summarizer_for(server.base_url).call("家族の予定の話")
    finally:
        server.stop()
    assert [path for path, _ in server.requests] == ["/v1/responses"]
    assert env_proxy.heads == []


# ------------------------------------------------------------------------------------- notebooks

def _searchable(notebook: dict) -> str:
    """The notebook as JSON without image data (base64 could contain a short name by chance)."""
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            for mime in [m for m in output.get("data", {}) if m.startswith("image/")]:
                del output["data"][mime]
    return json.dumps(notebook, ensure_ascii=False)


@pytest.mark.integration
def test_an_executed_notebook_keeps_no_widget_state_and_no_message_text(tmp_path):
    from pmrag.study.notebooks import execute_notebook

    study = make_tiny_study(tmp_path, "bootstrap: {n_resamples: 100}\nhybrid: {beta_step: 0.25}\n"
                                      f"notebooks_dir: {REPO / 'notebooks'}\n")
    study.build()
    messages = study.messages()
    texts = {t for t in messages["text"] if isinstance(t, str) and len(t) >= 4}
    senders = {s for s in messages["sender"] if isinstance(s, str) and len(s) >= 3}
    assert len(texts) >= 5 and senders
    notebook = REPO / "notebooks" / "06_failure_analysis.ipynb"
    target = study.run_dir / "notebooks" / notebook.name

    result = execute_notebook(notebook, target, tmp_path / "p.yaml")

    assert "error" not in result, result
    executed = json.loads(target.read_text(encoding="utf-8"))
    assert "widgets" not in executed["metadata"]
    assert any("application/vnd.jupyter.widget-view+json" in output.get("data", {})   # the inspector was shown
               for cell in executed["cells"] for output in cell.get("outputs", []))
    metadata = json.dumps(executed["metadata"], ensure_ascii=False)
    assert [t for t in texts | senders if t in metadata] == []
    assert [t for t in texts if t in _searchable(executed)] == []


def test_widget_state_already_in_a_notebook_is_removed(tmp_path):
    from pmrag.study.notebooks import drop_widget_state

    path = tmp_path / "saved.ipynb"
    node = nbformat.v4.new_notebook()
    node.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"m": {"value": "秘密の話"}}}}
    nbformat.write(node, path)
    drop_widget_state(path)
    assert "widgets" not in nbformat.read(path, as_version=4).metadata


KERNEL_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from pmrag.study.notebooks import execute_notebook

    root = Path(sys.argv[1])
    results = {}
    for name, kernel in (("ok", "python3"), ("ok_nocurve", "pmrag-nocurve"), ("fail", "python3")):
        notebook = root / ("fail.ipynb" if name == "fail" else "ok.ipynb")
        results[name] = execute_notebook(notebook, root / "out" / f"{name}.ipynb", root / "p.yaml", kernel_name=kernel)
    try:
        execute_notebook(root / "ok.ipynb", root / "out" / "broken.ipynb", root / "p.yaml", kernel_name="pmrag-broken")
    except Exception as exc:
        results["broken"] = type(exc).__name__
    print(json.dumps(results))
""")


def _kernelspec(folder: Path, name: str, argv: list[str], metadata: dict) -> None:
    (folder / "kernels" / name).mkdir(parents=True)
    spec = {"argv": argv, "display_name": name, "language": "python", "metadata": metadata}
    (folder / "kernels" / name / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")


def _notebook(path: Path, *sources: str) -> None:
    node = nbformat.v4.new_notebook()
    node.cells = [nbformat.v4.new_code_cell("params_path = ''", metadata={"tags": ["parameters"]}),
                  *(nbformat.v4.new_code_cell(source) for source in sources)]
    node.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(node, path)


@pytest.mark.integration
def test_executing_a_notebook_keeps_the_kernels_noise_off_stderr_but_not_its_errors(tmp_path):
    """Three kernels: the python3 one (CurveZMQ-encrypted, so ipykernel has nothing to warn about), one whose
    kernelspec does not declare encryption (ipykernel 7 warns; the warning is filtered out of its captured
    stderr) and one that fails to start (its stderr still reaches ours).  A failing cell is still reported."""
    _notebook(tmp_path / "ok.ipynb", "print(1 + 1)")
    _notebook(tmp_path / "fail.ipynb", "raise ValueError('cell failed on purpose')")
    jupyter = tmp_path / "jupyter"
    _kernelspec(jupyter, "pmrag-nocurve", [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], {})
    _kernelspec(jupyter, "pmrag-broken", [sys.executable, "-c", "import sys; sys.exit('kernel could not start: "
                                                                  "pmrag-broken on purpose')"], {})
    env = {**os.environ, "JUPYTER_PATH": str(jupyter)}

    done = subprocess.run([sys.executable, "-c", KERNEL_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=120)

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in results["ok"] and "error" not in results["ok_nocurve"]
    assert results["fail"]["error"]["ename"] == "ValueError"
    assert results["fail"]["error"]["evalue"] == "cell failed on purpose"
    assert results["broken"] == "RuntimeError"
    assert "without encryption" not in done.stderr
    assert "KeyboardInterrupt" not in done.stderr
    assert "kernel could not start: pmrag-broken on purpose" in done.stderr
    executed = nbformat.read(tmp_path / "out" / "ok_nocurve.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "2\n"


def test_kernel_stderr_filter_drops_only_the_known_noise():
    from pmrag.study.notebooks import kernel_stderr_without_noise

    noise_and_errors = (
        "[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication ...\n"
        "Traceback (most recent call last):\n"
        '  File "/x/ipykernel/kernelbase.py", line 1, in shutdown\n'
        "    time.sleep(0.1)\n"
        "KeyboardInterrupt\n"
        "KeyboardInterrupt\n"
        "real warning: disk almost full\n"
        "Traceback (most recent call last):\n"
        '  File "/x/kernel.py", line 2, in start\n'
        "MemoryError: out of memory\n"
    )
    assert kernel_stderr_without_noise(noise_and_errors) == (
        "real warning: disk almost full\n"
        "Traceback (most recent call last):\n"
        '  File "/x/kernel.py", line 2, in start\n'
        "MemoryError: out of memory\n"
    )


# --------------------------------------------------------------------------------------- redaction

ECHO_KEY = "sk-echo-Zq8Xv2Lm9Pw4/Rt6Ny1Kb3Hd5Jf7Gc0Ua"        # a "/" to escape, as base64-ish keys hold


@pytest.mark.parametrize("spelled", [
    ECHO_KEY,                                                              # as it is
    "".join(f"%{b:02X}" for b in ECHO_KEY.encode()),                      # percent-encoded, every character
    "".join(f"%{b:02x}" for b in ECHO_KEY.encode()),                      # ... lower-case hex
    ECHO_KEY.replace("/", "%2F"),                                          # urllib.parse.quote's
    "".join(f"\\u{ord(c):04x}" for c in ECHO_KEY),                         # JSON \u escapes
    ECHO_KEY.replace("/", "\\/"),                                          # JSON's escaped solidus
    ECHO_KEY[:10] + "\n  " + ECHO_KEY[10:30] + "\t" + ECHO_KEY[30:],      # cut by whitespace
    ECHO_KEY[:10] + "\\n" + ECHO_KEY[10:],                                 # cut by an escaped line break
    ECHO_KEY[:10] + "%0A" + ECHO_KEY[10:],                                 # ... escaped for a URL
    "\u200b".join(ECHO_KEY),                                               # zero-width spaces between all
    ECHO_KEY[:-5],                                                         # a reply cut short in the key
    ECHO_KEY[7:25],                                                        # any 16 or more of its characters
])
def test_a_secret_is_redacted_in_every_spelling(spelled, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ECHO_KEY)
    redacted = privacy.redact(f"before {spelled} after")
    assert redacted == "before [REDACTED] after"
    assert privacy.redact(redacted) == redacted                            # idempotent


def test_a_secret_the_caller_names_is_redacted_without_the_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert privacy.redact(f"x{ECHO_KEY}y") == f"x{ECHO_KEY}y"
    assert privacy.redact(f"x{ECHO_KEY}y", [ECHO_KEY]) == "x[REDACTED]y"
    assert privacy.secrets([ECHO_KEY, ECHO_KEY, "short"]) == (ECHO_KEY,)   # once; a placeholder is no secret


def test_a_key_shorter_than_a_secret_is_a_placeholder_and_stays(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")                              # what local servers are given
    assert privacy.secrets() == ()
    assert privacy.redact("the next example") == "the next example"


@pytest.mark.parametrize("text, expected", [
    ("Authorization: Bearer abc", "Authorization: [REDACTED]"),
    ("authorization=Basic dXNlcjpwYXNz; next", "authorization=[REDACTED]; next"),
    ("Proxy-Authorization: Token t0k3n", "Proxy-Authorization: [REDACTED]"),
    ('{"Authorization": "Bearer sk-1", "a": 1}', '{"Authorization": "[REDACTED]", "a": 1}'),
    ("{'x-api-key': 'k1', 'n': 2}", "{'x-api-key': '[REDACTED]', 'n': 2}"),
    ("api-key: abc | rest", "api-key: [REDACTED] | rest"),
    ("https://h/v1?api_key=abc&x=1", "https://h/v1?api_key=[REDACTED]&x=1"),
    ('headers {\\"authorization\\": \\"Bearer zz\\"}', 'headers {\\"authorization\\": \\"[REDACTED]\\"}'),
    ("sent Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig to it", "sent Bearer [REDACTED] to it"),
])
def test_a_credential_header_value_is_redacted_whatever_the_key(text, expected, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert privacy.redact(text) == expected
    assert privacy.redact(expected) == expected


@pytest.mark.parametrize("text", [
    "the bearer of good news", "Bearer responsibilities", "a basic idea", "the authorization was granted",
    "山田: 明日の API の話、鍵は後で送るね", "api keys are long", "",
])
def test_ordinary_text_is_left_as_it_is(text, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ECHO_KEY)
    assert privacy.redact(text) == text
    assert privacy.redact(None) is None


def test_redact_value_reaches_every_string_of_a_nested_value(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ECHO_KEY)
    value = {"url": f"http://h/{ECHO_KEY}", ECHO_KEY: [1, (f"a {ECHO_KEY}", None)], "n": 2.5}
    assert privacy.redact_value(value) == {"url": "http://h/[REDACTED]",
                                           "[REDACTED]": [1, ("a [REDACTED]", None)], "n": 2.5}
