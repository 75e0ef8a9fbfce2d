"""Okapi BM25 over a sparse term × document weight matrix, exactly as the paper's §5.1 (equations 8–9).

    BM25(q, d) = Σ_{t ∈ q} IDF(t) · f(t,d)·(k1 + 1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl))
    IDF(t)     = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

* ``f(t,d)``: occurrences of token ``t`` in document ``d``; ``|d|``: number of tokens of ``d`` after
  tokenization (empty documents count, with ``|d| = 0``); ``avgdl``: mean ``|d|`` over the corpus;
  ``N``: number of documents; ``df(t)``: number of documents containing ``t``.  ``k1 = 1.2``,
  ``b = 0.75``, natural logarithm.
* The sum runs over query tokens *with repeats*: a token occurring ``c`` times in the query adds its
  term ``c`` times.  A token absent from the corpus adds nothing (``f = 0`` everywhere).
* This IDF is always positive, so every score is ≥ 0 and exactly 0 for documents sharing no query token.

``bm25s.BM25(method="lucene")`` uses the same IDF but drops the constant ``(k1 + 1)`` factor, so its
scores are ours divided by ``k1 + 1`` (same ranking); ``tests/test_bm25.py`` checks both.

Index: ``W[t, d] = IDF(t) · f(t,d)(k1+1) / (f(t,d) + k1(1 − b + b|d|/avgdl))`` is precomputed as a CSR
matrix (vocabulary × documents), so a query is the sparse row vector ``c`` of its token counts and
``scores = c · W``; many queries are ``C · W``.  The rows of the terms found in at least one document in
:data:`DENSE_SHARE` are also kept dense (:class:`DenseRows`): a query adds such a row as one contiguous vector
instead of scattering its long posting list, and every score is still summed term by term in column order, so
it equals the sparse product bit for bit.

Besides token lists (:meth:`BM25Index.fit`), an index can be fitted on a ready count matrix
(:meth:`BM25Index.fit_counts`: documents × terms, scikit-learn's ``CountVectorizer`` layout, e.g. the
character n-gram counts of :mod:`pmrag.retrieve.lexical`), and a query can be any non-negative weight row
over the vocabulary (:meth:`BM25Index.scores_matrix`: ``scores = Q · W``, RM3's expanded queries in
:mod:`pmrag.retrieve.prf`); with count rows that is exactly the sum over query tokens with repeats.

Ranking the scores (score ↓, chunk start time ↓, chunk ID ↓) is :mod:`pmrag.retrieve.ranking`'s job;
tokenization is the tokenizer component's (:mod:`pmrag.retrieve.tokenizer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pmrag.core.params import BM25Section
from pmrag.retrieve.ranking import BLOCK_VALUES


def idf(doc_freqs: np.ndarray, n_docs: int) -> np.ndarray:
    """``IDF(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))`` (equation 9), elementwise."""
    df = np.asarray(doc_freqs, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def length_norm(doc_len: np.ndarray, avgdl: float, b: float) -> np.ndarray:
    """``1 − b + b·|d|/avgdl``, the document-length normalisation of equation 8."""
    return 1.0 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl


def tf_weight(tf: np.ndarray, doc_len: np.ndarray | None, avgdl: float, k1: float, b: float,
              norm: np.ndarray | None = None) -> np.ndarray:
    """``f(k1 + 1) / (f + k1(1 − b + b·|d|/avgdl))``, the term-frequency part of equation 8 (``norm``: the
    :func:`length_norm` of ``doc_len`` when already known, e.g. gathered per document)."""
    tf = np.asarray(tf, dtype=np.float64)
    norm = length_norm(doc_len, avgdl, b) if norm is None else norm
    return tf * (k1 + 1.0) / (tf + k1 * norm)


def posting_weights(tf: np.ndarray, doc_norm: np.ndarray, docs: np.ndarray, term_idf: np.ndarray,
                    doc_freqs: np.ndarray, k1: float, *, overwrite_tf: bool = False) -> np.ndarray:
    """``IDF(t) · f(k1 + 1) / (f + k1·norm(d))`` for every posting (term-major: ``doc_freqs[t]`` postings of term
    ``t`` in a row, in documents ``docs``), given each document's :func:`length_norm` ``doc_norm``.

    The same floating-point operations, in the same order, as ``np.repeat(term_idf, doc_freqs) * tf_weight(tf,
    None, avgdl, k1, b, doc_norm[docs])``, so the same bits; done in place, with two posting-sized arrays alive
    instead of six (at 10× the paper's scale a character-trigram index has 65 million postings, 520 MB each).
    ``overwrite_tf``: the weights are written into ``tf`` itself (float64), one posting-sized array fewer."""
    tf = np.asarray(tf, dtype=np.float64)
    denominator = doc_norm[docs]   # gathered per posting; the norm itself is computed once per document
    denominator *= k1
    denominator += tf
    weights = np.multiply(tf, k1 + 1.0, out=tf if overwrite_tf else None)
    weights /= denominator
    del denominator
    weights *= np.repeat(term_idf, doc_freqs)
    return weights


ENCODE_DOCS = 20_000
"""Documents whose token lists :func:`encode_token_lists` holds at a time: a token is a Python string of ~60 bytes
beside its 4-byte id, so all of them at once (10× the paper's scale: 185k raw_text chunks) held gigabytes."""


EncodedBlock = tuple[list[str], np.ndarray, np.ndarray]
"""One block of documents' tokens (:func:`encode_block`): its distinct tokens in order of first occurrence, each
token as its index among them (int32), each document's length (int64)."""


def encode_block(token_lists: Sequence[Sequence[str]]) -> EncodedBlock:
    """The tokens of a block of documents as :data:`EncodedBlock`, hashed in one pass in C (``pandas.factorize``,
    whose uniques come in order of first occurrence, instead of a ``dict.setdefault`` per token)."""
    lengths, local_ids, terms = _factorized(token_lists)
    return terms, local_ids.astype(np.int32), lengths


def encode_kept(match_lists: Sequence[Sequence[str]], kept_terms: Callable[[list[str]], Iterable[str]]
                ) -> EncodedBlock:
    """:func:`encode_block` of ``match_lists`` with only the tokens whose term ``kept_terms`` keeps, the rule applied
    once per distinct term instead of once per token.

    ``kept_terms(terms)`` gets the block's distinct terms and returns those it keeps (a filter that depends on the
    term alone, e.g. :func:`pmrag.retrieve.tokenizer.filter_tokens`).  The ids are those of :func:`encode_block` on
    the filtered lists: every occurrence of a kept term is kept, so the kept terms first occur in the same order as
    among all terms, and a term's id is the number of kept terms before it."""
    lengths, local_ids, terms = _factorized(match_lists)
    kept = set(kept_terms(terms))
    keep_term = np.fromiter((term in kept for term in terms), dtype=bool, count=len(terms))
    keep = keep_term[local_ids]
    kept_lengths = np.bincount(np.repeat(np.arange(len(lengths)), lengths)[keep], minlength=len(lengths))
    new_id = np.cumsum(keep_term, dtype=np.int32) - 1
    return ([term for term, k in zip(terms, keep_term.tolist()) if k], new_id[local_ids[keep]],
            kept_lengths.astype(np.int64))


def _factorized(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each document's length (int64), every token as its index among the block's distinct tokens, and those
    tokens in order of first occurrence (``pandas.factorize`` of the tokens laid end to end)."""
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    flat = np.fromiter(chain.from_iterable(token_lists), dtype=object, count=int(lengths.sum()))
    if not len(flat):
        return lengths, np.zeros(0, dtype=np.int32), []
    local_ids, terms = pd.factorize(flat)
    return lengths, local_ids, terms.tolist()


def encoded_blocks(token_lists: Iterable[Sequence[str]], what: str = "token_lists") -> Iterator[EncodedBlock]:
    """:func:`encode_block` of every :data:`ENCODE_DOCS` documents of ``token_lists`` (an iterator is never held
    whole), each list checked to be tokens."""
    _refuse_a_string(token_lists, what)
    lists = iter(token_lists)
    while block := list(islice(lists, ENCODE_DOCS)):
        for tokens in block:
            _refuse_an_untokenized_text(tokens, what)
        yield encode_block(block)
        del block


def merge_encoded(blocks: Iterable[EncodedBlock]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Token → id in order of first occurrence, every document's token ids concatenated, and each document's
    length, from consecutive encoded blocks: only a block's distinct terms meet the vocabulary, new ones numbered in
    the order they first occur, so the ids are those of one pass over all tokens however the documents were cut
    into blocks (or wherever the blocks were encoded: :func:`pmrag.retrieve.lexical.encoded_in_workers`)."""
    vocabulary: dict[str, int] = {}
    id_blocks, length_blocks = [], []
    for terms, local_ids, lengths in blocks:
        if len(local_ids):
            global_id = np.fromiter((vocabulary.setdefault(term, len(vocabulary)) for term in terms),
                                    dtype=np.int64, count=len(terms))
            id_blocks.append(global_id[local_ids])
        length_blocks.append(lengths)
    token_ids = np.concatenate(id_blocks) if id_blocks else np.zeros(0, dtype=np.int64)
    doc_lengths = np.concatenate(length_blocks) if length_blocks else np.zeros(0, dtype=np.int64)
    return vocabulary, token_ids, doc_lengths


def encode_token_lists(token_lists: Iterable[Sequence[str]], what: str = "token_lists"
                       ) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Token → id in order of first occurrence, every document's token ids concatenated, and each document's length
    (:func:`merge_encoded` of :func:`encoded_blocks`): the lists are read :data:`ENCODE_DOCS` documents at a time."""
    return merge_encoded(encoded_blocks(token_lists, what))


def term_doc_counts(token_ids: np.ndarray, doc_lengths: np.ndarray, n_terms: int) -> sp.csr_matrix:
    """``f(t, d)`` as a canonical CSR matrix (terms × documents) from the concatenated token ids.

    The ids are already grouped by document, so they are the rows of a documents × terms CSR matrix as they
    stand; its duplicates are summed row by row and one transposition (a counting sort) makes it terms ×
    documents, without sorting all the ids as a COO matrix would."""
    indptr = np.zeros(len(doc_lengths) + 1, dtype=np.int64)
    np.cumsum(doc_lengths, out=indptr[1:])
    by_doc = sp.csr_matrix((np.ones(len(token_ids), dtype=np.float64), token_ids, indptr),
                           shape=(len(doc_lengths), n_terms))
    by_doc.sum_duplicates()
    counts = by_doc.T.tocsr()
    counts.has_sorted_indices = True   # the transposition's counting sort visits documents in order
    return counts


def weight_matrix(
    counts: sp.csr_matrix, doc_lengths: np.ndarray, params: BM25Section, *, overwrite_counts: bool = False
) -> tuple[sp.csr_matrix, np.ndarray]:
    """``W[t, d] = IDF(t) · tf_weight(f(t,d), |d|)`` on the nonzeros of ``counts``, and the IDF vector
    (``overwrite_counts``: written over the counts' float64 values, for a caller that drops the counts)."""
    n_docs = counts.shape[1]
    doc_freqs = np.diff(counts.indptr)
    term_idf = idf(doc_freqs, n_docs)
    avgdl = float(doc_lengths.mean())
    data = posting_weights(counts.data, length_norm(doc_lengths, avgdl, params.b) if counts.nnz else np.zeros(0),
                           counts.indices, term_idf, doc_freqs, params.k1,
                           overwrite_tf=overwrite_counts and counts.data.dtype == np.float64)
    # the same nonzeros as the counts: their index arrays are shared, not copied (changed in place: only the counts'
    # values, and only with overwrite_counts)
    weights = sp.csr_matrix((data, counts.indices, counts.indptr), shape=counts.shape, copy=False)
    weights.has_canonical_format = True
    return weights, term_idf


def query_matrix(queries: Sequence[Sequence[str]], vocabulary: Mapping[str, int]) -> sp.csr_matrix:
    """Token counts of each query over the vocabulary (queries × terms); unknown tokens are dropped."""
    rows, cols = [], []
    for row, tokens in enumerate(queries):
        for token in tokens:
            col = vocabulary.get(token)
            if col is not None:
                rows.append(row)
                cols.append(col)
    matrix = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float64), (rows, cols)), shape=(len(queries), len(vocabulary))
    )
    matrix.sum_duplicates()
    return matrix


def counts_by_term(doc_term_counts: sp.spmatrix, n_terms: int) -> sp.csr_matrix:
    """A documents × terms count matrix (``CountVectorizer`` layout) as canonical terms × documents CSR float64."""
    counts = sp.csr_matrix(doc_term_counts, dtype=np.float64)
    if counts.shape[1] != n_terms:
        raise ValueError(f"the count matrix has {counts.shape[1]} term columns, the vocabulary {n_terms} terms")
    if counts.nnz and (counts.data < 0).any():
        raise ValueError("term counts must be non-negative")
    by_term = counts.T.tocsr()
    by_term.sum_duplicates()
    by_term.eliminate_zeros()
    by_term.sort_indices()
    return by_term


DENSE_SHARE = 8
"""A term found in at least 1/8 of the documents gets a dense weight row: adding ``n_docs`` contiguous values
costs about as much as scattering ``n_docs / 10`` postings (``np.add.at``, measured on the benchmark's inputs).
The dense rows take at most 8× the memory of those terms' sparse weights."""


@dataclass(frozen=True)
class DenseRows:
    """The weight rows of the frequent terms as a dense ``(n_dense, n_docs)`` array; ``slot[t]`` is term ``t``'s
    row in it, or -1 for a term kept sparse."""

    slot: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, weights: sp.csr_matrix) -> DenseRows:
        n_terms, n_docs = weights.shape
        frequent = np.flatnonzero(np.diff(weights.indptr) * DENSE_SHARE >= max(n_docs, 1))
        slot = np.full(n_terms, -1, dtype=np.int64)
        slot[frequent] = np.arange(len(frequent))
        rows = np.zeros((len(frequent), n_docs), dtype=weights.dtype)
        # filled row by row: a sliced copy of these rows first was most of the postings again, beside the rows
        for row, term in zip(rows, frequent.tolist()):
            postings = slice(weights.indptr[term], weights.indptr[term + 1])
            row[weights.indices[postings]] = weights.data[postings]
        return cls(slot, rows)


def weighted_product(query: sp.csr_matrix, weights: sp.csr_matrix, dense: DenseRows) -> np.ndarray:
    """``Q · W`` as a dense ``(n_queries, n_docs)`` array, for a canonical CSR ``query`` (sorted, no duplicates)
    (:func:`weighted_rows` of every row)."""
    scores = np.zeros((query.shape[0], weights.shape[1]), dtype=np.float64)
    weighted_rows(query, weights, dense, scores, zeroed=True)
    return scores


def weighted_rows(query: sp.csr_matrix, weights: sp.csr_matrix, dense: DenseRows, out: np.ndarray, first: int = 0,
                  *, zeroed: bool = False) -> None:
    """Rows ``first, first + 1, …`` of ``Q · W`` written into ``out`` (one row of it each), for a canonical CSR
    ``query`` (sorted, no duplicates); ``zeroed``: ``out`` holds zeros already.

    Each query's scores are summed term by term in column order, like the sparse product.  ``np.add.at`` adds
    its entries one after another, so a run of sparse terms is one call over their concatenated postings; a
    dense term adds its whole row, whose zeros leave the other documents' sums as they are.  A row that starts
    from zeros with a dense term is written as ``0 + that term's row`` in one pass (the same bits as zeros and then
    the add)."""
    lo, hi = int(query.indptr[first]), int(query.indptr[first + len(out)])
    terms = query.indices[lo:hi]
    slots = dense.slot[terms].tolist()
    starts = weights.indptr[terms].tolist()
    ends = weights.indptr[terms + 1].tolist()
    values = query.data[lo:hi].tolist()
    bounds = (query.indptr[first:first + len(out) + 1] - lo).tolist()
    for row, scores in enumerate(out):
        begin, end = bounds[row], bounds[row + 1]
        if not zeroed:
            if begin < end and slots[begin] >= 0 and values[begin] == 1.0:
                np.add(dense.rows[slots[begin]], 0.0, out=scores)
                begin += 1
            else:
                scores.fill(0.0)
        run_docs: list[np.ndarray] = []
        run_values: list[np.ndarray] = []
        for i in range(begin, end):
            if slots[i] >= 0:
                _scatter_add(scores, run_docs, run_values)
                run_docs, run_values = [], []
                scores += dense.rows[slots[i]] if values[i] == 1.0 else values[i] * dense.rows[slots[i]]
            else:
                postings = slice(starts[i], ends[i])
                run_docs.append(weights.indices[postings])
                run_values.append(weights.data[postings] if values[i] == 1.0 else values[i] * weights.data[postings])
        _scatter_add(scores, run_docs, run_values)


def _scatter_add(out: np.ndarray, docs: list[np.ndarray], values: list[np.ndarray]) -> None:
    if len(docs) == 1:
        np.add.at(out, docs[0], values[0])
    elif docs:
        np.add.at(out, np.concatenate(docs), np.concatenate(values))


def _as_token_lists(token_lists: Iterable[Sequence[str]], what: str) -> list[Sequence[str]]:
    _refuse_a_string(token_lists, what)
    lists = list(token_lists)
    for tokens in lists:
        _refuse_an_untokenized_text(tokens, what)
    return lists


def _refuse_a_string(token_lists, what: str) -> None:
    if isinstance(token_lists, str):
        raise TypeError(f"{what} must be a sequence of token lists, not a string")


def _refuse_an_untokenized_text(tokens, what: str) -> None:
    if isinstance(tokens, str):
        raise TypeError(f"each of {what} must be a list of tokens, not a string (tokenize first): {tokens[:40]!r}")


@dataclass(frozen=True, eq=False)
class BM25Index:
    """A fitted BM25 index; build it with :meth:`fit`.  Read-only by convention (the arrays are shared)."""

    params: BM25Section
    vocabulary: dict[str, int] = field(repr=False)
    weights: sp.csr_matrix = field(repr=False)
    idf: np.ndarray = field(repr=False)
    doc_lengths: np.ndarray = field(repr=False)
    avgdl: float
    counts: sp.csr_matrix | None = field(default=None, repr=False)   # f(t, d), terms × documents
    dense: DenseRows | None = field(default=None, repr=False)          # the frequent terms' rows, dense

    def __post_init__(self) -> None:
        if self.dense is None:
            object.__setattr__(self, "dense", DenseRows.of(self.weights))

    @classmethod
    def fit(cls, token_lists: Iterable[Sequence[str]], params: BM25Section | None = None, *,
            keep_counts: bool = True) -> BM25Index:
        """Index already tokenized documents (one token list per document, e.g. ``tokenize_many``).

        Parameters
        ----------
        token_lists : one token list per document; an iterator is read :data:`ENCODE_DOCS` documents at a time
        params : ``k1`` and ``b`` (default: the schema's, the paper's 1.2 and 0.75)
        keep_counts : keep ``f(t, d)`` (:attr:`counts`, which pseudo-relevance feedback reads); without them the
            index holds half the memory (at 10× the paper's scale, character trigrams: 780 MB less)
        """
        return cls.fit_encoded(encoded_blocks(token_lists, "token_lists"), params, keep_counts=keep_counts)

    @classmethod
    def fit_encoded(cls, blocks: Iterable[EncodedBlock], params: BM25Section | None = None, *,
                    keep_counts: bool = True) -> BM25Index:
        """:meth:`fit` of documents whose tokens were encoded a block at a time (:func:`encode_block`, in order):
        the same index as :meth:`fit` on their token lists."""
        params = BM25Section() if params is None else params
        vocabulary, token_ids, doc_lengths = merge_encoded(blocks)
        if not len(doc_lengths):
            raise ValueError("cannot fit BM25 on an empty corpus")
        counts = term_doc_counts(token_ids, doc_lengths, len(vocabulary))
        weights, term_idf = weight_matrix(counts, doc_lengths, params, overwrite_counts=not keep_counts)
        counts = counts if keep_counts else None   # not kept: its values are the weights now
        return cls(params, vocabulary, weights, term_idf, doc_lengths, float(doc_lengths.mean()), counts)

    @classmethod
    def fit_counts(cls, doc_term_counts: sp.spmatrix, vocabulary: Mapping[str, int],
                   params: BM25Section | None = None, *, keep_counts: bool = True) -> BM25Index:
        """Index documents already counted: the same index as :meth:`fit` on the token lists they count.

        Parameters
        ----------
        doc_term_counts : documents × terms sparse matrix of ``f(t, d)`` (``CountVectorizer.fit_transform``'s
            layout); ``|d|`` is its row sum
        vocabulary : term → column (``CountVectorizer.vocabulary_``); a term with no occurrence gets
            ``df = 0`` and never scores
        params : ``k1`` and ``b`` (default: the paper's)
        keep_counts : keep :attr:`counts` (as :meth:`fit`)
        """
        return cls.fit_term_counts(counts_by_term(doc_term_counts, len(vocabulary)), vocabulary, params,
                                   keep_counts=keep_counts)

    @classmethod
    def fit_term_counts(cls, term_counts: sp.csr_matrix, vocabulary: Mapping[str, int],
                        params: BM25Section | None = None, *, keep_counts: bool = True) -> BM25Index:
        """:meth:`fit_counts` of counts already made terms × documents (:func:`counts_by_term`), so that a caller
        can drop its documents × terms matrix before the weights are made (at 10× the paper's scale, character
        trigrams: 0.75 GB each).  The index takes ``term_counts`` over: with ``keep_counts`` as its
        :attr:`counts`; without, their values are overwritten by the weights (one posting-sized array fewer)."""
        params = BM25Section() if params is None else params
        vocabulary = dict(vocabulary)
        if sorted(vocabulary.values()) != list(range(len(vocabulary))):
            raise ValueError(f"vocabulary must map its {len(vocabulary)} terms to the columns 0..{len(vocabulary) - 1}")
        counts = term_counts
        if counts.shape[0] != len(vocabulary):
            raise ValueError(f"the count matrix has {counts.shape[0]} term rows, the vocabulary {len(vocabulary)} terms")
        if counts.shape[1] == 0:
            raise ValueError("cannot fit BM25 on an empty corpus")
        doc_lengths = np.asarray(counts.sum(axis=0)).ravel()
        if not np.array_equal(doc_lengths, np.round(doc_lengths)):
            raise ValueError("term counts must be whole numbers")
        doc_lengths = doc_lengths.astype(np.int64)
        weights, term_idf = weight_matrix(counts, doc_lengths, params, overwrite_counts=not keep_counts)
        counts = counts if keep_counts else None
        return cls(params, vocabulary, weights, term_idf, doc_lengths, float(doc_lengths.mean()), counts)

    @property
    def n_docs(self) -> int:
        return self.weights.shape[1]

    def scores_many(self, queries: Iterable[Sequence[str]]) -> np.ndarray:
        """BM25 scores of every document for each query: ``(n_queries, n_docs)`` float64."""
        query_lists = _as_token_lists(queries, "queries")
        return self.scores_matrix(query_matrix(query_lists, self.vocabulary))

    def scores_matrix(self, query_weights: sp.spmatrix) -> np.ndarray:
        """``Q · W``: scores of every document for each row of a queries × terms weight matrix over this
        index's vocabulary (token counts: :func:`query_matrix`; or any non-negative weights), ``(n_queries,
        n_docs)`` float64.  Each row is summed in term-column order, so equal rows give equal scores bit for
        bit whatever order their entries were stored in."""
        return weighted_product(self._canonical_queries(query_weights), self.weights, self.dense)

    def _canonical_queries(self, query_weights: sp.spmatrix) -> sp.csr_matrix:
        if query_weights.shape[1] != self.weights.shape[0]:
            raise ValueError(f"query weights have {query_weights.shape[1]} term columns, the index "
                             f"{self.weights.shape[0]} terms")
        query = sp.csr_matrix(query_weights, dtype=np.float64, copy=True)
        query.sum_duplicates()
        return query

    def score_blocks(self, query_weights: sp.spmatrix, rows: int | None = None) -> Iterator[np.ndarray]:
        """:meth:`scores_matrix` a block of ``rows`` queries at a time (default: as many as fill
        :data:`BLOCK_VALUES` scores), each block the same bits as those rows of the whole matrix.

        The blocks are one buffer, overwritten by the next: use each before asking for the next.  Ranking 100
        queries over 22,329 chunks block by block keeps each block in the CPU cache from its sums to its top k,
        where the whole matrix (18 MB) is first written out to memory and then read back."""
        query = self._canonical_queries(query_weights)
        rows = max(BLOCK_VALUES // max(self.n_docs, 1), 1) if rows is None else rows
        if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
            raise ValueError(f"rows must be a positive integer, got {rows!r}")
        return self._blocks(query, int(rows))   # checked here, when called, not at the first block

    def _blocks(self, query: sp.csr_matrix, rows: int) -> Iterator[np.ndarray]:
        n_queries = query.shape[0]
        buffer = np.empty((min(rows, max(n_queries, 1)), self.n_docs), dtype=np.float64)
        for first in range(0, n_queries, len(buffer)):
            block = buffer[:min(len(buffer), n_queries - first)]
            weighted_rows(query, self.weights, self.dense, block, first)
            yield block

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 scores of every document for one tokenized query: ``(n_docs,)`` float64."""
        return self.scores_many([query_tokens])[0]
