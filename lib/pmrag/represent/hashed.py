"""A deterministic vector stand-in for corpora too large to embed on this machine (not a language model).

At the paper's scale (358,896 messages, ~22,000 chunks, three representations) a CPU embeds for hours; the
``hashed-stand-in`` embedding backend gives every text a vector in milliseconds instead, so the rest of the study
(dense scoring, the hybrid sweep, the bootstrap, every table) can be run and timed at that size.  It is chosen
only when the params name it (``embedding.backend: hashed-stand-in``) and labelled as a stand-in wherever the
dense retrievers' model is named (:meth:`pmrag.core.params.EmbeddingSection.label`): its vectors find shared surface strings, not meaning,
so numbers made with them say nothing about e5 or text-embedding-3-small.

The vector of a text (:func:`hashed_vectors`): its characters (code points) and its pairs of adjacent characters
are hashed (tabulation hashing over tables drawn from ``seed``) to one of ``dim`` dimensions and a sign ±1; the
vector is the signed count per dimension (the "hashing trick" of Weinberger et al. 2009: a random projection of the
n-gram counts), scaled to unit length.  A text with no characters gets the unit vector on dimension 0.  Queries and
passages are treated alike.  Integer hashing and counting, then one division: the same text, ``dim`` and ``seed``
give the same vector on any CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from pmrag.core.params import HASHED_STAND_IN, HASHED_STAND_IN_LABEL

_CODE_POINTS = 0x110000


@lru_cache(maxsize=4)
def _tables(seed: int) -> np.ndarray:
    """Three random uint32 tables over every code point (PCG64, the same on any platform): a character's hash, and
    the hashes of a pair's first and second character, XOR-ed (simple tabulation hashing, Pătraşcu & Thorup 2012)."""
    return np.random.Generator(np.random.PCG64(seed)).integers(0, 2 ** 32, size=(3, _CODE_POINTS), dtype=np.uint32)


def _code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every text's code points, concatenated, and the row each belongs to."""
    arrays = [np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32) for t in texts]
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    codes = np.concatenate(arrays) if arrays else np.zeros(0, np.uint32)
    return codes, np.repeat(np.arange(len(texts), dtype=np.int64), lengths)


def hashed_vectors(texts: Sequence[str], dim: int, seed: int = 0) -> np.ndarray:
    """Unit-length float32 vectors ``(len(texts), dim)`` of hashed characters and character pairs (module docstring).

    Parameters
    ----------
    texts : the texts, as sent (no shortening here).
    dim : the vectors' dimension (≥ 2).
    seed : chooses the hash tables: another seed is another random projection.
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim must be an integer ≥ 2, got {dim!r}")
    n, width = len(texts), np.uint64(2 * dim)
    single, first, second = _tables(seed)
    codes, rows = _code_points(texts)
    base = rows.astype(np.uint64) * width
    # 2·dim cells a row (multiply-shift picks one from the hash's 32 bits): the first dim count +1, the other
    # dim −1, so the sign is the hash's too and the counts stay integers
    one = (single[codes].astype(np.uint64) * width >> np.uint64(32)) + base
    two = ((first[codes[:-1]] ^ second[codes[1:]]).astype(np.uint64) * width >> np.uint64(32)) + base[1:]
    two = two[rows[:-1] == rows[1:]]   # no pair across two texts
    counts = (np.bincount(one.view(np.int64), minlength=n * 2 * dim)
              + np.bincount(two.view(np.int64), minlength=n * 2 * dim)).reshape(n, 2, dim)
    signed = (counts[:, 0] - counts[:, 1]).astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", signed, signed))
    empty = norms == 0
    signed[empty, 0], norms[empty] = 1.0, 1.0
    return (signed / norms[:, None]).astype(np.float32)


def stand_in_model_id(dim: int, seed: int = 0) -> str:
    """The model id the stand-in's vectors are recorded under: ``hashed-stand-in/d<dim>-s<seed>``."""
    return f"{HASHED_STAND_IN}/d{dim}-s{seed}"


class HashedStandInEmbedder:
    """The ``hashed-stand-in`` embedding backend: :func:`hashed_vectors` in batches (module docstring).

    ``cached`` is false: computing a vector is faster than reading it from the embedding cache, so
    :func:`pmrag.represent.embed.embed_with_cache` neither reads nor fills the cache for it.
    """

    unit_length = True
    cached = False
    label = HASHED_STAND_IN_LABEL

    def __init__(self, dim: int = 256, seed: int = 0, batch_size: int = 1024):
        hashed_vectors([""], dim, seed)   # checks dim
        self.dim, self.seed, self.batch_size = dim, seed, batch_size
        self.model_id = stand_in_model_id(dim, seed)

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        if kind not in ("query", "passage"):
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = max(self.batch_size, 1)
        return np.concatenate([hashed_vectors(texts[i:i + step], self.dim, self.seed)
                               for i in range(0, len(texts), step)])
