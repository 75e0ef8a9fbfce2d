"""Answer scores: LoCoMo's token F1 and categories, citations parsed, refused and scored
(pmrag.evaluate.answer_scores)."""

from __future__ import annotations

import re
import string
from collections import Counter

import pytest

from pmrag.evaluate.answer_scores import (citation_scores, locomo_answer_score, multi_answer_f1, normalise_answer,
                                          parse_citations, token_f1)


def published_normalisation(s: str) -> str:
    """LoCoMo's normalize_answer as published (task_eval/evaluation.py), step by step in its own order."""
    s = s.replace(",", "")

    def remove_articles(text):
        return re.sub(r"\b(a|an|the|and)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def published_f1(prediction: str, ground_truth: str) -> float:
    import Stemmer

    stem = Stemmer.Stemmer("porter").stemWord
    p = [stem(w) for w in published_normalisation(prediction).split()]
    g = [stem(w) for w in published_normalisation(ground_truth).split()]
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


CASES = [
    ("The cat, and the dog!", "a dog"),
    ("Caroline went hiking in May 2023.", "hiking, May 2023"),
    ("She's running the races", "ran a race"),
    ("", "Paris"),
    ("Melanie painted a sunrise; then a lake.", "a sunrise"),
    ("THE END", "the end and the start"),
]


@pytest.mark.agreement
@pytest.mark.parametrize("prediction, gold", CASES)
def test_token_f1_agrees_with_a_reimplementation_of_the_published_normalisation(prediction, gold):
    assert normalise_answer(prediction) == published_normalisation(prediction)
    assert token_f1(prediction, gold) == pytest.approx(published_f1(prediction, gold), abs=1e-12)


def test_token_f1_stems_and_counts_tokens_as_a_multiset():
    assert normalise_answer("The Café, and a bar.") == "café bar"
    assert token_f1("running races", "ran a race") == pytest.approx(0.5)      # race/races share a stem; ran ≠ run
    assert token_f1("dog dog", "dog") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("nothing shared", "else") == 0.0


def test_locomo_categories_score_as_its_evaluation_does():
    assert multi_answer_f1("hiking, painting", "painting, hiking, swimming") == pytest.approx(2 / 3)
    assert locomo_answer_score("hiking, painting", "painting, hiking, swimming", 1) == pytest.approx(2 / 3)
    assert locomo_answer_score("7 May 2023", "7 May 2023", 2) == 1.0
    assert locomo_answer_score("a lake", "a lake; or a river", 3) == 1.0        # the gold before its first ';'
    assert locomo_answer_score("No information available.", "x", 5) == 1.0
    assert locomo_answer_score("It was not mentioned", "x", 5) == 1.0
    assert locomo_answer_score("Paris", "x", 5) == 0.0
    with pytest.raises(ValueError, match="category"):
        locomo_answer_score("a", "a", 6)


def test_citations_outside_the_context_are_refused_and_counted_each_valid_one_once():
    found = parse_citations("At the lake [c2], again [c2] and [c9]; see [c1]. [not an id]", ["c1", "c2", "c3"])
    assert found.cited == ("c2", "c1") and found.refused == 1        # c9 was not shown; "[not an id]" is no id
    assert parse_citations("no citation", ["c1"]).cited == ()
    assert citation_scores(("c2", "c1"), {"c1", "c4"}) == (0.5, 0.5)
    assert citation_scores((), {"c1"}) == (0.0, 0.0)
    with pytest.raises(ValueError, match="non-empty gold"):
        citation_scores(("c1",), set())


def test_answer_rows_score_the_cited_ids_as_a_set_and_as_citations():
    import pandas as pd

    from pmrag.evaluate.answer_scores import answer_rows

    answers = pd.DataFrame({"retriever": ["g", "g"], "question_id": ["q1", "q2"],
                            "answer": ["At the lake [c1] [c2] [c7]", "No information available."],
                            "context_ids": [["c1", "c2", "c3"], ["c1"]]})
    qrels = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "chunk_id": ["c1", "c2", "c3"], "relevance": [2, 1, 2]})
    rows = answer_rows(answers, qrels, pd.Series({"q1": "a", "q2": "b"})).set_index("question_id")
    assert rows.loc["q1", ["cited", "refused"]].tolist() == [2, 1]                 # c7 was not in the context
    assert rows.loc["q1", ["set_precision", "set_recall"]].tolist() == [0.5, 1.0]   # primary gold: c1
    assert rows.loc["q1", ["citation_precision", "citation_recall"]].tolist() == [1.0, 1.0]   # evidence: c1, c2
    assert rows.loc["q2", ["cited", "set_precision", "set_recall", "citation_recall"]].tolist() == [0, 0.0, 0.0, 0.0]
