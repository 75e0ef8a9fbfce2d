"""Errors raised for bad user input: each names the file, the line or key, and what was expected."""

from __future__ import annotations


class PmragError(Exception):
    """Base class for errors the command line reports as one line, without a traceback."""

    exit_code = 2


class InputError(PmragError):
    """Malformed input data: ``path``, ``location`` (``line 12`` / ``key '2024-04-10'``) and a reason."""

    def __init__(self, path, location: str | None, reason: str):
        self.path = str(path)
        self.location = location
        self.reason = reason
        where = f"{self.path}, {location}" if location else self.path
        super().__init__(f"{where}: {reason}")


class ParamsError(PmragError):
    """An invalid params file: names the key (dotted) or the path that is wrong."""
