"""A Ctrl-C during a commit is raised after it (pmrag.core.interrupts)."""

import os
import signal
import threading
import time

import pytest

from pmrag.core.interrupts import deferred_interrupt


def test_a_ctrl_c_during_the_block_is_raised_when_it_ends():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)   # the signal is handled meanwhile, and held
            finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_is_raised_and_an_error_of_the_block_goes_on():
    with deferred_interrupt():
        pass
    with pytest.raises(ValueError):
        with deferred_interrupt():
            raise ValueError("the block's own")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_ctrl_c_stays_ignored_and_other_threads_run_the_block_as_it_is():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    thread_ran = []

    def in_thread():
        with deferred_interrupt():
            thread_ran.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert thread_ran == [signal.default_int_handler]


def test_a_ctrl_c_while_sigint_is_ignored_is_dropped_and_the_handler_comes_back():
    from pmrag.core.interrupts import sigint_ignored

    with sigint_ignored():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
