"""TOBUGraph's extraction by an LLM (paper 002 §2.2–2.3), the ``openai`` backend of
:data:`pmrag.represent.extract.EXTRACTORS`.

The openai backend (:class:`OpenAIExtractor`) is the paper's method: an LLM does both steps.

* **Prompts** ``graph_semantic_{system,user}.txt`` and ``graph_interest_{system,user}.txt`` of the params'
  ``representations.prompts`` set (``ja``, ``en`` or a folder).  The paper publishes no prompts: ours were
  written from its description of the two modules (002 §2.2: participants, activities, stories, sentiment and a
  summary per memory; §2.3: common themes such as hobbies, locations, activities, preferences, important dates
  or people, each linked to every memory it concerns), and graphs made with them are not the paper's.
* **Connection**: the params' ``summarizer`` section (model, base_url, timeout, interval, retries, backoff,
  failure policy; one LLM configuration per study) and ``allow_remote`` / ``proxy``, through the shared client of
  the LLM steps (:class:`~pmrag.represent.llm.ResponsesClient`: the Responses API, ``instructions`` = the system
  prompt, ``input`` = the user template, a blank line and the input; no temperature or seed sent).  Each step
  (:data:`SEMANTIC`, :data:`INTEREST`) runs through :func:`~pmrag.represent.llm.run_step`.
* **Semantic step** (§2.2): one call per memory on the first ``summarizer.max_input_chars`` characters of its
  raw text.  The reply is one JSON object: ``people``, ``places``, ``organisations``, ``objects``, ``events``,
  ``activities`` (lists of strings), ``sentiment`` (a string or null), ``summary`` (optional).  People →
  ``person``, places → ``place``, organisations and events → ``named`` (all kept); activities → ``activity``
  then objects → ``thing`` (the first ``max_phrases``); the sentiment its own node; the model's summary only for
  a memory without one.  Participants and time span come from the store, as offline.
* **Interest step** (§2.3): one call per ``interest_batch`` memories, each given as a JSON line with its id
  and semantic details; the reply is ``{"interests": [{label, kind, memory_ids}]}``.  Memory ids not in the
  batch are dropped and counted (:class:`~pmrag.represent.llm.StepReport`, the row's ``dropped_ids``).
  The prompt lets an interest concern one memory and asks for at least one interest per memory (002 §2.3).
  Interests of all batches are merged by :func:`merge_interests` (same normalised label; under
  ``interest_rule: recurring`` then ``min_memories`` and ``max_interests``; the offline backend's clustering at
  ``merge_distance``).
* **Validation**: a reply that is not JSON, or lacks a key or holds a value of the wrong type, is a failed,
  not retried, call with a one-line error naming the memory (or batch) and the key, never the reply's text.
  A Markdown code fence around the JSON is allowed.  ``max_output_tokens``: the summarizer's for a semantic
  call, at least :data:`INTEREST_MAX_OUTPUT_TOKENS` for an interest call.
* **Provenance and resume** (store table ``graph_extractions``, one row per memory or batch, committed after
  each call): status, the validated JSON, requested and reported model, SDK version, both prompts' SHA-256,
  the input's length and SHA-256, tokens, latency, attempts, run id, time.  A batch's id is a hash of its
  input (:class:`~pmrag.represent.llm.ExtractionStore`).  A rerun calls the model only for items without an
  ``ok`` row under the same model, prompts and input; error rows are called again.  Retries and failure policy
  are the LLM step's (:class:`~pmrag.represent.llm.CallPolicy`): retryable errors (429, 5xx, timeout,
  connection) up to ``max_retries`` times with capped exponential backoff; then
  ``stop_on_first_error`` raises :class:`GraphExtractionStopped`, ``retry`` records the error and goes on (a
  memory without its reply keeps only what the store gives; a batch without its reply adds no interest).
"""

from __future__ import annotations

import hashlib
import json
import time
import unicodedata
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy import Engine

from pmrag.core.params import GraphSection, SummarizerSection
from pmrag.represent import privacy
from pmrag.represent.extract import (EXTRACTORS, NAMED_KINDS, PHRASE_KINDS, Embedder, GraphError, Interest,
                                     Memory, MemorySemantics, Term, _check_unique, cluster_phrases)
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, Prompts, ResponsesClient,
                                 StepItem, StepReport, StepStopped, load_step_prompts, reply_object, require_keys,
                                 run_step)


# --------------------------------------------------------------------------------------------- openai

SEMANTIC_LIST_KEYS = {"people": "person", "places": "place", "organisations": "named", "events": "named",
                      "activities": "activity", "objects": "thing"}
"""The semantic reply's list keys (002 §2.2's named things and activities) → term kinds, in the order they are kept."""

INTEREST_KINDS = ("hobby", "place", "activity", "preference", "date", "person", "event", "other")
"""Kinds of an LLM interest (002 §2.3's examples of themes); a kind the model writes otherwise is ``other``."""

INTEREST_MAX_OUTPUT_TOKENS = 4000
"""``max_output_tokens`` of an interest call unless the summarizer's is larger: its reply lists memory ids of up
to ``interest_batch`` memories, more than a summary's 700 tokens hold."""


class GraphExtractionStopped(StepStopped):
    """``stop_on_first_error``: a graph extraction call failed; its row is recorded and the run is stopped."""

    what = "graph extraction ({step})"


def load_graph_prompts(prompts: str = "ja", files: dict[str, tuple[str, str]] | None = None) -> dict[str, Prompts]:
    """The graph prompts of a set (``ja``, ``en`` or a folder, as :func:`~pmrag.represent.representations.prompt_dir`):
    ``{"semantic": Prompts, "interest": Prompts}`` from ``graph_{semantic,interest}_{system,user}.txt`` (or the
    ``step → (system file, user file)`` of ``files``), a leading byte-order mark and trailing whitespace stripped
    (the input follows the user template after a blank line); a missing or empty file is a :class:`GraphError`."""
    return load_step_prompts(prompts, GRAPH_PROMPT_FILES if files is None else files, "graph prompts", GraphError)


# --- replies

def _strings(value, what: str, key: str) -> list[str]:
    """A list of strings, stripped, empty ones dropped, each once (first occurrence kept)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CallError(f"{what}: key {key!r} must be a list of strings", retryable=False)
    return list(dict.fromkeys(item.strip() for item in value if item.strip()))


def _optional_text(reply: dict, what: str, key: str) -> str | None:
    value = reply.get(key)
    if value is not None and not isinstance(value, str):
        raise CallError(f"{what}: key {key!r} must be a string or null", retryable=False)
    if value is None:
        return None
    return value.strip() or None


def validate_semantic_reply(text: str, memory_id: str) -> dict:
    """A semantic reply (002 §2.2) checked and normalised: every key of :data:`SEMANTIC_LIST_KEYS` a list of
    strings (required), ``sentiment`` a string or null (required), ``summary`` a string or null (may be absent);
    other keys are ignored.  Raises a non-retryable ``CallError`` naming the memory and the key."""
    what = f"memory {memory_id!r}"
    reply = reply_object(text, what)
    require_keys(reply, (*SEMANTIC_LIST_KEYS, "sentiment"), what)
    out: dict = {"summary": _optional_text(reply, what, "summary")}
    for key_name in SEMANTIC_LIST_KEYS:
        out[key_name] = _strings(reply[key_name], what, key_name)
    out["sentiment"] = _optional_text(reply, what, "sentiment")
    return out


def validate_interest_reply(text: str, batch_id: str, memory_ids: Sequence[str]) -> tuple[dict, int]:
    """An interest reply (002 §2.3) checked and normalised, and the number of memory ids dropped.

    ``interests`` must be a list of objects with ``label`` (a non-empty string), ``kind`` (a string; one not in
    :data:`INTEREST_KINDS`, case-insensitively, becomes ``other``) and ``memory_ids`` (a list of strings).  A memory
    id not in ``memory_ids`` (the batch's) is dropped and counted, each occurrence once; an interest left without
    memories is dropped.  Raises a non-retryable ``CallError`` naming the batch, the interest's index and the key.
    """
    what = f"interest batch {batch_id}"
    reply = reply_object(text, what)
    require_keys(reply, ("interests",), what)
    if not isinstance(reply["interests"], list):
        raise CallError(f"{what}: key 'interests' must be a list of objects", retryable=False)
    known = set(memory_ids)
    dropped = 0
    interests = []
    for index, item in enumerate(reply["interests"]):
        where = f"{what}: interests[{index}]"
        if not isinstance(item, dict):
            raise CallError(f"{where} is not an object", retryable=False)
        require_keys(item, ("label", "kind", "memory_ids"), where)
        label = item["label"].strip() if isinstance(item["label"], str) else None
        if not label:
            raise CallError(f"{where}: key 'label' must be a non-empty string", retryable=False)
        if not isinstance(item["kind"], str):
            raise CallError(f"{where}: key 'kind' must be a string", retryable=False)
        kind = item["kind"].strip().lower()
        ids = _strings(item["memory_ids"], where, "memory_ids")
        dropped += sum(1 for memory_id in item["memory_ids"] if isinstance(memory_id, str)
                       and memory_id.strip() and memory_id.strip() not in known)
        ids = [memory_id for memory_id in ids if memory_id in known]
        if ids:
            interests.append({"label": label, "kind": kind if kind in INTEREST_KINDS else "other", "memory_ids": ids})
    return {"interests": interests}, dropped


def _check_semantic(text: str, item: StepItem) -> dict:
    return validate_semantic_reply(text, item.item_id)


def _check_interest(text: str, item: StepItem) -> tuple[dict, int]:
    return validate_interest_reply(text, item.item_id, item.context)


SEMANTIC = LLMStep("semantic", "graph semantic", ("graph_semantic_system", "graph_semantic_user"), _check_semantic,
                   noun="memory", stopped=GraphExtractionStopped)
"""002 §2.2: one call per memory, its raw text in, its semantic details out."""
INTEREST = LLMStep("interest", "graph interest", ("graph_interest_system", "graph_interest_user"), _check_interest,
                   noun="interest batch", dropped="memory ids not in their batch dropped",
                   stopped=GraphExtractionStopped)
"""002 §2.3: one call per batch of memories (the item's context: the batch's memory ids), its interests out."""
GRAPH_PROMPT_FILES = {step.name: step.prompt_files for step in (SEMANTIC, INTEREST)}
STEPS = tuple(GRAPH_PROMPT_FILES)


def semantics_from_reply(memory: Memory, reply: dict | None, max_phrases: int) -> MemorySemantics:
    """A memory's :class:`MemorySemantics` from its validated semantic reply (``None``: the call failed, so only
    what the store gives: summary, participants, time span).  Named things: people → person, places → place,
    organisations and events → named, all kept; key phrases: activities → activity then objects → thing, the
    first ``max_phrases``, in the reply's order.  The memory's own summary wins over the model's."""
    if reply is None:
        return MemorySemantics(memory.memory_id, memory.summary, tuple(memory.speakers), memory.start_at,
                               memory.end_at, entities=(), phrases=())
    terms = tuple(dict.fromkeys(Term(kind, label, 1) for key_name, kind in SEMANTIC_LIST_KEYS.items()
                                for label in reply[key_name]))
    return MemorySemantics(
        memory_id=memory.memory_id, summary=memory.summary or reply["summary"], participants=tuple(memory.speakers),
        start_at=memory.start_at, end_at=memory.end_at,
        entities=tuple(t for t in terms if t.kind in NAMED_KINDS),
        phrases=tuple(t for t in terms if t.kind in PHRASE_KINDS)[:max_phrases],
        terms=terms, sentiment=reply["sentiment"],
    )


def interest_batch_input(batch: Sequence[MemorySemantics]) -> str:
    """The input of one interest call: one JSON object per memory and line, its id and semantic details (summary,
    participants, time span, named things and key phrases by kind, sentiment), empty ones left out."""
    lines = []
    for memory in batch:
        record: dict = {"id": memory.memory_id, "summary": memory.summary, "participants": list(memory.participants),
                        "time": f"{memory.start_at:%Y-%m-%d %H:%M} – {memory.end_at:%Y-%m-%d %H:%M}"}
        for kind, name in (("person", "people"), ("place", "places"), ("named", "names"), ("activity", "activities"),
                           ("thing", "things")):
            record[name] = [t.label for t in (*memory.entities, *memory.phrases) if t.kind == kind]
        record["sentiment"] = memory.sentiment
        lines.append(json.dumps({k: v for k, v in record.items() if v}, ensure_ascii=False))
    return "\n".join(lines)


def normalise_label(label: str) -> str:
    """What makes two interest labels one: NFKC, case-folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", label).casefold().split())


def merge_interests(replies: Sequence[dict], params: GraphSection, embedder: Embedder) -> list[Interest]:
    """Interests of validated interest replies (in batch order) merged across batches.

    Rules: interests whose :func:`normalise_label` is equal are one (their memories united; spelled as the spelling
    linked to most memories, then the shorter, then by code point; of the kind linked to most memories, then in
    :data:`INTEREST_KINDS` order).  Under ``interest_rule: per_memory`` (002 §2.3) every one is a candidate (an
    interest may concern one memory); under ``recurring`` only those linked to at least ``min_memories`` memories,
    the ``max_interests`` most shared kept (ties by label).  Then they are merged by :func:`cluster_phrases` over the injected
    ``embedder``'s vectors of their labels at ``merge_distance``, as the offline backend merges: a group is labelled
    by its most shared member (ties: the shorter, then by code point), of that member's kind, linked to the union
    of its members' memories, with every spelling as an alias (the label first).  Most shared first, ties by label.
    """
    memories_of: dict[str, set[str]] = defaultdict(set)
    spellings: dict[str, Counter[str]] = defaultdict(Counter)
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    for reply in replies:
        for item in reply["interests"]:
            norm = normalise_label(item["label"])
            memories_of[norm].update(item["memory_ids"])
            spellings[norm][item["label"]] += len(item["memory_ids"])
            kinds[norm][item["kind"]] += len(item["memory_ids"])
    label_of = {norm: min(found, key=lambda s: (-found[s], len(s), s)) for norm, found in spellings.items()}
    recurring = params.interest_rule == "recurring"
    candidates = sorted((norm for norm, ids in memories_of.items() if not recurring or len(ids) >= params.min_memories),
                        key=lambda norm: (-len(memories_of[norm]), label_of[norm]))
    candidates = candidates[: params.max_interests] if recurring else candidates
    if not candidates:
        return []
    vectors = np.asarray(embedder([label_of[norm] for norm in candidates]), dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(candidates):
        raise GraphError(f"the phrase embedder returned shape {vectors.shape} for {len(candidates)} phrases")
    interests = []
    for group in cluster_phrases(vectors, params.merge_distance):
        members = sorted((candidates[i] for i in group),
                         key=lambda norm: (-len(memories_of[norm]), len(label_of[norm]), label_of[norm]))
        head = members[0]
        kind = min(kinds[head], key=lambda k: (-kinds[head][k], INTEREST_KINDS.index(k)))
        aliases = [label_of[norm] for norm in members]
        for norm in members:
            aliases += sorted(spellings[norm], key=lambda s: (-spellings[norm][s], len(s), s))
        ids = sorted(set().union(*(memories_of[norm] for norm in members)))
        interests.append(Interest(label=label_of[head], kind=kind, memory_ids=tuple(ids),
                                  aliases=tuple(dict.fromkeys(aliases))))
    return sorted(interests, key=lambda i: (-len(i.memory_ids), i.label))


# --- runs

def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class OpenAIExtractor:
    """The paper's extraction (module docstring): the LLM steps :data:`SEMANTIC`, a call per memory, then
    :data:`INTEREST`, a call per ``interest_batch`` memories; every call's outcome a row of ``graph_extractions``.
    Both steps share one run id and one :class:`~pmrag.represent.llm.CallPolicy`; ``reports`` holds each step's
    :class:`~pmrag.represent.llm.StepReport` once it has run (or stopped)."""

    backend = "openai"

    def __init__(self, params: GraphSection, *, embedder: Embedder, llm: SummarizerSection, engine: Engine,
                 prompts: str = "ja", allow_remote: bool = False, proxy: str | None = None, progress: bool = False,
                 sleep: Callable[[float], None] = time.sleep):
        self.params, self.embedder, self.llm, self.engine, self.progress = params, embedder, llm, engine, progress
        self.prompts = load_graph_prompts(prompts)
        interest_llm = llm.model_copy(update={"max_output_tokens": max(llm.max_output_tokens,
                                                                       INTEREST_MAX_OUTPUT_TOKENS)})
        self.clients = {step.name: ResponsesClient(settings, self.prompts[step.name],
                                                   sender="the openai graph extractor", allow_remote=allow_remote,
                                                   proxy=proxy)
                        for step, settings in ((SEMANTIC, llm), (INTEREST, interest_llm))}
        self.sdk_version = self.clients[SEMANTIC.name].sdk_version
        self.policy = CallPolicy(llm, sleep)
        self.run_id = uuid.uuid4().hex
        self.reports: dict[str, StepReport] = {}

    def label(self) -> str:
        """``openai <model> (LLM extraction, the paper's method)``."""
        return f"openai {self.llm.model} (LLM extraction, the paper's method)"

    def prompt_sha256(self) -> dict[str, str]:
        return {f"{step}_{part}": digest for step, prompts in self.prompts.items()
                for part, digest in zip(("system", "user"), prompts.sha256().values())}

    def provenance(self) -> dict:
        """Backend, label, model, base URL (without any user:password), the graph params, the connection params
        (never the API key), the four prompt files' SHA-256 and the SDK version: what a stage's key needs;
        redacted (:func:`pmrag.represent.privacy.redact_value`)."""
        llm = self.llm.model_dump(mode="json", include={
            "model", "timeout_s", "interval_s", "max_input_chars", "max_output_tokens", "failure_policy",
            "max_retries", "backoff_initial_s", "backoff_max_s"})
        return privacy.redact_value({
            "backend": self.backend, "label": self.label(), "model": self.llm.model,
            "base_url": self.clients[SEMANTIC.name].provenance()["base_url"], **self.params.model_dump(mode="json"),
            "llm": {**llm, "interest_max_output_tokens": self.clients[INTEREST.name].settings.max_output_tokens},
            "prompt_sha256": self.prompt_sha256(), "sdk_version": self.sdk_version},
            self.clients[SEMANTIC.name].secrets)

    def extract(self, memories: Sequence[Memory]) -> list[MemorySemantics]:
        """One semantic call per memory (its raw text, the first ``summarizer.max_input_chars`` characters)."""
        _check_unique([m.memory_id for m in memories])
        items = [StepItem(m.memory_id, m.text[: self.llm.max_input_chars]) for m in memories]
        replies = self._run(SEMANTIC, items)
        return [semantics_from_reply(m, replies.get(m.memory_id), self.params.max_phrases) for m in memories]

    def interests(self, semantics: Sequence[MemorySemantics]) -> list[Interest]:
        """One interest call per ``interest_batch`` memories (in the order given), merged by :func:`merge_interests`."""
        _check_unique([s.memory_id for s in semantics])
        size = self.params.interest_batch
        items = []
        for start in range(0, len(semantics), size):
            batch = semantics[start:start + size]
            text = interest_batch_input(batch)
            items.append(StepItem("batch-" + _sha256(text)[:16], text, tuple(s.memory_id for s in batch)))
        replies = self._run(INTEREST, items)
        return merge_interests([replies[item.item_id] for item in items if item.item_id in replies],
                               self.params, self.embedder)

    def _run(self, step: LLMStep, items: list[StepItem]) -> dict[str, dict]:
        """The validated replies (stored ones included) by item id of one step's run; its report in ``reports``
        whether it ends or stops (:class:`GraphExtractionStopped` under ``stop_on_first_error``)."""
        try:
            result = run_step(step, items, client=self.clients[step.name], store=ExtractionStore(self.engine),
                              policy=self.policy, run_id=self.run_id, progress=self.progress)
        except StepStopped as stopped:
            self.reports[step.name] = stopped.report
            raise
        self.reports[step.name] = result.report
        return result.outputs


@EXTRACTORS.register("openai")
def _openai(params: GraphSection, *, embedder: Embedder, llm: SummarizerSection | None = None, prompts: str = "ja",
            allow_remote: bool = False, proxy: str | None = None, engine: Engine | None = None,
            progress: bool = False) -> OpenAIExtractor:
    if llm is None:
        raise GraphError("graph.extractor 'openai' needs the summarizer section (llm=): its model and server")
    if engine is None:
        raise GraphError("graph.extractor 'openai' needs the study store (engine=) for its per-call rows and resume")
    return OpenAIExtractor(params, embedder=embedder, llm=llm, engine=engine, prompts=prompts,
                           allow_remote=allow_remote, proxy=proxy, progress=progress)
