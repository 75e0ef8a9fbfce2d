"""The evaluation set: the questions a study scores and their chunk-level gold (§4.2).

A question is evaluable when at least one chunk holds its primary evidence (relevance 2); the paper drops the
others (108 → 100).  The params may leave question types out (``dataset.include_types`` / ``exclude_types``:
LoCoMo's adversarial questions have no evidence to retrieve).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pmrag.chunking.stats import primary_gold_questions
from pmrag.core.errors import PmragError
from pmrag.core.params import AnalysisSection, DatasetSection


@dataclass(frozen=True)
class EvaluationSet:
    """The evaluable questions (at least one primary-gold chunk, §4.2; in ID order) and their qrels."""

    questions: pd.DataFrame
    qrels: pd.DataFrame
    n_questions: int          # all questions, evaluable or not
    excluded_types: tuple[str, ...] = ()   # types the params leave out (dataset.include_types / exclude_types)

    def types(self) -> pd.Series:
        """Each evaluable question's type, indexed by question ID."""
        return self.questions.set_index("question_id")["type"]

    def tags(self) -> pd.DataFrame:
        """The evaluable questions' tags (the questions file's ``tags``), ``question_id, tag, value`` in question
        and tag order; no rows when no question has tags (or the questions came without a ``tags`` column)."""
        return question_tags(self.questions)


def question_tags(questions: pd.DataFrame) -> pd.DataFrame:
    """``question_id, tag, value``: one row per tag of each question, from the stored ``tags`` column (a JSON
    object per question, NULL for none)."""
    stored = questions[["question_id", "tags"]].dropna() if "tags" in questions else pd.DataFrame(
        columns=["question_id", "tags"])
    rows = [(qid, name, value) for qid, text in zip(stored["question_id"], stored["tags"])
            for name, value in sorted(json.loads(text).items())]
    return pd.DataFrame(rows, columns=["question_id", "tag", "value"], dtype=object)


def evaluation_set(questions: pd.DataFrame, qrels: pd.DataFrame, dataset: DatasetSection, analysis: AnalysisSection,
                   params_path: Path | None = None) -> EvaluationSet:
    """The questions with primary gold whose type the params keep, and their qrels; there must be some (with
    the reason when there are none), and ``analysis.aggregate_type`` must name one of their types
    (``params_path`` names the params file in errors)."""
    check_questions_given(questions, params_path)
    excluded = excluded_types(questions["type"], dataset, params_path)
    evaluable = primary_gold_questions(qrels)
    kept = questions[questions["question_id"].isin(evaluable) & ~questions["type"].isin(excluded)].reset_index(drop=True)
    if kept.empty:
        n_left_out = int(questions["type"].isin(excluded).sum())
        raise PmragError(f"{params_path or 'params'}: none of the study's {len(questions)} questions can be evaluated: "
                         f"{len(questions) - n_left_out} without a chunk holding their primary evidence (relevance 2), "
                         f"{n_left_out} of types left out (dataset.include_types / exclude_types)")
    check_analysis_types(kept["type"], analysis, params_path)
    kept_qrels = qrels[qrels["question_id"].isin(kept["question_id"])].reset_index(drop=True)
    return EvaluationSet(kept, kept_qrels, len(questions), excluded)


def check_questions_given(questions: pd.DataFrame, params_path: Path | None) -> None:
    """A study needs questions.  Only ingest knows whether it has some (a LoCoMo input file brings its own),
    so this is checked on the ingested questions, not when the params are loaded."""
    if questions.empty:
        raise PmragError(f"{params_path or 'params'}: the study has no questions to evaluate; give them in a "
                         "questions file (key 'dataset.questions'), with a LoCoMo file among 'dataset.inputs', or "
                         "use the demo's ('dataset.synthetic.enabled: true')")


def excluded_types(types: pd.Series, dataset: DatasetSection, params_path: Path | None) -> tuple[str, ...]:
    """The question types the params leave out of the evaluation (sorted); a type named in
    ``dataset.include_types`` or ``dataset.exclude_types`` that no question has is an error (a typo would
    otherwise silently evaluate everything or nothing)."""
    present = set(types)
    for name in ("include_types", "exclude_types"):
        for value in getattr(dataset, name) or ():
            if value not in present:
                raise PmragError(f"{params_path or 'params'}: key 'dataset.{name}': question type {value!r} matches "
                                 f"no question of this dataset (types: {', '.join(sorted(present)) or 'none'})")
    kept = set(dataset.include_types) if dataset.include_types is not None else present
    return tuple(sorted(present - (kept - set(dataset.exclude_types))))


def check_analysis_types(types: pd.Series, analysis: AnalysisSection, params_path: Path | None) -> None:
    """``analysis.aggregate_type`` must name a type of the evaluated questions: otherwise Table 8 and the
    aggregate section would silently show zeros (LoCoMo's params name multi-hop)."""
    present = set(types)
    if analysis.aggregate_type not in present:
        raise PmragError(f"{params_path or 'params'}: key 'analysis.aggregate_type': {analysis.aggregate_type!r} "
                         f"matches no evaluated question type (types: {', '.join(sorted(present)) or 'none'}); "
                         "name the dataset's type whose evidence is spread over many chunks")
