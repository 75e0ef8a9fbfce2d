"""Learned fusion (pmrag.evaluate.learned): the features as documented, folds that keep a source on one side, every
question scored only by a model that never saw it, the same numbers twice, and the params' one-line errors."""

import numpy as np
import pandas as pd
import pytest

from conftest import one_openmp_thread, params_error as error_of, write_file as write
from pmrag.core.params import StudyParams
from pmrag.evaluate import learned as lf

HOUR = pd.Timedelta(hours=1)
T0 = pd.Timestamp("2024-01-01 09:00")


def chunk_table() -> pd.DataFrame:
    """Source a: session 0 with two overlapping windows, session 1 one window 5 h later; source b: one chunk."""
    rows = [("a1", "a", 0, 0, 0, T0, T0 + 2 * HOUR, 3, "x" * 9),
            ("a2", "a", 1, 0, 1, T0 + HOUR, T0 + 3 * HOUR, 4, "y" * 19),
            ("a3", "a", 2, 1, 0, T0 + 8 * HOUR, T0 + 9 * HOUR, 2, "z" * 4),
            ("b1", "b", 0, 0, 0, T0, T0 + HOUR, 5, "w" * 99)]
    return pd.DataFrame(rows, columns=["chunk_id", "source", "chunk_index", "session_index", "window_index",
                                       "start_at", "end_at", "n_messages", "raw_text"])


def ranking(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


def test_chunk_features_are_length_session_position_and_gaps_with_edges_the_sources_largest_gap():
    features = lf.chunk_features(chunk_table())
    assert features.loc["a2", "chars"] == pytest.approx(np.log1p(19))
    assert features.loc["a2", "messages"] == 4
    assert features["session position"].to_dict() == {"a1": 0.0, "a2": 1.0, "a3": 0.0, "b1": 0.0}
    # a2 overlaps a1 (gap 0); a3 starts 5 h after a2 ends; a source's edges take its largest gap (a: 5 h, b: none, 0)
    assert features.loc["a2", "gap before"] == 0.0 and features.loc["a2", "gap after"] == pytest.approx(np.log1p(5))
    assert features.loc["a1", "gap before"] == pytest.approx(np.log1p(5))
    assert features.loc["a3", "gap after"] == pytest.approx(np.log1p(5))
    assert features.loc["b1", ["gap before", "gap after"]].tolist() == [0.0, 0.0]


def test_candidate_features_are_the_union_with_eq14_scores_reciprocal_ranks_and_presence():
    bm25 = ranking([("q1", "a1", 1, 9.0), ("q1", "a2", 2, 5.0), ("q1", "a3", 3, 1.0)])
    vec = ranking([("q1", "b1", 1, 0.8), ("q1", "a1", 2, 0.4)])
    features = lf.candidate_features({"bm25": bm25, "vec": vec}, chunk_table(), depth=2)
    frame = pd.DataFrame(features.matrix, columns=features.names, index=features.keys["chunk_id"])
    # depth 2: bm25's a3 is not a candidate; chunk IDs descending
    assert features.keys["chunk_id"].tolist() == ["b1", "a2", "a1"]
    assert frame["bm25 score"].to_dict() == {"b1": 0.0, "a2": 0.0, "a1": 1.0}   # eq. 14 over the top 2: 9 → 1, 5 → 0
    assert frame["bm25 rr"].to_dict() == {"b1": 0.0, "a2": 0.5, "a1": 1.0}
    assert frame["bm25 present"].to_dict() == {"b1": 0.0, "a2": 1.0, "a1": 1.0}
    assert frame["vec score"].to_dict() == {"b1": 1.0, "a2": 0.0, "a1": 0.0}
    assert frame.loc["a2", "chars"] == pytest.approx(np.log1p(19))
    assert features.names[-len(lf.CHUNK_FEATURES):] == lf.CHUNK_FEATURES
    assert features.groups[:3] == ("bm25",) * 3 and features.groups[-1] == "gap after"


def test_a_ranked_chunk_missing_from_the_chunk_table_is_an_error():
    with pytest.raises(ValueError, match="not in the chunk table"):
        lf.candidate_features({"bm25": ranking([("q1", "zz", 1, 1.0)])}, chunk_table(), depth=5)


def test_labels_count_relevance_at_least_positive():
    keys = pd.DataFrame({"question_id": ["q1", "q1", "q1"], "chunk_id": ["a3", "a2", "a1"]})
    qrels = pd.DataFrame({"question_id": ["q1", "q1"], "chunk_id": ["a1", "a2"], "relevance": [2, 1]})
    assert lf.labels(keys, qrels, 1).tolist() == [0, 1, 1]
    assert lf.labels(keys, qrels, 2).tolist() == [0, 0, 1]


def _many_sources(n_sources=6, per_source=4):
    chunks = pd.DataFrame({"chunk_id": [f"s{s}c{c}" for s in range(n_sources) for c in range(3)],
                           "source": [f"s{s}" for s in range(n_sources) for _ in range(3)]})
    questions = [f"s{s}q{i}" for s in range(n_sources) for i in range(per_source)]
    qrels = pd.DataFrame({"question_id": questions, "chunk_id": [f"{q[:2]}c{int(q[-1]) % 3}" for q in questions],
                          "relevance": 2})
    return chunks, questions, qrels


def test_folds_keep_every_source_on_one_side_of_every_split():
    chunks, questions, qrels = _many_sources()
    groups = lf.question_groups(questions, qrels, chunks)
    assert groups["s3q1"] == "s3"
    assignment, scheme = lf.question_folds(groups, folds=4, seed=0)
    assert scheme.startswith("GroupKFold by source: 4 folds over 6 sources")
    assert (assignment.groupby("group")["fold"].nunique() == 1).all()   # no group straddles two folds
    assert set(assignment["fold"]) == {0, 1, 2, 3}
    few, _ = lf.question_folds(groups[groups.isin(["s0", "s1"])], folds=5, seed=0)   # 2 sources: 2 folds
    assert sorted(few.groupby("group")["fold"].first()) == [0, 1]


def test_one_source_folds_questions_by_a_seeded_kfold():
    chunks, questions, qrels = _many_sources(n_sources=1, per_source=7)
    groups = lf.question_groups(questions, qrels, chunks)
    assignment, scheme = lf.question_folds(groups, folds=5, seed=3)
    assert scheme == "KFold over questions (one source): 5 folds, shuffled with seed 3"
    assert assignment["fold"].value_counts().sort_index().tolist() == [2, 2, 1, 1, 1]
    again, _ = lf.question_folds(groups, folds=5, seed=3)
    assert again.equals(assignment)
    with pytest.raises(ValueError, match="at least two questions"):
        lf.question_folds(groups.iloc[:1], folds=5, seed=0)


def test_a_question_with_gold_in_two_sources_is_grouped_by_both():
    chunks, questions, qrels = _many_sources(n_sources=2)
    qrels = pd.concat([qrels, pd.DataFrame({"question_id": ["s0q0"], "chunk_id": ["s1c0"], "relevance": [1]})])
    assert lf.question_groups(questions, qrels, chunks)["s0q0"] == "s0|s1"


def study_inputs(n_sources=3, per_source=8, width=12, seed=0):
    """Rankings of two retrievers over a few sources: the gold chunk is near the top of the first, noise in the
    second; chunks long enough that the chunk features vary."""
    rng = np.random.default_rng(seed)
    chunk_rows, bm25, vec, qrels, types = [], [], [], [], {}
    for s in range(n_sources):
        for c in range(width):
            chunk_rows.append((f"s{s}c{c:02d}", f"s{s}", c, c // 4, c % 4, T0 + c * HOUR, T0 + (c + 1) * HOUR,
                               c % 5 + 1, "m" * (c + 1)))
        for i in range(per_source):
            q = f"s{s}q{i}"
            gold = int(rng.integers(width))
            types[q] = "one" if i % 2 else "two"
            qrels.append((q, f"s{s}c{gold:02d}", 2))
            order = [gold, *[c for c in rng.permutation(width) if c != gold]]
            if rng.random() < 0.4:   # the gold chunk second now and then
                order[0], order[1] = order[1], order[0]
            bm25 += [(q, f"s{s}c{c:02d}", r + 1, float(width - r)) for r, c in enumerate(order)]
            vec += [(q, f"s{s}c{c:02d}", r + 1, float(1 / (r + 1))) for r, c in enumerate(rng.permutation(width))]
    chunks = pd.DataFrame(chunk_rows, columns=["chunk_id", "source", "chunk_index", "session_index", "window_index",
                                               "start_at", "end_at", "n_messages", "raw_text"])
    return ({"bm25": ranking(bm25), "vec": ranking(vec)},
            pd.DataFrame(qrels, columns=["question_id", "chunk_id", "relevance"]),
            pd.Series(types, name="type").rename_axis("question_id"), chunks)


class Recorder:
    """A model that remembers which questions it was trained on and refuses to score any of them (the question is
    the first feature column, see below)."""

    seen: list = []

    def fit(self, x, y):
        self.trained = set(x[:, 0])
        return self

    def predict_proba(self, x):
        scored = set(x[:, 0])
        Recorder.seen.append((self.trained, scored))
        assert not self.trained & scored, "a model scored a question it was trained on"
        return np.column_stack([1 - x[:, 1], x[:, 1]])


def test_every_question_is_scored_once_by_a_model_trained_without_it(monkeypatch):
    rankings, qrels, types, chunks = study_inputs()
    features = lf.candidate_features(rankings, chunks, depth=12)
    question_index = features.keys["question_id"].astype("category").cat.codes.to_numpy(dtype=np.float64)
    tagged = lf.Features(features.keys, np.column_stack([question_index, features.matrix]),
                         ("question", *features.names), ("question", *features.groups))
    y = lf.labels(features.keys, qrels)
    assignment, _ = lf.question_folds(lf.question_groups(sorted(types.index), qrels, chunks), folds=3, seed=0)
    Recorder.seen = []
    monkeypatch.setattr(lf, "make_model", lambda name, seed, iterations: Recorder())
    scores, models = lf.out_of_fold(tagged, y, lf.row_folds(features.keys, assignment), "logistic", 0)
    assert len(models) == 3 and not np.isnan(scores).any()
    scored = [q for _, questions in Recorder.seen for q in questions]
    assert sorted(scored) == sorted(set(question_index))   # every question scored, exactly once
    assert all(len(trained) > 0 for trained, _ in Recorder.seen)


def test_a_training_part_with_one_class_is_an_error():
    features = lf.Features(pd.DataFrame({"question_id": list("abcd"), "chunk_id": list("wxyz")}),
                           np.arange(8.0).reshape(4, 2), ("f", "g"), ("f", "g"))
    with pytest.raises(ValueError, match="only one class"):
        lf.out_of_fold(features, np.array([1, 0, 0, 0]), np.array([0, 0, 1, 1]), "logistic", 0)


def test_ranking_is_score_descending_ties_by_chunk_id_descending():
    keys = pd.DataFrame({"question_id": ["q", "q", "q", "r"], "chunk_id": ["c", "b", "a", "a"]})
    ranked = lf.ranking_of(keys, np.array([0.5, 0.9, 0.5, 0.1]))
    assert ranked["chunk_id"].tolist() == ["b", "c", "a", "a"] and ranked["rank"].tolist() == [1, 2, 3, 1]


def test_learned_fusion_scores_out_of_fold_learns_the_informative_list_and_repeats_itself():
    rankings, qrels, types, chunks = study_inputs()
    settings = dict(folds=3, depth=12, importance_repeats=1, iterations=10, ks=(1, 5))
    with one_openmp_thread():
        result = lf.learned_fusion(rankings, qrels, types, chunks, **settings)
        again = lf.learned_fusion(rankings, qrels, types, chunks, **settings)
    assert result.scheme == "GroupKFold by source: 3 folds over 3 sources"
    assert set(result.runs) == {"learned_logistic", "learned_gradient_boosting"}
    for name, run in result.runs.items():
        pd.testing.assert_frame_equal(run, again.runs[name])   # seeded: the same numbers twice
    pd.testing.assert_frame_equal(result.importance, again.importance)
    rows = result.per_question.set_index(["retriever", "question_id"])
    assert rows.loc["learned_logistic", "recall@5"].mean() == 1.0   # gold is always in bm25's top 2
    assert rows.loc["learned_logistic", "recall@1"].mean() >= 0.5
    top = result.importance.groupby("model").head(1).set_index("model")["feature"]
    assert top["logistic"].startswith("bm25 ") and top["gradient_boosting"] == "bm25"
    assert result.candidates == 3 * 8 * 12 and result.retrievers == ("bm25", "vec")
    assert set(result.folds.columns) == {"question_id", "group", "fold"}


def test_the_fitted_models_do_not_depend_on_the_thread_count():
    rankings, qrels, types, chunks = study_inputs()
    settings = dict(folds=3, depth=12, importance_repeats=1, iterations=10, ks=(1, 5), models=("gradient_boosting",))
    one = lf.learned_fusion(rankings, qrels, types, chunks, threads=1, **settings)
    two = lf.learned_fusion(rankings, qrels, types, chunks, threads=2, **settings)
    pd.testing.assert_frame_equal(one.runs["learned_gradient_boosting"], two.runs["learned_gradient_boosting"])
    pd.testing.assert_frame_equal(one.importance, two.importance)


def study_params(**learned) -> StudyParams:
    return StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                       "learned_fusion": learned})


@pytest.mark.parametrize("learned, key, says", [
    ("{retrievers: [raw_text_bm25, raw_text_multivec_max]}", "learned_fusion.retrievers",
     "raw_text_multivec_max is not in retrieval.retrievers"),
    ("{retrievers: [raw_text_bm25, raw_text_bm25]}", "learned_fusion.retrievers", "is listed twice"),
    ("{models: [logistic, forest]}", "learned_fusion.models", "gradient_boosting"),
    ("{models: [logistic, logistic]}", "learned_fusion.models", "'logistic' is listed twice"),
    ("{folds: 1}", "learned_fusion.folds", "greater than or equal to 2"),
    ("{iterations: 0}", "learned_fusion.iterations", "greater than or equal to 1"),
    ("{threads: 0}", "learned_fusion.threads", "greater than or equal to 1"),
    ("{enabled: true, depth: 201}", "learned_fusion.depth", "(201) exceeds retrieval.depth (200)"),
    ("{positive: 3}", "learned_fusion.positive", "less than or equal to 2"),
    ("{enabled: 'yes'}", "learned_fusion.enabled", "bool"),
])
def test_bad_learned_fusion_params_are_a_one_line_error_naming_file_and_key(tmp_path, learned, key, says):
    path = write(tmp_path, f"run: x\ndataset: {{synthetic: {{enabled: true}}}}\nlearned_fusion: {learned}\n")
    message = error_of(path)   # one line (the helper checks it)
    assert message.startswith(str(path)) and key in message and says in message, message


def test_the_default_fuses_every_listed_retriever_and_is_off():
    shallow = StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                          "retrieval": {"depth": 3}})
    assert shallow.learned_fusion.depth == 200   # off: its depth is never read, so a shallow study is no error
    params = study_params()
    assert not params.learned_fusion.enabled
    assert params.learned_fusion.retriever_ids(params.retrieval) == params.retrieval.retriever_ids()
    chosen = study_params(retrievers=["summary_bm25", "raw_text_bm25"])
    assert [str(r) for r in chosen.learned_fusion.retriever_ids(chosen.retrieval)] == ["summary_bm25", "raw_text_bm25"]


def test_the_stage_exists_when_enabled_and_keys_on_its_section_and_the_fused_retrievers_runs():
    from pmrag.core.names import StageKey
    from pmrag.study.pipeline import build_stages

    def stage(**learned):
        found = [s for s in build_stages(study_params(**learned)) if s.key.name == "learned_fusion"]
        return found[0] if found else None

    assert stage() is None   # off: no stage, so no demo number moves
    on = stage(enabled=True, retrievers=["summary_bm25", "raw_text_vector"])
    assert {n for n in on.needs if n.name == "runs"} == {StageKey("runs", "summary_bm25"),
                                                         StageKey("runs", "raw_text_vector")}
    assert {"qrels", "chunks"} <= {n.name for n in on.needs}
    assert {k for k in on.params if k.startswith("learned_fusion.")} == {
        f"learned_fusion.{k}" for k in ("models", "folds", "depth", "seed", "positive", "iterations",
                                        "importance_repeats")}
    reseeded = stage(enabled=True, retrievers=["summary_bm25", "raw_text_vector"], seed=1)
    assert reseeded.params != on.params
    threaded = stage(enabled=True, retrievers=["summary_bm25", "raw_text_vector"], threads=2)
    assert threaded.params == on.params   # the thread count enters no key: it changes no result
