"""Sub-windows of a representation's text, embedded one vector each, for multi-vector retrieval.

A chunk's text is split into its lines, ``text.split("\\n")`` (raw_text: one message per line, so a window is
``window_lines`` consecutive messages; a message that itself holds a line break counts as several lines, and
an empty line is a line).  With ``n`` lines, ``w = multivector.window_lines`` and
``s = multivector.stride_lines`` (``1 ≤ s ≤ w``, checked by the params):

* ``n ≤ w``: one window, the text itself, character for character.  Its vector is then the single-vector
  retriever's vector of that chunk (same text sent, same cache entry), which is what makes ``multivec_max``
  equal to ``vector`` on a corpus of short texts.
* ``n > w``: windows start at lines ``0, s, 2s, …`` for as long as ``start + w < n`` (a window that does not
  reach the last line), followed by one final window ``[n - w, n)`` that ends at the last line.  Every window
  has exactly ``w`` lines, so similarities of windows are comparable: the final window overlaps the one
  before it (start ``r``) by ``r + 2w - n`` lines rather than being shorter (our choice: a short tail window
  holding one or two messages would score extremes that full windows cannot).  Because ``s ≤ w`` no line is
  skipped, and the final start is strictly after the previous one, so no window is repeated.

A window's text is its lines joined by ``"\\n"``.  Each window is embedded as a passage through the study's
embedder and content-addressed cache with the same long-text rule as any chunk text
(:func:`pmrag.represent.embed.embed_passages`: ``embedding.long_text``, ``max_chars``, ``head_fraction``), so an
identical window text (in another chunk, or another run) is embedded once.

:class:`SubVectors` holds, for one representation, the matrix (one row per window), each row's owner (the
index of its chunk, in chunk order, non-decreasing, every chunk owning at least one row) and the chunk IDs.
It stays in memory and is pickled as the ``subvectors:<representation>`` stage's result: at the paper's
scale (18,544 chunks, raw_text 21.6 lines on average) raw_text at 4 / 4 has 108,035 windows, 158 MiB of
float32 at 384 dimensions (633 MiB at 1,536), a size the stage cache handles; a ``.npy`` beside the chunk
vectors would add a second file to keep consistent for no gain in speed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pmrag.core.errors import PmragError
from pmrag.core.params import EmbeddingSection, MultiVectorSection

LINE_SEPARATOR = "\n"


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float32 (a zero row stays zero): :func:`pmrag.retrieve.dense.l2_normalise`'s
    arithmetic, restated here because ``represent`` does not import from ``retrieve``."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _check_window(window_lines, stride_lines) -> None:
    if isinstance(window_lines, bool) or not isinstance(window_lines, (int, np.integer)) or window_lines < 1:
        raise ValueError(f"multivector.window_lines must be an integer ≥ 1, got {window_lines!r}")
    if (isinstance(stride_lines, bool) or not isinstance(stride_lines, (int, np.integer))
            or not 1 <= stride_lines <= window_lines):
        raise ValueError(f"multivector.stride_lines must be an integer from 1 to window_lines ({window_lines}), "
                         f"got {stride_lines!r}")


def window_starts(n_lines: int, window_lines: int, stride_lines: int) -> list[int]:
    """First line of every window of a text of ``n_lines`` lines (module docstring): ``[0]`` when
    ``n_lines ≤ window_lines``; else ``0, s, 2s, …`` while ``start + w < n``, then ``n - w``."""
    _check_window(window_lines, stride_lines)
    if n_lines <= window_lines:
        return [0]
    starts = list(range(0, n_lines - window_lines, stride_lines))
    return starts + [n_lines - window_lines]


def subwindow_texts(texts: Sequence[str], window_lines: int, stride_lines: int) -> tuple[np.ndarray, list[str]]:
    """Every text's sub-windows, in text order.

    Parameters
    ----------
    texts : one representation's texts, in chunk order.
    window_lines, stride_lines : ``multivector.window_lines`` and ``multivector.stride_lines``.

    Returns
    -------
    ``(owner, windows)``: ``windows[r]`` is a window's text and ``owner[r]`` (int64, non-decreasing) the
    index in ``texts`` of the text it comes from; every text owns at least one window.
    """
    _check_window(window_lines, stride_lines)
    owner: list[int] = []
    windows: list[str] = []
    for index, text in enumerate(texts):
        lines = text.split(LINE_SEPARATOR)
        if len(lines) <= window_lines:
            owner.append(index)
            windows.append(text)
            continue
        for start in window_starts(len(lines), window_lines, stride_lines):
            owner.append(index)
            windows.append(LINE_SEPARATOR.join(lines[start:start + window_lines]))
    return np.asarray(owner, dtype=np.int64), windows


@dataclass(frozen=True, eq=False)
class SubVectors:
    """One representation's sub-window vectors: ``matrix[r]`` belongs to chunk ``chunk_ids[owner[r]]``.

    ``matrix`` is stored with unit-length float32 rows, scaled once, on construction, with the arithmetic of
    :func:`pmrag.retrieve.dense.l2_normalise` (a zero row stays zero), so that a ranking, which needs only
    the cosine, does not re-normalise ~10⁵ rows per call.
    """

    representation: str
    model_id: str
    chunk_ids: np.ndarray
    owner: np.ndarray
    matrix: np.ndarray

    def __post_init__(self):
        owner, matrix = np.asarray(self.owner), np.asarray(self.matrix)
        where = f"sub-window vectors of {self.representation}"
        if owner.ndim != 1 or owner.dtype.kind not in "iu":
            raise PmragError(f"{where}: owner must be a 1-D integer array, got {owner.dtype} of shape {owner.shape}")
        if matrix.ndim != 2 or matrix.shape[0] != len(owner):
            raise PmragError(f"{where}: {matrix.shape} matrix for {len(owner)} owner rows")
        counts = np.bincount(owner, minlength=len(self.chunk_ids)) if len(owner) and owner.min() >= 0 else None
        if (counts is None or len(counts) != len(self.chunk_ids) or (counts < 1).any()
                or (np.diff(owner) < 0).any()):
            raise PmragError(f"{where}: owner must be non-decreasing and give every one of the "
                             f"{len(self.chunk_ids)} chunks at least one row")
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "matrix", _unit_rows(matrix))

    @property
    def counts(self) -> np.ndarray:
        """Windows per chunk, in chunk order."""
        return np.bincount(self.owner, minlength=len(self.chunk_ids))

    @property
    def starts(self) -> np.ndarray:
        """Row of each chunk's first window (the segment offsets ``np.*.reduceat`` takes)."""
        return np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)


def subwindow_vectors(chunk_ids: Sequence[str], texts: Sequence[str], representation: str, *,
                      multivector: MultiVectorSection, embedding: EmbeddingSection, cache_dir: str | Path,
                      allow_remote: bool = False, proxy: str | None = None, progress: bool = False) -> SubVectors:
    """The ``subvectors:<representation>`` stage: every chunk's sub-windows of one representation embedded as
    passages (module docstring).

    Parameters
    ----------
    chunk_ids, texts : the chunks in chunk order and their text of ``representation``.
    representation : the representation's name (recorded in the result).
    multivector : the ``multivector`` params (``window_lines``, ``stride_lines``).
    embedding : the ``embedding`` params (model, long-text rule, batch size).
    cache_dir : the folder of the shared embedding cache (``embeddings.sqlite``).
    allow_remote, proxy : the study's permission and named proxy (:mod:`pmrag.represent.privacy`).
    progress : progress bars.

    Returns
    -------
    SubVectors: one unit-length row per window, its chunk's index in ``owner``.
    """
    from pmrag.represent.embed import EmbeddingCache, embed_passages, make_embedder

    if len(chunk_ids) != len(texts):
        raise PmragError(f"sub-window vectors of {representation}: {len(chunk_ids)} chunk ids for {len(texts)} texts")
    owner, windows = subwindow_texts(list(texts), multivector.window_lines, multivector.stride_lines)
    embedder = make_embedder(embedding, allow_remote=allow_remote, proxy=proxy)
    with EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") as cache:
        matrix = embed_passages(embedder, windows, cache, embedding, progress=progress)
    return SubVectors(representation, embedder.model_id, np.asarray(chunk_ids), owner, matrix)
