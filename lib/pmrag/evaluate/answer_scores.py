"""Scores of an answer (paper 002 §2.4's h(q, M′, S′) → r; paper 000 §9's evidence-attributed answers).

Three families, each a per-question value so that :mod:`pmrag.evaluate.bootstrap` gives intervals and paired
differences as for every other metric:

* **Cited set** (002 §3.3.1's set metrics on what the answer *uses*): with C the memories (chunks) the answer
  cites and G the primary gold (relevance 2), ``cited_precision`` = |C ∩ G| / |C| (0 when C is empty),
  ``cited_recall`` = |C ∩ G| / |G|, ``cited_f1`` = 2|C ∩ G| / (|C| + |G|)
  (:func:`pmrag.evaluate.set_metrics.set_scores`, the retrieved set's formulas, reported beside them).
* **Citation precision and recall** (000 §9's evidence attribution): the same ratios against every judged
  evidence chunk (relevance ≥ 1, primary and supporting): a citation is *supported* when it names a chunk that
  holds evidence.  ``citation_precision`` = supported / cited (0 when nothing is cited), ``citation_recall`` =
  evidence chunks cited / evidence chunks.
* **Answer accuracy as LoCoMo's evaluation computes it** (``task_eval/evaluation.py`` of the LoCoMo release, the
  categories of :mod:`pmrag.ingest.locomo`): the text normalised by :func:`normalize_answer` (commas removed,
  lower-cased, ``string.punctuation`` removed, the words ``a an the and`` removed, whitespace collapsed), each
  word Porter-stemmed (NLTK's ``PorterStemmer()``, the one LoCoMo imports), then token F1 (:func:`token_f1`:
  the SQuAD F1 of the two bags of stems, 0 when they share none).  By category (:func:`locomo_score`):
  single-hop, temporal: token F1 of the whole answer; open-domain: token F1 against the gold's part before its
  first ``;``; multi-hop: :func:`multi_answer_f1` (the gold split at commas, each part's best F1 over the
  answer's comma-separated parts, averaged over the gold's parts); adversarial: 1 when the answer says ``no
  information available`` or ``not mentioned`` (lower-cased), else 0 (:func:`adversarial_score`); a question
  without a gold answer text has no accuracy (NaN).  :func:`locomo_score` scores any other type by token F1, but
  the study applies it to LoCoMo's categories only (:func:`pmrag.evaluate.answers.answer_rows`): the
  normalisation is English and a Japanese answer has no spaces to split at, so the demo's and a LINE study's
  questions get only the cited-set and citation scores.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from pmrag.evaluate.set_metrics import set_scores

ANSWER_METRICS = ("answer_f1",)
CITED_METRICS = ("cited_precision", "cited_recall", "cited_f1")
CITATION_METRICS = ("citation_precision", "citation_recall")
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
"""What LoCoMo's evaluation looks for in an answer to an adversarial (category 5) question."""
_DROPPED_WORDS = re.compile(r"\b(a|an|the|and)\b")   # LoCoMo's pattern: a word between word boundaries
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: commas removed, lower case, ``string.punctuation`` removed, the words ``a``,
    ``an``, ``the`` and ``and`` removed, whitespace runs as one space."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_DROPPED_WORDS.sub(" ", text).split())


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def answer_tokens(text: str) -> list[str]:
    """The Porter stems (NLTK's, LoCoMo's) of the normalised text's words, in order."""
    stem = _stemmer().stem
    return [stem(word) for word in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1: with common = the multiset intersection of the two stem bags,
    P = |common| / |prediction|, R = |common| / |gold|, F1 = 2PR / (P + R); 0 when nothing is common."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1 (multi-hop): mean over the gold's comma-separated parts g of max over the prediction's
    comma-separated parts p of :func:`token_f1` (p, g)."""
    predicted = [part.strip() for part in str(prediction).split(",")]
    expected = [part.strip() for part in str(gold).split(",")]
    return float(np.mean([max(token_f1(p, g) for p in predicted) for g in expected]))


def adversarial_score(prediction: str) -> float:
    """Category 5 (adversarial): 1.0 when the lower-cased answer contains one of :data:`ADVERSARIAL_PHRASES`."""
    text = str(prediction).lower()
    return float(any(phrase in text for phrase in ADVERSARIAL_PHRASES))


def locomo_score(prediction: str, gold: str | None, question_type: str) -> float:
    """One answer's accuracy by its question type (module docstring); NaN when there is no gold answer text
    (an adversarial question needs none)."""
    if question_type == "adversarial":
        return adversarial_score(prediction)
    if gold is None or (isinstance(gold, float) and np.isnan(gold)):
        return float("nan")
    gold = str(gold)
    if question_type == "multi-hop":
        return multi_answer_f1(prediction, gold)
    if question_type == "open-domain":
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


def citation_scores(cited: Iterable[str], gold: Iterable[str]) -> tuple[float, float, float]:
    """``(precision, recall, f1)`` of a cited set C against a non-empty gold set G: |C ∩ G| / |C| (0 when C is
    empty), |C ∩ G| / |G|, 2|C ∩ G| / (|C| + |G|) (:func:`~pmrag.evaluate.set_metrics.set_scores`)."""
    cited, gold = set(cited), set(gold)
    precision, recall, f1 = set_scores([len(cited & gold)], [len(cited)], [len(gold)])
    return float(precision[0]), float(recall[0]), float(f1[0])
