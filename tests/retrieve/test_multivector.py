"""pmrag.represent.subwindows and pmrag.retrieve.multivector: the window rule and its edge cases, the max and softmax
scores against a brute-force loop, their limits in τ, equality with the single-vector retriever on short texts, and the
``subvectors:<representation>`` stage adapter through a small engine (the real e5 embedder, offline)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pmrag.core import store
from pmrag.core.errors import PmragError
from pmrag.core.names import RetrieverId
from pmrag.core.params import EmbeddingSection, MultiVectorSection, StudyParams
from pmrag.represent.embed import EmbeddingCache, embed_passages, make_embedder
from pmrag.represent.subwindows import (
    SubVectors, subwindow_texts, subwindow_vectors, window_starts,
)
from pmrag.retrieve.multivector import (
    MultiVectorRetriever, multivector_scores, segment_max, segment_softmax_mean,
)
from pmrag.retrieve.dense import l2_normalise
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import Corpus, Queries, VectorRetriever, subvectors_of
from pmrag.study import keyed, stages
from pmrag.study.declare import Runtime, params_at, resolve_stage, stage
from pmrag.study.engine import Engine

DIM = 6


def lines(n: int, tag: str = "m") -> str:
    return "\n".join(f"{tag}{i}" for i in range(n))


def params(**multivector) -> StudyParams:
    return StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, multivector=multivector)


# ------------------------------------------------------------------------------------------ window rule


@pytest.mark.parametrize("n, w, s, expected", [
    (1, 4, 4, [0]),
    (4, 4, 4, [0]),               # exactly window_lines: one window
    (5, 4, 4, [0, 1]),            # one line over: the final window ends at the last line
    (8, 4, 4, [0, 4]),            # an exact fit adds no extra window
    (10, 4, 4, [0, 4, 6]),        # the final window overlaps the one before it
    (10, 4, 2, [0, 2, 4, 6]),     # 6 + 4 = 10 reaches the end: it is the final window, not repeated
    (11, 4, 2, [0, 2, 4, 6, 7]),
    (5, 1, 1, [0, 1, 2, 3, 4]),
    (7, 3, 1, [0, 1, 2, 3, 4]),
])
def test_window_starts(n, w, s, expected):
    assert window_starts(n, w, s) == expected


def test_windows_cover_every_line_with_full_windows_and_no_repeat():
    for n in range(1, 40):
        for w in range(1, 8):
            for s in range(1, w + 1):
                starts = window_starts(n, w, s)
                covered = set()
                for start in starts:
                    covered.update(range(start, min(start + w, n)))
                assert covered == set(range(n))
                assert starts == sorted(set(starts)) and starts[0] == 0
                assert starts[-1] + min(w, n) == n          # the last window ends at the last line
                if n > w:
                    assert all(start + w <= n for start in starts)     # every window is full


def test_subwindow_texts_owner_and_texts():
    texts = [lines(3, "a"), lines(10, "b"), "", "one line", lines(5, "c")]
    owner, windows = subwindow_texts(texts, 4, 4)
    assert owner.tolist() == [0, 1, 1, 1, 2, 3, 4, 4]
    assert owner.dtype == np.int64
    assert windows[0] == texts[0]                               # short text: itself, character for character
    assert windows[1:4] == ["b0\nb1\nb2\nb3", "b4\nb5\nb6\nb7", "b6\nb7\nb8\nb9"]
    assert windows[4] == "" and windows[5] == "one line"
    assert windows[6:] == ["c0\nc1\nc2\nc3", "c1\nc2\nc3\nc4"]


def test_subwindow_lines_are_split_on_newline_only_and_empty_lines_count():
    text = "a\r\nb\n\nc\u2028d\ne"
    owner, windows = subwindow_texts([text], 2, 2)
    assert windows == ["a\r\nb", "\nc\u2028d", "c\u2028d\ne"]     # lines: "a\r", "b", "", "c\u2028d", "e"
    assert owner.tolist() == [0, 0, 0]


@pytest.mark.parametrize("w, s, key", [(0, 1, "window_lines"), (2, 3, "stride_lines"), (2, 0, "stride_lines"),
                                       (True, 1, "window_lines"), (2.0, 1, "window_lines")])
def test_window_arguments_are_checked(w, s, key):
    with pytest.raises(ValueError, match=f"multivector.{key}"):
        subwindow_texts(["x"], w, s)


def test_params_refuse_a_stride_over_the_window():
    with pytest.raises(ValueError, match="stride_lines"):
        params(window_lines=2, stride_lines=3)


# ----------------------------------------------------------------------------------------------- SubVectors


def test_subvectors_checks_its_owner():
    ids = np.array(["a", "b"])
    raw = np.array([[3, 4], [0, 0], [1, 1]], np.float32)
    good = SubVectors("raw_text", "m", ids, np.array([0, 1, 1]), raw)
    assert good.counts.tolist() == [1, 2] and good.starts.tolist() == [0, 1]
    np.testing.assert_array_equal(good.matrix, l2_normalise(raw))     # unit rows, a zero row stays zero
    assert good.matrix[0].tolist() == pytest.approx([0.6, 0.8]) and good.matrix[1].tolist() == [0, 0]
    for owner in ([0, 0, 0], [1, 0, 1], [0, 1, 2], [-1, 0, 1]):
        with pytest.raises(PmragError, match="raw_text"):
            SubVectors("raw_text", "m", ids, np.array(owner), np.ones((3, 2), np.float32))
    with pytest.raises(PmragError, match="matrix"):
        SubVectors("raw_text", "m", ids, np.array([0, 1]), np.ones((3, 2), np.float32))


# ------------------------------------------------------------------------------------------------- scores


def brute_force(window_vectors, owner, queries, variant, temperature):
    """One loop per question and chunk, in float64, written from the formulas."""
    scores = np.zeros((len(queries), owner.max() + 1))
    for qi, q in enumerate(queries.astype(np.float64)):
        for chunk in range(owner.max() + 1):
            sims = [float(q @ w) / (np.linalg.norm(q) * np.linalg.norm(w))
                    for w in window_vectors[owner == chunk].astype(np.float64)]
            if variant == "max":
                scores[qi, chunk] = max(sims)
            else:
                weights = [np.exp((x - max(sims)) / temperature) for x in sims]
                scores[qi, chunk] = sum(wt * x for wt, x in zip(weights, sims)) / sum(weights)
    return scores


@pytest.fixture(scope="module")
def random_windows():
    rng = np.random.default_rng(7)
    counts = np.array([1, 3, 2, 7, 1, 4])
    owner = np.repeat(np.arange(len(counts)), counts)
    windows = rng.normal(size=(len(owner), DIM)).astype(np.float32)
    queries = rng.normal(size=(5, DIM)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return owner, starts, windows, queries


@pytest.mark.parametrize("variant, temperature", [("max", 0.05), ("softmax", 0.05), ("softmax", 0.3),
                                                  ("softmax", 2.0)])
def test_scores_match_a_brute_force_loop(random_windows, variant, temperature):
    owner, starts, windows, queries = random_windows
    ours = multivector_scores(windows, starts, queries, variant, temperature)
    assert ours.shape == (5, 6)
    np.testing.assert_allclose(ours, brute_force(windows, owner, queries, variant, temperature), rtol=0, atol=2e-6)


def test_softmax_tends_to_max_and_to_mean(random_windows):
    owner, starts, windows, queries = random_windows
    sims = multivector_scores(windows, np.arange(len(owner)), queries, "max", 1.0)   # one column per window
    mean = np.stack([sims[:, owner == c].mean(axis=1) for c in range(owner.max() + 1)], axis=1)
    best = multivector_scores(windows, starts, queries, "max", 1.0)
    cold = multivector_scores(windows, starts, queries, "softmax", 1e-6)
    hot = multivector_scores(windows, starts, queries, "softmax", 1e6)
    np.testing.assert_allclose(cold, best, rtol=0, atol=1e-6)
    np.testing.assert_allclose(hot, mean, rtol=0, atol=1e-5)
    assert np.abs(best - mean).max() > 0.1                   # the two limits are far apart on these vectors
    middle = multivector_scores(windows, starts, queries, "softmax", 0.2)
    assert (middle <= best + 1e-6).all() and (middle >= mean - 1e-6).all()


def test_segment_reductions_with_extreme_temperatures_stay_finite():
    scores = np.array([[0.5, -0.5, 0.5, 0.25]], dtype=np.float32)
    assert segment_softmax_mean(scores, np.array([0, 2]), 1e-30).tolist() == [[0.5, 0.5]]
    assert segment_max(scores, np.array([0, 1, 3])).tolist() == [[0.5, 0.5, 0.25]]
    for starts in ([1, 2], [0, 2, 2], [0, 4], []):
        with pytest.raises(ValueError, match="segment starts"):
            segment_max(scores, np.array(starts, dtype=np.int64))
    with pytest.raises(ValueError, match="multivector.temperature"):
        segment_softmax_mean(scores, np.array([0, 2]), 0)


# -------------------------------------------------------------------------------------------- retriever


CHUNK_IDS = np.array(["c0", "c1", "c2", "c3", "c4"])
STARTS = np.array(["2024-01-01T10:00", "2024-01-02T10:00", "2024-01-02T10:00", "2024-01-03T10:00",
                   "2024-01-04T10:00"], dtype="datetime64[ns]")


def corpus_of(sub: SubVectors, vectors=None) -> Corpus:
    return Corpus(CHUNK_IDS, STARTS, texts=lambda rep: [], vectors=lambda rep: vectors,
                  upstream={subvectors_of(sub.representation): sub}.__getitem__)


def test_the_method_is_registered_with_its_variants_and_needs():
    assert RETRIEVERS.get("multivec") is MultiVectorRetriever
    assert set(MultiVectorRetriever.variants()) == {"max", "softmax"}
    rid = RetrieverId.parse("summary_multivec_softmax")
    assert tuple(map(str, MultiVectorRetriever.needs(rid))) == ("subvectors:summary", "query_vectors")
    assert MultiVectorRetriever.sections == ("multivector",)


@pytest.mark.parametrize("variant", ["max", "softmax"])
def test_one_window_per_chunk_ranks_exactly_like_the_vector_retriever(variant):
    rng = np.random.default_rng(3)
    chunk_vectors = rng.normal(size=(5, DIM)).astype(np.float32)
    chunk_vectors[2] = chunk_vectors[1]                              # a tie, broken by start time then chunk ID
    queries = Queries(["q1", "q2", "q3"], ["", "", ""], lambda: rng.normal(size=(3, DIM)).astype(np.float32))
    fixed = queries.vectors()
    queries = Queries(queries.question_ids, queries.texts, lambda: fixed)
    sub = SubVectors("raw_text", "m", CHUNK_IDS, np.arange(5), chunk_vectors)
    ours = MultiVectorRetriever(RetrieverId.parse(f"raw_text_multivec_{variant}"), params()).rank(
        corpus_of(sub), queries, 5)
    theirs = VectorRetriever(RetrieverId.parse("raw_text_vector"), params()).rank(
        corpus_of(sub, chunk_vectors), queries, 5)
    pd.testing.assert_frame_equal(ours.rankings, theirs.rankings)   # scores equal as floats, not approximately
    pd.testing.assert_series_equal(ours.matches, theirs.matches)


def test_the_best_window_decides_under_max():
    """Chunk c3 has one window pointing at the question among three pointing away: it ranks first under max,
    below the chunk of two middling windows under a hot softmax (the mean)."""
    q = np.array([[1.0, 0, 0, 0, 0, 0]], dtype=np.float32)
    away, half = [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]
    rows = {"c0": [away], "c1": [half, half], "c2": [away], "c3": [[1, 0, 0, 0, 0, 0], away, away, away],
            "c4": [[-1, 0, 0, 0, 0, 0]]}
    owner = np.repeat(np.arange(5), [len(rows[c]) for c in CHUNK_IDS])
    matrix = np.array([v for c in CHUNK_IDS for v in rows[c]], dtype=np.float32)
    sub = SubVectors("raw_text", "m", CHUNK_IDS, owner, matrix)
    queries = Queries(["q"], ["?"], lambda: q)
    best = MultiVectorRetriever(RetrieverId.parse("raw_text_multivec_max"), params()).rank(corpus_of(sub), queries, 5)
    assert best.rankings["chunk_id"].tolist()[:2] == ["c3", "c1"]
    assert best.rankings["score"].iloc[0] == pytest.approx(1.0, abs=1e-6)
    assert best.matches.tolist() == [2]
    hot = MultiVectorRetriever(RetrieverId.parse("raw_text_multivec_softmax"), params(temperature=100)).rank(
        corpus_of(sub), queries, 5)
    assert hot.rankings["chunk_id"].tolist()[:2] == ["c1", "c3"]
    assert hot.rankings["score"].iloc[1] == pytest.approx(1 / (1 + 3 * np.exp(-1 / 100)), abs=1e-6)   # ≈ the mean, 1/4


def test_rank_refuses_subvectors_of_another_chunk_order():
    sub = SubVectors("raw_text", "m", CHUNK_IDS[::-1].copy(), np.arange(5), np.eye(5, DIM, dtype=np.float32))
    queries = Queries(["q"], ["?"], lambda: np.ones((1, DIM), np.float32))
    with pytest.raises(RuntimeError, match="subvectors:raw_text"):
        MultiVectorRetriever(RetrieverId.parse("raw_text_multivec_max"), params()).rank(corpus_of(sub), queries, 5)


# ---------------------------------------------------------------------------------------------- the stage


REPRESENTATIONS = pd.DataFrame({"chunk_id": ["a", "b"], "raw_text": ["駅で待ってる\n了解", "明日は雨\n傘を持って\n駅まで迎えに行くね"]})


@stage("the representations, made by hand")
def representations() -> pd.DataFrame:
    return REPRESENTATIONS


def test_subvectors_stage_embeds_windows_like_chunk_texts(tmp_path):
    """Through the engine, with the declaration the study uses: only declared params and upstream stages are
    readable, and a short text's window vector is the chunk vector of that text."""
    study_params = StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, cache_dir=str(tmp_path / "cache"),
                               multivector={"window_lines": 2, "stride_lines": 1})
    reps = REPRESENTATIONS
    families = {"representations": ("",), "subvectors": ("raw_text",)}
    param_json = lambda dotted: str(params_at(study_params, dotted))   # noqa: E731
    declared = [resolve_stage(representations, study_params, families, param_json=param_json),
                resolve_stage(stages.subvectors, study_params, families, item="raw_text", param_json=param_json)]
    model_keys = ("backend", "model", "base_url")   # e5-local: no stand-in dimension (keyed.MODEL_KEYS)
    assert set(declared[1].params) == {*(f"embedding.{k}" for k in model_keys + keyed.CUT_KEYS),
                                       "multivector.window_lines", "multivector.stride_lines"}
    runtime = Runtime(store.open_store(tmp_path / "s.sqlite"), tmp_path / "run", tmp_path / "cache")
    sub = Engine(declared, runtime, lambda path: path.name).get("subvectors:raw_text")
    assert sub.owner.tolist() == [0, 1, 1] and sub.chunk_ids.tolist() == ["a", "b"]
    assert sub.model_id == "e5-local/multilingual-e5-small-q4" and sub.matrix.shape == (3, 384)
    embedder = make_embedder(study_params.embedding)
    with EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite") as cache:
        size = len(cache)
        expected = embed_passages(embedder, [reps["raw_text"][0], "明日は雨\n傘を持って", "傘を持って\n駅まで迎えに行くね"],
                                  cache, study_params.embedding, progress=False)
        assert len(cache) == size == 3                           # every window was cached by the stage
    np.testing.assert_array_equal(sub.matrix, l2_normalise(expected))            # stored at unit length


def test_subwindow_vectors_take_explicit_inputs(tmp_path):
    texts = ["駅で待ってる\n了解", "明日は雨\n傘を持って\n駅まで迎えに行くね"]
    section, embedding = MultiVectorSection(window_lines=2, stride_lines=1), EmbeddingSection()
    sub = subwindow_vectors(np.array(["a", "b"], dtype=object), texts, "raw_text", multivector=section,
                            embedding=embedding, cache_dir=tmp_path / "cache")
    assert sub.representation == "raw_text" and sub.owner.tolist() == [0, 1, 1]
    expected = embed_passages(make_embedder(embedding), [texts[0], "明日は雨\n傘を持って", "傘を持って\n駅まで迎えに行くね"],
                              EmbeddingCache(tmp_path / "other.sqlite"), embedding, progress=False)
    np.testing.assert_allclose(sub.matrix, l2_normalise(expected), atol=1e-6)
    with EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite") as cache:
        assert len(cache) == 3
    with pytest.raises(PmragError, match="sub-window vectors of raw_text: 1 chunk ids for 2 texts"):
        subwindow_vectors(["a"], texts, "raw_text", multivector=section, embedding=embedding,
                          cache_dir=tmp_path / "cache")
