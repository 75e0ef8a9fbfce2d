"""Metric names: one type, one parser and one written form (ranx's ``<metric>@<k>`` strings).

A metric at a cut-off is written ``<name>@<k>``: the paper's ``recall@5``, ``mrr@5``, ``ndcg@5`` (eq. 3–6,
:mod:`pmrag.evaluate.metrics`) at any k, the same three on evidence groups, ``group_recall@5`` …
(:mod:`pmrag.evaluate.groups`), and recall counting each primary-evidence message once, ``message_recall@5``
(:mod:`pmrag.evaluate.message_recall`).  A metric of a retrieved set has no cut-off and is written by its name alone:
``set_precision``, ``set_recall``, ``set_f1`` (:mod:`pmrag.evaluate.set_metrics`).  :func:`parse_metric` is the
only function that takes a written name apart, and ``str(metric)`` writes it back, so the column names of every
saved table and notebook output are the strings they were.

The paper selects by Recall@5, then nDCG@5, then MRR@5 (§6.2): :data:`PAPER_METRICS` holds them in that order
(:mod:`pmrag.evaluate.select`), :data:`TABLE_METRICS` in the order its tables print them (Recall, MRR, nDCG).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pmrag.core.text import shown

RANK_METRICS = ("recall", "mrr", "ndcg")                      # eq. 3–6, at a cut-off k
GROUP_METRICS = ("group_recall", "group_mrr", "group_ndcg")   # the same three on evidence groups, at k
MESSAGE_METRICS = ("message_recall",)                         # each primary-evidence message once, at k
SET_METRICS = ("set_precision", "set_recall", "set_f1")       # of a retrieved set, no cut-off
_AT_K = RANK_METRICS + GROUP_METRICS + MESSAGE_METRICS
KNOWN = _AT_K + SET_METRICS
_LABELS = {"recall": "Recall", "mrr": "MRR", "ndcg": "nDCG"}   # the paper's spelling in its tables
_WRITTEN = re.compile(r"(?P<name>[a-z_0-9]+)(?:@(?P<k>[0-9]+))?")


class InvalidMetric(ValueError):
    """A malformed or unknown metric name."""


@dataclass(frozen=True)
class Metric:
    """A metric and its cut-off: ``Metric("recall", 5)`` is ``recall@5``; a set metric has ``k = None``."""

    name: str
    k: int | None = None

    def __post_init__(self):
        if self.name not in KNOWN:
            raise InvalidMetric(f"unknown metric {shown(self.name)} (known: {_known()})")
        if self.name in _AT_K:
            if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
                raise InvalidMetric(f"{self.name} needs a cut-off k ≥ 1 ({self.name}@5), got {shown(self.k)}")
            object.__setattr__(self, "k", int(self.k))
        elif self.k is not None:
            raise InvalidMetric(f"{self.name} has no cut-off, got k={shown(self.k)}")

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    def at(self, k: int) -> Metric:
        """The same metric at cut-off ``k`` (``RECALL5.at(20)`` is ``recall@20``)."""
        return Metric(self.name, k)

    @property
    def label(self) -> str:
        """The paper's spelling: ``Recall@5``, ``MRR@5``, ``nDCG@5`` (the name itself for the others)."""
        return f"{_LABELS[self.name]}@{self.k}" if self.name in _LABELS else str(self)


def parse_metric(text: Metric | str) -> Metric:
    """``"ndcg@5"`` → ``Metric("ndcg", 5)``, ``"set_f1"`` → ``Metric("set_f1")``; a metric itself is returned.

    Anything else is an :class:`InvalidMetric` (a ``ValueError``) naming the text and the known metrics.
    """
    if isinstance(text, Metric):
        return text
    match = _WRITTEN.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise InvalidMetric(f"{shown(text)} is not a metric name: expected <metric>@<k> or a set metric ({_known()})")
    k = match.group("k")
    try:
        return Metric(match.group("name"), None if k is None else int(k))
    except InvalidMetric as error:
        raise InvalidMetric(f"{shown(text)} is not a metric name: {error}") from None


def is_metric(text) -> bool:
    """Whether ``text`` (a column name, say) is a well-formed metric name (parsed, never raising)."""
    try:
        parse_metric(text)
    except InvalidMetric:
        return False
    return True


def metric_columns(columns: Iterable) -> list[str]:
    """The metric names among ``columns`` (a frame's columns), in their order."""
    return [c for c in columns if is_metric(c)]


def at_k(k: int, names: Iterable[str] = RANK_METRICS) -> tuple[Metric, ...]:
    """The metrics ``names`` at cut-off ``k``, in that order (by default the paper's three in table order)."""
    return tuple(Metric(name, k) for name in names)


def _known() -> str:
    return ", ".join([*(f"{name}@k" for name in _AT_K), *SET_METRICS])


RECALL5, MRR5, NDCG5 = at_k(5)
PAPER_METRICS = (RECALL5, NDCG5, MRR5)    # the selection order of §6.2
TABLE_METRICS = (RECALL5, MRR5, NDCG5)    # the order of the paper's tables (Table 3, 4)
PAPER_COLUMNS = tuple(map(str, TABLE_METRICS))    # their column names, in table order
SET_PRECISION, SET_RECALL, SET_F1 = (Metric(name) for name in SET_METRICS)
