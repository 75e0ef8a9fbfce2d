"""Scores of an answer step (paper 002 §2.4's h(q, M′, S′); paper 000 §9's evidence-attributed answers).

Two readings of one generated answer:

* **Answer accuracy as LoCoMo computes it** (snap-research/locomo, ``task_eval/evaluation.py``):
  :func:`normalise_answer` (commas removed, lower-cased, ASCII punctuation removed, the words a, an, the, and
  removed, whitespace runs as one space), tokens stemmed, then :func:`token_f1` (the harmonic mean of token
  precision and recall over the multiset of common tokens, 0 when none is shared).  Per LoCoMo category
  (:func:`locomo_answer_score`): 1 (multi-hop) splits both answers at commas and averages, over the gold parts,
  the best F1 of any predicted part; 2 and 4 are one F1; 3 scores against the gold's text before its first
  ``;``; 5 (adversarial) is 1 when the answer says "no information available" or "not mentioned", else 0.
  LoCoMo stems with NLTK's ``PorterStemmer`` (its NLTK-extensions mode); we stem with the original Porter
  algorithm of PyStemmer (``Stemmer.Stemmer("porter")``), which agrees on ordinary English words and differs
  on a few irregular ones NLTK special-cases (e.g. "dying", "skies"), so figures may differ from LoCoMo's in
  the third decimal.
* **Citations** (:func:`parse_citations`, :func:`citation_scores`): an answer cites the memories or chunks it
  uses as ``[id]``; an id not in the context it was given is refused and counted (a model cannot cite what it
  was not shown), each valid id counts once; precision and recall of the cited ids against the gold ids
  (precision 0 for an answer that cites nothing, as :mod:`pmrag.evaluate.set_metrics` scores an empty set).
  :func:`answer_rows` scores a table of answers per question: 002's set metrics on the memories an answer
  cites (primary gold) beside 000 §9's citation precision / recall (every judged evidence chunk).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = frozenset(string.punctuation)
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
"""LoCoMo category 5: an answer holding one of these (case-insensitively) declines correctly."""
_CITATION = re.compile(r"\[([^\[\]\s]+)\]")


def normalise_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``: commas dropped, lower case, punctuation dropped, a/an/the/and dropped,
    whitespace runs as one space."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=1)
def _porter():
    import Stemmer

    return Stemmer.Stemmer("porter")


def answer_tokens(text: str) -> list[str]:
    """The normalised answer's words, each stemmed (module docstring)."""
    return _porter().stemWords(normalise_answer(text).split())


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1_score``: token F1 of the stemmed, normalised texts (0 when no token is shared)."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1`` for category 1: both split at commas; the mean over gold parts of the best part's F1."""
    parts = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)


def locomo_answer_score(prediction: str, gold: str, category: int) -> float:
    """One answer's score by its LoCoMo category (module docstring); another category is a ``ValueError``."""
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category in (2, 4):
        return token_f1(prediction, gold)
    if category == 3:
        return token_f1(prediction, str(gold).split(";")[0].strip())
    if category == 5:
        lowered = prediction.lower()
        return float(any(phrase in lowered for phrase in ADVERSARIAL_PHRASES))
    raise ValueError(f"LoCoMo category must be 1–5, got {category!r}")


@dataclass(frozen=True)
class Citations:
    """The ids an answer cites that were in its context (first-citation order, each once) and how many cited
    ids were not (refused)."""

    cited: tuple[str, ...]
    refused: int


def parse_citations(answer: str, context_ids: Iterable[str]) -> Citations:
    """``[id]`` citations of ``answer`` checked against the ids of the context it was given (module docstring)."""
    allowed = set(context_ids)
    cited: dict[str, None] = {}
    refused = 0
    for found in _CITATION.findall(answer):
        if found in allowed:
            cited[found] = None
        else:
            refused += 1
    return Citations(tuple(cited), refused)


def citation_scores(cited: Sequence[str], gold: Iterable[str]) -> tuple[float, float]:
    """``(precision, recall)`` of the cited ids against the gold ids (a non-empty set; precision 0 when nothing
    is cited)."""
    gold = set(gold)
    if not gold:
        raise ValueError("citation recall needs a non-empty gold set")
    hits = len(set(cited) & gold)
    return (hits / len(set(cited)) if cited else 0.0), hits / len(gold)


def answer_rows(answers: pd.DataFrame, qrels, types: pd.Series) -> pd.DataFrame:
    """Per-question scores of answers: rows ``retriever, question_id, question_type, cited, refused,
    set_precision, set_recall, set_f1, citation_precision, citation_recall``.

    ``answers`` has ``retriever, question_id, answer, context_ids`` (the ids the answer was given, a list).  The
    cited ids (:func:`parse_citations`) are scored as a retrieved set twice: 002's set precision / recall / F1
    against primary gold (:func:`pmrag.evaluate.set_metrics.per_question_set_rows`, an answer citing nothing an
    empty set), and 000 §9's citation precision / recall against every judged evidence chunk (relevance ≥ 1).
    """
    from pmrag.evaluate.set_metrics import per_question_set_rows

    parsed = [parse_citations(text, ids) for text, ids in zip(answers["answer"], answers["context_ids"])]
    cited = pd.DataFrame([(r, q, c) for r, q, p in zip(answers["retriever"], answers["question_id"], parsed)
                          for c in p.cited], columns=["retriever", "question_id", "chunk_id"])
    questions = list(dict.fromkeys(answers["question_id"]))
    retrievers = list(dict.fromkeys(answers["retriever"]))
    primary = per_question_set_rows(cited, qrels, types, questions=questions, retrievers=retrievers)
    evidence = per_question_set_rows(cited, qrels, types, questions=questions, retrievers=retrievers, min_relevance=1)
    counts = pd.DataFrame({"retriever": answers["retriever"].to_numpy(), "question_id": answers["question_id"].to_numpy(),
                           "cited": [len(p.cited) for p in parsed], "refused": [p.refused for p in parsed]})
    rows = primary.merge(counts, on=["retriever", "question_id"], how="left").merge(
        evidence[["retriever", "question_id", "set_precision", "set_recall"]].rename(
            columns={"set_precision": "citation_precision", "set_recall": "citation_recall"}),
        on=["retriever", "question_id"])
    return rows[["retriever", "question_id", "question_type", "cited", "refused", "set_precision", "set_recall",
                 "set_f1", "citation_precision", "citation_recall"]]
