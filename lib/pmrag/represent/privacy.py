"""Private by default: chat histories leave the machine only when the params say ``allow_remote: true``.

A backend whose base URL is on the loopback interface (127.0.0.0/8, ::1, localhost) is local: nothing leaves
the machine, so it needs no permission.  Any other host is remote.  API keys come from the environment
only (``OPENAI_API_KEY``); :func:`redact` removes them, and any credential a header carries, from any text
before it is stored or shown: error texts, and every model output, since a server may echo what it was sent
(the LLM step, :func:`pmrag.represent.llm.run_step`, redacts each reply before it is checked, stored or
returned).

Redaction (:func:`redact`) replaces with ``[REDACTED]``:

* **a secret** (the key from the environment, and any the caller names) written out whole, also percent-encoded
  (``%73%6B…``), JSON- or backslash-escaped (``\\u0073``, ``\\/``) character by character, and cut by
  whitespace, escaped line breaks (``\\n``, ``%0A``) or zero-width characters between any two characters;
* **a fragment** of a secret: any :data:`FRAGMENT_CHARS` consecutive characters of it (a reply cut short by
  ``max_output_tokens`` in the middle of an echoed key);
* **a header value**: what follows ``Authorization``, ``Proxy-Authorization``, ``api-key``, ``x-api-key`` or
  ``api_key`` and a ``:`` or ``=`` (quotes allowed around the name and the value, as in JSON or a Python
  dict), up to the next space, quote, comma, semicolon, ``&`` or brace (after a scheme: ``Bearer``, ``Basic``,
  ``Token``, ``Digest``, ``Negotiate``); and a token after ``Bearer``: :data:`MIN_BEARER_TOKEN_CHARS` or more
  token characters holding a digit (``bearer of good news`` stays).

Not caught: a secret spelled otherwise (reversed, case-changed, base64, HTML entities, or cut into pieces
shorter than :data:`FRAGMENT_CHARS` that are stored apart).  A value of ``OPENAI_API_KEY`` shorter than
:data:`MIN_SECRET_CHARS` is not a secret but a placeholder that local servers accept (``x``, ``EMPTY``):
redacting it would rewrite ordinary words of every summary.

Proxies: the HTTP clients of the model backends (:func:`http_client`) never read proxy settings from the
environment (``HTTP_PROXY``, ``http_proxy``, ``ALL_PROXY``, ``NO_PROXY``, ...): an environment proxy would
receive a "local" call's chat text and its ``Authorization`` header in plain HTTP without ``allow_remote``
ever being consulted.  The only proxy ever used is the one the params name (``proxy``), and only for a
remote server with ``allow_remote: true``; a loopback server is always reached directly.  A client made for
a loopback server also refuses any request to another host (a redirect), so a local server cannot forward
chat text off the machine.  ``trust_env=False`` also means ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` and
``.netrc`` are not read.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from pmrag.core.errors import PmragError

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_PLACEHOLDER_KEY = "not-needed"


class RemoteNotAllowed(PmragError):
    """A remote backend was requested without ``allow_remote: true``."""


def resolve_base_url(base_url: str | None) -> str:
    """The params value, else ``OPENAI_BASE_URL`` from the environment, else OpenAI's public endpoint."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL


def is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_remote_allowed(what: str, base_url: str, allow_remote: bool, setting: str = "allow_remote") -> None:
    """Refuse to send data to a non-loopback ``base_url`` unless ``allow_remote`` is true."""
    if allow_remote or is_loopback(base_url):
        return
    host = urlsplit(base_url).hostname or base_url
    raise RemoteNotAllowed(
        f"{what} would send chat text to {host}, which is not this machine; set '{setting}: true' in the params "
        f"file to allow it, or use a local backend"
    )


def http_client(base_url: str, *, allow_remote: bool, proxy: str | None, timeout_s: float):
    """The ``httpx`` client an ``openai.OpenAI`` client for ``base_url`` must use (its ``http_client=``).

    The SDK's own defaults (connection limits, following redirects, ``timeout_s``), but ``trust_env=False``
    so that no proxy (or other setting) is taken from the environment.  ``proxy`` is used only for a remote
    ``base_url`` that ``allow_remote`` permits; for a loopback ``base_url`` it is ignored and every request
    must stay on this machine (:func:`_stay_on_loopback`).
    """
    import openai

    local = is_loopback(base_url)
    hooks = {} if allow_remote else {"request": [_stay_on_loopback]}
    return openai.DefaultHttpxClient(trust_env=False, proxy=None if local or not allow_remote else proxy,
                                     timeout=timeout_s, event_hooks=hooks)


def _stay_on_loopback(request) -> None:
    """Request hook of a client without permission to go remote: refuse any request off this machine (e.g. a
    local server redirecting elsewhere) before it is sent."""
    url = str(request.url)
    if not is_loopback(url):
        host = urlsplit(url).hostname or url
        raise RemoteNotAllowed(f"a request to {host}, which is not this machine, was refused (a redirect from a "
                               f"local server?); set 'allow_remote: true' in the params file to allow it")


def api_key_for(base_url: str) -> str:
    """``OPENAI_API_KEY`` from the environment; a placeholder for a loopback server that needs none."""
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if is_loopback(base_url):
        return LOCAL_PLACEHOLDER_KEY
    raise PmragError(f"OPENAI_API_KEY is not set in the environment (needed for {base_url}); keys are never read from params")


REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
FRAGMENT_CHARS = 16
MIN_BEARER_TOKEN_CHARS = 16

_SEPARATOR = r"(?:\s|[\u200b-\u200d\u2060\ufeff]|\\[nrt]|%(?i:0[9ad]|20)|\\u(?i:00(?:0[9ad]|20)))*"
"""What may stand between two characters of an echoed secret: whitespace, zero-width characters, a line break
escaped for JSON or a URL."""
_HEADER = re.compile(
    r"(?i)(?<![\w-])((?:proxy-)?authorization|(?:x-)?api[-_]?key)"   # the header's name
    r"([\"'\\]*\s*[:=]\s*[\"'\\]*)"                               # : or =, quotes around it
    r"((?:(?:bearer|basic|token|digest|negotiate)\s+)?[^\s\"'\\,;&{}]+)")   # [scheme] credentials
_BEARER = re.compile(r"(?i)(?<![\w-])(bearer\s+)"
                     rf"((?=[A-Za-z0-9\-._~+/]{{{MIN_BEARER_TOKEN_CHARS}}})[A-Za-z0-9\-._~+/]*\d[A-Za-z0-9\-._~+/]*=*)")


def secrets(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The secrets :func:`redact` removes: ``OPENAI_API_KEY`` from the environment and ``extra``, each of at least
    :data:`MIN_SECRET_CHARS` characters, once, the longest first."""
    found = [os.environ.get("OPENAI_API_KEY") or "", *extra]
    return tuple(sorted({s for s in found if s and len(s) >= MIN_SECRET_CHARS}, key=lambda s: (-len(s), s)))


@functools.lru_cache(maxsize=16)
def _spelled(secret: str) -> re.Pattern:
    """``secret`` in any of its spellings (module docstring): each character itself, percent-encoded (UTF-8
    bytes), ``\\uXXXX`` or backslash-escaped, with :data:`_SEPARATOR` between characters."""
    def character(c: str) -> str:
        forms = [re.escape(c), "".join(f"%(?i:{b:02x})" for b in c.encode("utf-8")), rf"\\u(?i:{ord(c):04x})"]
        if not c.isalnum():
            forms.append(r"\\" + re.escape(c))
        return "(?:" + "|".join(forms) + ")"

    return re.compile(_SEPARATOR.join(character(c) for c in secret))


def _without_fragments(text: str, secret: str) -> str:
    """``text`` with every run of :data:`FRAGMENT_CHARS` or more consecutive characters of ``secret`` replaced."""
    if len(secret) < FRAGMENT_CHARS or len(text) < FRAGMENT_CHARS:
        return text
    # Every run of FRAGMENT_CHARS characters of the secret holds one of these; most texts hold none (fast path).
    step = FRAGMENT_CHARS // 2
    if not any(secret[j:j + step] in text for j in range(0, len(secret) - step + 1, step)):
        return text
    grams = {secret[i:i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1)}
    spans: list[list[int]] = []
    for start in range(len(text) - FRAGMENT_CHARS + 1):
        if text[start:start + FRAGMENT_CHARS] in grams:
            if spans and start <= spans[-1][1]:
                spans[-1][1] = start + FRAGMENT_CHARS
            else:
                spans.append([start, start + FRAGMENT_CHARS])
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], REDACTED]
        last = end
    return "".join(pieces) + text[last:]


def redact(text: str | None, extra_secrets: Iterable[str] = ()) -> str | None:
    """``text`` without secrets or credential header values (module docstring), each replaced by ``[REDACTED]``.

    Parameters
    ----------
    text : any text that is about to be stored, returned or shown (``None`` passes through).
    extra_secrets : secrets besides ``OPENAI_API_KEY`` of the environment (:func:`secrets`).

    Idempotent: redacting a redacted text changes nothing.
    """
    if not text:
        return text
    for secret in secrets(extra_secrets):
        text = _spelled(secret).sub(REDACTED, text)
        text = _without_fragments(text, secret)
    text = _HEADER.sub(lambda m: m[1] + m[2] + REDACTED, text)
    return _BEARER.sub(lambda m: m[1] + REDACTED, text)


def redact_value(value, extra_secrets: Iterable[str] = ()):
    """``value`` with :func:`redact` applied to every string in it, through dicts (keys and values), lists and
    tuples; anything else is returned as it is."""
    if isinstance(value, str):
        return redact(value, extra_secrets)
    if isinstance(value, dict):
        return {redact_value(k, extra_secrets): redact_value(v, extra_secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v, extra_secrets) for v in value)
    return value
