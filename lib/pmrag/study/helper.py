"""A second process for a study's stages: while the building loop computes the stages in order, the helper computes
later ones whose inputs are ready, so that both cores work where the stage graph allows it.

A stage's result does not depend on which process computes it: each is stored in the run folder's cache and store,
where the building loop then loads it like any cached stage.  The helper takes a stage when every stage it reads
is one the loop has passed (it computes the stages in order, so those are done, retries included) or one the
helper has stored; it takes the latest such stage first (the loop reaches it last), and claims it under a lock the
two processes share (:class:`Claims`): the loop claims each stage as it reaches it, and waits only for one the
helper has claimed.  A stage the helper did not finish (it failed, or was stopped) is computed by the loop, which
then reports its error as it would have.  At the paper's scale it ranks retrievers beside the loop's and works out
the speakers and private strings while the loop summarises.

Never for the ingest and the chunks (they start worker processes of their own) nor for a stage that calls a model
(:data:`~pmrag.study.costs.MODEL_STAGES`: its budget, rate and progress are the loop's).  Only for a study large
enough for a second process to pay for its start (importing pmrag and loading the stages' inputs again, ~3 s) and
small enough for both to hold their inputs at once: :data:`HELPER_MESSAGES`.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence

from pmrag.core.interrupts import ignore_interrupts
from pmrag.core.parallel import process_context, worker_processes

HELPER_MESSAGES = (100_000, 1_000_000)
"""A study of this many messages (at least, at most) gets a helper.  Below: the demo's stages that a helper could
take beside the loop take ~2 s in all, less than the helper's start.  Above: each process holds the representations
and an index at once, and at 10× the paper's scale one of them alone made most of the study's peak."""

LOOP_ONLY = ("ingest", "chunks")
FREE, BUILDER, HELPER = 0, 1, 2
POLL_S = 0.05   # how often a process looks for the stage it waits for


class Plan:
    """Which stages a helper may take (:attr:`names`, in the loop's order ``computed``: neither the loop's own nor a
    model stage nor one ``cached`` already), the position of each there (:attr:`at`) and the positions of the stages
    each reads (:attr:`reads`)."""

    def __init__(self, computed: Sequence[str], needs: Callable[[str], Sequence[str]], cached: Callable[[str], bool],
                 model_stages: Sequence[str]):
        order = {name: at for at, name in enumerate(computed)}
        self.computed = list(computed)
        self.names = [name for name in computed if name.split(":")[0] not in (*LOOP_ONLY, *model_stages)
                      and not cached(name)]
        self.at = [order[name] for name in self.names]
        self.reads = [[order[need] for need in needs(name) if need in order] for name in self.names]

    def ready(self, loop_at: int, done_here: set[int], free: Callable[[int], bool]) -> list[int]:
        """Indices into :attr:`names` of the free stages (``free(i)``) after ``loop_at`` whose inputs are all done
        (before ``loop_at``: the loop has passed them; or at a position in ``done_here``: the helper stored them),
        latest first."""
        return [i for i in reversed(range(len(self.names))) if self.at[i] > loop_at and free(i)
                and all(read < loop_at or read in done_here for read in self.reads[i])]

    def start_at(self) -> int | None:
        """The first position of the loop at which a later stage is ready: where a helper starts, or None."""
        for position in range(max(self.at, default=-1) + 1):
            if self.ready(position, set(), lambda i: True):
                return position
        return None


def study_plan(study) -> Plan:
    from pmrag.study.costs import MODEL_STAGES

    keys: dict = {}   # each stage's key worked out once, shared by the statuses (pmrag status does the same)
    return Plan(study.computed_stages, lambda name: [str(need) for need in study.engine.stage(name).needs],
                lambda name: study.engine.status_of(name, keys).state == "cached", MODEL_STAGES)


class Claims:
    """Who computes each of ``names``, claimed one at a time under a lock the two processes share, and the position
    the loop has reached (:attr:`loop_at`)."""

    def __init__(self, names: Sequence[str], context):
        self.names = list(names)
        self.owner = context.Array("b", len(self.names))   # FREE until claimed; its own lock
        self.loop_at = context.Value("i", 0)

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

    def __init__(self, params, plan: Plan, computed: Sequence[str]):
        context = process_context()
        self.computed = list(computed)
        self.claims = Claims(plan.names, context)
        self.done = context.SimpleQueue()
        self.finished: set[str] = set()
        self.process = context.Process(target=_help, args=(params, plan, self.claims, self.done), daemon=True)
        # started beside the loop, which goes on meanwhile: a process started by the fork server waits for the
        # server's own start and imports the first time (1.1-1.2 s at the paper's scale, measured in the loop)
        self.starting = threading.Thread(target=self.process.start, name="pmrag-helper-start", daemon=True)
        self.starting.start()

    @classmethod
    def start(cls, study) -> StageHelper | None:
        """A helper for ``study`` (its ingest and chunks computed), or None: a study outside
        :data:`HELPER_MESSAGES`, one core, worker processes switched off
        (:func:`~pmrag.core.parallel.in_this_process`), or no stage a helper could take before the loop."""
        low, high = HELPER_MESSAGES
        if worker_processes(1) < 1 or (os.cpu_count() or 1) < 2 or not low <= study.message_count() <= high:
            return None
        plan = study_plan(study)
        return cls(study.params, plan, study.computed_stages) if plan.start_at() is not None else None

    def wait_for(self, name: str) -> None:
        """Before the building loop asks for ``name`` (every stage before it done): claim it, or, when the helper
        has, wait until the helper has stored it or ended (then the loop computes it)."""
        self.claims.loop_at.value = self.computed.index(name)
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
        self.starting.join()
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()


def _help(params, plan: Plan, claims: Claims, done: multiprocessing.SimpleQueue) -> None:
    """The helper process: take the latest stage whose inputs are done, until no stage is free or the loop ended."""
    ignore_interrupts()
    from pmrag.study.facade import Study

    study = Study(params, claim=False)
    parent = multiprocessing.parent_process()
    done_here: set[int] = set()
    free = lambda i: claims.owner[i] == FREE   # noqa: E731
    while any(owner == FREE for owner in claims.owner):
        if parent is not None and not parent.is_alive():
            return
        taken = next((i for i in plan.ready(claims.loop_at.value, done_here, free)
                      if claims.claim(plan.names[i], HELPER) == HELPER), None)
        if taken is None:
            time.sleep(POLL_S)
            continue
        name = plan.names[taken]
        try:   # without retry: what it reads is as the loop left it (a retried model stage is the loop's to retry)
            study.engine.get(name)
        except Exception:   # noqa: BLE001 - the building loop computes this stage again and reports the error
            return
        done_here.add(plan.at[taken])
        still_read = {plan.computed[read] for i, reads in enumerate(plan.reads) if free(i) for read in reads}
        for key in [key for key in study.engine.memo if str(key) not in still_read]:
            del study.engine.memo[key]   # the loop loads them from the cache; the helper again if it must
        done.put(name)
