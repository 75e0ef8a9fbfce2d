"""The evaluation set: the questions a study scores and their chunk-level gold (§4.2).

A question is evaluable when at least one chunk holds its primary evidence (relevance 2); the paper drops the
others (108 → 100).  The params may leave question types out (``dataset.include_types`` / ``exclude_types``:
LoCoMo's adversarial questions have no evidence to retrieve).
"""

from __future__ import annotations

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


def evaluation_set(questions: pd.DataFrame, qrels: pd.DataFrame, dataset: DatasetSection, analysis: AnalysisSection,
                   params_path: Path | None = None) -> EvaluationSet:
    """The questions with primary gold whose type the params keep, and their qrels; ``analysis.aggregate_type``
    must name one of their types (``params_path`` names the params file in errors)."""
    excluded = excluded_types(questions["type"], dataset, params_path)
    evaluable = primary_gold_questions(qrels)
    kept = questions[questions["question_id"].isin(evaluable) & ~questions["type"].isin(excluded)].reset_index(drop=True)
    check_analysis_types(kept["type"], analysis, params_path)
    kept_qrels = qrels[qrels["question_id"].isin(kept["question_id"])].reset_index(drop=True)
    return EvaluationSet(kept, kept_qrels, len(questions), excluded)


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
