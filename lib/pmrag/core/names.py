"""Typed names of what a study ranks with: single retrievers and fused (hybrid) configurations.

One format, one parse and one file-name rule each; nothing else in the package takes a name apart.

* :class:`RetrieverId` — ``<representation>_<method>[_<variant>]``: ``embedding_text_bm25`` (the paper's
  names), ``raw_text_bm25_sudachi`` (a tokenizer variant).  Representations contain underscores, so the
  parse matches the known representations first; a method and a variant are ``[a-z0-9]+`` words.
* :class:`HybridId` — ``hybrid:<first>+<second>@<β>`` for the paper's min-max linear fusion
  (``hybrid:raw_text_bm25+embedding_text_vector@0.35``), ``hybrid-<fusion>:<first>+<second>@<β>`` for the
  fusions compared beside it (``hybrid-rrf:…``, ``hybrid-combmnz:…``, :mod:`pmrag.retrieve.fusion`).  The
  paper's names carry no fusion word, so every name written before other fusions existed is unchanged and
  means what it meant; ``hybrid-minmax:`` is refused (one spelling per configuration).  β is written exactly
  (:func:`format_beta`: at least two decimals, as many as the value needs), so a fine β grid never gives two
  configurations one name.  RRF's k is a study parameter (``hybrid.rrf_k``), not part of the name.
* File names: ``<retriever>.trec`` and ``hybrid[-<fusion>]__<first>+<second>__beta<β>.trec``
  (:meth:`file_stem`); TREC tags replace ``:`` (:meth:`run_tag`).  Retriever names hold neither ``+``, ``@``
  nor ``-``, so names, stems and tags of different configurations never coincide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pmrag.core.text import shown

PAPER_REPRESENTATIONS = ("raw_text", "summary", "embedding_text")
# embedding_text's parts alone and summary + excerpt (the §8 ablation, :mod:`pmrag.represent.representations`)
ABLATION_REPRESENTATIONS = ("prefix", "excerpt", "summary_excerpt")
REPRESENTATIONS = PAPER_REPRESENTATIONS + ABLATION_REPRESENTATIONS
_WORD = re.compile(r"[a-z0-9]+")
HYBRID_PREFIX = "hybrid:"
# the paper's min-max linear fusion (eq. 15) first; the same tuple as pmrag.core.params.FUSIONS
FUSIONS = ("minmax", "rrf", "combmnz")
PAPER_FUSION = "minmax"
_HYBRID = re.compile(r"hybrid(?:-(?P<fusion>[a-z0-9]+))?:(?P<first>[^+@]+)\+(?P<second>[^+@]+)@(?P<beta>\d+(?:\.\d+)?)")


class InvalidName(ValueError):
    """A malformed retriever or hybrid name."""


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
    """A fused configuration: two retrievers, the exact β weighting the first, and the fusion (one of
    :data:`FUSIONS`; ``minmax``, the paper's min-max linear fusion of §5.3, by default)."""

    first: RetrieverId
    second: RetrieverId
    beta: float
    fusion: str = PAPER_FUSION

    def __post_init__(self):
        if self.fusion not in FUSIONS:
            raise InvalidName(f"unknown fusion {shown(self.fusion)} (known: {', '.join(FUSIONS)})")
        if not 0 <= float(self.beta) <= 1:
            raise InvalidName(f"β must be in [0, 1], got {shown(self.beta)}")
        object.__setattr__(self, "beta", float(self.beta))

    @property
    def _kind(self) -> str:
        """``hybrid`` for the paper's fusion, ``hybrid-<fusion>`` for the others."""
        return "hybrid" if self.fusion == PAPER_FUSION else f"hybrid-{self.fusion}"

    def __str__(self) -> str:
        return f"{self._kind}:{self.first}+{self.second}@{format_beta(self.beta)}"

    @property
    def pairing(self) -> tuple[RetrieverId, RetrieverId]:
        return self.first, self.second

    @classmethod
    def of(cls, first: RetrieverId | str, second: RetrieverId | str, beta: float,
           fusion: str = PAPER_FUSION) -> HybridId:
        """A hybrid from its two retrievers' names or ids (a sweep row's ``bm25, vector, beta[, fusion]``):
        ``HybridId.of("raw_text_bm25", "summary_vector", 0.35)``; a malformed name is an :class:`InvalidName`."""
        return cls(_retriever(first), _retriever(second), beta, fusion)

    @classmethod
    def parse(cls, text: str) -> HybridId:
        """``hybrid:a+b@0.35`` → ``HybridId(a, b, 0.35)``, ``hybrid-rrf:a+b@0.35`` → ``HybridId(a, b, 0.35, "rrf")``;
        anything else is an :class:`InvalidName`."""
        match = _HYBRID.fullmatch(text) if isinstance(text, str) else None
        if not match:
            raise InvalidName(f"{shown(text)} is not a hybrid name: expected hybrid[-<fusion>]:<first>+<second>@<β>")
        fusion = match.group("fusion")
        if fusion == PAPER_FUSION or (fusion is not None and fusion not in FUSIONS):
            raise InvalidName(f"{shown(text)} names no known fusion: hybrid: (minmax) or "
                              f"{', '.join(f'hybrid-{f}:' for f in FUSIONS if f != PAPER_FUSION)}")
        return cls(RetrieverId.parse(match.group("first")), RetrieverId.parse(match.group("second")),
                   float(match.group("beta")), fusion or PAPER_FUSION)

    def file_stem(self) -> str:
        return f"{self._kind}__{self.first}+{self.second}__beta{format_beta(self.beta)}"

    def run_tag(self) -> str:
        return str(self).replace(":", "_")


MethodId = RetrieverId | HybridId


def _retriever(value: RetrieverId | str) -> RetrieverId:
    return value if isinstance(value, RetrieverId) else RetrieverId.parse(value)


def parse_method(text: str) -> MethodId:
    """A retriever or hybrid name, typed (no representation starts with ``hybrid``)."""
    return HybridId.parse(text) if str(text).startswith("hybrid") else RetrieverId.parse(text)


def is_hybrid(text: str) -> bool:
    """Whether ``text`` is a well-formed hybrid name of any fusion (parsed, never raising)."""
    try:
        HybridId.parse(str(text))
    except InvalidName:
        return False
    return True


@dataclass(frozen=True, order=True)
class StageKey:
    """A stage of a study's graph: its name and, for a stage made once per item, the item (``vectors`` of
    ``summary``, ``runs`` of ``raw_text_bm25``, ``notebook`` of ``03_retrievers``).  Written ``name`` or
    ``name:item`` in status lines and records; :meth:`of` reads that form back, for names typed by a person."""

    name: str
    item: str = ""

    def __post_init__(self):
        if not _STAGE_WORD.fullmatch(self.name) or ":" in self.item:
            raise InvalidName(f"a stage is named by a lowercase word and an optional item without ':', got "
                              f"{shown(self.name)}, {shown(self.item)}")

    def __str__(self) -> str:
        return f"{self.name}:{self.item}" if self.item else self.name

    def file_stem(self) -> str:
        """The stage's file name in the run folder's ``stages/`` (no ``:``, which some file systems refuse)."""
        return f"{self.name}__{self.item}" if self.item else self.name

    @classmethod
    def of(cls, value: StageKey | str) -> StageKey:
        """A key itself, or one read from its written form ``name[:item]``."""
        if isinstance(value, StageKey):
            return value
        name, _, item = str(value).partition(":")
        return cls(name, item)


_STAGE_WORD = re.compile(r"[a-z][a-z0-9_]*")
