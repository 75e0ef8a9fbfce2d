"""The answer step over a retriever's output (paper 002 §2.4, h(q, M′, S′) → r; paper 000 §9): the context an
answer is written from, and the offline stand-in that writes one.

* **Context** (:class:`ContextItem`): one item per retrieved memory or chunk, its id and its text.  For the graph,
  :func:`graph_context` gives each memory of M′ with its semantic nodes S′ (summary, participants, time span,
  named things, key phrases, sentiment), one ``subkind: label`` line each, as 002 §2.4 hands them to the model;
  a flat retriever's top k chunks are items of their own text.
* **The offline stand-in** (:func:`extractive_answer`, labelled :data:`STAND_IN_LABEL` wherever its answers are
  shown): no model.  Each item's text is cut into sentences (after 。！？.!? or a line break); the sentence
  holding most of the question's terms (the offline graph extractor's terms: SudachiPy nouns for Japanese,
  the English word rules otherwise; :func:`pmrag.retrieve.graph_interest.question_terms`; matched
  case-insensitively as substrings) is the answer, with
  its item's citation ``[id]`` (ties: the earlier item, then the earlier sentence).  A context where no
  sentence holds a question term gets LoCoMo's declining answer, "No information available.", citing nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

STAND_IN_LABEL = "extractive stand-in (the best-matching sentence of the context, cited), not an LLM"
NO_ANSWER = "No information available."
_SENTENCE_END = re.compile(r"(?<=[。！？!?.])\s*|\n+")


@dataclass(frozen=True)
class ContextItem:
    """One retrieved memory or chunk as the answer step sees it: the id it is cited by and its text."""

    item_id: str
    text: str


def graph_context(graph, memory_ids: Sequence[str]) -> list[ContextItem]:
    """M′ with S′ (002 §2.4): each memory of ``memory_ids`` (in that order) with one ``subkind: label`` line per
    semantic node of ``graph`` (a :class:`~pmrag.represent.graph.MemoryGraph`)."""
    return [ContextItem(memory_id, "\n".join(f"{node.subkind}: {node.label}"
                                              for node in graph.neighbours(f"m:{memory_id}", "memory-semantic")))
            for memory_id in memory_ids]


def sentences(text: str) -> list[str]:
    """``text`` cut after 。！？.!? and at line breaks, each piece stripped, empty ones dropped."""
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece and piece.strip()]


def extractive_answer(question: str, context: Sequence[ContextItem], split_mode: str = "C") -> str:
    """The stand-in's answer to ``question`` from ``context`` (module docstring): a sentence and its ``[id]``."""
    from pmrag.retrieve.graph_interest import question_terms

    terms = [term.casefold() for term in question_terms([question], split_mode)[0]]
    best, best_hits = None, 0
    for item in context:
        for sentence in sentences(item.text):
            folded = sentence.casefold()
            hits = sum(term in folded for term in terms)
            if hits > best_hits:
                best, best_hits = f"{sentence} [{item.item_id}]", hits
    return best if best is not None else NO_ANSWER
