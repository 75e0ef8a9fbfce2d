"""Typed names of what a study ranks with: single retrievers and fused (hybrid) configurations.

One format, one parse and one file-name rule each; nothing else in the package takes a name apart.

* :class:`RetrieverId` — ``<representation>_<method>[_<variant>]``: ``embedding_text_bm25`` (the paper's
  names), ``raw_text_bm25_sudachi`` (a tokenizer variant).  Representations contain underscores, so the
  parse matches the known representations first; a method and a variant are ``[a-z0-9]+`` words.
* :class:`HybridId` — ``hybrid:<first>+<second>@<β>`` for the paper's min-max linear fusion
  (``hybrid:raw_text_bm25+embedding_text_vector@0.35``).  β is written exactly (:func:`format_beta`: at least
  two decimals, as many as the value needs), so a fine β grid never gives two configurations one name.
* File names: ``<retriever>.trec`` and ``hybrid__<first>+<second>__beta<β>.trec`` (:meth:`file_stem`);
  TREC tags replace ``:`` (:meth:`run_tag`).
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass

REPRESENTATIONS = ("raw_text", "summary", "embedding_text")
_WORD = re.compile(r"[a-z0-9]+")
HYBRID_PREFIX = "hybrid:"


class InvalidName(ValueError):
    """A malformed retriever or hybrid name."""


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60


def shown(value) -> str:
    """``repr(value)`` cut to about 60 characters: a message never grows with its input."""
    return _SHORT.repr(value)


def format_beta(beta: float) -> str:
    """β with at least two decimals and no rounding: 0.35 → ``0.35``, 0.5 → ``0.50``, 0.005 → ``0.005``."""
    text = f"{float(beta):.10f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


@dataclass(frozen=True, order=True)
class RetrieverId:
    """A single retriever: which representation it searches, its method and an optional variant."""

    representation: str
    method: str
    variant: str | None = None

    def __post_init__(self):
        if self.representation not in REPRESENTATIONS:
            raise InvalidName(f"unknown representation {shown(self.representation)} (expected {', '.join(REPRESENTATIONS)})")
        for part, value in (("method", self.method), ("variant", self.variant)):
            if value is not None and not _WORD.fullmatch(value):
                raise InvalidName(f"a retriever {part} is a lowercase word of letters and digits, got {shown(value)}")

    def __str__(self) -> str:
        return "_".join(p for p in (self.representation, self.method, self.variant) if p)

    @classmethod
    def parse(cls, text: str) -> RetrieverId:
        """``embedding_text_bm25`` → ``RetrieverId("embedding_text", "bm25")``; anything else is a ``ValueError``."""
        if not isinstance(text, str):
            raise InvalidName(f"a retriever name is a string, got {shown(text)}")
        for representation in sorted(REPRESENTATIONS, key=len, reverse=True):
            if text.startswith(representation + "_"):
                method, _, variant = text[len(representation) + 1:].partition("_")
                if not method or (variant == "" and text.endswith("_")):
                    break
                return cls(representation, method, variant or None)
        raise InvalidName(f"{shown(text)} is not a retriever name: expected <representation>_<method>[_<variant>] with "
                         f"representation one of {', '.join(REPRESENTATIONS)}")

    def file_stem(self) -> str:
        return str(self)

    def run_tag(self) -> str:
        return str(self)


@dataclass(frozen=True)
class HybridId:
    """A fused configuration: two retrievers, the fusion (min-max linear, §5.3) and the exact β."""

    first: RetrieverId
    second: RetrieverId
    beta: float
    fusion: str = "minmax"

    def __post_init__(self):
        if self.fusion != "minmax":
            raise InvalidName(f"unknown fusion {shown(self.fusion)} (known: minmax)")
        if not 0 <= float(self.beta) <= 1:
            raise InvalidName(f"β must be in [0, 1], got {shown(self.beta)}")
        object.__setattr__(self, "beta", float(self.beta))

    def __str__(self) -> str:
        return f"{HYBRID_PREFIX}{self.first}+{self.second}@{format_beta(self.beta)}"

    @property
    def pairing(self) -> tuple[RetrieverId, RetrieverId]:
        return self.first, self.second

    @classmethod
    def parse(cls, text: str) -> HybridId:
        """``hybrid:a+b@0.35`` → ``HybridId(a, b, 0.35)``."""
        match = re.fullmatch(rf"{re.escape(HYBRID_PREFIX)}([^+@]+)\+([^+@]+)@(\d+(?:\.\d+)?)", text or "")
        if not match:
            raise InvalidName(f"{shown(text)} is not a hybrid name: expected hybrid:<first>+<second>@<β>")
        return cls(RetrieverId.parse(match.group(1)), RetrieverId.parse(match.group(2)), float(match.group(3)))

    def file_stem(self) -> str:
        return f"hybrid__{self.first}+{self.second}__beta{format_beta(self.beta)}"

    def run_tag(self) -> str:
        return str(self).replace(":", "_")


MethodId = RetrieverId | HybridId


def parse_method(text: str) -> MethodId:
    """A retriever or hybrid name, typed."""
    return HybridId.parse(text) if str(text).startswith(HYBRID_PREFIX) else RetrieverId.parse(text)


def is_hybrid(text: str) -> bool:
    """Whether ``text`` is a well-formed hybrid name (parsed, never raising)."""
    try:
        HybridId.parse(str(text))
    except InvalidName:
        return False
    return True
