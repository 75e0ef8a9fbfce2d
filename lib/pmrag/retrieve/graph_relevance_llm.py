"""TOBUGraph's interest relevance by an LLM, f(q, I) → I′ (paper 002 §2.4): ``graph.relevance: openai``.

The paper's retrieval "generates a prompt combining the user request with the content of these [interest] nodes";
an LLM then identifies the interests most relevant to the request (002 §2.4).  Here
(:func:`llm_interest_relevance`):

* **Prompts** ``graph_relevance_{system,user}.txt`` of the params' ``representations.prompts`` set (``ja``,
  ``en`` or a folder), loaded as every LLM step's (:func:`~pmrag.represent.llm.load_step_prompts`).  The
  paper publishes no prompt: ours were written from that description (the request, the list of interests, the
  model chooses the relevant ones), so choices made with them are not the paper's.
* **Connection**: the params' ``summarizer`` section and ``allow_remote`` / ``proxy``, through the shared client of
  the LLM steps (:class:`~pmrag.represent.llm.ResponsesClient`: the Responses API, ``instructions`` = the system
  prompt, ``input`` = the user template, a blank line and the input; the summarizer's ``max_output_tokens``).
  ``max_input_chars`` does not apply: the list is sent whole, since a cut list would hide interests from the choice.
* **One call per question**.  Its input: the question on one line (whitespace runs as one space), a blank line,
  then every interest label in the order given, numbered from 1, one per line (``3. hiking``).  A graph without
  interests calls nothing (there is nothing to choose from): the matrix has no columns.
* **Reply** ``{"interests": [...]}``, the most relevant first, each item a label or its number
  (:func:`validate_relevance_reply`): a numeral means one thing whether the JSON holds it as an integer or
  a string (``3``, ``"3"``, ``"3."``): number 3 when the list has a third interest (so an interest labelled
  ``"3"`` elsewhere in the list is named by its own number, as the prompt asks), else the label it spells
  (``"2024"`` in a shorter list).  Any other string equal to a label under
  :func:`~pmrag.represent.extract_llm.normalise_label` is that label (the first in list order), and
  ``"3. hiking"`` is number 3 when ``hiking`` is its label.  A number outside
  1..n or a string matching nothing is dropped and counted (the row's ``dropped_ids``, the report's line); an
  interest named again keeps its first place.  An empty list is an answer: nothing is relevant.  A reply that is
  not a JSON object, lacks ``interests``, or holds something other than a list of strings and integers is a
  failed, not retried, call with a one-line error naming the question and the key, never the reply's text.
* **r(q, i)**: the n interests kept for q, at model position p = 0 … n − 1, get r = (n − p) / n; every other
  interest gets 0.  So the first is 1.0, the model's order is kept (strictly decreasing), any
  ``relevance_threshold`` ≤ 1/n keeps all n, and a cap c keeps the model's first c
  (:func:`~pmrag.retrieve.graph_interest.choose_interests`).  A question the model chose nothing for, or whose
  call failed under ``failure_policy: retry``, has a row of zeros and reaches no memory.
* **Provenance and resume**: one row of the store table ``graph_extractions`` per call, step ``relevance``
  (the LLM step :data:`RELEVANCE` run by :func:`~pmrag.represent.llm.run_step` into
  :class:`~pmrag.represent.llm.ExtractionStore`, as the graph extractor's steps: status, the validated reply,
  requested and reported model, SDK version, both prompts' SHA-256, the input's length and SHA-256, tokens,
  latency, attempts, run id, time; never the API key).  The item id is ``<question id>:<SHA-256 of the question
  text, 16 hex>:<SHA-256 of the label list, 16 hex>``, so a changed question or graph is a new item (the old row
  stays, for when it comes back).  The row's output is ``{"numbers": [...], "labels": [...]}``: the chosen
  interests' numbers in the list sent and their labels, the most relevant first.  A rerun calls the model only
  for questions without an ``ok`` row under the same model, prompts and input.  Retries and failure policy are
  the LLM step's (:class:`~pmrag.represent.llm.CallPolicy`): ``stop_on_first_error`` raises
  :class:`~pmrag.represent.extract_llm.GraphExtractionStopped`, ``retry`` records the error and goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from pmrag.core.params import SummarizerSection
from pmrag.core.text import one_line
from pmrag.represent.extract import GraphError
from pmrag.represent.extract_llm import GraphExtractionStopped, normalise_label
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, ResponsesClient, StepItem,
                                 StepReport, load_step_prompts, reply_object, require_keys, run_step)

_NUMBER = re.compile(r"(\d+)\.?")
_NUMBERED_LABEL = re.compile(r"(\d+)[.)]\s+(.+)", flags=re.DOTALL)


@dataclass(frozen=True)
class RelevanceResult:
    """r(q, i) chosen by the model (questions × interests, float64, in the orders given) and what the calls did
    (``reports.line()``: seen, skipped, ok, error, calls, chosen interests not in the list dropped)."""

    matrix: np.ndarray
    reports: StepReport


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def relevance_input(question_text: str, labels: Sequence[str]) -> str:
    """What follows the user template: the question on one line, a blank line, the labels numbered from 1."""
    listing = "\n".join(f"{number}. {one_line(label)}" for number, label in enumerate(labels, start=1))
    return f"{one_line(question_text)}\n\n{listing}"


def relevance_item_id(question_id: str, question_text: str, labels: Sequence[str]) -> str:
    """``<question id>:<question text hash>:<label list hash>`` (16 hex digits of SHA-256 each; the list as JSON)."""
    listing = json.dumps(list(labels), ensure_ascii=False)
    return f"{question_id}:{_sha256(question_text)[:16]}:{_sha256(listing)[:16]}"


def validate_relevance_reply(text: str, question_id: str, labels: Sequence[str]) -> tuple[dict, int]:
    """A relevance reply read by the rules of the module docstring: ``({"numbers": [...], "labels": [...]},
    dropped)``, the chosen interests' 1-based numbers and labels in the model's order, and how many items named
    nothing in the list.  Raises a non-retryable ``CallError`` naming the question and the key."""
    what = f"question {question_id!r}"
    reply = reply_object(text, what)
    require_keys(reply, ("interests",), what)
    items = reply["interests"]
    if not isinstance(items, list) or not all(isinstance(item, (str, int)) and not isinstance(item, bool)
                                              for item in items):
        raise CallError(f"{what}: key 'interests' must be a list of labels (strings) or numbers (integers)",
                               retryable=False)
    number_of: dict[str, int] = {}
    for number, label in enumerate(labels, start=1):
        number_of.setdefault(normalise_label(label), number)
    chosen: list[int] = []
    dropped = 0
    for item in items:
        number = _number(item, number_of, labels)
        if number is None:
            dropped += 1
        elif number not in chosen:
            chosen.append(number)
    return {"numbers": chosen, "labels": [labels[number - 1] for number in chosen]}, dropped


def _number(item: str | int, number_of: dict[str, int], labels: Sequence[str]) -> int | None:
    """The 1-based number an item names, or ``None`` (module docstring's rules): a numeral means the same as an
    integer or a string (``3``, ``"3"``, ``"3."``): its number when in 1..n, else a label it spells."""
    text = item.strip() if isinstance(item, str) else str(item)
    plain = _NUMBER.fullmatch(text)
    if plain and 1 <= int(plain.group(1)) <= len(labels):
        return int(plain.group(1))
    found = number_of.get(normalise_label(text))
    if found is not None:
        return found
    numbered = _NUMBERED_LABEL.fullmatch(text)
    if numbered and 1 <= int(numbered.group(1)) <= len(labels) and (
            normalise_label(numbered.group(2)) == normalise_label(labels[int(numbered.group(1)) - 1])):
        return int(numbered.group(1))
    return None


def _check_reply(text: str, item: StepItem) -> tuple[dict, int]:
    question_id, labels = item.context
    return validate_relevance_reply(text, question_id, labels)


RELEVANCE = LLMStep("relevance", "graph relevance", ("graph_relevance_system", "graph_relevance_user"), _check_reply,
                    noun="question", dropped="chosen interests not in the list dropped",
                    stopped=GraphExtractionStopped)
"""f(q, I) by the model: one call per question (the item's context: its id and the labels sent)."""
STEP = RELEVANCE.name
RELEVANCE_PROMPT_FILES = {STEP: RELEVANCE.prompt_files}


def choice_relevance(chosen: Sequence[Sequence[int]], n_interests: int) -> np.ndarray:
    """r(q, i) of the model's choices: questions × interests, the interest at 0-based index ``chosen[q][p]`` gets
    (n − p) / n where n = ``len(chosen[q])``, every other 0 (module docstring)."""
    matrix = np.zeros((len(chosen), n_interests), dtype=np.float64)
    for row, order in enumerate(chosen):
        n = len(order)
        for position, index in enumerate(order):
            matrix[row, index] = (n - position) / n
    return matrix


def llm_interest_relevance(question_ids: Sequence[str], question_texts: Sequence[str], labels: Sequence[str], *,
                           llm: SummarizerSection, prompts: str, engine: Engine, allow_remote: bool,
                           proxy: str | None, progress: bool = False, sleep=time.sleep) -> RelevanceResult:
    """f(q, I) by the model (module docstring): one call per question without an ok row, r(q, i) of its choice.

    Parameters
    ----------
    question_ids, question_texts: the questions (rows of the matrix), ids unique.
    labels: every interest's label in the graph's order (columns of the matrix), all sent, numbered from 1.
    llm: the summarizer section (model, base_url, timeout, interval, retries, backoff, failure policy).
    prompts: the prompt set (``ja``, ``en`` or a folder) holding ``graph_relevance_{system,user}.txt``.
    engine: the study store: a row of ``graph_extractions`` per call, and resume.
    allow_remote, proxy: as for the summaries (:mod:`pmrag.represent.privacy`).
    progress: a progress bar; sleep: the pause between calls and retries (injectable for tests).

    Returns
    -------
    RelevanceResult: ``matrix`` (questions × interests, float64) and ``reports`` (a ``StepReport``).
    Raises ``GraphExtractionStopped`` under ``stop_on_first_error`` when a call fails; ``RemoteNotAllowed``
    for a remote server without ``allow_remote``.
    """
    if len(question_ids) != len(question_texts):
        raise GraphError(f"interest relevance: {len(question_ids)} question ids for {len(question_texts)} "
                         f"question texts")
    question_ids = [str(q) for q in question_ids]
    twice = next((q for q, n in Counter(question_ids).items() if n > 1), None)
    if twice is not None:
        raise GraphError(f"interest relevance: question {twice!r} is given twice")
    labels = list(labels)
    prompt = load_step_prompts(prompts, RELEVANCE_PROMPT_FILES, "graph prompts", GraphError)[STEP]
    client = ResponsesClient(llm, prompt, sender="the openai interest relevance", allow_remote=allow_remote,
                             proxy=proxy)
    item_ids = [relevance_item_id(q, text, labels) for q, text in zip(question_ids, question_texts)]
    items = [StepItem(item_id, relevance_input(text, labels), (q, labels))
             for item_id, q, text in zip(item_ids, question_ids, question_texts)
             if labels]                                   # no interests: nothing to choose from, nothing called
    result = run_step(RELEVANCE, items, client=client, store=ExtractionStore(engine), policy=CallPolicy(llm, sleep),
                      progress=progress)
    chosen = [[number - 1 for number in result.outputs[item_id]["numbers"]] if item_id in result.outputs else []
              for item_id in item_ids]
    return RelevanceResult(choice_relevance(chosen, len(labels)), result.report)
