"""An optional LLM judge of the answers (paper 002 §2.4's r = h(q, M′, S′) against a gold answer text): beside
LoCoMo's token F1 (:mod:`pmrag.evaluate.answer_scores`), a model says whether each answer states the same fact as
the gold answer, lenient on wording, as the LLM judges used on LoCoMo do.

* **Which answers** (:func:`judge_jobs`): those whose question has a gold answer text (LoCoMo's, the demo's, a
  questions file's ``answer``), but adversarial ones: their gold text is the trap answer, and LoCoMo's own
  check ("no information available" / "not mentioned", ``answer_f1``) already scores them.  A failed answer call
  is an empty answer, judged incorrect without a call.
* **The input** (:func:`judge_input`): ``{"question", "gold_answer", "answer"}`` as one JSON line after the user
  template (prompts ``answer_judge_{system,user}.txt`` of ``representations.prompts``: ours, the papers publish
  none).  Identical inputs (two retrievers giving the same answer to a question) are one call.
* **The reply** (:func:`validate_judge_reply`): one JSON object ``{"correct": true | false}`` (a Markdown code
  fence allowed); anything else is a failed, not retried, call whose one-line error names the question and the
  key, never the reply's text.
* **Running** (:func:`run_judge`): :data:`ANSWER_JUDGE` through :func:`~pmrag.represent.llm.run_step`, the
  summarizer section's client, pacing, retries and failure policy, with ``answers.judge_model`` (null: the
  summarizer's model) and ``answers.concurrency`` calls in flight; a row of ``graph_extractions`` per call, so a
  rerun calls only the items without an ``ok`` row for the same model, prompts and input.

The score is ``judge_correct`` (1.0 or 0.0; NaN without a gold text or when the judge's call failed) in
:func:`pmrag.evaluate.answers.answer_rows`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Engine

from pmrag.core.errors import PmragError
from pmrag.core.params import AnswersSection, SummarizerSection
from pmrag.core.text import one_line
from pmrag.represent.llm import (CallError, CallPolicy, ExtractionStore, LLMStep, Prompts, ResponsesClient, StepItem,
                                 StepReport, StepStopped, input_sha256, load_step_prompts, reply_object,
                                 require_keys, run_step)

JUDGE_PROMPTS = ("answer_judge_system", "answer_judge_user")
JUDGE_METRICS = ("judge_correct",)
UNJUDGED_TYPES = ("adversarial",)
"""Question types the judge skips: LoCoMo's adversarial gold text is the trap answer, not the right one."""


class JudgeError(PmragError):
    """The judge's prompts are missing or empty."""


class JudgeStopped(StepStopped):
    """``stop_on_first_error``: a judge call failed; its row is recorded and the run is stopped."""

    what = "answer judge"
    item_noun = False


def judge_input(question: str, gold: str, answer: str) -> str:
    """What follows the user template: ``{"question", "gold_answer", "answer"}``, each on one line."""
    return json.dumps({"question": one_line(question), "gold_answer": one_line(gold), "answer": one_line(answer)},
                      ensure_ascii=False)


def judge_item_id(question_id: str, text: str) -> str:
    """``judge|<question id>|<SHA-256 of the input, 16 hex digits>``: the same answer to a question is one item."""
    return f"judge|{question_id}|{input_sha256(text)[:16]}"


def validate_judge_reply(text: str, question_id: str) -> dict:
    """A reply read by the module docstring's rule: ``{"correct": bool}``.  Raises a non-retryable
    :class:`~pmrag.represent.llm.CallError` naming the question and the key, never the reply's text."""
    what = f"question {question_id!r}"
    reply = reply_object(text, what)
    require_keys(reply, ("correct",), what)
    if not isinstance(reply["correct"], bool):
        raise CallError(f"{what}: key 'correct' must be true or false", retryable=False)
    return {"correct": reply["correct"]}


def _check_reply(text: str, item: StepItem) -> dict:
    return validate_judge_reply(text, item.context)


ANSWER_JUDGE = LLMStep("answer_judge", "answer judge", JUDGE_PROMPTS, _check_reply, noun="judgment",
                       stopped=JudgeStopped)
"""One call per distinct (question, gold answer, answer) (the item's context: the question id)."""


def load_judge_prompts(prompts: str = "ja") -> Prompts:
    """``Prompts(system, user_template)`` from ``answer_judge_{system,user}.txt`` of a set (``ja``, ``en`` or a
    folder); a missing or empty file is a :class:`JudgeError`."""
    return load_step_prompts(prompts, {ANSWER_JUDGE.name: JUDGE_PROMPTS}, "answer judge prompts",
                             JudgeError)[ANSWER_JUDGE.name]


def judge_llm(section: AnswersSection, summarizer: SummarizerSection) -> SummarizerSection:
    """The summarizer section with ``answers.judge_model`` (null: its own model) and ``answers.concurrency``
    calls in flight (null: its own)."""
    update = {"model": section.judge_model or summarizer.model,
              "concurrency": section.concurrency or summarizer.concurrency}
    return summarizer.model_copy(update=update)


def judge_label(model: str) -> str:
    """How tables name the judge."""
    return f"openai {model} (LLM judge: same fact as the gold answer)"


def make_judge(llm: SummarizerSection, prompts: str, *, allow_remote: bool = False,
               proxy: str | None = None) -> ResponsesClient:
    """The shared :class:`~pmrag.represent.llm.ResponsesClient` with the judge's prompts (the remote guard runs
    before anything is sent)."""
    return ResponsesClient(llm, load_judge_prompts(prompts), sender="the openai answer judge",
                           allow_remote=allow_remote, proxy=proxy)


@dataclass(frozen=True)
class JudgeJobs:
    """Which answers the judge reads: ``keys[(method, question id)]`` the item id of each judged answer (``None``:
    a failed answer, incorrect without a call), and the items to call, each once."""

    keys: dict[tuple[str, str], str | None]
    items: tuple[StepItem, ...]


def judged_questions(questions: pd.DataFrame) -> set[str]:
    """The ids of the questions (``question_id, type`` and ``answer``, the gold text, which may be missing) whose
    answers are judged: a gold text that is not blank, a type not in :data:`UNJUDGED_TYPES`."""
    if "answer" not in questions:
        return set()
    gold = questions["answer"]
    judged = gold.notna() & gold.astype(str).str.strip().ne("") & ~questions["type"].isin(UNJUDGED_TYPES)
    return set(questions.loc[judged, "question_id"].astype(str))


def judge_jobs(answers: pd.DataFrame, questions: pd.DataFrame) -> JudgeJobs:
    """The judged answers of ``answers`` (``method, question_id, status, answer``; module docstring) with
    ``questions`` (``question_id, text, type`` and ``answer``; :func:`judged_questions`)."""
    judged = judged_questions(questions)
    info = questions.set_index("question_id")
    keys, items = {}, {}
    for row in answers.itertuples(index=False):
        if row.question_id not in judged:
            continue
        gold = info.at[row.question_id, "answer"]
        if row.status != "ok":
            keys[(row.method, row.question_id)] = None
            continue
        text = judge_input(info.at[row.question_id, "text"], str(gold), row.answer)
        item_id = judge_item_id(row.question_id, text)
        keys[(row.method, row.question_id)] = item_id
        items.setdefault(item_id, StepItem(item_id, text, row.question_id))
    return JudgeJobs(keys, tuple(items.values()))


def run_judge(answers: pd.DataFrame, questions: pd.DataFrame, client, *, llm: SummarizerSection, engine: Engine,
              progress: bool = False,
              sleep: Callable[[float], None] = time.sleep) -> tuple[dict[tuple[str, str], float], StepReport]:
    """Each judged answer's verdict through :func:`~pmrag.represent.llm.run_step` (resume included).

    Returns
    -------
    ``(verdicts, report)``: ``verdicts[(method, question id)]`` 1.0 (correct), 0.0 (incorrect, or a failed
    answer) or NaN (the judge's call failed); answers not judged are absent.  Raises :class:`JudgeStopped` under
    ``stop_on_first_error``.
    """
    jobs = judge_jobs(answers, questions)
    result = run_step(ANSWER_JUDGE, jobs.items, client=client, store=ExtractionStore(engine),
                      policy=CallPolicy(llm, sleep), progress=progress)
    verdicts = {}
    for key, item_id in jobs.keys.items():
        output = None if item_id is None else result.outputs.get(item_id)
        verdicts[key] = 0.0 if item_id is None else float("nan") if output is None else float(output["correct"])
    return verdicts, result.report
