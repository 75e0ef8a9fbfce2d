"""Sub-queries of every question (the ``decomposition`` stage): the offline stand-in, the LLM, and their value.

The paper suggests, beyond its retrievers, query expansion and decomposition (Query2doc; splitting a question
into concrete sub-queries); the ``decomp`` retriever (:mod:`pmrag.retrieve.decompose`) fuses the rankings of a
question and its sub-queries.  This module makes the sub-queries, by ``decomposition.backend``:

* **offline** (:func:`offline_subqueries`): a stand-in with no model, labelled "offline stand-in, not an LLM"
  (:func:`label`).  The question's content-word terms in order of appearance, each once (the offline graph
  extractor's rules, :func:`pmrag.retrieve.graph_interest.question_terms`: SudachiPy split mode C nouns for a
  Japanese question, stop-word-filtered words and capitalised names for another), cut into
  min(max_subqueries, n) consecutive groups as even as possible (the first groups one term longer), each
  group's terms joined by one space.
* **openai** (:func:`llm_decomposition`): the LLM step :data:`DECOMPOSITION`, one call per question through the
  shared client and settings of the LLM steps (:mod:`pmrag.represent.llm`: the params' ``summarizer`` section,
  ``allow_remote``, ``proxy``; :mod:`pmrag.represent.privacy`'s guard before anything is sent).  Prompts
  ``decompose_{system,user}.txt`` of ``representations.prompts``: ours, written from the paper's suggestion
  (concrete, self-contained sub-queries, each for one fact the answer needs; the question's own words and names
  kept); the paper publishes none.  The input after the user template: ``{"question": <the question on one
  line>, "max_subqueries": n}`` as JSON.  The reply must be one JSON object ``{"subqueries": [...]}`` of strings
  (a Markdown code fence allowed); anything else is a failed, not retried, call with a one-line error naming the
  question and the key, never the reply's text.  An empty list is an answer (the question needs no
  decomposition).
* **Clean-up**, both backends (:func:`clean_subqueries`): each sub-query on one line (whitespace runs as one
  space); empty ones, one equal to the question, and repeats dropped (equal: NFKC, case-folded, whitespace
  normalised); the first ``max_subqueries`` of the rest kept, in the model's (or the terms') order.  The
  number dropped is counted (the row's ``dropped_ids``, the report line).
* **Provenance and resume** (openai): one row of the store table ``graph_extractions`` per call, step
  ``decomposition`` (:func:`~pmrag.represent.llm.run_step` into :class:`~pmrag.represent.llm.ExtractionStore`:
  status, the validated reply ``{"subqueries": [...]}``, requested and reported model, SDK version, both
  prompts' SHA-256, the input's length and SHA-256, tokens, latency, attempts, run id, time; never the API key).
  Item id ``<question id>:<SHA-256 of the question text, 16 hex>:<max_subqueries>``, so a changed question or
  cap is a new row (the old one stays).  A rerun calls the model only for questions without an ``ok`` row under
  the same model, prompts and input.  Retries and failure policy are the LLM step's: ``stop_on_first_error``
  raises :class:`DecompositionStopped`, ``retry`` records the error and the question goes on with no
  sub-query (its own list alone).

Every sub-query is embedded as a query (``kind="query"``) by the study's embedder and cache
(:func:`decompose_questions`), so both variants of the retriever read one :class:`SubQueries`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from pmrag.core.errors import PmragError
from pmrag.core.params import DecompositionSection, EmbeddingSection, SummarizerSection
from pmrag.core.text import one_line
from pmrag.represent import privacy
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, Prompts, ResponsesClient,
                                 StepItem, StepReport, StepStopped, load_step_prompts, reply_object, require_keys,
                                 run_step)

OFFLINE_SPLIT_MODE = "C"       # SudachiPy's longest units: a compound noun stays one term


class DecompositionError(PmragError):
    """Sub-queries or their inputs break a rule (a question twice, a question without its sub-queries, ...)."""


class DecompositionStopped(StepStopped):
    """``stop_on_first_error``: a decomposition call failed; its row is recorded and the run is stopped."""

    what = "query decomposition"


# --------------------------------------------------------------------------------------------- sub-queries

def clean_subqueries(candidates: Iterable[str], question: str, max_subqueries: int) -> tuple[tuple[str, ...], int]:
    """``(kept, dropped)``: each candidate on one line; empty ones, one equal to the question and repeats dropped
    (compared under :func:`~pmrag.represent.extract_llm.normalise_label`); the first ``max_subqueries`` of the rest
    kept in the order given; ``dropped`` counts every candidate not kept."""
    from pmrag.represent.extract_llm import normalise_label

    candidates = list(candidates)
    seen = {normalise_label(question)}
    kept: list[str] = []
    for candidate in candidates:
        text = one_line(candidate)
        key = normalise_label(text)
        if text and key not in seen and len(kept) < max_subqueries:
            kept.append(text)
        seen.add(key)
    return tuple(kept), len(candidates) - len(kept)


def group_terms(terms: Sequence[str], max_subqueries: int) -> list[str]:
    """``terms`` cut into min(max_subqueries, n) consecutive groups as even as possible (the first n mod g
    groups one term longer), each joined by one space."""
    n = len(terms)
    groups = min(max_subqueries, n)
    out, start = [], 0
    for index in range(groups):
        size = n // groups + (1 if index < n % groups else 0)
        out.append(" ".join(terms[start:start + size]))
        start += size
    return out


def offline_subqueries(texts: Sequence[str], max_subqueries: int) -> list[tuple[tuple[str, ...], int]]:
    """The offline stand-in (module docstring) for each question text: ``(sub-queries, dropped)``."""
    from pmrag.retrieve.graph_interest import question_terms

    _check_cap(max_subqueries)
    terms = question_terms(list(texts), OFFLINE_SPLIT_MODE)
    return [clean_subqueries(group_terms(found, max_subqueries), text, max_subqueries)
            for text, found in zip(texts, terms)]


def label(section: DecompositionSection, model: str | None = None) -> str:
    """How tables name the sub-queries: a stand-in is never passed off as an LLM."""
    if section.backend == "offline":
        return "offline stand-in (the question's content words), not an LLM"
    return f"openai {model} (LLM decomposition)"


def _check_cap(max_subqueries) -> None:
    if isinstance(max_subqueries, bool) or not isinstance(max_subqueries, (int, np.integer)) or max_subqueries < 1:
        raise DecompositionError(f"decomposition.max_subqueries must be a positive integer, got {max_subqueries!r}")


def _check_questions(question_ids: Sequence[str], texts: Sequence[str]) -> list[str]:
    if len(question_ids) != len(texts):
        raise DecompositionError(f"decomposition: {len(question_ids)} question ids for {len(texts)} question texts")
    question_ids = [str(q) for q in question_ids]
    twice = next((q for q, n in Counter(question_ids).items() if n > 1), None)
    if twice is not None:
        raise DecompositionError(f"decomposition: question {twice!r} is given twice")
    return question_ids


# --------------------------------------------------------------------------------------------- openai

def decomposition_input(question: str, max_subqueries: int) -> str:
    """What follows the user template: ``{"question": ..., "max_subqueries": n}`` (the question on one line)."""
    return json.dumps({"question": one_line(question), "max_subqueries": int(max_subqueries)}, ensure_ascii=False)


def decomposition_item_id(question_id: str, question: str, max_subqueries: int) -> str:
    """``<question id>:<question text hash, 16 hex digits of SHA-256>:<max_subqueries>``."""
    return f"{question_id}:{hashlib.sha256(question.encode('utf-8')).hexdigest()[:16]}:{int(max_subqueries)}"


def validate_decomposition_reply(text: str, question_id: str, question: str,
                                 max_subqueries: int) -> tuple[dict, int]:
    """A reply read by the module docstring's rules: ``({"subqueries": [...]}, dropped)``.  Raises a
    non-retryable :class:`~pmrag.represent.llm.CallError` naming the question and the key, never the reply's
    text."""
    what = f"question {question_id!r}"
    reply = reply_object(text, what)
    require_keys(reply, ("subqueries",), what)
    items = reply["subqueries"]
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise CallError(f"{what}: key 'subqueries' must be a list of strings", retryable=False)
    kept, dropped = clean_subqueries(items, question, max_subqueries)
    return {"subqueries": list(kept)}, dropped


def _check_reply(text: str, item: StepItem) -> tuple[dict, int]:
    question_id, question, max_subqueries = item.context
    return validate_decomposition_reply(text, question_id, question, max_subqueries)


DECOMPOSITION = LLMStep("decomposition", "decomposition", ("decompose_system", "decompose_user"), _check_reply,
                        noun="question",
                        dropped="sub-queries dropped (empty, repeated, the question itself or past max_subqueries)",
                        stopped=DecompositionStopped)
"""One call per question (the item's context: its id, its text and the cap), its sub-queries out."""
STEP = DECOMPOSITION.name
DECOMPOSE_PROMPT_FILES = {STEP: DECOMPOSITION.prompt_files}


def load_decomposition_prompts(prompts: str = "ja") -> Prompts:
    """``Prompts(system, user_template)`` from ``decompose_{system,user}.txt`` of a set (``ja``, ``en`` or a
    folder), a leading byte-order mark and trailing whitespace stripped; a missing or empty file is a
    :class:`DecompositionError`."""
    return load_step_prompts(prompts, DECOMPOSE_PROMPT_FILES, "decomposition prompts", DecompositionError)[STEP]


@dataclass(frozen=True)
class LLMDecomposition:
    """Sub-queries by the model, per question in the order given, the calls' report and what a key needs."""

    subqueries: list[tuple[str, ...]]
    report: StepReport
    provenance: dict


def llm_decomposition(question_ids: Sequence[str], texts: Sequence[str], *, max_subqueries: int,
                      llm: SummarizerSection, prompts: str, engine: Engine, allow_remote: bool, proxy: str | None,
                      progress: bool = False, sleep: Callable[[float], None] = time.sleep) -> LLMDecomposition:
    """Sub-queries by the model (module docstring): one call per question without an ok row.

    Parameters
    ----------
    question_ids, texts: the questions, ids unique.
    max_subqueries: the cap sent with each question and applied to its reply.
    llm: the summarizer section (model, base_url, timeout, interval, retries, backoff, failure policy).
    prompts: the prompt set (``ja``, ``en`` or a folder) holding ``decompose_{system,user}.txt``.
    engine: the study store: a row of ``graph_extractions`` per call, and resume.
    allow_remote, proxy: as for the summaries (:mod:`pmrag.represent.privacy`).
    progress: a progress bar; sleep: the pause between calls and retries (injectable for tests).

    Returns
    -------
    LLMDecomposition: ``subqueries`` (a tuple per question; empty where the call failed under ``retry``),
    ``report`` (a :class:`~pmrag.represent.llm.StepReport`; its ``line()`` for a log) and ``provenance`` (never
    the API key).  Raises :class:`DecompositionStopped` under ``stop_on_first_error``; ``RemoteNotAllowed`` for
    a remote server without ``allow_remote``.
    """
    _check_cap(max_subqueries)
    question_ids = _check_questions(question_ids, texts)
    prompt = load_decomposition_prompts(prompts)
    client = ResponsesClient(llm, prompt, sender="the openai query decomposition", allow_remote=allow_remote,
                             proxy=proxy)
    item_ids = [decomposition_item_id(q, text, max_subqueries) for q, text in zip(question_ids, texts)]
    items = [StepItem(item_id, decomposition_input(text, max_subqueries), (q, text, max_subqueries))
             for item_id, q, text in zip(item_ids, question_ids, texts)]
    result = run_step(DECOMPOSITION, items, client=client, store=ExtractionStore(engine),
                      policy=CallPolicy(llm, sleep), progress=progress)
    subqueries = [tuple(result.outputs[item_id]["subqueries"]) if item_id in result.outputs else ()
                  for item_id in item_ids]
    settings = llm.model_dump(mode="json", include={
        "model", "timeout_s", "interval_s", "max_output_tokens", "failure_policy", "max_retries",
        "backoff_initial_s", "backoff_max_s"})
    provenance = {"backend": "openai", "model": llm.model, "base_url": client.provenance()["base_url"],
                  "max_subqueries": int(max_subqueries), "llm": settings, "prompt_sha256": prompt.sha256(),
                  "sdk_version": client.sdk_version, "calls": result.report.line()}
    return LLMDecomposition(subqueries, result.report, privacy.redact_value(provenance, client.secrets))


# --------------------------------------------------------------------------------------------- the stage

@dataclass(frozen=True)
class SubQueries:
    """The ``decomposition`` stage's value: each question's sub-queries and their query vectors.

    ``subqueries[i]`` belongs to ``question_ids[i]``; the sub-queries flattened in that order are the rows of
    ``matrix`` (float32, embedded as queries), and ``owner[r]`` is the index in ``question_ids`` of row r's
    question.  ``label`` names the backend (a stand-in says so); ``provenance`` is what produced them."""

    question_ids: tuple[str, ...]
    subqueries: tuple[tuple[str, ...], ...]
    owner: np.ndarray
    matrix: np.ndarray
    label: str
    provenance: dict

    def __post_init__(self):
        if len(self.question_ids) != len(self.subqueries):
            raise DecompositionError(f"sub-queries: {len(self.subqueries)} lists for {len(self.question_ids)} "
                                     f"questions")
        expected = owner_of(self.subqueries)
        if not np.array_equal(np.asarray(self.owner), expected):
            raise DecompositionError("sub-queries: owner must give each flattened sub-query its question's index")
        if len(self.matrix) != len(expected):
            raise DecompositionError(f"sub-queries: {len(self.matrix)} vectors for {len(expected)} sub-queries")

    def texts(self) -> list[str]:
        """Every sub-query, flattened in question order (the rows of ``matrix``)."""
        return [text for found in self.subqueries for text in found]

    def rows_for(self, question_ids: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(texts, owner, rows)`` of the given questions' sub-queries, in that question order: ``owner`` the
        index in ``question_ids`` (the argument), ``rows`` the rows of ``matrix``.  A question without an entry
        is an error naming it."""
        position = {q: i for i, q in enumerate(self.question_ids)}
        starts = np.concatenate([[0], np.cumsum([len(found) for found in self.subqueries])]).astype(np.int64)
        texts, owner, rows = [], [], []
        for index, question_id in enumerate(question_ids):
            found = position.get(str(question_id))
            if found is None:
                raise DecompositionError(f"decomposition has no entry for question {str(question_id)!r}; "
                                         f"recompute the decomposition stage")
            texts += self.subqueries[found]
            owner += [index] * len(self.subqueries[found])
            rows += range(starts[found], starts[found + 1])
        return texts, np.asarray(owner, dtype=np.int64), np.asarray(rows, dtype=np.int64)


def owner_of(subqueries: Sequence[Sequence[str]]) -> np.ndarray:
    """For each flattened sub-query, the index of its question (int64)."""
    return np.repeat(np.arange(len(subqueries), dtype=np.int64), [len(found) for found in subqueries])


def decompose(question_ids: Sequence[str], texts: Sequence[str], section: DecompositionSection, *,
              llm: SummarizerSection | None = None, prompts: str = "ja", engine: Engine | None = None,
              allow_remote: bool = False, proxy: str | None = None, progress: bool = False,
              sleep: Callable[[float], None] = time.sleep) -> tuple[list[tuple[str, ...]], str, dict]:
    """Each question's sub-queries by ``section.backend``: ``(sub-queries per question, label, provenance)``.
    The openai backend needs ``llm`` (the summarizer section) and ``engine`` (the store)."""
    question_ids = _check_questions(question_ids, texts)
    if section.backend == "offline":
        from importlib.metadata import version

        found = offline_subqueries(texts, section.max_subqueries)
        provenance = {"backend": "offline", "max_subqueries": section.max_subqueries,
                      "split_mode": OFFLINE_SPLIT_MODE, "dropped": sum(dropped for _, dropped in found),
                      "sudachipy": version("sudachipy"), "sudachidict_core": version("sudachidict_core")}
        return [kept for kept, _ in found], label(section), {"label": label(section), **provenance}
    if llm is None or engine is None:
        raise DecompositionError("decomposition.backend 'openai' needs the summarizer section (llm=) and the "
                                 "study store (engine=)")
    result = llm_decomposition(question_ids, texts, max_subqueries=section.max_subqueries, llm=llm,
                               prompts=prompts, engine=engine, allow_remote=allow_remote, proxy=proxy,
                               progress=progress, sleep=sleep)
    name = label(section, llm.model)
    return result.subqueries, name, {"label": name, **result.provenance}


def build_subqueries(question_ids: Sequence[str], subqueries: Sequence[Sequence[str]],
                     embed: Callable[[list[str]], np.ndarray], label_text: str, provenance: dict) -> SubQueries:
    """:class:`SubQueries` with every sub-query embedded by ``embed`` (texts → one float32 row each, as
    queries); ``embed`` is not called when there is no sub-query (the matrix is then 0 × 0)."""
    subqueries = tuple(tuple(found) for found in subqueries)
    texts = [text for found in subqueries for text in found]
    matrix = np.asarray(embed(texts), dtype=np.float32) if texts else np.zeros((0, 0), dtype=np.float32)
    if matrix.ndim != 2 or len(matrix) != len(texts):
        raise DecompositionError(f"the query embedder returned shape {matrix.shape} for {len(texts)} sub-queries")
    return SubQueries(tuple(str(q) for q in question_ids), subqueries, owner_of(subqueries), matrix, label_text,
                      provenance)


def decompose_questions(question_ids: Sequence[str], texts: Sequence[str], section: DecompositionSection, *,
                        embedding: EmbeddingSection, cache_dir: str | Path, llm: SummarizerSection | None = None,
                        prompts: str = "ja", engine: Engine | None = None, allow_remote: bool = False,
                        proxy: str | None = None, progress: bool = False,
                        sleep: Callable[[float], None] = time.sleep) -> SubQueries:
    """The ``decomposition`` stage: the questions decomposed by ``section.backend`` (:func:`decompose`), each
    sub-query embedded as a query through the study's embedder and its content-addressed cache.

    Parameters
    ----------
    question_ids, texts : the evaluable questions, ids unique.
    section : the ``decomposition`` params.
    embedding : the ``embedding`` params (the query model embeds the sub-queries).
    cache_dir : the folder of the shared embedding cache (``embeddings.sqlite``).
    llm, prompts, engine : for ``openai`` only: the ``summarizer`` section, the prompt set
        (``representations.prompts``) and the study store (its ``graph_extractions`` rows, resume).
    allow_remote, proxy : the study's permission and named proxy (:mod:`pmrag.represent.privacy`).
    progress : progress bars; sleep : the pause between calls and retries (injectable for tests).

    Returns
    -------
    SubQueries: the sub-queries and their query vectors; ``provenance`` names the backend, its settings and
    the embedding model.  The openai backend prints its report line on stderr.
    """
    from pmrag.represent.embed import EmbeddingCache, embed_with_cache, make_embedder

    found, name, provenance = decompose(question_ids, texts, section, llm=llm, prompts=prompts, engine=engine,
                                        allow_remote=allow_remote, proxy=proxy, progress=progress, sleep=sleep)
    if section.backend != "offline":
        print(provenance["calls"], file=sys.stderr)
    embedder = make_embedder(embedding, allow_remote=allow_remote, proxy=proxy)
    with EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") as cache:
        return build_subqueries(question_ids, found, lambda batch: embed_with_cache(
            embedder, batch, "query", cache, progress=progress), name,
            {**provenance, "embedding_model": embedder.model_id})
