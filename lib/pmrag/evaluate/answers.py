"""The answer step h(q, M′, S′) → r (paper 002 §2.4) over any retriever's output, with evidence-attributed
answers (paper 000 §9's next step): each answer cites the memories or chunks it uses.

* **Context** (:func:`context_items`): what a retriever returned for a question, in its order, each item with a
  short id stable within the question (``M1``, ``M2``, …) and its text cut to ``answers.max_context_chars``.
  TOBUGraph's memories M′ come with their semantic details S′ (:func:`graph_memory_texts`: one ``<kind>:
  <label>`` line per semantic node, then the memory's conversation); RAGv1 and RAGv2 give the memory's summary
  (002 Table 1's baselines retrieve summaries), RAGv3 and every flat retriever or hybrid the chunk's raw
  conversation, a flat one its top ``answers.k`` chunks.  What each retriever returned is read from the
  graph evaluation (its sets and rankings), never recomputed.
* **The input** (:func:`answer_input`): ``{"question": ..., "context": [{"id": "M1", "text": ...}, ...]}`` as
  JSON, after the user template (prompts ``answer_{system,user}.txt`` of ``representations.prompts``: ours, the
  papers publish none).
* **The reply** (:func:`validate_answer_reply`): one JSON object ``{"answer": str, "citations": [ids]}`` (a
  Markdown code fence allowed).  A cited id that is not in the context is **refused and counted** (the row's
  ``dropped_ids``, the report line, the ``refused`` column), a repeated one kept once; anything else (not JSON,
  a key missing, a wrong type) is a failed, not retried, call whose one-line error names the question and the
  key, never the reply's text.
* **Backends**: ``openai`` (:data:`ANSWERS`, one call per retriever × question through
  :func:`~pmrag.represent.llm.run_step`: the summarizer section's client, pacing, retries, failure policy and
  ``answers.concurrency`` calls in flight; a row of ``graph_extractions`` per call, so a rerun calls only the
  items without an ``ok`` row for the same model, prompts and input), or ``extractive``, a stand-in with no
  model (:func:`extractive_answer`), labelled as such in every table (:func:`answerer_label`): the context
  sentence sharing the most content words with the question (the BM25 baseline's regex tokens,
  :func:`pmrag.retrieve.tokenizer.tokenize`; ties: the earlier item, then the earlier sentence), citing its item;
  when none shares a word it answers ``No information available`` and cites nothing.  Its replies go through the
  same check and store (step ``answers_stand_in``, apart from the model's rows).
* **Which questions**: the held-out part of the graph evaluation's split (the graph's threshold and cap, and the
  hybrid's β, were chosen on the tuning part), so every retriever answers the same questions.

Scores are :mod:`pmrag.evaluate.answer_scores`' (:func:`answer_rows`), and, with ``answers.judge: openai``, an
LLM judge's verdict against the gold answer text (:mod:`pmrag.evaluate.answer_judge`, ``judge_correct``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from pmrag.core.errors import PmragError
from pmrag.core.params import (ANSWER_ROLES, ANSWER_SET_METHODS, AnswersSection, BootstrapSection,
                               SummarizerSection)
from pmrag.core.text import one_line
from pmrag.evaluate.answer_judge import JUDGE_METRICS, judge_label, judge_llm, make_judge, run_judge
from pmrag.evaluate.answer_scores import (ANSWER_METRICS, CITATION_METRICS, CITED_METRICS, citation_scores,
                                          locomo_score)
from pmrag.evaluate.metric_names import SET_METRICS
from pmrag.evaluate.runs import PRIMARY, Qrels
from pmrag.ingest.locomo import LOCOMO_CATEGORIES
from pmrag.represent import privacy
from pmrag.represent.llm import (CallError, CallPolicy, Done, ExtractionStore, LLMStep, Prompts, Reply,
                                 ResponsesClient, StepItem, StepReport, StepStopped, input_sha256, load_step_prompts,
                                 reply_object, require_keys, run_step)

ANSWER_PROMPTS = ("answer_system", "answer_user")
STAND_IN_MODEL = "extractive-answer-v1"
NO_ANSWER = "No information available"
SET_SOURCES = ANSWER_SET_METHODS
"""The graph evaluation's set methods (002 Table 2): their context is the whole set they returned."""
ROLES = ANSWER_ROLES
"""Names a retriever by its role: ``reference`` (analysis.reference_retriever, the paper's best single retriever),
``selected`` (the hybrid the study selected), ``best_flat`` and ``graph_hybrid`` (the graph evaluation's best flat
retriever and its graph + flat hybrid), ``graph`` (the tuned graph's ranking)."""
SCORE_COLUMNS = (*ANSWER_METRICS, *JUDGE_METRICS, *CITED_METRICS, *CITATION_METRICS, *SET_METRICS)
OPTIONAL_METRICS = (*ANSWER_METRICS, *JUDGE_METRICS)
"""Scores a question may lack (no gold answer text, no judge): a table shows them where some question has one."""


class AnswerError(PmragError):
    """The answer step's inputs break a rule (an unknown retriever, a memory without text, ...)."""


class AnswersStopped(StepStopped):
    """``stop_on_first_error``: an answer call failed; its row is recorded and the run is stopped."""

    what = "answers"
    item_noun = False


# --------------------------------------------------------------------------------------------- context

@dataclass(frozen=True)
class ContextItem:
    """One memory or chunk given to h: its id in the context (``M1``…), the chunk it is, and its text."""

    ref: str
    chunk_id: str
    text: str


def context_items(chunk_ids: Sequence[str], texts: Mapping[str, str], max_chars: int) -> tuple[ContextItem, ...]:
    """The context of one question: ``chunk_ids`` in order (each once), ids ``M1``, ``M2``, …, each text on its
    own lines cut to ``max_chars`` characters.  A chunk without a text is an :class:`AnswerError` naming it."""
    items = []
    for chunk_id in dict.fromkeys(map(str, chunk_ids)):
        if chunk_id not in texts:
            raise AnswerError(f"answers: chunk {chunk_id!r} has no text to answer from")
        text = str(texts[chunk_id] or "")
        items.append(ContextItem(f"M{len(items) + 1}", chunk_id, text[:max_chars]))
    return tuple(items)


def graph_memory_texts(graph, raw_texts: Mapping[str, str]) -> dict[str, str]:
    """Each memory's text with its semantic details S′ (002 §2.4): a ``<kind>: <label>`` line per semantic node of
    the memory in the graph's order, then the conversation (``graph``: a
    :class:`~pmrag.represent.graph.MemoryGraph`).  The details come first so that cutting a long memory to
    ``answers.max_context_chars`` cuts its conversation, never S′."""
    memories = {node.node_id for node in graph.of_kind("memory")}
    out = {}
    for memory_id, text in raw_texts.items():
        node = f"m:{memory_id}"
        details = [f"{n.subkind}: {one_line(n.label)}" for n in graph.neighbours(node, "memory-semantic")] \
            if node in memories else []
        out[memory_id] = "\n".join([*details, str(text or "")])
    return out


def answer_input(question: str, items: Sequence[ContextItem]) -> str:
    """What follows the user template: ``{"question": <one line>, "context": [{"id", "text"}, ...]}``."""
    return json.dumps({"question": one_line(question), "context": [{"id": c.ref, "text": c.text} for c in items]},
                      ensure_ascii=False)


def answer_item_id(method: str, question_id: str, text: str) -> str:
    """``<method>|<question id>|<SHA-256 of the input, 16 hex digits>``: another context is another row."""
    return f"{method}|{question_id}|{input_sha256(text)[:16]}"


# --------------------------------------------------------------------------------------------- replies

def validate_answer_reply(text: str, question_id: str, refs: Sequence[str]) -> tuple[dict, int]:
    """A reply read by the module docstring's rules: ``({"answer", "citations", "refused"}, refused count)``.
    Raises a non-retryable :class:`~pmrag.represent.llm.CallError` naming the question and the key, never the
    reply's text."""
    what = f"question {question_id!r}"
    reply = reply_object(text, what)
    require_keys(reply, ("answer", "citations"), what)
    if not isinstance(reply["answer"], str):
        raise CallError(f"{what}: key 'answer' must be a string", retryable=False)
    cited = reply["citations"]
    if not isinstance(cited, list) or not all(isinstance(ref, str) for ref in cited):
        raise CallError(f"{what}: key 'citations' must be a list of strings", retryable=False)
    known = set(refs)
    cited = list(dict.fromkeys(ref.strip() for ref in cited))
    kept = [ref for ref in cited if ref in known]
    refused = [ref for ref in cited if ref not in known]
    return {"answer": reply["answer"].strip(), "citations": kept, "refused": refused}, len(refused)


def _check_reply(text: str, item: StepItem) -> tuple[dict, int]:
    question_id, refs = item.context
    return validate_answer_reply(text, question_id, refs)


ANSWERS = LLMStep("answers", "answers", ANSWER_PROMPTS, _check_reply, noun="answer",
                  dropped="cited ids refused (not in the context)", stopped=AnswersStopped)
"""One call per retriever × question (the item's context: the question id and the context's ids)."""
STAND_IN_STEP = dataclasses.replace(ANSWERS, name="answers_stand_in", title="answers (stand-in)")
"""The stand-in's rows, apart from the model's (the cost table's rate of the answers step is the model's)."""


def load_answer_prompts(prompts: str = "ja") -> Prompts:
    """``Prompts(system, user_template)`` from ``answer_{system,user}.txt`` of a set (``ja``, ``en`` or a folder);
    a missing or empty file is an :class:`AnswerError`."""
    return load_step_prompts(prompts, {ANSWERS.name: ANSWER_PROMPTS}, "answer prompts", AnswerError)[ANSWERS.name]


# --------------------------------------------------------------------------------------------- the stand-in

_SENTENCE_END = re.compile(r"\n+|(?<=[。！？!?])|(?<=\.)\s+")


def sentences(text: str) -> list[str]:
    """``text`` cut at line breaks, after ``。！？!?`` and after a full stop followed by a space; blank parts
    dropped, each stripped."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def extractive_answer(question: str, items: Sequence[ContextItem]) -> dict:
    """The stand-in's reply (module docstring): the sentence of ``items`` sharing the most distinct content words
    with ``question`` and the id of its item, or :data:`NO_ANSWER` citing nothing."""
    from pmrag.retrieve.tokenizer import tokenize

    wanted = set(tokenize(question))
    best, best_overlap = None, 0
    for item in items:
        for sentence in sentences(item.text):
            overlap = len(wanted & set(tokenize(sentence)))
            if overlap > best_overlap:
                best, best_overlap = (sentence, item.ref), overlap
    if best is None:
        return {"answer": NO_ANSWER, "citations": []}
    return {"answer": best[0], "citations": [best[1]]}


class ExtractiveAnswerer:
    """The offline stand-in as a :class:`~pmrag.represent.llm.Client` (no call is made or counted): it reads the
    input :func:`answer_input` wrote and replies with :func:`extractive_answer` as JSON; it reads no prompt."""

    backend = "extractive"
    requested_model = STAND_IN_MODEL
    sdk_version = None
    calls_api = False

    prompts = Prompts(STAND_IN_MODEL, STAND_IN_MODEL)   # it reads no prompt file; its rows are keyed by its name

    def call(self, text: str) -> Reply:
        payload = json.loads(text)
        items = [ContextItem(c["id"], "", c["text"]) for c in payload["context"]]
        return Reply(json.dumps(extractive_answer(payload["question"], items), ensure_ascii=False), STAND_IN_MODEL)

    def provenance(self) -> dict:
        return {"prompt_sha256": self.prompts.sha256()}


def answerer_label(section: AnswersSection, model: str = "") -> str:
    """How tables name the answers: a stand-in is never passed off as an LLM."""
    if section.backend == "extractive":
        return "extractive stand-in (the context sentence sharing most content words), not an LLM"
    return f"openai {model} (LLM answers)"


# --------------------------------------------------------------------------------------------- running

@dataclass(frozen=True)
class AnswerJob:
    """One question for one retriever: who answers from what."""

    method: str
    question_id: str
    question: str
    items: tuple[ContextItem, ...]


def answer_jobs(questions: pd.DataFrame, contexts: Mapping[str, Mapping[str, Sequence[str]]],
                texts: Mapping[str, Mapping[str, str]], max_chars: int) -> list[AnswerJob]:
    """Every method × question (``questions``: ``question_id, text``, in order): ``contexts[method][question]`` the
    chunk ids it returned, ``texts[method]`` the text of each chunk as that method gives it."""
    return [AnswerJob(method, str(q), text, context_items(found.get(str(q), ()), texts[method], max_chars))
            for method, found in contexts.items()
            for q, text in zip(questions["question_id"], questions["text"])]


def step_items(jobs: Sequence[AnswerJob]) -> list[StepItem]:
    """One :class:`~pmrag.represent.llm.StepItem` per job: its id (:func:`answer_item_id`), its input
    (:func:`answer_input`) and what the check needs (the question id and the context's ids)."""
    items = []
    for job in jobs:
        text = answer_input(job.question, job.items)
        items.append(StepItem(answer_item_id(job.method, job.question_id, text), text,
                              (job.question_id, tuple(c.ref for c in job.items))))
    return items


def run_answers(jobs: Sequence[AnswerJob], client, *, llm: SummarizerSection, engine: Engine,
                progress: bool = False, sleep: Callable[[float], None] = time.sleep) -> tuple[pd.DataFrame, StepReport]:
    """Each job answered by ``client`` through :func:`~pmrag.represent.llm.run_step` (resume included).

    Returns
    -------
    ``(answers, report)``: a row per job ``method, question_id, status`` (``ok`` | ``error``), ``answer``,
    ``cited`` (the cited chunk ids, a tuple), ``refused`` (the refused ids, a tuple), ``n_context``; a failed call
    is an empty answer citing nothing.  Raises :class:`AnswersStopped` under ``stop_on_first_error``.
    """
    items = step_items(jobs)
    step = ANSWERS if client.calls_api else STAND_IN_STEP
    result = run_step(step, items, client=client, store=ExtractionStore(engine), policy=CallPolicy(llm, sleep),
                      progress=progress)
    rows = []
    for job, item in zip(jobs, items):
        output = result.outputs.get(item.item_id)
        chunk_of = {c.ref: c.chunk_id for c in job.items}
        rows.append({"method": job.method, "question_id": job.question_id,
                     "status": "error" if output is None else "ok",
                     "answer": "" if output is None else output["answer"],
                     "cited": tuple(chunk_of[ref] for ref in (output or {}).get("citations", ()) if ref in chunk_of),
                     "refused": tuple((output or {}).get("refused", ())), "n_context": len(job.items)})
    return pd.DataFrame(rows, columns=["method", "question_id", "status", "answer", "cited", "refused",
                                       "n_context"]), result.report


def known_answers(jobs: Sequence[AnswerJob], stored: Mapping[str, Done] | None = None) -> pd.DataFrame | None:
    """The answers of ``jobs`` known without a call (``method, question_id, status, answer``, every status ``ok``):
    the stand-in's computed (``stored`` None), or the model's read from the store's ``ok`` rows (``stored``: the
    step's :meth:`~pmrag.represent.llm.ExtractionStore.done`); ``None`` when a job has no ``ok`` row for its input."""
    items = step_items(jobs)
    if stored is None:
        stand_in = ExtractiveAnswerer()
        outputs = [validate_answer_reply(stand_in.call(item.text).text, *item.context)[0] for item in items]
    else:
        found = [stored.get(item.item_id) for item in items]
        if any(row is None or not row.resumes(input_sha256(item.text)) for row, item in zip(found, items)):
            return None
        outputs = [json.loads(row.stored) for row in found]
    return pd.DataFrame({"method": [job.method for job in jobs], "question_id": [job.question_id for job in jobs],
                         "status": "ok", "answer": [output["answer"] for output in outputs]},
                        columns=["method", "question_id", "status", "answer"])


def make_answerer(section: AnswersSection, llm: SummarizerSection, prompts: str, *, allow_remote: bool = False,
                  proxy: str | None = None):
    """The client of ``section.backend``: :class:`ExtractiveAnswerer` or the shared
    :class:`~pmrag.represent.llm.ResponsesClient` (the remote guard runs before anything is sent)."""
    if section.backend == "extractive":
        return ExtractiveAnswerer()
    return ResponsesClient(llm, load_answer_prompts(prompts), sender="the openai answer step",
                           allow_remote=allow_remote, proxy=proxy)


def answer_llm(section: AnswersSection, summarizer: SummarizerSection) -> SummarizerSection:
    """The summarizer section with ``answers.concurrency`` calls in flight (``None``: the summarizer's)."""
    if section.concurrency is None:
        return summarizer
    return summarizer.model_copy(update={"concurrency": section.concurrency})


# --------------------------------------------------------------------------------------------- scores

def answer_rows(answers: pd.DataFrame, contexts: Mapping[str, Mapping[str, Sequence[str]]],
                questions: pd.DataFrame, qrels: Qrels | pd.DataFrame,
                verdicts: Mapping[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """Per-question scores of every answer (:mod:`pmrag.evaluate.answer_scores`): ``method, question_id,
    question_type`` + ``answer_f1`` (LoCoMo's, NaN outside LoCoMo's categories or without a gold answer),
    ``judge_correct`` (the judge's ``verdicts[(method, question id)]``, :func:`~pmrag.evaluate.answer_judge.run_judge`;
    NaN for an answer it did not judge or whose judge call failed, then ``judge_failed``), ``cited_precision,
    cited_recall, cited_f1`` (primary gold), ``citation_precision, citation_recall`` (every judged evidence chunk),
    ``set_precision, set_recall, set_f1`` of the context (what was retrieved), and
    ``n_context, n_cited, n_refused, failed, judge_failed``.

    ``questions``: ``question_id, type`` and ``answer`` (the gold text, may be missing); every question needs a
    primary-gold chunk (the evaluable ones)."""
    judged = Qrels.of(qrels).frame
    primary = judged[judged["relevance"] >= PRIMARY].groupby("question_id")["chunk_id"].agg(set)
    evidence = judged[judged["relevance"] >= 1].groupby("question_id")["chunk_id"].agg(set)
    info = questions.set_index("question_id")
    gold_answer = info["answer"] if "answer" in info else pd.Series(None, index=info.index, dtype=object)
    scored = set(LOCOMO_CATEGORIES.values())
    verdicts = verdicts or {}
    rows = []
    for row in answers.itertuples(index=False):
        q = row.question_id
        if q not in primary.index:
            raise AnswerError(f"answers: question {q!r} has no primary gold chunk")
        question_type = info.at[q, "type"]
        retrieved = contexts[row.method].get(q, ())
        cited = citation_scores(row.cited, primary[q])
        attributed = citation_scores(row.cited, evidence[q])
        found = citation_scores(retrieved, primary[q])
        accuracy = (locomo_score(row.answer, gold_answer.get(q), question_type) if question_type in scored
                    else float("nan"))
        verdict = verdicts.get((row.method, q), float("nan"))
        rows.append({"method": row.method, "question_id": q, "question_type": question_type, "answer_f1": accuracy,
                     "judge_correct": verdict, **dict(zip(CITED_METRICS, cited)),
                     **dict(zip(CITATION_METRICS, attributed[:2])), **dict(zip(SET_METRICS, found)),
                     "n_context": row.n_context, "n_cited": len(row.cited), "n_refused": len(row.refused),
                     "failed": row.status != "ok", "judge_failed": (row.method, q) in verdicts and np.isnan(verdict)})
    return pd.DataFrame(rows, columns=["method", "question_id", "question_type", *SCORE_COLUMNS, "n_context",
                                       "n_cited", "n_refused", "failed", "judge_failed"])


@dataclass(frozen=True)
class AnswerSet:
    """The ``answers`` stage's value: the answers, their per-question scores, the methods in order, how they were
    made (``label``; a stand-in says so), the run's report line, and the judge (``judge``: its label, ``""`` when
    there is none; ``judge_report``: its run's report line)."""

    answers: pd.DataFrame
    rows: pd.DataFrame
    methods: tuple[str, ...]
    label: str
    report: str
    judge: str = ""
    judge_report: str = ""

    def metrics(self) -> list[str]:
        """The score columns with a value: ``answer_f1`` only when some question has LoCoMo's accuracy,
        ``judge_correct`` only when some answer was judged."""
        return [m for m in SCORE_COLUMNS if m not in OPTIONAL_METRICS or self.rows[m].notna().any()]

    def finished(self) -> bool:
        """No answer call and no judge call failed (a failed one is retried by the next run)."""
        return not (self.rows["failed"].any() or self.rows["judge_failed"].any())


def answer_tables(value: AnswerSet, bootstrap: BootstrapSection | None = None,
                  type_order: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The answers' tables, each with an ``answerer`` column (:func:`answerer_label`) and, when the answers were
    judged, a ``judge`` column (:func:`~pmrag.evaluate.answer_judge.judge_label`): ``cis`` (mean and
    percentile-bootstrap interval of every score per method; ``answer_f1`` and ``judge_correct`` over the
    questions that have them), ``by_type`` (the headline score per question type: ``answer_f1`` where defined,
    else ``cited_f1``), ``differences`` (the first method − each other, paired, in the headline score, in
    ``judge_correct`` when judged, and in ``cited_f1``) and ``counts`` (questions, failed calls, mean context and
    citations, refused citations per method; failed judge calls when judged)."""
    from pmrag.evaluate.bootstrap import ci_table
    from pmrag.evaluate.reliability import by_type_cis, paired_differences

    rows = value.rows.rename(columns={"method": "retriever"})
    metrics = value.metrics()
    headline = ANSWER_METRICS[0] if ANSWER_METRICS[0] in metrics else "cited_f1"
    cis = []
    for metric in metrics:
        part = rows[rows[metric].notna()].rename(columns={"retriever": "method"})
        if not part.empty:
            cis.append(ci_table(part[["method", "question_id", metric]], metrics=[metric], params=bootstrap))
    cis = pd.concat(cis, ignore_index=True).rename(columns={"method": "retriever"})
    order = {m: i for i, m in enumerate(value.methods)}
    cis = cis.sort_values(["retriever", "metric"], key=lambda s: s.map(order) if s.name == "retriever"
                          else s.map({m: i for i, m in enumerate(metrics)}), kind="stable").reset_index(drop=True)
    first, others = value.methods[0], value.methods[1:]
    comparisons = [(f"{first} − {b}", first, b) for b in others]
    differences = pd.concat([paired_differences(rows[rows[m].notna()], comparisons, m, bootstrap)
                             for m in dict.fromkeys([headline, *(m for m in JUDGE_METRICS if m in metrics),
                                                     "cited_f1"])], ignore_index=True) if others else \
        pd.DataFrame()
    by_type = by_type_cis(rows[rows[headline].notna()], headline, bootstrap, type_order)
    by_type.insert(2, "metric", headline)
    judged = {"judge_failed": ("judge_failed", "sum")} if value.judge else {}
    counts = value.rows.groupby("method", sort=False).agg(
        questions=("question_id", "size"), failed=("failed", "sum"), mean_context=("n_context", "mean"),
        mean_cited=("n_cited", "mean"), refused=("n_refused", "sum"), **judged).reset_index().rename(
        columns={"method": "retriever"})
    tables = {"cis": cis, "by_type": by_type, "differences": differences, "counts": counts}
    named = {"answerer": value.label, **({"judge": value.judge} if value.judge else {})}
    return {name: frame.assign(**named) for name, frame in tables.items()}


# --------------------------------------------------------------------------------------------- the stage

def method_contexts(names: Sequence[str], evaluation, selected, reference: str, k: int) -> dict[str, dict]:
    """What each named retriever returned per question, by its name in the tables: a set method's whole set,
    a ranking's top ``k`` (a role of :data:`ROLES` resolved to the retriever it names).  ``evaluation``: the
    graph evaluation (:class:`~pmrag.evaluate.graph_eval.GraphEvaluation`); ``selected``: the study's selected
    hybrid (its ranking fused again from the listed retrievers' rankings)."""
    from pmrag.retrieve.fusion import minmax_fuse

    roles = {"reference": reference, "selected": str(selected), "best_flat": str(evaluation.best_flat),
             "graph_hybrid": str(evaluation.hybrid), "graph": str(evaluation.tuned)}
    rankings = dict(evaluation.rankings)
    if str(selected) not in rankings and str(selected.first) in rankings and str(selected.second) in rankings:
        rankings[str(selected)] = minmax_fuse(rankings[str(selected.first)], rankings[str(selected.second)],
                                              selected.beta)
    out = {}
    for name in names:
        if name in SET_SOURCES:
            found = evaluation.sets[evaluation.sets["retriever"] == name]
        else:
            resolved = roles.get(name, name)
            if resolved not in rankings:
                raise AnswerError(f"answers.retrievers: {name!r} names no retriever of the study "
                                  f"(a role of {', '.join(ROLES)}, one of {', '.join(SET_SOURCES)} or a listed retriever)")
            ranking = rankings[resolved]
            found = ranking[ranking["rank"] <= k].sort_values(["question_id", "rank"], kind="stable")
            name = resolved
        out[name] = {str(q): tuple(map(str, group["chunk_id"])) for q, group in found.groupby("question_id", sort=False)}
    return out


def method_texts(methods: Sequence[str], chunks: pd.DataFrame, summaries: pd.DataFrame, graph) -> dict[str, dict]:
    """The text each method gives a chunk (module docstring): TOBUGraph the conversation with S′, RAGv1 and RAGv2
    the summary (the conversation where the summary failed), any other the conversation."""
    raw = dict(zip(chunks["chunk_id"].astype(str), chunks["raw_text"]))
    ok = summaries[summaries["status"] == "ok"]
    summary = {**raw, **dict(zip(ok["chunk_id"].astype(str), ok["summary"]))}
    graph_texts = graph_memory_texts(graph, raw) if "TOBUGraph" in methods else {}
    return {m: graph_texts if m == "TOBUGraph" else summary if m in ("RAGv1", "RAGv2") else raw for m in methods}


def study_jobs(questions: pd.DataFrame, chunks: pd.DataFrame, summaries: pd.DataFrame, graph, evaluation, selected, *,
               section: AnswersSection, reference: str) -> tuple[pd.DataFrame, dict, list[AnswerJob]]:
    """``(questions asked, contexts, jobs)`` of a study (:func:`answer_study`'s parameters): the held-out
    questions, what each retriever returned for them, and one job per retriever × question."""
    held_out = evaluation.split.index[evaluation.split == "held_out"]
    asked = questions[questions["question_id"].isin(held_out)].sort_values("question_id", kind="stable")
    contexts = method_contexts(section.retrievers, evaluation, selected, reference, section.k)
    texts = method_texts(list(contexts), chunks, summaries, graph.graph)
    return asked, contexts, answer_jobs(asked, contexts, texts, section.max_context_chars)


def answer_study(questions: pd.DataFrame, qrels: pd.DataFrame, chunks: pd.DataFrame, summaries: pd.DataFrame, graph,
                 evaluation, selected, *, section: AnswersSection, reference: str, llm: SummarizerSection,
                 prompts: str, engine: Engine, allow_remote: bool = False, proxy: str | None = None,
                 progress: bool = False, sleep: Callable[[float], None] = time.sleep) -> AnswerSet:
    """The ``answers`` stage: every retriever of ``section.retrievers`` answers every held-out question.

    Parameters
    ----------
    questions, qrels : the evaluable questions (``question_id, text, type[, answer]``) and their qrels.
    chunks, summaries, graph : the chunks (``raw_text``), their summaries and the memory graph (S′).
    evaluation, selected : the graph evaluation (sets, rankings, split) and the study's selected hybrid.
    section, reference : the ``answers`` params and ``analysis.reference_retriever``.
    llm, prompts, engine : the summarizer section, the prompt set and the study store (rows, resume).
    allow_remote, proxy : the remote guard's settings; progress, sleep : as for every LLM step.

    With ``section.judge: openai`` the answers are then judged (:func:`judge_answers`).
    """
    asked, contexts, jobs = study_jobs(questions, chunks, summaries, graph, evaluation, selected, section=section,
                                       reference=reference)
    summarizer, llm = llm, answer_llm(section, llm)
    client = make_answerer(section, llm, prompts, allow_remote=allow_remote, proxy=proxy)
    answers, report = run_answers(jobs, client, llm=llm, engine=engine, progress=progress, sleep=sleep)
    line = privacy.redact(report.line(), getattr(client, "secrets", ()))
    if client.calls_api:
        print(line, file=sys.stderr)
    verdicts, judge, judge_line = ({}, "", "") if section.judge == "none" else judge_answers(
        answers, asked, section=section, llm=summarizer, prompts=prompts, engine=engine, allow_remote=allow_remote,
        proxy=proxy, progress=progress, sleep=sleep)
    rows = answer_rows(answers, contexts, asked, qrels, verdicts)
    return AnswerSet(answers, rows, tuple(contexts), answerer_label(section, llm.model), line, judge, judge_line)


def judge_answers(answers: pd.DataFrame, questions: pd.DataFrame, *, section: AnswersSection, llm: SummarizerSection,
                  prompts: str, engine: Engine, allow_remote: bool = False, proxy: str | None = None,
                  progress: bool = False, sleep: Callable[[float], None] = time.sleep) -> tuple[dict, str, str]:
    """``(verdicts, judge label, report line)``: the answers judged by ``answers.judge_model`` (null: the
    summarizer's model) through :func:`~pmrag.evaluate.answer_judge.run_judge`; ``llm``: the summarizer section."""
    llm = judge_llm(section, llm)
    client = make_judge(llm, prompts, allow_remote=allow_remote, proxy=proxy)
    verdicts, report = run_judge(answers, questions, client, llm=llm, engine=engine, progress=progress, sleep=sleep)
    line = privacy.redact(report.line(), getattr(client, "secrets", ()))
    print(line, file=sys.stderr)
    return verdicts, judge_label(llm.model), line

