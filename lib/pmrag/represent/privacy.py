"""Private by default: chat histories leave the machine only when the params say ``allow_remote: true``.

A backend whose base URL is on the loopback interface (127.0.0.0/8, ::1, localhost) is local: nothing leaves
the machine, so it needs no permission.  Any other host is remote.  API keys come from the environment
only (``OPENAI_API_KEY``); :func:`redact` removes them from any text before it is stored or shown.

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

import ipaddress
import os
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


def redact(text: str | None) -> str | None:
    """``text`` with the API key from the environment (if any) replaced by ``[REDACTED]``."""
    key = os.environ.get("OPENAI_API_KEY")
    if text is None or not key:
        return text
    return text.replace(key, "[REDACTED]")
