"""A scripted, local stand-in for the OpenAI Responses API, spoken over real HTTP on 127.0.0.1.

Enough of ``POST /v1/responses`` for the official ``openai`` client to parse a reply into a
``openai.types.responses.Response``.  Each request takes the next scripted :class:`Reply` (once the script is
exhausted: the route's reply for the request, else the default reply) and is recorded, headers and JSON body, so
tests can check exactly what the client sent.

A hostile server echoes the credentials it was sent: in an ok reply's text and model, and in an error's message,
the placeholders of :func:`echo` are replaced by the request's ``Authorization`` header in several forms.

``latency_s=(low, high)`` waits a seeded random time before each answer (requests answered at once are counted:
``most_in_flight``); a scripted error may carry headers (``Reply.error(429, headers={"Retry-After": "1"})``).

``POST /v1/embeddings`` answers like the Embeddings API with ``server.embedding(text)`` for each input text
(default :func:`default_embedding`, a unit vector of 8 numbers); a test replaces it to send what a broken
server would (NaN is written as JSON's common ``NaN`` extension, which the client's parser reads).

    with ResponsesServer() as server:
        server.script(Reply.status(429), Reply.ok("要約"))
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``kind`` is ok | status | hang | malformed."""

    kind: str = "ok"
    text: str | None = None           # ok: the output text (default: derived from the input); echo placeholders
    status: int = 200                 # status: the HTTP status code
    message: str = "scripted error"   # status: the error message; echo placeholders ("{auth}": the header)
    seconds: float = 0.0              # hang: how long to wait before answering (ok) — past the client's timeout
    model: str = RESPONSE_MODEL       # ok: the model the response reports; echo placeholders
    headers: tuple[tuple[str, str], ...] = ()   # status: extra response headers (Retry-After, ...)

    @classmethod
    def ok(cls, text: str | None = None, model: str = RESPONSE_MODEL) -> "Reply":
        return cls("ok", text=text, model=model)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", headers: dict[str, str] | None = None) -> "Reply":
        return cls("status", status=status, message=message, headers=tuple((headers or {}).items()))

    @classmethod
    def hang(cls, seconds: float) -> "Reply":
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed(cls) -> "Reply":
        return cls("malformed")


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict | None
    raw: bytes = field(repr=False)


def echo(template: str, authorization: str) -> str:
    """``template`` with the request's credentials echoed: ``{auth}`` the whole ``Authorization`` header,
    ``{key}`` its token (after ``Bearer``), ``{key_url}`` the token percent-encoded character by character,
    ``{key_json}`` as JSON ``\\uXXXX`` escapes, ``{key_split}`` cut in two by a newline and a space,
    ``{key_split_json}`` cut by a JSON-escaped newline, ``{key_cut}`` without its last five characters (a reply
    cut short)."""
    key = authorization.removeprefix("Bearer ").strip()
    half = len(key) // 2
    forms = {
        "{auth}": authorization, "{key_url}": "".join(f"%{b:02X}" for b in key.encode("utf-8")),
        "{key_json}": "".join(f"\\u{ord(c):04x}" for c in key), "{key_split_json}": f"{key[:half]}\\n{key[half:]}",
        "{key_split}": f"{key[:half]}\n {key[half:]}", "{key_cut}": key[:-5], "{key}": key,
    }
    for placeholder, value in forms.items():
        template = template.replace(placeholder, value)
    return template


def default_text(input_text: str) -> str:
    """A deterministic fake summary of a request's input."""
    return f"要約: {len(input_text)}文字の入力。" + input_text[-40:].replace("\n", " ")


def default_embedding(text: str, dim: int = 8) -> list[float]:
    """A deterministic unit vector for ``text`` (from its SHA-256)."""
    import hashlib
    import math

    raw = [b - 127.5 for b in hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:dim]]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def embeddings_json(vectors: list, model: str) -> dict:
    return {"object": "list", "model": model, "usage": {"prompt_tokens": len(vectors), "total_tokens": len(vectors)},
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]}


def response_json(text: str, model: str, input_text: str) -> dict:
    n_in, n_out = max(1, len(input_text) // 2), max(1, len(text))
    return {
        "id": "resp_test", "object": "response", "created_at": 0, "completed_at": 0, "model": model,
        "status": "completed", "error": None, "incomplete_details": None, "instructions": None,
        "max_output_tokens": 700, "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0,
        "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "output": [{
            "type": "message", "id": "msg_test", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }],
        "usage": {
            "input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


class ResponsesServer:
    """Threaded HTTP server on an ephemeral loopback port; use as a context manager (always shut down)."""

    def __init__(self, delay_s: float = 0.0, default: Reply = Reply.ok(), route=None,
                 latency_s: tuple[float, float] | None = None, seed: int = 0):
        self.delay_s = delay_s            # added before every answer (slows a run down for the kill test)
        self.latency_s = latency_s        # (low, high): a random wait before every answer, seeded
        self._random = random.Random(seed)
        self.in_flight = self.most_in_flight = 0   # requests being answered now, and the most at once
        self.default = default
        self.route = route                # request JSON body -> Reply or None, asked once the script is exhausted
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._embedding_script: deque[Reply] = deque()
        self.embedding = default_embedding   # text -> the vector /embeddings answers for it
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def script_embeddings(self, *refusals: Reply) -> None:
        """Errors (``Reply.error``) the next ``/embeddings`` requests get, one each, before the vectors again."""
        with self._lock:
            self._embedding_script.extend(refusals)

    def response_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/responses")]

    def embedding_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    def start(self) -> "ResponsesServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()              # wakes hanging handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "ResponsesServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _next(self, body: dict | None) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        routed = self.route(body or {}) if self.route else None
        return self.default if routed is None else routed

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True   # headers and body leave at once: no 40 ms delayed-ACK stall per answer

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: bytes, content_type: str = "application/json",
                      headers: tuple[tuple[str, str], ...] = ()) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def do_POST(self):
                with server._lock:
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                    wait = server._random.uniform(*server.latency_s) if server.latency_s else 0.0
                try:
                    if wait:
                        time.sleep(wait)
                    self._answer()
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(Recorded(self.path, dict(self.headers.items()), body, raw))
                if self.path.endswith("/embeddings") and server._embedding_script:
                    with server._lock:
                        refusal = server._embedding_script.popleft() if server._embedding_script else None
                    if refusal is not None:
                        error = {"message": refusal.message, "type": "server_error", "param": None, "code": None}
                        self._send(refusal.status, json.dumps({"error": error}).encode(), headers=refusal.headers)
                        return
                if self.path.endswith("/embeddings"):
                    texts = (body or {}).get("input") or []
                    texts = [texts] if isinstance(texts, str) else texts
                    vectors = [server.embedding(text) for text in texts]
                    self._send(200, json.dumps(embeddings_json(vectors, (body or {}).get("model", ""))).encode())
                    return
                if not self.path.endswith("/responses"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                reply = server._next(body)
                authorization = self.headers.get("Authorization", "")
                if server.delay_s and server._stopping.wait(server.delay_s):
                    return
                input_text = (body or {}).get("input") or ""
                if reply.kind == "hang":
                    if server._stopping.wait(reply.seconds):
                        return
                    reply = Reply.ok()
                if reply.kind == "ok":
                    text = echo(reply.text, authorization) if reply.text is not None else default_text(input_text)
                    model = echo(reply.model, authorization)
                    self._send(200, json.dumps(response_json(text, model, input_text)).encode())
                elif reply.kind == "status":
                    message = echo(reply.message, authorization)
                    error = {"message": message, "type": "server_error", "param": None, "code": None}
                    self._send(reply.status, json.dumps({"error": error}).encode(), headers=reply.headers)
                elif reply.kind == "malformed":
                    self._send(200, b'{"id": "resp_test", "object": "response", "output": [')
                else:
                    raise ValueError(f"unknown reply kind {reply.kind!r}")

        return Handler
