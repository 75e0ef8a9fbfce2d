"""Giving freed memory back to the operating system, and none of it collected at exit."""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache


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


@cache   # once per process
def no_collection_at_exit() -> None:
    """Let the interpreter's last cyclic collections, at exit, skip every object still alive then (``gc.freeze``
    as the last exit handler: call this first thing, exit handlers run last-registered first).

    At exit CPython collects the whole heap more than once while it tears the modules down: 8 s of a 17 s
    ``pmrag status`` on a slow 2-core machine, 0.9 s with this, for memory the operating system takes back anyway.
    What it skips is finalizers of objects in reference cycles, which CPython does not promise to run at exit
    either; pmrag closes its files, stores and pools where it opens them."""
    atexit.register(gc.freeze)


@contextmanager
def older_objects_frozen() -> Iterator[None]:
    """Every object alive when the block starts left out of the cyclic collections inside it (``gc.freeze``), and
    put back in the oldest generation after it (``gc.unfreeze``).

    :func:`return_freed_memory` collects after each stage that dropped results, and a full collection walks every
    container object of the process, the imported modules' included: 0.35 s each in a process that imported the
    study's libraries, eight times per build of even the smallest study, for results that were all made during the
    build.  Inside the block a collection walks those alone.  Where objects are frozen already (a kernel forked
    from the warm process, :mod:`pmrag.study.kernel_forks`) the block changes nothing: unfreezing would put back
    objects this block did not freeze.  What becomes garbage in a cycle of older objects inside the block is
    collected after it."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (back as it was after it).

    For a block that builds hundreds of thousands of objects and no reference cycle (a file's messages as records
    and rows): each young collection walks the objects made since the last, and every so often one walks them all,
    for nothing freed.  Garbage without cycles is freed by reference counting as always."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
