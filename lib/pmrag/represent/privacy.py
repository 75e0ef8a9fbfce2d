"""Private by default: chat histories leave the machine only when the params say ``allow_remote: true``.

A backend whose base URL is on the loopback interface (127.0.0.0/8, ::1, localhost) is local: nothing leaves
the machine, so it needs no permission.  Any other host is remote.  API keys come from the environment
only (``OPENAI_API_KEY``); :func:`redact` removes them from any text before it is stored or shown.
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
