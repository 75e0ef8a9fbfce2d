"""Giving freed memory back to the operating system."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim`` (None on other C libraries and systems)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):   # musl and other C libraries have no malloc_trim
        return None


def return_freed_memory() -> None:
    """Collect garbage, then ask the C allocator to hand its free pages back (``malloc_trim(0)`` on glibc).

    Python frees a DataFrame's arrays into the allocator's heap, which keeps most of them mapped: at the paper's
    scale a process that dropped every stage result still held about 550 MB, 255 MB after trimming.  Elsewhere
    only the garbage is collected."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Hand the C allocator's free pages back to the system (``malloc_trim(0)`` on glibc; nothing elsewhere).

    After a step that freed many arrays of up to a few tens of MB (glibc serves those from its heap once a larger
    one was freed) the pages stay resident, and the next step's large arrays, mapped afresh, come on top of them:
    counting a character-trigram index at 10× the paper's scale left 1.5 GB so, trimmed in milliseconds."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
