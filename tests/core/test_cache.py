"""The SQLite cache base (pmrag.core.cache.SqliteCache) and its two caches' file formats: the embedding cache and
the token cache keep the tables they always had, so caches written before (the committed demo cache) read
unchanged, and opening a cache file to read it leaves the file as it was."""

import hashlib
import sqlite3

import numpy as np
import pytest

from pmrag.core.cache import LOOKUP_CHUNK, SqliteCache
from pmrag.represent.embed import EmbeddingCache
from pmrag.retrieve.lexical import TokenCache

# The CREATE TABLE statements the two caches wrote before they shared a base: a file's format is this text.
EMBEDDINGS_SQL = ("CREATE TABLE embeddings (key TEXT PRIMARY KEY, model_id TEXT NOT NULL, kind TEXT NOT NULL, "
                  "dim INTEGER NOT NULL, vector BLOB NOT NULL)")
TOKENS_SQL = "CREATE TABLE tokens (key TEXT PRIMARY KEY, config TEXT NOT NULL, tokens TEXT NOT NULL)"


class Notes(SqliteCache):
    table = "notes"
    columns = "owner TEXT NOT NULL, body TEXT NOT NULL"

    def get_many(self, keys):
        return {key: (owner, body) for key, owner, body in self._rows(keys, "owner, body")}

    def put_many(self, rows):
        self._put("owner, body", rows)


class SharedNotes(Notes):
    wal = True


def journal_mode(path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]


def table_sql(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table'")]


def test_entries_round_trip_and_persist(tmp_path):
    path = tmp_path / "deep" / "folder" / "notes.sqlite"           # the folder is created
    with Notes(path) as cache:
        assert len(cache) == 0 and cache.get_many(["a"]) == {}
        cache.put_many([("a", "me", "first"), ("b", "you", "second")])
        cache.put_many([("a", "me", "replaced")])                    # insert or replace
        assert len(cache) == 2
    with Notes(path) as reopened:
        assert reopened.get_many(["a", "b", "missing", "a"]) == {"a": ("me", "replaced"), "b": ("you", "second")}
    assert table_sql(path) == ["CREATE TABLE notes (key TEXT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL)"]


def test_a_lookup_of_more_keys_than_one_select_holds_finds_every_one(tmp_path):
    keys = [f"k{i:05d}" for i in range(2 * LOOKUP_CHUNK + 7)]
    with Notes(tmp_path / "n.sqlite") as cache:
        cache.put_many([(key, "o", key.upper()) for key in keys[::2]])
        found = cache.get_many(keys)
    assert sorted(found) == keys[::2] and found[keys[-1]] == ("o", keys[-1].upper())


def test_only_a_cache_that_asks_for_it_uses_the_write_ahead_log(tmp_path):
    with Notes(tmp_path / "plain.sqlite"):
        pass
    with SharedNotes(tmp_path / "shared.sqlite"):
        pass
    assert journal_mode(tmp_path / "plain.sqlite") == "delete" and journal_mode(tmp_path / "shared.sqlite") == "wal"
    assert (EmbeddingCache.wal, TokenCache.wal) == (False, True)


def test_the_context_manager_closes_the_connection(tmp_path):
    with Notes(tmp_path / "n.sqlite") as cache:
        pass
    with pytest.raises(sqlite3.ProgrammingError):
        len(cache)


def test_the_two_caches_keep_their_tables(tmp_path):
    with EmbeddingCache(tmp_path / "embeddings.sqlite"), TokenCache(tmp_path / "tokens.sqlite"):
        pass
    assert table_sql(tmp_path / "embeddings.sqlite") == [EMBEDDINGS_SQL]
    assert table_sql(tmp_path / "tokens.sqlite") == [TOKENS_SQL]


def test_a_cache_written_by_the_old_code_reads_and_opening_it_changes_no_byte(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    with sqlite3.connect(path) as conn:                               # as the embedding cache always wrote it
        conn.execute(EMBEDDINGS_SQL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
        conn.execute("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?)",
                     ("k", "m", "passage", 3, np.array([1, 2, 3], dtype="<f4").tobytes()))
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with EmbeddingCache(path) as cache:
        found = cache.get_many(["k"])
        assert len(cache) == 1
    np.testing.assert_array_equal(found["k"], np.array([1, 2, 3], dtype=np.float32))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
