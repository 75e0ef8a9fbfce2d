"""A second process for a study's retrieval stages: it ranks some retrievers while the building process ranks the
others, so that both cores work through the study's longest run of independent stages.

The ``runs:<retriever>`` stages that read only what comes before them (the chunk table, the questions, the
representations and vectors; not another retriever's rankings, as a wrapping retriever does) may be computed in
any order, by any process: each is stored in the run folder's cache and store, where the building process then
loads it like any cached stage.
The building process claims them front to back as its loop reaches them, the helper back to front, one at a time
(:class:`Claims`), until they meet; the building process waits only for a stage the helper has claimed.  A stage
the helper did not finish (it failed, or was stopped) is computed by the building process, which then reports
its error as it would have.  Same params, same results: a stage's result does not depend on who computed it.

Only for a study large enough for a second process to pay for its start (importing pmrag and loading the stages'
inputs again, ~3 s) and small enough for both to hold those inputs at once: :data:`HELPER_MESSAGES`.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from functools import partial

from pmrag.core.parallel import ignore_interrupts, process_context, worker_processes

HELPER_MESSAGES = (100_000, 1_000_000)
"""A study of this many messages (at least, at most) gets a helper.  Below: the demo's retrieval stages take ~2 s
in all, less than the helper's start.  Above: each process holds the representations and an index at once, and
at 10× the paper's scale one of them alone made most of the study's peak."""

FREE, BUILDER, HELPER = 0, 1, 2
POLL_S = 0.05   # how often the building loop looks for the stage it waits for


def helper_stages(computed: Sequence[str], position: int, recorded, needs) -> list[str]:
    """The stages a helper may take when the building loop is at ``computed[position]``: when that is the first
    ``runs:<retriever>`` stage, it and the later ones that have no current record (``recorded(name)`` false) and
    read no stage from ``position`` on (``needs(name)``: the names of the stages it reads)."""
    if not computed[position].startswith("runs:") or any(name.startswith("runs:") for name in computed[:position]):
        return []
    later = set(computed[position:])
    return [name for name in computed[position:] if name.startswith("runs:") and not recorded(name)
            and not later.intersection(needs(name))]


def _recorded(engine, name: str) -> bool:
    """Whether ``name`` has a complete record under its current key (its result is not loaded to tell)."""
    record = engine.record(name)
    return record is not None and bool(record.get("complete")) and record["key"] == engine.key(name)


class Claims:
    """Who computes each of ``names``: claimed one at a time under a lock shared by the two processes."""

    def __init__(self, names: Sequence[str], context):
        self.names = list(names)
        self.owner = context.Array("b", len(self.names))   # FREE until claimed; its own lock

    def claim(self, name: str, who: int) -> int:
        """Claim ``name`` for ``who`` when free; the owner it has now."""
        at = self.names.index(name)
        with self.owner.get_lock():
            if self.owner[at] == FREE:
                self.owner[at] = who
            return self.owner[at]


class StageHelper:
    """The helper process of one building loop (:meth:`start`); :meth:`wait_for` before each stage, :meth:`stop`
    at the end (also on an error: the helper is ended, what it stored stays)."""

    def __init__(self, params, names: Sequence[str]):
        context = process_context()
        self.claims = Claims(names, context)
        self.done = context.SimpleQueue()
        self.finished: set[str] = set()
        self.process = context.Process(target=_help, args=(params, self.claims, self.done), daemon=True)
        self.process.start()

    @classmethod
    def start(cls, study, position: int, messages: int) -> StageHelper | None:
        """A helper for the stages :func:`helper_stages` gives, or None (one or none to share, a study outside
        :data:`HELPER_MESSAGES`, or worker processes switched off: :func:`~pmrag.core.parallel.in_this_process`)."""
        low, high = HELPER_MESSAGES
        if not low <= messages <= high or worker_processes(1) < 1 or (os.cpu_count() or 1) < 2:
            return None
        names = helper_stages(study.computed_stages, position, partial(_recorded, study.engine),
                              lambda name: [str(need) for need in study.engine.stage(name).needs])
        return cls(study.params, names) if len(names) > 1 else None

    def wait_for(self, name: str) -> None:
        """Before the building loop asks for ``name``: claim it, or, when the helper has, wait until the helper
        has stored it or ended (then the loop computes it, as for a stage the helper never had)."""
        if name not in self.claims.names or self.claims.claim(name, BUILDER) == BUILDER:
            return
        while name not in self.finished:
            if not self.done.empty():
                self.finished.add(self.done.get())
            elif self.process.is_alive():
                self.process.join(POLL_S)
            elif self.done.empty():   # ended without it
                return

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()


def _help(params, claims: Claims, done: multiprocessing.SimpleQueue) -> None:
    """The helper process: claim the stages back to front and compute each, until one is the building loop's."""
    ignore_interrupts()
    from pmrag.study.facade import Study

    study = Study(params, claim=False)
    for name in reversed(claims.names):
        if claims.claim(name, HELPER) != HELPER:
            return
        try:
            study.engine.get(name, retry=True)
        except Exception:   # noqa: BLE001 - the building loop computes this stage again and reports the error
            return
        study.engine.memo.pop(study.engine.stage(name).key, None)   # the loop loads it from the cache
        done.put(name)
