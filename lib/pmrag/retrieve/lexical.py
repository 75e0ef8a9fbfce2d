"""BM25 tokenizers beside the paper's regex: SudachiPy morphemes, character n-grams, English words.

Each is a tokenizer component registered in ``TOKENIZERS`` like :class:`~pmrag.retrieve.tokenizer.RegexTokenizer`,
so its name is a variant of the ``bm25`` and ``rm3`` retrievers (``raw_text_bm25_sudachi``,
``summary_bm25_char2``, ``embedding_text_rm3_word``).  Queries and documents go through the same tokenizer.

``sudachi`` (:class:`SudachiTokenizer`): SudachiPy with its core dictionary.

* A text is tokenized **line by line** (split on ``"\\n"``; its tokens are its lines' tokens in order): a
  newline always ends a morpheme, which it does in SudachiPy anyway (a blank), and the lines embedding_text
  repeats from summary and raw_text are analysed once.  A line longer than ``MAX_LINE_CHARS`` (12,000)
  characters is cut into pieces of that length, because SudachiPy refuses inputs over 49,149 UTF-8 bytes.
* ``bm25.sudachi_split_mode`` (A / B / C), ``bm25.sudachi_form``: the morpheme's normalized form (表記ゆれ
  merged: 附属 → 付属, ＵＳＢ → USB), dictionary form (lemma: 行き → 行く) or surface; every form is lower-cased.
* ``bm25.sudachi_pos``: ``content`` keeps morphemes whose first part-of-speech level is in ``CONTENT_POS``
  (名詞 nouns, numerals included; 動詞 verbs; 形容詞 and 形状詞 adjectives; 副詞 adverbs; 連体詞 adnominals;
  感動詞 interjections); particles, auxiliaries, pronouns, prefixes, suffixes, conjunctions, symbols and
  blanks are dropped.  ``all`` keeps every morpheme but blanks (空白).  Empty forms are dropped; a lone
  surrogate (no Unicode text: it can come from broken JSON escapes) is analysed as ``?``.
* Tokenization is cached (:class:`TokenCache`, ``<cache_dir>/tokens.sqlite``) by ``sha256(config, exact
  text)``, for each whole text (a cached text is one lookup) and for each of its lines (the unit SudachiPy
  analyses, so that embedding_text finds the lines of summary and raw_text already there: per whole text
  only, it would double the work at the paper's scale).  The config (:attr:`SudachiTokenizer.config`) names
  the rule version, split mode, form, part-of-speech filter and the sudachipy and sudachidict_core
  versions; whole-text keys add ``|text`` to it.  Lines not in the cache are analysed in ``workers``
  processes when they are many (:mod:`pmrag.core.parallel`).

``char2`` / ``char3`` (:class:`CharNgramTokenizer`): the character n-grams (n = 2, 3) of scikit-learn's
``CountVectorizer(analyzer="char", ngram_range=(n, n), preprocessor=normalise_chars)``.  The text is lower-cased
and every run of whitespace (spaces, tabs, newlines, the ideographic space) becomes one ASCII space, then
every window of ``n`` consecutive characters is a token, windows across a space included (a space marks a
word or line boundary, as ``char_wb``'s padding does); a text shorter than ``n`` has no token.  Our choice of
preprocessor replaces scikit-learn's own whitespace rule (runs of two or more whitespace characters become
a space, a single newline stays), which treats ``"a\\nb"`` and ``"a  b"`` differently.  BM25 is fitted on the
count matrix directly (:meth:`~pmrag.retrieve.bm25.BM25Index.fit_counts`).  The counts come from
:func:`char_ngram_counts`, a vectorised numpy twin of that ``CountVectorizer`` (the same vocabulary in
the same order, the same counts: ``tests/test_lexical.py`` checks it); ``CountVectorizer`` itself counts one
n-gram at a time in Python, about a minute per representation at the paper's scale.

``word`` (:class:`WordTokenizer`): English text's default: lower-cased words of two or more word characters
(``(?u)\\b\\w\\w+\\b``, the token pattern of scikit-learn and bm25s).  ``bm25.stopwords`` drops the words of
one of bm25s's lists (:func:`stopword_set`: ``english``, Lucene's 33 English stop words; ``english_plus``, NLTK's
179; ``none``, the default, drops nothing); then, with ``bm25.stemmer: english``, each word is stemmed by
PyStemmer's English (Porter 2) Snowball stemmer.  Stop words are matched before stemming, as ``bm25s.tokenize``
matches them, so with the same list and stemmer the tokens are bm25s's (``tests/retrieve/test_lexical.py``
checks the rankings against a plain bm25s index).

Documents of :data:`PARALLEL_INDEX_CHARS` characters or more (10× the paper's scale) are tokenized, or their n-grams
counted, a block at a time in worker processes (:func:`index_texts`); the index is the same as one made here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from pmrag.core.cache import SqliteCache
from pmrag.core.errors import PmragError
from pmrag.core.memory import trim_heap
from pmrag.retrieve.bm25 import BM25Index, EncodedBlock, counts_by_term, encode_block, encoded_blocks, query_matrix
from pmrag.retrieve.registry import TOKENIZERS

TOKEN_CACHE_FILE = "tokens.sqlite"
MAX_LINE_CHARS = 12_000      # × at most 4 UTF-8 bytes < SudachiPy's 49,149-byte limit
CONTENT_POS = frozenset({"名詞", "動詞", "形容詞", "形状詞", "副詞", "連体詞", "感動詞"})
BLANK_POS = "空白"
SUDACHI_RULE = "sudachi-lines-1"   # bump when the tokenization rule above changes: old cache entries stop matching
PARALLEL_MIN_CHARS = 2_000_000     # fewer uncached characters (~7 s) are tokenized here: a worker starts in ~3 s
BATCH_LINES = 2_000
WHOLE_TEXT = "text"                # the cache keys of whole texts add this to the config (lines: the config alone)
WORD_PATTERN = re.compile(r"(?u)\b\w\w+\b")
CODE_BITS = 21                     # Unicode code points fit in 21 bits, so an n-gram of n ≤ 3 fits in 63
MAX_NGRAM = 3
BLOCK_CHARS = 2_000_000            # characters whose n-grams are counted at once (about 100 MB of arrays)
PARALLEL_INDEX_CHARS = 30_000_000
"""Documents of at least this many characters in all (~3 s of regex tokenizing on one core) are tokenized, or their
n-grams counted, in :data:`INDEX_WORKERS` worker processes a block at a time (:func:`index_workers`): at 10× the
paper's scale raw_text (137 M characters) was indexed in 10.1 s instead of 17.3 s (regex), 11.2 s instead of 16.7 s
(character trigrams).  The paper-scale study's representations stay below it (raw_text 14 M characters,
embedding_text 19 M): its rankings are computed beside its helper process (:mod:`pmrag.study.helper`), which keeps
the second core busy already; at 10× there is no helper, and these workers keep both cores busy."""
INDEX_WORKERS = 2


# --------------------------------------------------------------------------------------------- sudachi


def sudachi_lines(text: str) -> list[str]:
    """The pieces a text is tokenized in: its lines, each cut into ``MAX_LINE_CHARS``-character pieces."""
    pieces = []
    for line in text.split("\n"):
        pieces.extend(line[i:i + MAX_LINE_CHARS] for i in range(0, len(line), MAX_LINE_CHARS))
    return pieces


@lru_cache(maxsize=1)
def sudachi_dictionary():
    """SudachiPy's core dictionary, loaded once per process.  The same as
    :func:`pmrag.represent.extract.sudachi_dictionary`, without importing that module (and scikit-learn with
    it: seconds more in every worker process)."""
    from sudachipy import Dictionary

    return Dictionary(dict="core")


@lru_cache(maxsize=8)
def _sudachi(split_mode: str, form: str):
    """This process's SudachiPy tokenizer for a split mode and form (the dictionary is loaded once)."""
    from sudachipy import SplitMode

    fields = {"pos"} | ({f"{form}_form"} if form in ("normalized", "dictionary") else set())
    return sudachi_dictionary().tokenizer(getattr(SplitMode, split_mode), fields=fields)


@lru_cache(maxsize=2)
def kept_pos_ids(pos_filter: str) -> frozenset[int]:
    """The part-of-speech ids the filter keeps (``content``: first level in ``CONTENT_POS``; ``all``: no blank)."""
    dictionary = sudachi_dictionary()
    kept, pos_id = set(), 0
    while (pos := dictionary.pos_of(pos_id)) is not None:
        if (pos[0] in CONTENT_POS) if pos_filter == "content" else (pos[0] != BLANK_POS):
            kept.add(pos_id)
        pos_id += 1
    return frozenset(kept)


def sudachi_tokens(pieces: Sequence[str], split_mode: str, form: str, pos_filter: str) -> list[list[str]]:
    """The tokens of each piece (a line, see :func:`sudachi_lines`) under one configuration."""
    tokenizer = _sudachi(split_mode, form)
    kept = kept_pos_ids(pos_filter)
    out = []
    for piece in pieces:
        if not piece:
            out.append([])
            continue
        try:
            morphemes = tokenizer.tokenize(piece)
        except UnicodeEncodeError:   # a lone surrogate is no Unicode text: SudachiPy gets "?" in its place
            morphemes = tokenizer.tokenize(piece.encode("utf-8", "replace").decode("utf-8"))
        if form == "normalized":
            words = [m.normalized_form() for m in morphemes if m.part_of_speech_id() in kept]
        elif form == "dictionary":
            words = [m.dictionary_form() for m in morphemes if m.part_of_speech_id() in kept]
        else:
            words = [m.surface() for m in morphemes if m.part_of_speech_id() in kept]
        out.append([w.lower() for w in words if w])
    return out


def token_cache_key(config: str, text: str) -> str:
    """``sha256(config + "\\x1f" + text)`` over UTF-8, hex."""
    return hashlib.sha256(f"{config}\x1f{text}".encode("utf-8", "surrogatepass")).hexdigest()


class TokenCache(SqliteCache):
    """Content-addressed token lists in one SQLite file (:class:`~pmrag.core.cache.SqliteCache`, with the
    write-ahead log: several processes may read and write it).

    ``key -> (config, tokens)``; tokens are stored joined by ``"\\n"`` (no token holds a newline: the keys are
    lines, and empty tokens are dropped).  A key never changes meaning, so entries are never
    invalidated.  An entry that is not UTF-8 text, holds an empty token or is filed under another configuration
    is refused (:meth:`get_many`): a miss, tokenized again and stored again.
    """

    table = "tokens"
    columns = "config TEXT NOT NULL, tokens TEXT NOT NULL"
    wal = True
    what = "token cache"
    holds = "tokenizer outputs, keyed by tokenizer configuration and text"

    def get_many(self, keys: Sequence[str], config: str | None = None) -> dict[str, list[str]]:
        """The cached token lists among ``keys`` that pass the checks (missing and refused keys are absent).

        An entry must be filed under ``config`` (when given) and its tokens must be UTF-8 text whose tokens,
        split at ``"\\n"``, are all non-empty (the empty text is the empty list).  Text is decoded here rather
        than by SQLite, which would fail the whole lookup, quoting the text, on one undecodable entry.
        """
        want = None if config is None else config.encode("utf-8")
        found = {}
        for key, row_config, kind, raw in self._rows(keys, "CAST(config AS BLOB), typeof(tokens), CAST(tokens AS BLOB)"):
            if want is not None and row_config != want:
                self.refuse("filed under another configuration")
                continue
            try:
                joined = raw.decode("utf-8") if kind == "text" else None
            except UnicodeDecodeError:
                joined = None
            tokens = None if joined is None else joined.split("\n") if joined else []
            if tokens is None or "" in tokens:
                self.refuse("not a list of tokens")
                continue
            found[key] = tokens
        return found

    def put_many(self, config: str, entries: Mapping[str, Sequence[str]]) -> None:
        """Store each key's token list (one transaction)."""
        rows = []
        for key, tokens in entries.items():
            if any("\n" in t or not t for t in tokens):
                raise PmragError(f"token cache {self.path}: a token of entry {key[:12]}… is empty or holds a newline")
            rows.append((key, config, "\n".join(tokens)))
        self._put("config, tokens", rows)


def _tokenize_batch(split_mode: str, form: str, pos_filter: str, pieces: list[str]) -> list[list[str]]:
    return sudachi_tokens(pieces, split_mode, form, pos_filter)


class SudachiTokenizer:
    """SudachiPy morphemes (core dictionary) as BM25 tokens, cached (see the module docstring)."""

    name = "sudachi"
    packages = ("sudachipy", "sudachidict_core")   # a dictionary upgrade changes the tokens: the rankings' key
    uses_cache_dir: ClassVar[bool] = True
    tokenizes_in_workers: ClassVar[bool] = True   # its tokenize_many starts worker processes of its own

    def __init__(self, split_mode: str = "C", form: str = "normalized", pos: str = "content",
                 cache_dir: str | Path | None = None, workers: int = 2):
        if split_mode not in ("A", "B", "C"):
            raise ValueError(f"key 'bm25.sudachi_split_mode' must be A, B or C, got {split_mode!r}")
        if form not in ("normalized", "dictionary", "surface"):
            raise ValueError(f"key 'bm25.sudachi_form' must be normalized, dictionary or surface, got {form!r}")
        if pos not in ("content", "all"):
            raise ValueError(f"key 'bm25.sudachi_pos' must be content or all, got {pos!r}")
        self.split_mode, self.form, self.pos = split_mode, form, pos
        self.cache_path = None if cache_dir is None else Path(cache_dir) / TOKEN_CACHE_FILE
        self.workers = workers
        self.tokenized_pieces = 0   # pieces SudachiPy analysed in this object's calls (cache hits analyse none)

    @classmethod
    def from_params(cls, section, cache_dir: str | Path | None = None) -> SudachiTokenizer:
        """From the ``bm25`` section's ``sudachi_*`` keys; cached under ``cache_dir`` when given."""
        return cls(section.sudachi_split_mode, section.sudachi_form, section.sudachi_pos, cache_dir)

    @staticmethod
    def files(section) -> list[Path]:
        return []

    @property
    def config(self) -> str:
        """Everything the tokens depend on besides the text: the cache key's first part."""
        return (f"{SUDACHI_RULE}|split={self.split_mode}|form={self.form}|pos={self.pos}"
                f"|sudachipy={version('sudachipy')}|sudachidict_core={version('sudachidict_core')}")

    def tokenize(self, text: str) -> list[str]:
        return self.tokenize_many([text])[0]

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """The tokens of each text: from the cache's entry for the whole text, or else the concatenated tokens
        of its lines, each distinct line read from the cache or analysed once (in worker processes when
        many); lines and texts are then stored."""
        texts = list(texts)
        config = self.config
        text_keys = [token_cache_key(f"{config}|{WHOLE_TEXT}", t) for t in texts]
        cache = TokenCache(self.cache_path) if self.cache_path is not None else None
        try:
            found = cache.get_many(text_keys, config) if cache is not None else {}
            missing = {k: t for k, t in zip(text_keys, texts) if k not in found}
            if missing:
                fresh = dict(zip(missing, self._by_lines(list(missing.values()), config, cache)))
                if cache is not None:
                    cache.put_many(config, fresh)
                found.update(fresh)
        finally:
            if cache is not None:
                cache.close()
        return [list(found[k]) for k in text_keys]

    def _by_lines(self, texts: list[str], config: str, cache: TokenCache | None) -> list[list[str]]:
        """Each text's tokens as its lines' tokens, the lines from the cache or analysed (and stored)."""
        pieces_of = [sudachi_lines(t) for t in texts]
        keys = {p: token_cache_key(config, p) for pieces in pieces_of for p in pieces}
        found = cache.get_many(list(keys.values()), config) if cache is not None else {}
        missing = [p for p, k in keys.items() if k not in found]
        if missing:
            fresh = {keys[p]: tokens for p, tokens in zip(missing, self._tokenize_pieces(missing))}
            self.tokenized_pieces += len(missing)
            if cache is not None:
                cache.put_many(config, fresh)
            found.update(fresh)
        return [[tok for p in pieces for tok in found[keys[p]]] for pieces in pieces_of]

    def _tokenize_pieces(self, pieces: list[str]) -> list[list[str]]:
        from pmrag.core.parallel import ordered_map, worker_processes

        if worker_processes(self.workers) < 2 or sum(map(len, pieces)) < PARALLEL_MIN_CHARS:
            return sudachi_tokens(pieces, self.split_mode, self.form, self.pos)
        n_batches = max(self.workers * 4, -(-len(pieces) // BATCH_LINES))
        size = -(-len(pieces) // n_batches)
        calls = [(self.split_mode, self.form, self.pos, pieces[i:i + size]) for i in range(0, len(pieces), size)]
        return [tokens for batch in ordered_map(_tokenize_batch, calls, self.workers) for tokens in batch]


# ----------------------------------------------------------------------------------------- char n-grams


def normalise_chars(text: str) -> str:
    """Lower-cased, every whitespace run one ASCII space: the n-gram tokenizers' preprocessor.

    ``re.sub(r"\\s+", " ", text.lower())``, computed with ``str.split`` (the same whitespace: both test
    ``str.isspace``), which drops the runs at either end, so those are put back as one space each: 2.4× faster
    at the paper's scale, where each character n-gram index normalises every chunk."""
    lowered = text.lower()
    words = lowered.split()
    if not words:
        return " " if lowered else ""
    joined = " ".join(words)
    if lowered[0].isspace():
        joined = " " + joined
    if lowered[-1].isspace():
        joined += " "
    return joined


def char_ngrams(text: str, n: int) -> list[str]:
    """The character n-grams of one text in order (``CountVectorizer(analyzer="char")``'s, our preprocessor)."""
    text = normalise_chars(text)
    return [text[i:i + n] for i in range(len(text) - n + 1)]


def _code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The code points of texts already normalised (:func:`normalise_chars`) concatenated (uint64), and each text's
    length."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(joined, dtype="<u4").astype(np.uint64), lengths


def _ngram_codes(texts: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """One integer per n-gram of normalised texts (its code points in 21-bit fields, first character highest) and its
    text index.

    Integer order is the n-grams' code-point (string) order, which is how ``CountVectorizer`` sorts its
    vocabulary."""
    points, lengths = _code_points(texts)
    text_index = np.repeat(np.arange(len(lengths), dtype=np.int64), np.maximum(lengths - n + 1, 0))
    n_starts = len(points) - n + 1
    if n_starts < 1:
        return np.zeros(0, dtype=np.uint64), text_index
    codes = np.zeros(n_starts, dtype=np.uint64)
    for j in range(n):   # the window at every position of the joined texts ...
        codes = (codes << np.uint64(CODE_BITS)) | points[j:j + n_starts]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    inside = np.ones(n_starts, dtype=bool)
    for k in range(1, n):   # ... less those running past their text's end (its last n − 1 positions)
        last = ends - k
        last = last[(last >= starts) & (last < n_starts)]
        inside[last] = False
    return codes[inside], text_index


def _encode_ngrams(terms: Sequence[str], n: int) -> np.ndarray:
    """The codes of n-gram strings, each exactly ``n`` characters (the inverse of :func:`_decode_ngrams`)."""
    points = np.frombuffer("".join(terms).encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
    codes = np.zeros(len(terms), dtype=np.uint64)
    for j in range(n):
        codes = (codes << np.uint64(CODE_BITS)) | points[j::n]
    return codes


def _decode_ngrams(codes: np.ndarray, n: int) -> list[str]:
    """The n-gram strings of sorted unique codes."""
    mask = np.uint64((1 << CODE_BITS) - 1)
    points = np.stack([(codes >> np.uint64(CODE_BITS * (n - 1 - j))) & mask for j in range(n)], axis=1)
    text = points.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    return [text[i:i + n] for i in range(0, len(text), n)]


def char_ngram_counts(texts: Sequence[str], n: int, vocabulary: Mapping[str, int] | None = None, *,
                      workers: int = 0) -> tuple[sp.csr_matrix, dict[str, int]]:
    """Texts × n-grams count matrix (float64 CSR) and the vocabulary, as ``CountVectorizer(analyzer="char",
    ngram_range=(n, n), preprocessor=normalise_chars)`` would give them: ``fit_transform`` without a
    vocabulary (n-grams in sorted order), ``transform`` with one (unknown n-grams dropped).

    Parameters
    ----------
    texts : the texts (documents or queries)
    n : the n-gram length, 1 to 3
    vocabulary : n-gram → column of an earlier call (the documents'), to count queries over it
    workers : without a vocabulary, count the blocks in this many worker processes (:func:`_counts_in_workers`:
        the same matrix and vocabulary)
    """
    if not 1 <= n <= MAX_NGRAM:
        raise ValueError(f"character n-grams are counted for n from 1 to {MAX_NGRAM}, got {n}")
    if vocabulary is None and workers > 0:
        return _counts_in_workers(texts, n, workers)
    import pandas as pd

    texts = [normalise_chars(t) for t in texts]   # once, for both passes over the blocks
    blocks = [texts[a:b] for a, b in _text_blocks(texts, BLOCK_CHARS)]
    del texts   # the blocks hold the texts, and each is let go once counted
    if vocabulary is None:   # the sorted distinct n-grams of every block
        terms = np.unique(np.concatenate([np.zeros(0, np.uint64)] + [
            np.asarray(pd.unique(_ngram_codes(block, n)[0])) for block in blocks]))
        column_of = np.arange(len(terms), dtype=np.int64)
        vocabulary = {term: i for i, term in enumerate(_decode_ngrams(terms, n))}
    else:
        vocabulary = dict(vocabulary)
        known = list(vocabulary)
        column_of = np.fromiter(vocabulary.values(), dtype=np.int64, count=len(known))
        right_length = np.fromiter(map(len, known), dtype=np.int64, count=len(known)) == n
        if not right_length.all():
            known = [t for t, keep in zip(known, right_length) if keep]
            column_of = column_of[right_length]
        terms = _encode_ngrams(known, n)
        order = np.argsort(terms, kind="stable")
        terms, column_of = terms[order], column_of[order]
    parts = []
    for i in range(len(blocks)):   # the counts grow as the normalised texts go: never both whole
        parts.append(_block_counts(blocks[i], n, terms, column_of, len(vocabulary)))
        blocks[i] = None
    trim_heap()   # the blocks' arrays and the normalised texts, before the parts are joined
    counts = sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, len(vocabulary)))
    return counts, vocabulary


def _text_blocks(texts: Sequence[str], max_chars: int) -> list[tuple[int, int]]:
    """``[(start, stop)]`` runs of consecutive texts of at most ``max_chars`` characters each (a longer text is a
    block of its own): the n-grams are counted a block at a time, so their arrays stay that size."""
    blocks, start, size = [], 0, 0
    for i, text in enumerate(texts):
        if i > start and size + len(text) > max_chars:
            blocks.append((start, i))
            start, size = i, 0
        size += len(text)
    if start < len(texts):
        blocks.append((start, len(texts)))
    return blocks


def _block_counts(texts: Sequence[str], n: int, terms: np.ndarray, column_of: np.ndarray,
                  n_columns: int) -> sp.csr_matrix:
    """The count matrix of ``texts`` over the sorted n-gram codes ``terms`` (column ``column_of[i]`` for
    ``terms[i]``, ``texts`` normalised); n-grams not in ``terms`` are dropped.

    Each kept n-gram is one integer ``text · n_columns + column``; the sorted distinct ones and their counts are
    the canonical CSR matrix as they stand (rows, then columns in order, no duplicates), where building it from
    the (text, column) pairs and summing their duplicates sorted every row's columns again (~35 % of the counting:
    ~0.7 s per character-trigram index at the paper's scale)."""
    import pandas as pd

    codes, rows = _ngram_codes(texts, n)
    labels, distinct = pd.factorize(codes)   # each distinct code looked up once
    return _counts_of_labels(labels, np.asarray(distinct, dtype=np.uint64), rows, len(texts), terms, column_of,
                             n_columns)


def _counts_of_labels(labels: np.ndarray, distinct: np.ndarray, rows: np.ndarray, n_texts: int, terms: np.ndarray,
                      column_of: np.ndarray, n_columns: int) -> sp.csr_matrix:
    """:func:`_block_counts` of the n-grams of ``n_texts`` texts factorised: each n-gram's index ``labels`` into its
    block's ``distinct`` codes, and its text index ``rows`` (:func:`_ngram_codes`)."""
    at = np.searchsorted(terms, distinct)
    hit = at < len(terms)
    hit[hit] = terms[at[hit]] == distinct[hit]
    column = np.full(len(distinct), -1, dtype=np.int64)
    column[hit] = column_of[at[hit]]
    column = column[labels]
    kept = column >= 0
    cells, counts = np.unique(rows[kept] * n_columns + column[kept], return_counts=True)
    row = cells // n_columns
    indptr = np.zeros(n_texts + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n_texts), out=indptr[1:])
    matrix = sp.csr_matrix((counts.astype(np.float64), cells - row * n_columns, indptr), shape=(n_texts, n_columns))
    matrix.has_canonical_format = True
    return matrix


def _counts_in_workers(texts: Sequence[str], n: int, workers: int) -> tuple[sp.csr_matrix, dict[str, int]]:
    """:func:`char_ngram_counts` without a vocabulary, each block of texts counted in a worker process over its own
    n-grams (:func:`_local_counts`); here the blocks' sorted n-grams are merged into the vocabulary, sorted as one
    pass makes it, and each block's columns renumbered into it.  Renumbering keeps the columns of every row in
    order (both orders are the n-grams'), so the stacked matrix is canonical and equal to the one-process count."""
    from pmrag.core.parallel import ordered_map

    calls = [(texts[start:stop], n) for start, stop in _text_blocks(texts, BLOCK_CHARS)]
    parts = list(ordered_map(_local_counts, calls, workers))
    del calls
    terms = np.unique(np.concatenate([np.zeros(0, np.uint64)] + [local for local, *_ in parts]))
    nnz = sum(len(data) for _, data, _, _ in parts)
    data = np.empty(nnz, dtype=np.float64)
    columns = np.empty(nnz, dtype=np.int64)
    indptr = [np.zeros(1, dtype=np.int64)]
    at = 0
    for i, (local, counts, local_columns, local_indptr) in enumerate(parts):
        parts[i] = None   # each block's arrays let go as they are copied in
        data[at:at + len(counts)] = counts
        np.take(np.searchsorted(terms, local), local_columns, out=columns[at:at + len(counts)])
        indptr.append(local_indptr[1:] + at)
        at += len(counts)
    trim_heap()
    vocabulary = {term: i for i, term in enumerate(_decode_ngrams(terms, n))}
    indptr = np.concatenate(indptr)
    counts = sp.csr_matrix((data, columns, indptr), shape=(len(indptr) - 1, len(terms)), copy=False)
    counts.has_canonical_format = True
    return counts, vocabulary


def _local_counts(texts: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One block's sorted distinct n-gram codes and its count matrix over them as CSR arrays (counts and columns
    int32: half the bytes to hand back), for :func:`_counts_in_workers`."""
    import pandas as pd

    texts = [normalise_chars(t) for t in texts]
    codes, rows = _ngram_codes(texts, n)
    labels, distinct = pd.factorize(codes)   # hashed once: the block's own vocabulary is its distinct codes, sorted
    distinct = np.asarray(distinct, dtype=np.uint64)
    local = np.sort(distinct)
    matrix = _counts_of_labels(labels, distinct, rows, len(texts), local, np.arange(len(local), dtype=np.int64),
                               len(local))
    return local, matrix.data.astype(np.int32), matrix.indices.astype(np.int32), matrix.indptr


class CharNgramTokenizer:
    """Character n-grams (n = :attr:`n`) as BM25 tokens; counted directly (see the module docstring)."""

    n: ClassVar[int]
    name: ClassVar[str]

    @classmethod
    def from_params(cls, section=None, cache_dir=None) -> CharNgramTokenizer:
        return cls()

    @staticmethod
    def files(section) -> list[Path]:
        return []

    def vectorizer(self):
        """The ``CountVectorizer`` these n-grams are defined by (:func:`char_ngram_counts` is its fast twin)."""
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(analyzer="char", ngram_range=(self.n, self.n), preprocessor=normalise_chars,
                               dtype=np.float64)

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [char_ngrams(t, self.n) for t in texts]

    def count_many(self, documents: Sequence[str], queries: Sequence[str], workers: int = 0
                   ) -> tuple[sp.csr_matrix, sp.csr_matrix, dict[str, int]]:
        """Documents × n-grams counts, queries × n-grams counts over the documents' vocabulary, the vocabulary
        (the documents' counted in ``workers`` processes: :func:`char_ngram_counts`)."""
        doc_counts, vocabulary = char_ngram_counts(list(documents), self.n, workers=workers)
        query_counts, _ = char_ngram_counts(list(queries), self.n, vocabulary)
        return doc_counts, query_counts, vocabulary


class Char2Tokenizer(CharNgramTokenizer):
    n = 2
    name = "char2"


class Char3Tokenizer(CharNgramTokenizer):
    n = 3
    name = "char3"


# -------------------------------------------------------------------------------------------------- word


@lru_cache(maxsize=1)
def english_stemmer():
    """PyStemmer's English Snowball (Porter 2) stemmer."""
    import Stemmer

    return Stemmer.Stemmer("english")


STOPWORD_LISTS = {"english": "STOPWORDS_EN", "english_plus": "STOPWORDS_EN_PLUS"}   # name → bm25s.stopwords list


@lru_cache(maxsize=len(STOPWORD_LISTS) + 1)
def stopword_set(name: str) -> frozenset[str]:
    """bm25s's stopword list of that name, imported rather than copied so that it cannot drift from bm25s's:
    ``english`` (``bm25s.stopwords.STOPWORDS_EN``, Lucene's 33 English stop words), ``english_plus``
    (``STOPWORDS_EN_PLUS``, NLTK's 179); ``none`` is the empty set."""
    if name == "none":
        return frozenset()
    if name not in STOPWORD_LISTS:
        raise ValueError(f"key 'bm25.stopwords' must be none, {' or '.join(STOPWORD_LISTS)}, got {name!r}")
    import bm25s.stopwords

    return frozenset(getattr(bm25s.stopwords, STOPWORD_LISTS[name]))


class WordTokenizer:
    """Lower-cased ``\\w\\w+`` words, less stop words, optionally stemmed (English text's default; see the module
    docstring)."""

    name = "word"
    packages = ("PyStemmer", "bm25s")   # the stemmer's and the stopword lists' versions change the tokens

    def __init__(self, stemmer: str = "none", stopwords: str = "none"):
        if stemmer not in ("none", "english"):
            raise ValueError(f"key 'bm25.stemmer' must be none or english, got {stemmer!r}")
        self.stemmer = stemmer
        self.stopwords = stopwords
        self._dropped = stopword_set(stopwords)

    @classmethod
    def from_params(cls, section, cache_dir=None) -> WordTokenizer:
        return cls(section.stemmer, section.stopwords)

    @staticmethod
    def files(section) -> list[Path]:
        return []

    def tokenize(self, text: str) -> list[str]:
        words = WORD_PATTERN.findall(text.lower())
        if self._dropped:
            words = [w for w in words if w not in self._dropped]
        return english_stemmer().stemWords(words) if self.stemmer == "english" else words

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]


# ------------------------------------------------------------------------------------- tokenizer → BM25


def make_tokenizer(tokenizer_class, section, cache_dir: str | Path | None = None):
    """A tokenizer component from the ``bm25`` section; ``cache_dir`` reaches the ones that cache."""
    if getattr(tokenizer_class, "uses_cache_dir", False):
        return tokenizer_class.from_params(section, cache_dir=cache_dir)
    return tokenizer_class.from_params(section)


def index_texts(tokenizer, documents: Sequence[str], queries: Sequence[str], section, *, keep_counts: bool = True,
                workers: int | None = None) -> tuple[BM25Index, sp.csr_matrix]:
    """A BM25 index of ``documents`` and the queries' token counts over its vocabulary (queries × terms).

    A tokenizer with ``count_many`` (the character n-grams) hands over count matrices
    (:meth:`BM25Index.fit_term_counts`); the others token lists, encoded a block at a time
    (:meth:`BM25Index.fit_encoded`, :func:`query_matrix`), or, with ``encode_many`` (the paper's regex), blocks of
    documents already encoded.  ``workers``: the documents are tokenized (counted) in that
    many worker processes (default :func:`index_workers`: by their size), unless the tokenizer starts its own
    (``tokenizes_in_workers``); the index is the same either way.  ``keep_counts``: whether the index keeps
    ``f(t, d)`` (:meth:`BM25Index.fit`).
    """
    workers = index_workers(documents) if workers is None else workers
    if hasattr(tokenizer, "count_many"):
        doc_counts, query_counts, vocabulary = tokenizer.count_many(documents, queries, workers=workers)
        term_counts = counts_by_term(doc_counts, len(vocabulary))
        del doc_counts   # before the weights: both layouts at once and the weights were the peak of a study at scale
        trim_heap()
        return BM25Index.fit_term_counts(term_counts, vocabulary, section, keep_counts=keep_counts), query_counts
    if workers > 0 and not getattr(tokenizer, "tokenizes_in_workers", False):
        blocks = encoded_in_workers(tokenizer, documents, workers)
    elif hasattr(tokenizer, "encode_many"):
        blocks = map(tokenizer.encode_many, document_blocks(documents))
    else:
        blocks = encoded_blocks(tokenized_in_blocks(tokenizer, documents), "token_lists")
    index = BM25Index.fit_encoded(blocks, section, keep_counts=keep_counts)
    return index, query_matrix(tokenizer.tokenize_many(queries), index.vocabulary)


def index_workers(documents: Sequence[str]) -> int:
    """The worker processes to tokenize ``documents`` in: :data:`INDEX_WORKERS` when they hold at least
    :data:`PARALLEL_INDEX_CHARS` characters, else none (and none inside
    :func:`~pmrag.core.parallel.in_this_process`)."""
    from pmrag.core.parallel import worker_processes

    return worker_processes(INDEX_WORKERS) if sum(map(len, documents)) >= PARALLEL_INDEX_CHARS else 0


def encoded_in_workers(tokenizer, documents: Sequence[str], workers: int) -> Iterator[EncodedBlock]:
    """Blocks of documents (:data:`~pmrag.retrieve.bm25.ENCODE_DOCS` at most, and at least four blocks a worker)
    tokenized and encoded (:func:`~pmrag.retrieve.bm25.encode_block`) in ``workers`` processes, in order
    (:func:`~pmrag.core.parallel.ordered_map`): what comes back is a block's distinct tokens and int32 ids, not its
    token lists (a Python string per token)."""
    from pmrag.core.parallel import ordered_map
    from pmrag.retrieve.bm25 import ENCODE_DOCS

    size = max(1, min(ENCODE_DOCS, -(-len(documents) // (4 * workers))))   # four blocks a worker at least: the last
    calls = [(tokenizer, documents[start:start + size]) for start in range(0, len(documents), size)]   # end together
    return ordered_map(_encoded_texts, calls, workers)


def _encoded_texts(tokenizer, texts: Sequence[str]) -> EncodedBlock:
    encode = getattr(tokenizer, "encode_many", None)
    return encode(texts) if encode is not None else encode_block(tokenizer.tokenize_many(texts))


def document_blocks(documents: Sequence[str]) -> Iterator[Sequence[str]]:
    """``documents`` :data:`~pmrag.retrieve.bm25.ENCODE_DOCS` at a time."""
    from pmrag.retrieve.bm25 import ENCODE_DOCS

    for start in range(0, len(documents), ENCODE_DOCS):
        yield documents[start:start + ENCODE_DOCS]


def tokenized_in_blocks(tokenizer, documents: Sequence[str]) -> Iterator[list[str]]:
    """Each document's tokens, tokenized :data:`~pmrag.retrieve.bm25.ENCODE_DOCS` documents at a time (one
    ``tokenize_many`` call each, so a tokenizer's worker processes and cache see whole blocks), so that
    :meth:`BM25Index.fit` holds one block's token lists, not every document's."""
    for block in document_blocks(documents):
        yield from tokenizer.tokenize_many(block)


for _component in (SudachiTokenizer, Char2Tokenizer, Char3Tokenizer, WordTokenizer):
    TOKENIZERS.register(_component.name)(_component)
