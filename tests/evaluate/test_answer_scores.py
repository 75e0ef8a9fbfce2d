"""Answer scores (pmrag.evaluate.answer_scores): LoCoMo's token F1 against a reimplementation of its published
evaluation (task_eval/evaluation.py: normalize_answer, f1_score, f1 and the category rules), citation scores."""

import math
import re
import string
from collections import Counter

import numpy as np
import pytest
from nltk.stem import PorterStemmer

from pmrag.evaluate.answer_scores import (adversarial_score, answer_tokens, citation_scores, locomo_score,
                                          multi_answer_f1, normalize_answer, token_f1)

# ---------------------------------------------------------------- LoCoMo's evaluation, written as it publishes it

_ps = PorterStemmer()


def reference_normalize(s):
    s = s.replace(",", "")

    def remove_articles(text):
        return re.sub(r"\b(a|an|the|and)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def reference_f1_score(prediction, ground_truth):
    prediction_tokens = [_ps.stem(w) for w in reference_normalize(prediction).split()]
    ground_truth_tokens = [_ps.stem(w) for w in reference_normalize(ground_truth).split()]
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def reference_f1(prediction, ground_truth):
    predictions = [p.strip() for p in prediction.split(",")]
    ground_truths = [g.strip() for g in ground_truth.split(",")]
    return np.mean([max([reference_f1_score(prediction, gt) for prediction in predictions]) for gt in ground_truths])


def reference_score(output, answer, category):
    answer = str(answer)
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category in [2, 3, 4]:
        return reference_f1_score(output, answer)
    if category in [1]:
        return reference_f1(output, answer)
    return 1 if "no information available" in output.lower() or "not mentioned" in output.lower() else 0


CATEGORY = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EXAMPLES = [   # (model output, gold answer, LoCoMo category)
    ("She went to the LGBTQ support group on 7 May 2023.", "7 May 2023", 2),
    ("The week before 9 June 2023", "The week before 9 June 2023", 2),
    ("Caroline is researching adoption agencies", "Adoption agencies", 4),
    ("running, painting and swimming", "Pottery, camping, painting, swimming", 1),
    ("Melanie painted a lake sunrise", "pottery, camping", 1),
    ("Likely no; she is a Christian", "Likely no; though she thinks it's fine", 3),
    ("Psychology, counseling certification", "Psychology; counseling", 3),
    ("That was not mentioned in the conversation.", "Self-care is important", 5),
    ("Sweden", "Sweden", 5),
    ("an Apple, the pear and a banana!", "apples; pears", 4),
    ("The kids' drawings—of the beach", "drawing the beaches", 4),
    ("", "something", 4),
]


@pytest.mark.agreement
@pytest.mark.parametrize("output, answer, category", EXAMPLES)
def test_locomo_score_agrees_with_locomos_published_evaluation(output, answer, category):
    assert math.isclose(locomo_score(output, answer, CATEGORY[category]), reference_score(output, answer, category),
                        abs_tol=1e-12)


@pytest.mark.agreement
@pytest.mark.parametrize("text", ["The Cat, and a DOG!", "  an  apple's — core ", "Running; the runners ran.", "",
                                  "and", "the-end of an era"])
def test_normalisation_agrees_with_locomos(text):
    assert normalize_answer(text) == reference_normalize(text)
    assert answer_tokens(text) == [_ps.stem(w) for w in reference_normalize(text).split()]


def test_token_f1_by_hand():
    # prediction stems carolin, is, research, adopt, agenc; gold adopt, agenc: P = 2/5, R = 1, F1 = 4/7
    assert math.isclose(token_f1("Caroline is researching adoption agencies", "Adoption agencies"), 4 / 7,
                        abs_tol=1e-12)
    assert math.isclose(token_f1("adoption agencies", "Adoption agencies."), 1.0)
    assert token_f1("nothing shared", "other words") == 0.0
    assert math.isclose(token_f1("red red blue", "red"), 2 * (1 / 3) * 1 / (1 / 3 + 1))   # multiset: one red counts


def test_multi_answer_f1_averages_each_gold_parts_best_match():
    # gold parts: pottery (no match), camping (matched exactly) -> (0 + 1) / 2
    assert multi_answer_f1("camping, hiking", "pottery, camping") == 0.5
    assert multi_answer_f1("pottery and camping", "pottery, camping") < 1.0   # one part holds both: each F1 2/3


def test_adversarial_answers_score_by_the_phrases_alone():
    assert adversarial_score("No information available.") == 1.0
    assert adversarial_score("It is NOT MENTIONED anywhere") == 1.0
    assert adversarial_score("Sweden") == 0.0
    assert locomo_score("not mentioned", None, "adversarial") == 1.0   # needs no gold text


def test_a_question_without_gold_text_has_no_accuracy():
    assert math.isnan(locomo_score("anything", None, "single-hop"))
    assert math.isnan(locomo_score("anything", float("nan"), "temporal"))


def test_citation_scores_are_set_scores_and_empty_citations_score_zero():
    assert citation_scores(["a", "b"], ["b", "c", "d"]) == pytest.approx((0.5, 1 / 3, 0.4))
    assert citation_scores([], ["b"]) == (0.0, 0.0, 0.0)
    assert citation_scores(["b", "b"], ["b"]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="non-empty gold"):
        citation_scores(["a"], [])
