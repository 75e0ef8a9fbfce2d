"""Freed memory goes back to the operating system (glibc's malloc_trim), measured in a fresh process."""

import subprocess
import sys

import pytest

from pmrag.core.memory import _malloc_trim

# 3,000 blocks of 100 kB (under glibc's mmap threshold, so on the heap), every tenth kept alive so that the heap's
# top cannot shrink on its own: what was freed stays resident until malloc_trim hands the free pages back.
FRAGMENTED = """
import numpy as np
from pmrag.core.memory import return_freed_memory

def rss_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

blocks = [np.ones(100_000 // 8) for _ in range(3_000)]
kept = blocks[::10]
del blocks
freed = rss_mb()
return_freed_memory()
print(freed, rss_mb())
"""


@pytest.mark.skipif(_malloc_trim() is None, reason="the C library has no malloc_trim (not glibc)")
def test_freed_heap_pages_are_returned_after_collection():
    result = subprocess.run([sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    before, after = map(int, result.stdout.split())
    assert before - after >= 150, (before, after)   # about 270 MB freed of the 300 MB allocated


# An exit handler registered before it (running after it, last-registered first) sees the heap frozen: the
# interpreter's collections at exit skip those objects.  Called twice: registered once.
AT_EXIT = """
import atexit, gc
from pmrag.core.memory import no_collection_at_exit

atexit.register(lambda: print(gc.get_freeze_count() > 0, flush=True))
before = atexit._ncallbacks()
no_collection_at_exit()
no_collection_at_exit()
print(atexit._ncallbacks() - before, flush=True)
atexit.register(lambda: print(gc.get_freeze_count(), flush=True))
"""


def test_the_heap_is_frozen_by_the_last_exit_handler_and_only_then():
    result = subprocess.run([sys.executable, "-c", AT_EXIT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "0", "True"]


def test_the_command_line_freezes_its_heap_at_exit():
    code = ("import atexit, gc\nfrom pmrag.cli import main\natexit.register(lambda: print(gc.get_freeze_count() > 0))\n"
            "main(['--help'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "True", result.stderr[-2000:]


def test_collection_paused_turns_the_collector_off_for_the_block_and_back_as_it_was():
    import gc

    from pmrag.core.memory import collection_paused

    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():   # nested: the inner block leaves it off for the outer
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError):   # an error in the block still turns it back on
        with collection_paused():
            raise KeyError("x")
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()   # it was off before: it stays off
    finally:
        gc.enable()


# Objects alive before the block are frozen inside it and back in the collector's care after it; a reference cycle
# made and dropped inside the block is collected inside it, one of older objects dropped inside it only after it.
# Where objects were frozen already (a forked kernel) the block leaves the count as it found it.
FROZEN = """
import gc, weakref
from pmrag.core.memory import older_objects_frozen

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

gc.collect()
old = cycle()
old_ref = weakref.ref(old)
with older_objects_frozen():
    inside = gc.get_freeze_count()
    new = cycle()
    new_ref = weakref.ref(new)
    del new, old
    gc.collect()
    new_collected, old_collected_inside = new_ref() is None, old_ref() is None
after = gc.get_freeze_count()
gc.collect()
old_collected_after = old_ref() is None
gc.freeze()
frozen = gc.get_freeze_count()
with older_objects_frozen():
    nested = gc.get_freeze_count()
print(inside > 0, new_collected, old_collected_inside, after, old_collected_after, nested == frozen,
      gc.get_freeze_count() == frozen)
"""


def test_objects_older_than_the_block_are_left_out_of_its_collections_and_collected_after_it():
    result = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True", "False", "0", "True", "True", "True"]
