"""The evaluation set (pmrag.evaluate.gold): a study without questions, or without a question that can be
evaluated, says so in one line instead of complaining about ``analysis.aggregate_type``."""

from pathlib import Path

import pandas as pd
import pytest

from pmrag.core.errors import PmragError
from pmrag.core.params import AnalysisSection, DatasetSection
from pmrag.evaluate.gold import check_questions_given, evaluation_set

PARAMS = Path("/study/p.yaml")
QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2", "q3"], "type": ["aggregate", "contextual", "adversarial"]})
QRELS = pd.DataFrame({"question_id": ["q1", "q1", "q2", "q3"], "chunk_id": ["c1", "c2", "c1", "c3"],
                      "relevance": [2, 1, 1, 2]})


def test_no_questions_is_said_with_how_to_give_them():
    empty = QUESTIONS.iloc[0:0]
    with pytest.raises(PmragError) as info:
        evaluation_set(empty, QRELS.iloc[0:0], DatasetSection(), AnalysisSection(), PARAMS)
    message = str(info.value)
    assert message.startswith(f"{PARAMS}: the study has no questions to evaluate; ") and "\n" not in message
    assert all(way in message for way in ("'dataset.questions'", "LoCoMo", "'dataset.synthetic.enabled: true'"))
    assert "aggregate_type" not in message
    check_questions_given(QUESTIONS, PARAMS)   # some: nothing to say


def test_no_evaluable_question_says_why_each_was_dropped():
    dataset = DatasetSection(exclude_types=("adversarial",))
    qrels = QRELS[QRELS["question_id"] != "q1"]   # q1 without primary gold, q2 supporting only, q3 left out
    with pytest.raises(PmragError) as info:
        evaluation_set(QUESTIONS, qrels, dataset, AnalysisSection(), PARAMS)
    assert str(info.value) == (f"{PARAMS}: none of the study's 3 questions can be evaluated: 2 without a chunk holding "
                               "their primary evidence (relevance 2), 1 of types left out "
                               "(dataset.include_types / exclude_types)")


def test_evaluable_questions_are_kept_with_their_qrels():
    kept = evaluation_set(QUESTIONS, QRELS, DatasetSection(exclude_types=("adversarial",)), AnalysisSection(), PARAMS)
    assert list(kept.questions["question_id"]) == ["q1"] and kept.n_questions == 3
    assert list(kept.qrels["chunk_id"]) == ["c1", "c2"] and kept.excluded_types == ("adversarial",)
