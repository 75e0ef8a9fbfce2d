"""Learned fusion: a classifier over what every fused retriever says about a candidate, scored out of fold.

Beyond the paper.  The paper fuses two lists with one weight β (§5.3, eq. 15); here a model learns how to weigh
many lists and a chunk's own properties, and every question is scored by a model that never saw it, so its
Recall/MRR/nDCG@5 are out-of-fold estimates (unlike the in-sample selection of the paper's hybrid, §9.1).

Candidates (:func:`candidate_features`): for a question q, the union over the fused retrievers r of each one's top
``depth`` list P_r(q) (eq. 11 over k lists), one row per (q, d), sorted by question then chunk ID descending.

Features of (q, d) (:data:`CHUNK_FEATURES` and three per retriever):

* ``<r> score``: ŝ_r(q, d), min-max normalised over r's top-``depth`` list of q (eq. 14), 0 where d ∉ P_r(q);
* ``<r> rr``: 1 / rank_r(q, d) (the list's own rank, so its tie-breaks carry over), 0 where absent;
* ``<r> present``: 1 where d ∈ P_r(q), else 0 (the last chunk of a list has ŝ = 0 but is present);
* ``chars``: log(1 + characters of raw_text); ``messages``: the chunk's message count;
* ``session position``: window_index / (windows of its session − 1), 0 for a session's only window;
* ``gap before`` / ``gap after``: log(1 + hours) from the previous chunk's end to this one's start, and from this
  one's end to the next one's start (same source, chunk order; overlapping windows give 0; at a source's edge,
  the largest gap of that source, an edge being the longest break there is).

Label: 1 where the chunk's gold relevance is at least ``positive`` (1: any gold chunk, 2: primary gold only).

Folds (:func:`question_folds`): a question's group is the source of its gold chunks (LoCoMo: its conversation;
sources joined where its gold spans several).  With at least two groups, scikit-learn's ``GroupKFold`` over
questions (min(folds, groups) folds), so no source has questions on both sides of a split; with one group
(one chat history), ``KFold`` over questions, shuffled with ``seed``.

Scoring (:func:`out_of_fold`): for each fold, a model is fit on the candidates of the other folds' questions and
predicts P(relevant) for the fold's own; ranking (:func:`ranking_of`) by that probability descending, ties by chunk
ID descending (the paper's rule for eq. 15).  Models (:data:`MODELS`): ``logistic`` (standardised features,
``LogisticRegression``, lbfgs) and ``gradient_boosting`` (``HistGradientBoostingClassifier``, ``iterations`` trees, no early
stopping, ``random_state=seed``: the same numbers on every run).

Importance (:func:`importance`): ``logistic``: each feature's coefficient on standardised features, mean and sd
over the folds' models; ``gradient_boosting``: permutation importance on held-out rows: the drop in average
precision of the fold's held-out candidates when one retriever's three columns (or one chunk feature) are
shuffled together, mean and sd over folds × ``importance_repeats`` shuffles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.evaluate.metrics import per_question_rows
from pmrag.evaluate.runs import Qrels
from pmrag.retrieve.fusion import RANKING_COLUMNS, minmax_normalize

CHUNK_FEATURES = ("chars", "messages", "session position", "gap before", "gap after")
RETRIEVER_FEATURES = ("score", "rr", "present")
MODELS = ("logistic", "gradient_boosting")
KEYS = ("question_id", "chunk_id")


@dataclass(frozen=True)
class Features:
    """Candidates and their feature matrix: ``keys`` (question_id, chunk_id; question, then chunk ID ↓),
    ``matrix`` (rows × features, float64), ``names`` (the columns), ``groups`` (per column, the retriever or
    chunk feature it belongs to: what permutation importance shuffles together)."""

    keys: pd.DataFrame
    matrix: np.ndarray
    names: tuple[str, ...]
    groups: tuple[str, ...]


def retriever_features(ranking: pd.DataFrame, depth: int) -> pd.DataFrame:
    """One retriever's top ``depth`` per question: ``question_id, chunk_id`` with ŝ (eq. 14 over that top list),
    1 / rank and presence (1)."""
    top = ranking[ranking["rank"] <= depth].reset_index(drop=True)
    return pd.DataFrame({"question_id": top["question_id"].astype(str).to_numpy(dtype=object),
                         "chunk_id": top["chunk_id"].astype(str).to_numpy(dtype=object),
                         "score": minmax_normalize(top).to_numpy(),
                         "rr": 1.0 / top["rank"].to_numpy(dtype=np.float64), "present": 1.0})


def chunk_features(chunks: pd.DataFrame) -> pd.DataFrame:
    """:data:`CHUNK_FEATURES` of every chunk, indexed by chunk_id (``chunks``: the study's chunk table with
    source, chunk_index, session_index, window_index, start_at, end_at, n_messages, raw_text)."""
    frame = chunks.sort_values(["source", "chunk_index"], kind="stable").reset_index(drop=True)
    start, end = pd.to_datetime(frame["start_at"]), pd.to_datetime(frame["end_at"])
    source = frame["source"]
    before = ((start - end.groupby(source).shift(1)).dt.total_seconds() / 3600).clip(lower=0)
    after = ((start.groupby(source).shift(-1) - end).dt.total_seconds() / 3600).clip(lower=0)
    edge = pd.concat([before, after], axis=1).max(axis=1).groupby(source).transform("max").fillna(0.0)
    windows = frame.groupby(["source", "session_index"])["window_index"].transform("max").to_numpy(dtype=np.float64)
    position = np.divide(frame["window_index"].to_numpy(dtype=np.float64), windows,
                         out=np.zeros(len(frame)), where=windows > 0)
    return pd.DataFrame({
        "chars": np.log1p(frame["raw_text"].str.len().to_numpy(dtype=np.float64)),
        "messages": frame["n_messages"].to_numpy(dtype=np.float64),
        "session position": position,
        "gap before": np.log1p(before.fillna(edge).to_numpy(dtype=np.float64)),
        "gap after": np.log1p(after.fillna(edge).to_numpy(dtype=np.float64)),
    }, index=pd.Index(frame["chunk_id"].astype(str), name="chunk_id"))


def candidate_features(rankings: Mapping[str, pd.DataFrame], chunks: pd.DataFrame, depth: int) -> Features:
    """The union of every ranking's top ``depth`` per question (``rankings``: retriever name → ranking, in
    feature order) with each retriever's three features and the chunk's (:func:`chunk_features`)."""
    if not rankings:
        raise ValueError("learned fusion needs at least one ranking")
    parts = {name: retriever_features(ranking, depth) for name, ranking in rankings.items()}
    keys = (pd.concat([p.loc[:, list(KEYS)] for p in parts.values()], ignore_index=True).drop_duplicates()
            .sort_values(list(KEYS), ascending=[True, False], ignore_index=True))
    index = pd.MultiIndex.from_frame(keys)
    columns, names, groups = [], [], []
    for name, part in parts.items():
        rows = index.get_indexer(pd.MultiIndex.from_frame(part.loc[:, list(KEYS)]))
        for feature in RETRIEVER_FEATURES:
            column = np.zeros(len(keys))
            column[rows] = part[feature].to_numpy(dtype=np.float64)
            columns.append(column)
            names.append(f"{name} {feature}")
            groups.append(name)
    per_chunk = chunk_features(chunks)
    missing = sorted(set(keys["chunk_id"]) - set(per_chunk.index))
    if missing:
        raise ValueError(f"{len(missing)} ranked chunks are not in the chunk table, e.g. {missing[0]}")
    chunk_rows = per_chunk.reindex(keys["chunk_id"])
    for feature in CHUNK_FEATURES:
        columns.append(chunk_rows[feature].to_numpy(dtype=np.float64))
        names.append(feature)
        groups.append(feature)
    return Features(keys, np.column_stack(columns), tuple(names), tuple(groups))


def labels(keys: pd.DataFrame, qrels: Qrels | pd.DataFrame, positive: int = 1) -> np.ndarray:
    """1 where the candidate's gold relevance is at least ``positive``, else 0 (int8, in ``keys`` order)."""
    judged = Qrels.of(qrels).frame
    judged = judged[judged["relevance"] >= positive]
    relevant = pd.MultiIndex.from_arrays([judged["question_id"].astype(str), judged["chunk_id"].astype(str)])
    return pd.MultiIndex.from_frame(keys).isin(relevant).astype(np.int8)


def question_groups(question_ids: Sequence[str], qrels: Qrels | pd.DataFrame, chunks: pd.DataFrame) -> pd.Series:
    """Each question's group: the source of its gold chunks (sorted sources joined by ``|`` where they are several),
    indexed by question_id."""
    judged = Qrels.of(qrels).frame
    judged = judged[judged["relevance"] > 0]
    source = chunks.set_index(chunks["chunk_id"].astype(str))["source"].astype(str)
    sources = judged.assign(source=judged["chunk_id"].astype(str).map(source)).dropna(subset=["source"])
    joined = sources.groupby(sources["question_id"].astype(str))["source"].agg(lambda s: "|".join(sorted(set(s))))
    ids = pd.Index([str(q) for q in question_ids], name="question_id")
    missing = ids[~ids.isin(joined.index)]
    if len(missing):
        raise ValueError(f"question {missing[0]} has no gold chunk, so no source to group it by")
    return joined.reindex(ids).rename("group")


def question_folds(groups: pd.Series, folds: int, seed: int) -> tuple[pd.DataFrame, str]:
    """``(assignment, scheme)``: ``question_id, group, fold`` for the questions of ``groups`` (question_id →
    group), and the splitter in words.  Several groups: ``GroupKFold`` with min(folds, groups) folds; one group:
    ``KFold(shuffle=True, random_state=seed)`` with min(folds, questions) folds."""
    from sklearn.model_selection import GroupKFold, KFold

    ids = groups.index.to_numpy(dtype=object)
    n_groups = groups.nunique()
    if n_groups >= 2:
        n_splits = min(folds, n_groups)
        splits = GroupKFold(n_splits=n_splits).split(ids, groups=groups.to_numpy())
        scheme = f"GroupKFold by source: {n_splits} folds over {n_groups} sources"
    else:
        n_splits = min(folds, len(ids))
        if n_splits < 2:
            raise ValueError("learned fusion needs at least two questions to score out of fold")
        splits = KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(ids)
        scheme = f"KFold over questions (one source): {n_splits} folds, shuffled with seed {seed}"
    fold = np.empty(len(ids), dtype=np.int64)
    for number, (_, scored) in enumerate(splits):
        fold[scored] = number
    return pd.DataFrame({"question_id": ids, "group": groups.to_numpy(dtype=object), "fold": fold}), scheme


def make_model(name: str, seed: int, iterations: int = 100):
    """An unfitted classifier of :data:`MODELS` (``iterations``: the boosted trees' ``max_iter``)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    if name == "gradient_boosting":
        return HistGradientBoostingClassifier(max_iter=iterations, early_stopping=False, random_state=seed)
    raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")


def row_folds(keys: pd.DataFrame, assignment: pd.DataFrame) -> np.ndarray:
    """Each candidate row's fold (its question's)."""
    fold = assignment.set_index("question_id")["fold"]
    return keys["question_id"].map(fold).to_numpy(dtype=np.int64)


def out_of_fold(features: Features, y: np.ndarray, fold_of_row: np.ndarray, name: str, seed: int,
                iterations: int = 100) -> tuple[np.ndarray, list]:
    """``(scores, models)``: P(relevant) of every row from the model fit on the other folds' rows, and each
    fold's fitted model (in fold order).  A fold whose training rows hold no relevant candidate (or only
    relevant ones) is an error: there is nothing to learn from."""
    scores = np.full(len(y), np.nan)
    models = []
    for fold in np.unique(fold_of_row):
        train, scored = fold_of_row != fold, fold_of_row == fold
        if np.unique(y[train]).size < 2:
            raise ValueError(f"learned fusion: the training folds for fold {fold} hold only one class of candidate")
        model = make_model(name, seed, iterations).fit(features.matrix[train], y[train])
        scores[scored] = model.predict_proba(features.matrix[scored])[:, 1]
        models.append(model)
    return scores, models


def ranking_of(keys: pd.DataFrame, scores: np.ndarray) -> pd.DataFrame:
    """Every candidate ranked by score descending, ties by chunk ID descending: ``question_id, chunk_id, rank,
    score`` with ranks 1..n per question."""
    frame = keys.assign(score=scores)
    ranked = frame.sort_values(["question_id", "score", "chunk_id"], ascending=[True, False, False],
                               ignore_index=True, kind="stable")
    ranked["rank"] = ranked.groupby("question_id", sort=False).cumcount() + 1
    return ranked.loc[:, list(RANKING_COLUMNS)]


def coefficients(features: Features, models: Sequence) -> pd.DataFrame:
    """Logistic coefficients on standardised features: ``feature, importance`` (mean over folds), ``sd``."""
    coef = np.vstack([model[-1].coef_[0] for model in models])
    return pd.DataFrame({"feature": features.names, "importance": coef.mean(axis=0),
                         "sd": coef.std(axis=0, ddof=1) if len(models) > 1 else 0.0})


def permutation_drops(features: Features, y: np.ndarray, fold_of_row: np.ndarray, models: Sequence,
                      repeats: int, seed: int) -> pd.DataFrame:
    """Held-out permutation importance: per feature group (a retriever's three columns, or one chunk feature),
    the drop in average precision of each fold's held-out rows when the group's columns are shuffled together
    across those rows; ``feature, importance`` (mean over folds × repeats), ``sd``.  A fold with no relevant
    held-out row is skipped (average precision is undefined there)."""
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(seed)
    group_names = list(dict.fromkeys(features.groups))
    columns = {g: [i for i, owner in enumerate(features.groups) if owner == g] for g in group_names}
    drops = {g: [] for g in group_names}
    for fold, model in zip(np.unique(fold_of_row), models):
        held = fold_of_row == fold
        x, truth = features.matrix[held], y[held]
        if truth.sum() == 0:
            continue
        base = average_precision_score(truth, model.predict_proba(x)[:, 1])
        for group in group_names:
            for _ in range(repeats):
                shuffled = x.copy()
                shuffled[:, columns[group]] = x[rng.permutation(len(x))][:, columns[group]]
                drops[group].append(base - average_precision_score(truth, model.predict_proba(shuffled)[:, 1]))
    return pd.DataFrame({"feature": group_names, "importance": [float(np.mean(drops[g])) if drops[g] else np.nan
                                                                for g in group_names],
                         "sd": [float(np.std(drops[g], ddof=1)) if len(drops[g]) > 1 else np.nan
                                for g in group_names]})


@dataclass(frozen=True)
class LearnedFusion:
    """A learned fusion's out-of-fold results: ``runs`` (method name → ranking of every candidate),
    ``per_question`` (metric rows of each run, :func:`pmrag.evaluate.metrics.per_question_rows`), ``folds``
    (question_id, group, fold), ``scheme`` (the splitter in words), ``importance`` (model, kind, feature,
    importance, sd; largest magnitude first within a model), ``retrievers`` fused, ``candidates`` (rows) and
    ``positive`` (the smallest relevance labelled relevant)."""

    runs: dict
    per_question: pd.DataFrame
    folds: pd.DataFrame
    scheme: str
    importance: pd.DataFrame
    retrievers: tuple[str, ...]
    candidates: int
    positive: int


def best_single(per_question: pd.DataFrame, retrievers: Sequence[str]) -> str:
    """The best of ``retrievers`` (any listed single retriever, not only the paper's six) by macro Recall@5, then
    nDCG@5, then MRR@5, then list order (:mod:`pmrag.evaluate.select`); chosen on the evaluated questions, so a
    difference from it is conditional on that choice."""
    from pmrag.evaluate.metric_names import PAPER_COLUMNS
    from pmrag.evaluate.select import listed, select

    names = [str(r) for r in retrievers]
    means = per_question[per_question["retriever"].isin(names)].groupby("retriever")[list(PAPER_COLUMNS)].mean()
    if means.empty:
        raise ValueError("no per-question rows for any of the retrievers")
    order = {name: i for i, name in enumerate(names)}
    return means.index[select(means, listed([order[name] for name in means.index]))]


def method_name(model: str) -> str:
    """How tables name a learned fusion: ``learned_<model>``."""
    return f"learned_{model}"


def learned_fusion(rankings: Mapping[str, pd.DataFrame], qrels: Qrels | pd.DataFrame, types: pd.Series,
                   chunks: pd.DataFrame, *, models: Sequence[str] = MODELS, folds: int = 5, depth: int = 200,
                   seed: int = 0, positive: int = 1, importance_repeats: int = 1, iterations: int = 100,
                   ks: Sequence[int] = (5,), threads: int = 1) -> LearnedFusion:
    """Every model of ``models`` trained on the candidates of :func:`candidate_features` and scored out of fold.

    Parameters: ``rankings`` (retriever name → ranking) of the fused retrievers; ``qrels`` and ``types``
    (question_id → type) of the evaluated questions (only they are candidates); ``chunks`` the chunk table;
    ``folds``, ``depth``, ``seed``, ``positive``, ``importance_repeats`` and ``iterations`` (the boosted trees'
    ``max_iter``) as in the module's description;
    ``ks`` the cut-offs of the per-question metrics; ``threads`` the OpenMP threads the models may use (threadpoolctl;
    the fitted models do not depend on it).
    """
    from threadpoolctl import threadpool_limits

    qrels = Qrels.of(qrels)
    evaluated = set(types.index.astype(str))
    rankings = {name: r[r["question_id"].astype(str).isin(evaluated)] for name, r in rankings.items()}
    features = candidate_features(rankings, chunks, depth)
    y = labels(features.keys, qrels, positive)
    assignment, scheme = question_folds(question_groups(sorted(evaluated), qrels, chunks), folds, seed)
    fold_of_row = row_folds(features.keys, assignment)
    runs, rows, importances = {}, [], []
    for model in models:
        with threadpool_limits(limits=threads, user_api="openmp"):   # the fits and the permuted predictions
            scores, fitted = out_of_fold(features, y, fold_of_row, model, seed, iterations)
            table = (coefficients(features, fitted).assign(kind="coefficient (standardised)") if model == "logistic"
                     else permutation_drops(features, y, fold_of_row, fitted, importance_repeats, seed)
                     .assign(kind="held-out permutation: drop in average precision"))
        name = method_name(model)
        runs[name] = ranking_of(features.keys, scores)
        rows.append(per_question_rows(runs[name], name, qrels, types, ks))
        order = table["importance"].abs().sort_values(ascending=False, kind="stable").index
        importances.append(table.loc[order].assign(model=model))
    importance = pd.concat(importances, ignore_index=True).loc[:, ["model", "kind", "feature", "importance", "sd"]]
    return LearnedFusion(runs, pd.concat(rows, ignore_index=True), assignment, scheme, importance,
                         tuple(rankings), len(features.keys), positive)
