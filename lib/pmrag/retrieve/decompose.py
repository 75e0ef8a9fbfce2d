"""Query decomposition: a question becomes several concrete sub-queries whose rankings are fused (retriever ``decomp``).

The paper suggests, beyond its retrievers, query expansion and decomposition (Query2doc; splitting a question
into concrete sub-queries).  This module is that suggestion, not the paper's method.  For a question q with
sub-queries s₁ … s_m (m ≤ ``decomposition.max_subqueries``):

* **Lists**: L₀ = the base retriever's top-``depth`` list for q itself, Lⱼ = its top-``depth`` list for sⱼ, each
  exactly as the base would rank that text alone (:mod:`pmrag.retrieve.ranking`: score ↓, chunk start time ↓,
  chunk id ↓; ``retrieval.depth`` long; for ``bm25`` the ``bm25.zero_scores`` rule: ``drop`` lists only
  chunks sharing a token with the text, ``pad`` fills the list with 0-scoring chunks in tie-break order).
  Bases (the variant): ``vector``, cosine of the text's query vector and each chunk's vector of the
  representation (§5.2, ``embedding_text_decomp_vector``); ``bm25``, Okapi BM25 with ``params.bm25`` and the
  paper's regex tokenizer, scored by the ``bm25`` component itself (§5.1, ``raw_text_decomp_bm25``).
* **Fusion** (reciprocal rank fusion, Cormack et al. 2009): s(q, d) = Σ_{j=0..m, d ∈ Lⱼ} 1 / (k + rankⱼ(d)),
  k = ``decomposition.rrf_k``; the question's own list L₀ counts like any other.  A chunk in no list scores 0.
  Each chunk's terms are added in rank order (all rank-1 terms first), so two chunks holding the same ranks
  in different lists get bit-identical sums and meet the tie-breaks instead of rounding noise.
* **Ranking**: s ↓, then the paper's chunk start time ↓, chunk id ↓ (:func:`~pmrag.retrieve.ranking.
  rankings_from_scores`), top ``depth``: the scores are non-increasing down each list.  Chunks scoring 0
  follow in tie-break order (``bm25`` under ``zero_scores: drop``: left out, as the base leaves them).  A
  question without sub-queries is ranked by L₀ alone, in the base's order.  ``matches``: chunks with a
  positive base score for q or any sⱼ.

Sub-queries come from the ``decomposition`` stage (:func:`compute_decomposition`, :class:`SubQueries`), by
``decomposition.backend``:

* **offline** (:func:`offline_subqueries`): a stand-in with no model, labelled "offline stand-in, not an LLM"
  (:func:`label`).  The question's content-word terms in order of appearance, each once (the offline graph
  extractor's rules, :func:`pmrag.retrieve.graph_interest.question_terms`: SudachiPy split mode C nouns for a
  Japanese question, stop-word-filtered words and capitalised names for another), cut into
  min(max_subqueries, n) consecutive groups as even as possible (the first groups one term longer), each
  group's terms joined by one space.
* **openai** (:func:`llm_decomposition`): one call per question through the summarizer's client and settings
  (the params' ``summarizer`` section, ``allow_remote``, ``proxy``; :mod:`pmrag.represent.privacy`'s guard
  before anything is sent).  Prompts ``decompose_{system,user}.txt`` of ``representations.prompts``: ours,
  written from the paper's suggestion (concrete, self-contained sub-queries, each for one fact the answer
  needs; the question's own words and names kept); the paper publishes none.  The input after the user
  template: ``{"question": <the question on one line>, "max_subqueries": n}`` as JSON.  The reply must be one
  JSON object ``{"subqueries": [...]}`` of strings (a Markdown code fence allowed); anything else is a
  failed, not retried, call with a one-line error naming the question and the key, never the reply's text.
  An empty list is an answer (the question needs no decomposition).
* **Clean-up**, both backends (:func:`clean_subqueries`): each sub-query on one line (whitespace runs as one
  space); empty ones, one equal to the question, and repeats dropped (equal: NFKC, case-folded, whitespace
  normalised); the first ``max_subqueries`` of the rest kept, in the model's (or the terms') order.  The
  number dropped is counted (the row's ``dropped_ids``, the report line).
* **Provenance and resume** (openai): one row of the store table ``graph_extractions`` per call, step
  ``decomposition``, the graph extractor's loop and columns (:class:`~pmrag.represent.extract_llm.
  OpenAIExtractor`: status, the validated reply ``{"subqueries": [...]}``, requested and reported model, SDK
  version, both prompts' SHA-256, the input's length and SHA-256, tokens, latency, attempts, run id, time; never
  the API key).  Item id ``<question id>:<SHA-256 of the question text, 16 hex>:<max_subqueries>``, so a
  changed question or cap is a new row (the old one stays).  A rerun calls the model only for questions
  without an ``ok`` row under the same model, prompts and input.  Retries and failure policy are the
  summarizer's: ``stop_on_first_error`` raises :class:`DecompositionStopped`, ``retry`` records the error
  and the question goes on with no sub-query (its own list alone).

Every sub-query is embedded as a query (``kind="query"``) by the study's embedder and cache in the stage, so
both variants read one :class:`SubQueries`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from pmrag.core.errors import PmragError
from pmrag.core.names import RetrieverId, StageKey
from pmrag.core.params import DecompositionSection, SummarizerSection
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.ranking import Ranker, rankings_from_scores
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import SUB_QUERIES, BM25Retriever, Corpus, Queries, Ranked, RetrieverComponent

STEP = "decomposition"
DECOMPOSE_PROMPT_FILES = {STEP: ("decompose_system", "decompose_user")}
OFFLINE_SPLIT_MODE = "C"       # SudachiPy's longest units: a compound noun stays one term
BASES = ("vector", "bm25")     # the variants: the base retriever methods, each with its own default variant


class DecompositionError(PmragError):
    """Sub-queries or their inputs break a rule (a question twice, a question without its sub-queries, ...)."""


class DecompositionStopped(PmragError):
    """``stop_on_first_error``: a decomposition call failed; its row is recorded and the run is stopped."""

    def __init__(self, item_id: str, error: str, run_id: str, n_ok: int):
        self.item_id, self.error, self.run_id = item_id, error, run_id
        super().__init__(
            f"query decomposition stopped at question {item_id} (run {run_id}, {n_ok} ok in this run): {error}; "
            f"rerun to resume (calls already ok are not made again), or set 'summarizer.failure_policy: retry'")


# --------------------------------------------------------------------------------------------- sub-queries

def one_line(text: str) -> str:
    """Whitespace runs as one space, stripped."""
    return " ".join(text.split())


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
    non-retryable ``SummaryCallError`` naming the question and the key, never the reply's text."""
    from pmrag.represent.extract_llm import _reply_object
    from pmrag.represent.summarize import SummaryCallError

    what = f"question {question_id!r}"
    reply = _reply_object(text, what)
    if "subqueries" not in reply:
        raise SummaryCallError(f"{what}: key 'subqueries' is missing", retryable=False)
    items = reply["subqueries"]
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise SummaryCallError(f"{what}: key 'subqueries' must be a list of strings", retryable=False)
    kept, dropped = clean_subqueries(items, question, max_subqueries)
    return {"subqueries": list(kept)}, dropped


def load_decomposition_prompts(prompts: str = "ja"):
    """``Prompts(system, user_template)`` from ``decompose_{system,user}.txt`` of a set (``ja``, ``en`` or a
    folder), a leading byte-order mark and trailing whitespace stripped."""
    from pmrag.represent.extract_llm import load_step_prompts

    return load_step_prompts(prompts, DECOMPOSE_PROMPT_FILES, "decomposition prompts", DecompositionError)[STEP]


@dataclass(frozen=True)
class LLMDecomposition:
    """Sub-queries by the model, per question in the order given, the calls' report and what a key needs."""

    subqueries: list[tuple[str, ...]]
    report: object          # pmrag.represent.extract_llm.StepReport
    provenance: dict


def report_line(report) -> str:
    """One line of what the calls did (no question text, no key)."""
    return (f"decomposition run {report.run_id} (openai/{report.requested_model}): {report.status}; seen "
            f"{report.seen}, skipped {report.skipped} already ok, ok {report.ok}, error {report.error}, calls "
            f"{report.calls}; {report.dropped_ids} sub-queries dropped (empty, repeated, the question itself or "
            f"past max_subqueries)")


@cache
def _calls_class():
    """The call loop's class, made on first use: the represent modules it needs are imported only when a
    decomposition is run (the retriever registry imports this module with every other)."""
    from pmrag.represent import privacy
    from pmrag.represent.extract_llm import OpenAIExtractor
    from pmrag.represent.summarize import OpenAISummarizer

    class _DecompositionCalls(OpenAIExtractor):
        """The extractor's call loop (``_run``: resume, retries, failure policy, one committed row per call) for
        the one step ``decomposition``; nothing else of the extractor is set up or used."""

        def __init__(self, llm, engine, prompts, allow_remote, proxy, progress, sleep):
            self.llm, self.engine, self.progress, self.sleep = llm, engine, progress, sleep
            self.prompts = {STEP: load_decomposition_prompts(prompts)}
            base_url = privacy.resolve_base_url(llm.base_url)
            privacy.require_remote_allowed("the openai query decomposition", base_url, allow_remote,
                                           setting="allow_remote")
            self.clients = {STEP: OpenAISummarizer(llm, self.prompts[STEP], allow_remote=allow_remote, proxy=proxy)}
            self.sdk_version = self.clients[STEP].sdk_version
            self.run_id = uuid.uuid4().hex
            self.reports = {}
            self._calls = 0

    return _DecompositionCalls


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
    ``report`` (a ``StepReport``, :func:`report_line`) and ``provenance`` (never the API key).
    Raises :class:`DecompositionStopped` under ``stop_on_first_error``; ``RemoteNotAllowed`` for a remote server
    without ``allow_remote``.
    """
    from pmrag.represent.extract_llm import GraphExtractionStopped

    _check_cap(max_subqueries)
    question_ids = _check_questions(question_ids, texts)
    calls = _calls_class()(llm, engine, prompts, allow_remote, proxy, progress, sleep)
    item_ids = [decomposition_item_id(q, text, max_subqueries) for q, text in zip(question_ids, texts)]
    by_item = {item_id: (q, text) for item_id, q, text in zip(item_ids, question_ids, texts)}
    items = [(item_id, decomposition_input(text, max_subqueries)) for item_id, text in zip(item_ids, texts)]
    try:
        replies = calls._run(STEP, items, lambda reply, item_id: validate_decomposition_reply(
            reply, by_item[item_id][0], by_item[item_id][1], max_subqueries))
    except GraphExtractionStopped as stopped:
        raise DecompositionStopped(stopped.item_id, stopped.error, stopped.run_id, calls.reports[STEP].ok) from None
    report = calls.reports[STEP]
    subqueries = [tuple(replies[item_id]["subqueries"]) if item_id in replies else () for item_id in item_ids]
    client = calls.clients[STEP]
    settings = llm.model_dump(mode="json", include={
        "model", "timeout_s", "interval_s", "max_output_tokens", "failure_policy", "max_retries",
        "backoff_initial_s", "backoff_max_s"})
    provenance = {"backend": "openai", "model": llm.model, "base_url": client.provenance()["base_url"],
                  "max_subqueries": int(max_subqueries), "llm": settings,
                  "prompt_sha256": calls.prompts[STEP].sha256(), "sdk_version": calls.sdk_version,
                  "calls": report_line(report)}
    return LLMDecomposition(subqueries, report, provenance)


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


def compute_decomposition(ctx) -> SubQueries:
    """The ``decomposition`` stage: the evaluable questions (``qrels``) decomposed by ``decomposition.backend``
    (openai: the summarizer's settings, the store's rows), each sub-query embedded as a query through the
    study's embedder and its cache.

    Its declaration: needs ``("qrels",)``; params ``decomposition``, the embedding model keys and
    ``embedding.query_model`` (as ``query_vectors``), and for ``openai`` the summary keys (``summarizer.*`` that
    change a reply, ``representations.prompts``) with the prompt files ``decompose_{system,user}.txt``."""
    from pmrag.represent.embed import EmbeddingCache, embed_with_cache, make_embedder

    section = ctx.params.decomposition
    questions = ctx.get("qrels").questions
    question_ids = questions["question_id"].astype(str).tolist()
    texts = questions["text"].tolist()
    extras = {} if section.backend == "offline" else dict(
        llm=ctx.params.summarizer, prompts=ctx.params.representations.prompts, engine=ctx.store,
        allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy, progress=ctx.progress)
    found, name, provenance = decompose(question_ids, texts, section, **extras)
    if section.backend != "offline":
        print(provenance["calls"], file=sys.stderr)
    embedder = make_embedder(ctx.params.embedding, allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy)
    with EmbeddingCache(Path(ctx.params.cache_dir) / "embeddings.sqlite") as cache:
        return build_subqueries(question_ids, found, lambda batch: embed_with_cache(
            embedder, batch, "query", cache, progress=ctx.progress), name,
            {**provenance, "embedding_model": embedder.model_id})


# --------------------------------------------------------------------------------------------- fusion

def rrf_scores(scores: np.ndarray, owner: np.ndarray, n_questions: int, ranker: Ranker, depth: int, k: int,
               keep: np.ndarray | None = None) -> np.ndarray:
    """s(q, d) = Σ_j 1 / (k + rank_j(d)) over the lists of question q (module docstring), ``(n_questions × n)``.

    ``scores`` (lists × chunks) holds one base score row per list, ``owner[j]`` the question (row of the
    result) list j belongs to; list j is ``ranker``'s top ``depth`` of row j (among the chunks ``keep[j]`` marks,
    when given).  Terms are added rank by rank, so equal rank multisets give bit-identical sums."""
    scores = np.asarray(scores)
    owner = np.asarray(owner, dtype=np.int64)
    if scores.ndim != 2 or len(owner) != len(scores):
        raise ValueError(f"scores must be lists × chunks with one owner per list, got {scores.shape} and "
                         f"{len(owner)} owners")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"rrf k must be a positive integer, got {k!r}")
    if len(owner) and (owner.min() < 0 or owner.max() >= n_questions):
        raise ValueError(f"owner must index the {n_questions} questions")
    width = min(int(depth), scores.shape[1])
    tops = np.full((len(scores), width), -1, dtype=np.int64)
    for row in range(len(scores)):
        if keep is None:
            top = ranker.top(scores[row], width) if width else np.zeros(0, dtype=np.int64)
        else:
            kept = np.flatnonzero(keep[row])
            top = kept[ranker.top_of(scores[row], kept, width)] if len(kept) else kept
        tops[row, :len(top)] = top
    fused = np.zeros((n_questions, scores.shape[1]), dtype=np.float64)
    for position in range(width):
        listed = tops[:, position] >= 0
        np.add.at(fused, (owner[listed], tops[listed, position]), 1.0 / (k + position + 1))
    return fused


def positive_union(scores: np.ndarray, owner: np.ndarray, n_questions: int) -> np.ndarray:
    """For each question, how many chunks score above 0 in at least one of its lists."""
    hits = np.zeros((n_questions, scores.shape[1]), dtype=bool)
    for row in range(len(scores)):
        hits[owner[row]] |= scores[row] > 0
    return hits.sum(axis=1)


@RETRIEVERS.register("decomp")
class DecompRetriever(RetrieverComponent):
    """The question's and its sub-queries' base rankings fused by RRF (module docstring); the variant names the
    base (``vector``: ``embedding_text_decomp_vector``; ``bm25``: ``raw_text_decomp_bm25``, scored by the
    paper's ``bm25`` component itself, the regex tokenizer)."""

    method = "decomp"
    sections = ("decomposition.rrf_k", "bm25")

    @classmethod
    def variants(cls) -> Iterable[str]:
        return BASES

    @staticmethod
    def base_id(rid: RetrieverId) -> RetrieverId:
        """The base retriever of a decomp retriever: ``<representation>_vector`` or ``<representation>_bm25``."""
        if rid.variant not in BASES:
            raise ValueError(f"{rid}: the decomp variant must be one of {', '.join(BASES)}")
        return RetrieverId(rid.representation, rid.variant)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (SUB_QUERIES, *RETRIEVERS.get(rid.variant).needs(cls.base_id(rid)))

    @classmethod
    def files(cls, rid: RetrieverId, params) -> list[Path]:
        return RETRIEVERS.get(rid.variant).files(cls.base_id(rid), params)

    @classmethod
    def uses(cls, rid: RetrieverId) -> tuple[type, ...]:
        base = RETRIEVERS.get(rid.variant)
        return (base, *base.uses(cls.base_id(rid)))

    @classmethod
    def packages(cls, rid: RetrieverId) -> tuple[str, ...]:
        return RETRIEVERS.get(rid.variant).packages(cls.base_id(rid))

    @classmethod
    def reads_embedding_cut(cls, rid: RetrieverId) -> bool:
        return rid.variant == "vector"

    def base_scores(self, corpus: Corpus, question_ids: Sequence[str], texts: Sequence[str],
                    vectors: Callable[[], np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """``(scores, keep)``: the base's score of every chunk for each text (texts × chunks), and for ``bm25``
        under ``zero_scores: drop`` the chunks its lists may hold (``None``: any)."""
        base = self.base_id(self.rid)
        if base.method == "vector":
            return cosine_scores(corpus.vectors(base.representation), vectors()), None
        index, counts = BM25Retriever(base, self.params).index(corpus, Queries(list(question_ids), list(texts),
                                                                              vectors))
        scores = index.scores_matrix(counts)
        return scores, (scores > 0 if self.params.bm25.zero_scores == "drop" else None)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        found: SubQueries = corpus.upstream(SUB_QUERIES)
        texts, owner, rows = found.rows_for(queries.question_ids)
        n = len(queries.question_ids)
        owner = np.concatenate([np.arange(n, dtype=np.int64), owner])

        def vectors() -> np.ndarray:
            questions = queries.vectors()
            return np.vstack([questions, found.matrix[rows]]) if len(rows) else questions

        list_ids = [*queries.question_ids, *(f"{queries.question_ids[o]}/{i}" for i, o in enumerate(owner[n:]))]
        scores, keep = self.base_scores(corpus, list_ids, [*queries.texts, *texts], vectors)
        ranker = Ranker(corpus.start_times, corpus.chunk_ids)
        fused = rrf_scores(scores, owner, n, ranker, depth, self.params.decomposition.rrf_k, keep)
        rankings = rankings_from_scores(fused, queries.question_ids, corpus.chunk_ids, corpus.start_times, depth,
                                        fused > 0 if keep is not None else None)
        matches = pd.Series(positive_union(scores, owner, n), index=pd.Index(queries.question_ids, name="question_id"),
                            name="matches")
        return Ranked(rankings, matches)
