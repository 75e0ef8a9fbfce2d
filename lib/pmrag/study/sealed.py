"""Stage results sealed by the user who computed them.

A stage's result is a pickle, and loading a pickle runs whatever code it names: a result planted in a run folder
(a colleague's copy, a shared drive, a worker's mount) would run its payload the moment ``pmrag study`` loaded
it.  So each result is written with an HMAC-SHA256 of its bytes under a secret key of this user's, kept outside
every run folder, and the bytes are unpickled only when the HMAC verifies.  A result sealed by someone else (or
altered, or written by a pmrag before sealing) is never unpickled: the stage is recomputed, with a warning.

The key is the file named by ``PMRAG_STAGE_KEY_FILE``, else ``$XDG_CONFIG_HOME/pmrag/stage.key`` (by default
``~/.config/pmrag/stage.key``): 32 random bytes made on first use, readable by this user only.  A study copied
or moved by the same user keeps loading (keys hold no location); to share computed results with someone you
trust, share this file with them through ``PMRAG_STAGE_KEY_FILE`` (they then trust every result you sealed).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
from functools import cache
from pathlib import Path
from typing import BinaryIO

from pmrag.core.errors import PmragError

MAGIC = b"pmrag-sealed-stage-v1\n"
KEY_ENV = "PMRAG_STAGE_KEY_FILE"
KEY_BYTES = 32


def key_file() -> Path:
    """Where this user's sealing key is (module docstring)."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "pmrag" / "stage.key"


@cache
def _secret(path: Path) -> bytes:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:   # made before, or by another process just now
            pass
        else:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(os.urandom(KEY_BYTES))
        secret = path.read_bytes()
    except OSError as exc:
        raise PmragError(f"{path}: the key that seals stage results cannot be read or made ({exc.strerror or exc}); "
                         f"set {KEY_ENV} to a file this user can write") from None
    if len(secret) < KEY_BYTES:
        raise PmragError(f"{path}: the key that seals stage results holds {len(secret)} bytes, fewer than "
                         f"{KEY_BYTES}; delete it to make a new one (results sealed with it are then recomputed)")
    return secret


def secret() -> bytes:
    """This user's sealing key (made on first use)."""
    return _secret(key_file())


def seal(payload: bytes) -> bytes:
    """``payload`` with its HMAC, as written to a run folder."""
    return MAGIC + _mac(payload).digest() + payload


def dump_sealed(value, handle: BinaryIO) -> None:
    """Pickle ``value`` into the open binary file ``handle`` as :func:`seal` would write its pickle, without the
    pickle's bytes held in memory: the pickler's writes go to the file and the HMAC as they come, and the tag is
    written last into the place kept for it.  (A result of millions of rows pickles to a GB or more; held, then
    copied behind the tag, that was twice its size on top of the result.)"""
    start = handle.tell()
    handle.write(MAGIC + bytes(TAG_BYTES))
    mac = _mac(b"")
    writer = _Tee(handle, mac)
    pickle.dump(value, writer, protocol=pickle.HIGHEST_PROTOCOL)
    handle.seek(start + len(MAGIC))
    handle.write(mac.digest())
    handle.seek(0, os.SEEK_END)


def unseal(data: bytes) -> memoryview | None:
    """The payload of ``data`` when this user's key sealed it (a view into ``data``, not a copy), else None (never
    inspected further)."""
    head = len(MAGIC) + TAG_BYTES
    if len(data) < head or not data.startswith(MAGIC):
        return None
    payload = memoryview(data)[head:]
    expected = _mac(payload).digest()
    return payload if hmac.compare_digest(data[len(MAGIC):head], expected) else None


TAG_BYTES = hashlib.sha256().digest_size


def _mac(payload) -> hmac.HMAC:
    """The HMAC of ``MAGIC + payload`` under this user's key (``payload`` is not copied to be joined to it)."""
    mac = hmac.new(secret(), MAGIC, hashlib.sha256)
    mac.update(payload)
    return mac


class _Tee:
    """A file object for :func:`pickle.dump` that writes to ``handle`` and feeds ``mac`` the same bytes."""

    def __init__(self, handle: BinaryIO, mac: hmac.HMAC):
        self.handle, self.mac = handle, mac

    def write(self, data) -> int:
        self.mac.update(data)
        return self.handle.write(data)


def sign(text: str) -> str:
    """This user's HMAC of ``text`` (hex): a stage record in the store is signed, so ``pmrag status`` tells a result
    computed elsewhere without reading it."""
    return hmac.new(secret(), text.encode("utf-8"), hashlib.sha256).hexdigest()


def signed(text: str, signature: object) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign(text), signature)
