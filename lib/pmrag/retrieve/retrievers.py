"""Retriever components: index a corpus of chunks and rank every question to a depth, with the paper's
tie-breaks (:mod:`pmrag.retrieve.ranking`).

A component is a class registered under its method name (``bm25``, ``vector``); the study builds one per
:class:`~pmrag.core.names.RetrieverId` in ``retrieval.retrievers``.  What the stage graph needs to know to
cache its rankings correctly is declared on the class: the upstream stages it reads (:meth:`needs`), the
params sections (``sections``), the other components it runs (:meth:`uses`), input files (:meth:`files`) and
packages (:meth:`packages`); the code it runs is found from its class's module.  The ranking stage gives it
only what it declared.  What the tables need is declared there too: the family it is compared in
(``family``, :meth:`family_of`: one of :data:`FAMILIES`), the retrievers it builds on (:meth:`bases`) and its
short label in figures and the inspector (``label``).

To add a method: in one module of :mod:`pmrag.retrieve`, or in a study's own file listed in
``retrieval.plugins``, subclass :class:`RetrieverComponent`, set ``method``, ``family`` and ``sections``,
implement :meth:`~RetrieverComponent.needs` and :meth:`~RetrieverComponent.rank`, and register it with
``RETRIEVERS.register(method)`` (:mod:`pmrag.retrieve.registry` imports the module).  A method over a base
retriever named by its variant subclasses :class:`WrappingRetriever`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from pmrag.core.names import RetrieverId, StageKey
from pmrag.core.params import DENSE, LEXICAL
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.ranking import rankings_from_score_blocks, rankings_from_scores
from pmrag.retrieve.registry import RETRIEVERS, TOKENIZERS
from pmrag.represent.representations import representation_texts

DEFAULT_TOKENIZER = "regex"
PAPER = "paper"
FAMILIES = (PAPER, "lexical", "dense", "distributed")
"""What a component's retrievers are compared as (notebook 08): ``paper``, the paper's own methods (§5.1 BM25
with its regex tokenizer, §5.2 dense retrieval), and the remedies for what the paper could not do (§7.2, §8):
``lexical`` (other tokens, pseudo-relevance feedback), ``dense`` (finer vectors) and ``distributed`` (evidence
spread over chunks, dates and people).  A component whose ``family`` is None is compared in none of them."""
# the upstream stages a component may read (:meth:`RetrieverComponent.needs`)
TEXTS = StageKey("representations")
QUERY_VECTORS = StageKey("query_vectors")
MEMORY_GRAPH = StageKey("graph")
INTEREST_RELEVANCE = StageKey("interest_relevance")
SUB_QUERIES = StageKey("decomposition")


def vectors_of(representation: str) -> StageKey:
    """The stage of a representation's chunk vectors."""
    return StageKey("vectors", representation)


def subvectors_of(representation: str) -> StageKey:
    """The stage of a representation's sub-window vectors (multi-vector retrieval)."""
    return StageKey("subvectors", representation)


@dataclass(frozen=True)
class Corpus:
    """The chunks in their stored order; representation texts and vectors are fetched only when used, and so
    is any other upstream stage a component declared in :meth:`RetrieverComponent.needs` (``upstream(key)``:
    the memory graph for the graph retriever)."""

    chunk_ids: np.ndarray
    start_times: np.ndarray
    texts: Callable[[str], list[str]]
    vectors: Callable[[str], np.ndarray]
    upstream: Callable[[StageKey], object] | None = None
    table: pd.DataFrame | None = None      # the chunk_table stage's (source, session_index, ...), in this order

    @classmethod
    def of(cls, chunks: pd.DataFrame, upstream: Callable[[StageKey], object],
           load_vectors: Callable[[object], tuple[np.ndarray, list[str]]]) -> Corpus:
        """The corpus of a study's chunk table (the ``chunk_table`` stage; the chunks with their texts do too):
        texts from the representations stage, vectors loaded from a vectors stage's result by ``load_vectors``,
        both checked to be in chunk order."""
        chunk_ids = chunks["chunk_id"].to_numpy()

        def texts(representation: str) -> list[str]:
            reps = upstream(TEXTS)
            if not np.array_equal(reps["chunk_id"].to_numpy(), chunk_ids):
                raise RuntimeError("representations are not in chunk order; recompute the representations stage")
            return representation_texts(reps, representation)

        def vectors(representation: str) -> np.ndarray:
            matrix, order = load_vectors(upstream(vectors_of(representation)))
            if list(order) != list(chunk_ids):
                raise RuntimeError(f"vectors of {representation} are not in chunk order; recompute the vector stage")
            return matrix

        return cls(chunk_ids, pd.to_datetime(chunks["start_at"]).to_numpy(), texts, vectors, upstream, chunks)


@dataclass(frozen=True)
class Queries:
    """The evaluable questions, in ID order; their vectors are fetched only when used."""

    question_ids: list[str]
    texts: list[str]
    vectors: Callable[[], np.ndarray]


@dataclass(frozen=True)
class Ranked:
    """A retriever's rankings (``question_id, chunk_id, rank, score``) and, per question, how many chunks
    scored above 0 (for BM25: chunks sharing a token with the question)."""

    rankings: pd.DataFrame
    matches: pd.Series


class RetrieverComponent:
    """Base class of retriever components (see the module docstring).

    A class that sets ``method`` declares its ``family`` too (one of :data:`FAMILIES`, or None); its ``label``
    defaults to the method."""

    method: ClassVar[str]
    family: ClassVar[str | None]
    label: ClassVar[str]
    sections: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "method" not in vars(cls):
            return
        if "family" not in vars(cls):
            raise TypeError(f"{cls.__name__} sets method {cls.method!r} but no family (one of "
                            f"{', '.join(FAMILIES)}, or None)")
        if cls.family is not None and cls.family not in FAMILIES:
            raise TypeError(f"{cls.__name__}.family must be one of {', '.join(FAMILIES)} or None, got {cls.family!r}")
        if "label" not in vars(cls):
            cls.label = cls.method

    def __init__(self, rid: RetrieverId, params):
        if rid.method != self.method:
            raise ValueError(f"{type(self).__name__} ranks with {self.method!r}, not {rid}")
        self.rid = rid
        self.params = params

    @classmethod
    def variants(cls) -> Iterable[str]:
        """Allowed variant names ('' = none)."""
        return ("",)

    @classmethod
    def family_of(cls, rid: RetrieverId) -> str | None:
        """The family one retriever of the method is compared in (``family``, unless a variant changes it)."""
        return cls.family

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        """The retrievers this one builds on or replaces, the first compared with it (notebook 08)."""
        return ()

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        """Upstream stages the ranking reads, besides the chunks and the evaluable questions."""
        raise NotImplementedError

    @classmethod
    def files(cls, rid: RetrieverId, params) -> list[Path]:
        """Input files the ranking depends on (e.g. a tokenizer spec)."""
        return []

    @classmethod
    def uses(cls, rid: RetrieverId) -> tuple[type, ...]:
        """The other components the ranking runs (a tokenizer, a base retriever and what it uses): their code
        enters the ranking's key with the component's own."""
        return ()

    @classmethod
    def packages(cls, rid: RetrieverId) -> tuple[str, ...]:
        """Installed packages whose version changes the ranking (e.g. a tokenizer's dictionary)."""
        return ()

    @classmethod
    def reads_embedding_cut(cls, rid: RetrieverId) -> bool:
        """Whether the ranking scores one embedding of each chunk's whole representation, which
        ``embedding.max_chars`` shortens (the coverage stage then counts what the cut hides)."""
        return False

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        raise NotImplementedError


def side_of(rid: RetrieverId) -> str:
    """Which side of a lexical × dense hybrid a retriever is on: ``dense`` when its ranking reads the question's
    vector (:data:`QUERY_VECTORS` among its :meth:`~RetrieverComponent.needs`: vector, multivec, mmr_vector,
    session, graph), else ``lexical`` (it ranks by the question's tokens: bm25 and its tokenizers, rm3,
    mmr_bm25)."""
    return DENSE if QUERY_VECTORS in RETRIEVERS.get(rid.method).needs(rid) else LEXICAL


def ranked_from_scores(scores: np.ndarray, corpus: Corpus, queries: Queries, depth: int,
                       keep: np.ndarray | None = None) -> Ranked:
    """:class:`Ranked` from a ``(questions × chunks)`` score matrix."""
    rankings = rankings_from_scores(scores, queries.question_ids, corpus.chunk_ids, corpus.start_times, depth, keep)
    return Ranked(rankings, pd.Series((scores > 0).sum(axis=1), index=pd.Index(queries.question_ids, name="question_id"),
                                      name="matches"))


def ranked_from_score_blocks(blocks: Iterable[np.ndarray], corpus: Corpus, queries: Queries, depth: int, *,
                             positive_only: bool = False) -> Ranked:
    """:class:`Ranked` from a ``(questions × chunks)`` score matrix given a block of rows at a time
    (:func:`pmrag.retrieve.ranking.rankings_from_score_blocks`; ``positive_only``: only chunks scoring above 0)."""
    rankings, matches = rankings_from_score_blocks(blocks, queries.question_ids, corpus.chunk_ids, corpus.start_times,
                                                   depth, positive_only=positive_only)
    return Ranked(rankings, pd.Series(matches, index=pd.Index(queries.question_ids, name="question_id"), name="matches"))


@RETRIEVERS.register("bm25")
class BM25Retriever(RetrieverComponent):
    """Okapi BM25 (§5.1) over one representation; the variant names the tokenizer (none: the paper's regex)."""

    method = "bm25"
    family = PAPER
    sections = ("bm25",)

    @classmethod
    def variants(cls) -> Iterable[str]:
        return ["" if name == DEFAULT_TOKENIZER else name for name in TOKENIZERS.names()]

    @classmethod
    def family_of(cls, rid: RetrieverId) -> str | None:
        """Another tokenizer than the paper's regex is a lexical remedy."""
        return "lexical" if rid.variant else cls.family

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        """A tokenizer variant replaces the paper's regex BM25 of the same representation."""
        return (RetrieverId(rid.representation, "bm25"),) if rid.variant else ()

    @staticmethod
    def tokenizer_class(rid: RetrieverId):
        return TOKENIZERS.get(rid.variant or DEFAULT_TOKENIZER)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (TEXTS,)

    @classmethod
    def files(cls, rid: RetrieverId, params) -> list[Path]:
        return cls.tokenizer_class(rid).files(params.bm25)

    @classmethod
    def uses(cls, rid: RetrieverId) -> tuple[type, ...]:
        return (cls.tokenizer_class(rid),)

    @classmethod
    def packages(cls, rid: RetrieverId) -> tuple[str, ...]:
        return tuple(getattr(cls.tokenizer_class(rid), "packages", ()))

    def tokenizer(self):
        """The variant's tokenizer from the ``bm25`` section (a caching one keeps its tokens in ``cache_dir``)."""
        from pmrag.retrieve.lexical import make_tokenizer

        return make_tokenizer(self.tokenizer_class(self.rid), self.params.bm25, self.params.cache_dir)

    def index(self, corpus: Corpus, queries: Queries, *, keep_counts: bool = True) -> tuple[BM25Index, object]:
        """The BM25 index of the representation and the questions' token counts over its vocabulary
        (``keep_counts``: :meth:`BM25Index.fit`)."""
        from pmrag.retrieve.lexical import index_texts

        return index_texts(self.tokenizer(), corpus.texts(self.rid.representation), queries.texts, self.params.bm25,
                           keep_counts=keep_counts)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        index, query_counts = self.index(corpus, queries, keep_counts=False)   # scores need the weights alone
        return ranked_from_score_blocks(index.score_blocks(query_counts), corpus, queries, depth,
                                        positive_only=self.params.bm25.zero_scores == "drop")


@RETRIEVERS.register("vector")
class VectorRetriever(RetrieverComponent):
    """Cosine similarity of the question's vector and each chunk's vector of one representation (§5.2)."""

    method = "vector"
    family = PAPER
    label = "vec"

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (vectors_of(rid.representation), QUERY_VECTORS)

    @classmethod
    def reads_embedding_cut(cls, rid: RetrieverId) -> bool:
        return True

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        scores = cosine_scores(corpus.vectors(self.rid.representation), queries.vectors())
        return ranked_from_scores(scores, corpus, queries, depth)


@RETRIEVERS.register("graph")
class GraphRetriever(RetrieverComponent):
    """TOBUGraph (002 §2.4) over the study's memory graph: the interests most relevant to the question (the
    ``interest_relevance`` stage: offline scoring or an LLM's choice) up to ``graph.max_chosen_interests`` and
    from ``graph.relevance_threshold``; every memory they link first (by relevance-weighted interest count),
    then the rest, each group in order of the memory's own similarity to the question in the named
    representation (:mod:`pmrag.retrieve.graph_interest`).  Variant ``interest`` (``summary_graph_interest``)."""

    method = "graph"
    family = None   # TOBUGraph has its own notebook (07)
    sections = ("graph.relevance_threshold", "graph.max_chosen_interests")

    @classmethod
    def variants(cls) -> Iterable[str]:
        return ("interest",)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return (MEMORY_GRAPH, INTEREST_RELEVANCE, vectors_of(rid.representation), QUERY_VECTORS)

    def rank(self, corpus: Corpus, queries: Queries, depth: int) -> Ranked:
        from pmrag.retrieve import graph_interest as gi

        section = self.params.graph
        built = corpus.upstream(MEMORY_GRAPH)
        index = gi.InterestIndex.from_graph(built.graph, list(corpus.chunk_ids))
        relevance = corpus.upstream(INTEREST_RELEVANCE).rows(queries.question_ids)
        chosen = gi.choose_interests(relevance, section.relevance_threshold, section.max_chosen_interests)
        weights = gi.graph_scores(chosen, relevance, index.membership)
        similarity = cosine_scores(corpus.vectors(self.rid.representation), queries.vectors())
        rankings = gi.graph_rankings(weights, similarity, queries.question_ids, corpus.chunk_ids, corpus.start_times,
                                     depth)
        reached = gi.reached(chosen, index.membership).sum(axis=1)
        return Ranked(rankings, pd.Series(reached, index=pd.Index(queries.question_ids, name="question_id"),
                                          name="matches"))


class WrappingRetriever(RetrieverComponent):
    """A retriever over a base retriever its variant names (``raw_text_mmr_vector``: over ``raw_text_vector``,
    one of ``base_methods``): the stages the base reads, its files, packages and components are the wrapper's
    too, and the base is what it is compared with.  A subclass adds what it reads itself to :meth:`needs`."""

    base_methods: ClassVar[tuple[str, ...]]

    @classmethod
    def variants(cls) -> Iterable[str]:
        return cls.base_methods

    @classmethod
    def base_id(cls, rid: RetrieverId) -> RetrieverId:
        """``<representation>_<method>_<base>`` → ``<representation>_<base>`` (the base's default variant)."""
        if rid.variant not in cls.base_methods:
            raise ValueError(f"{rid}: the {cls.method} variant must be one of {', '.join(cls.base_methods)} (the "
                             f"base retriever's method)")
        return RetrieverId(rid.representation, rid.variant)

    @classmethod
    def base_class(cls, rid: RetrieverId) -> type[RetrieverComponent]:
        return RETRIEVERS.get(cls.base_id(rid).method)

    @classmethod
    def bases(cls, rid: RetrieverId) -> tuple[RetrieverId, ...]:
        return (cls.base_id(rid),)

    @classmethod
    def needs(cls, rid: RetrieverId) -> tuple[StageKey, ...]:
        return cls.base_class(rid).needs(cls.base_id(rid))

    @classmethod
    def files(cls, rid: RetrieverId, params) -> list[Path]:
        return cls.base_class(rid).files(cls.base_id(rid), params)

    @classmethod
    def uses(cls, rid: RetrieverId) -> tuple[type, ...]:
        base = cls.base_class(rid)
        return (base, *base.uses(cls.base_id(rid)))

    @classmethod
    def packages(cls, rid: RetrieverId) -> tuple[str, ...]:
        return cls.base_class(rid).packages(cls.base_id(rid))

    @classmethod
    def reads_embedding_cut(cls, rid: RetrieverId) -> bool:
        return cls.base_class(rid).reads_embedding_cut(cls.base_id(rid))

    def base(self) -> RetrieverComponent:
        """The base component, with the same params."""
        return self.base_class(self.rid)(self.base_id(self.rid), self.params)
