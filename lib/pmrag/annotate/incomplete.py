"""How incomplete gold moves the numbers (000 §8: the pool's completeness was never measured).

With gold that is complete by construction (the demo's: every evidence message is planted, so every chunk's
grade is known), a pool can be judged by a *simulated annotator* that gives each pooled chunk its complete-gold
grade (:func:`pool_judgments`), and every number can be computed twice: with the pool's judgments (unjudged = 0,
the paper's rule; questions without a pooled relevance-2 chunk dropped, as the paper dropped questions without
primary gold) and with the complete gold (every chunk judged, :func:`~pmrag.annotate.judged.complete_judgments_of`).

* :func:`depth_scores` / :func:`pool_depth_table`: pools of the paper's retrievers at depths k; per k the pool's
  size, the share of the complete gold it holds, every retriever's Recall@5 / nDCG@5 both ways and Kendall's τ
  between the two rankings of methods;
* :func:`judged_table` / :func:`measure_agreement`: judged@5, condensed-list Recall/nDCG and bpref per depth
  (:mod:`pmrag.annotate.judged`), and how closely each ranks the methods as the complete gold does;
* :func:`leave_one_out_table`: the pool-bias test (Zobel 1998): each retriever scored on a pool it did not
  contribute to, against the complete gold and against a pool it did contribute to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from pmrag.annotate.judged import (Judgments, complete_judgments_of, ir_measures_evaluator, judged_scores_of_runs,
                                   judgments_of, measure_columns)
from pmrag.annotate.pool import pooled_names
from pmrag.evaluate.runs import PRIMARY, Qrels, Run

POOL_SIZE = ("depth", "pool_mean", "pool_total", "gold_share", "primary_share", "questions")
COVERAGE_COLUMNS = (*POOL_SIZE, "retriever", "pooled", "recall@5 pool", "recall@5 complete kept", "recall@5 complete",
                    "ndcg@5 pool", "ndcg@5 complete kept", "ndcg@5 complete", "tau recall@5", "tau ndcg@5")


def pool_judgments(pool: pd.DataFrame, gold: Qrels | pd.DataFrame) -> pd.DataFrame:
    """The simulated annotator: every pooled (question, chunk) judged with its complete-gold grade (0 where the
    gold does not list it).  ``pool``: rows ``question_id, chunk_id`` (:func:`~pmrag.annotate.pool.pool_chunks`;
    repeats are judged once); ``gold``: complete qrels ``question_id, chunk_id, relevance``."""
    pairs = pool[["question_id", "chunk_id"]].drop_duplicates()
    graded = pairs.merge(Qrels.of(gold).frame, on=["question_id", "chunk_id"], how="left")
    return graded.assign(relevance=graded["relevance"].fillna(0).astype(np.int8)).reset_index(drop=True)


def top_pairs(ranking: pd.DataFrame, depth: int) -> pd.DataFrame:
    """A ranking's ``question_id, chunk_id`` rows at ranks 1…``depth``: its part of a pool at that depth.  The pool
    of several retrievers is their concatenation (:func:`pool_judgments` judges each pair once): the pairs of
    :func:`~pmrag.annotate.pool.pool_chunks`, without the per-contribution rows and their order, which no score
    depends on (:func:`~pmrag.annotate.judged.judgments_of` indexes the pairs whatever their order)."""
    return ranking.loc[ranking["rank"] <= depth, ["question_id", "chunk_id"]]


def complete_pool_size(gold: Qrels | pd.DataFrame, chunk_ids: Sequence[str]) -> dict[str, float]:
    """:func:`pool_size` of the complete gold: every question of ``gold`` judged on every chunk of ``chunk_ids``."""
    frame = Qrels.of(gold).frame
    questions = frame["question_id"].nunique()
    return {"pool_mean": float(len(chunk_ids)) if questions else float("nan"), "pool_total": questions * len(chunk_ids),
            **gold_coverage(frame[frame["chunk_id"].isin(pd.Index(chunk_ids))], gold)}


def pool_size(judgments: pd.DataFrame, gold: Qrels | pd.DataFrame) -> dict[str, float]:
    """A pool's size (``pool_mean`` judged chunks per question, ``pool_total``) and :func:`gold_coverage`."""
    sizes = judgments.groupby("question_id").size()
    return {"pool_mean": float(sizes.mean()), "pool_total": int(sizes.sum()), **gold_coverage(judgments, gold)}


def kept_questions(judgments: pd.DataFrame) -> pd.DataFrame:
    """``judgments`` of the questions holding a relevance-2 chunk (the paper drops the others, §4.2)."""
    primary = judgments.loc[judgments["relevance"] == PRIMARY, "question_id"]
    return judgments[judgments["question_id"].isin(primary)].reset_index(drop=True)


def gold_coverage(judgments: pd.DataFrame, gold: Qrels | pd.DataFrame) -> dict[str, float]:
    """The share of the complete gold's relevance ≥ 1 rows (``gold_share``) and relevance-2 rows
    (``primary_share``) that ``judgments`` hold (a pool's judgments hold a gold chunk iff the pool does)."""
    gold = Qrels.of(gold).frame
    judged = pd.MultiIndex.from_frame(judgments[["question_id", "chunk_id"]])
    held = pd.MultiIndex.from_frame(gold[["question_id", "chunk_id"]]).isin(judged)
    relevant, primary = gold["relevance"].to_numpy() >= 1, gold["relevance"].to_numpy() == PRIMARY
    return {"gold_share": float(held[relevant].mean()), "primary_share": float(held[primary].mean())}


def method_scores(rankings: Mapping[str, Run | pd.DataFrame], judgments: Judgments | pd.DataFrame, k: int = 5, *,
                  library: bool = False) -> pd.DataFrame:
    """Macro averages of :func:`~pmrag.annotate.judged.judged_scores` per retriever (index ``retriever``, in
    ``rankings``' order) over the judged questions holding a relevance-2 chunk, with their count (``questions``).
    ``library``: judged@k and bpref from ir-measures instead of our kernels (the same numbers; ir-measures sorts
    every list in Python, several times slower)."""
    return _means(question_scores(rankings, judgments, k, library=library), rankings, k)


def question_scores(rankings: Mapping[str, Run | pd.DataFrame], judgments: Judgments | pd.DataFrame, k: int = 5, *,
                    library: bool = False) -> dict[str, pd.DataFrame]:
    """:func:`~pmrag.annotate.judged.judged_scores` per retriever (index ``question_id``, sorted) over the judged
    questions holding a relevance-2 chunk (none: an empty dict; :class:`~pmrag.annotate.judged.Judgments` hold
    only such questions).  A question's scores depend on its own judgments only, so the scores of a subset of
    questions are these rows (:func:`method_scores` of the subset is :func:`_means` of them)."""
    judgments = judgments if isinstance(judgments, Judgments) else judgments_of(kept_questions(judgments))
    if not len(judgments.question_ids):   # no pooled primary gold at all: nothing can be scored
        return {}
    evaluator = ir_measures_evaluator(judgments, k) if library else None
    return judged_scores_of_runs(rankings, judgments, k, evaluator=evaluator)


def _means(scores: Mapping[str, pd.DataFrame], rankings: Mapping, k: int,
           questions: np.ndarray | None = None) -> pd.DataFrame:
    """:func:`method_scores`' table from per-question ``scores`` (of ``questions`` only, when given)."""
    if questions is not None:
        scores = {name: frame[frame.index.isin(questions)] for name, frame in scores.items()}
    if not scores or not len(next(iter(scores.values()))):
        return pd.DataFrame(np.nan, index=pd.Index(list(rankings), name="retriever"),
                            columns=measure_columns(k)).assign(questions=0)
    rows = {name: frame.mean() for name, frame in scores.items()}
    table = pd.DataFrame.from_dict(rows, orient="index")[measure_columns(k)].rename_axis("retriever")
    return table.assign(questions=len(next(iter(scores.values()))))


def library_agreement(rankings: Mapping[str, pd.DataFrame], judgments: pd.DataFrame, k: int = 5) -> pd.Series:
    """The largest |difference| over retrievers between our judged@k and bpref and ir-measures' (``Judged@k``,
    ``Bpref(rel=2)``, i.e. trec_eval's), with ``judgments`` (the questions holding a relevance-2 chunk)."""
    runs = {name: Run.of(ranking) for name, ranking in rankings.items()}
    ours = method_scores(runs, judgments, k)
    library = method_scores(runs, judgments, k, library=True)
    columns = [f"judged@{k}", "bpref"]
    return (ours[columns] - library[columns]).abs().max().rename("max |ours − ir-measures|")


def kendall_tau(a: pd.Series, b: pd.Series) -> float:
    """Kendall's τ-b (scipy) between two scorings of the same methods (aligned on the index; a method scored NaN
    on either side is left out, and fewer than two methods give NaN)."""
    common = a.index.intersection(b.index)
    a, b = a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)
    if (~(np.isnan(a) | np.isnan(b))).sum() < 2:   # no pair of methods to order (scipy would warn)
        return float("nan")
    return float(kendalltau(a, b, nan_policy="omit").statistic)


def depth_scores(rankings: Mapping[str, pd.DataFrame], gold: Qrels | pd.DataFrame, chunk_ids: Sequence[str],
                 pooled: Sequence[str], depths: Sequence[int], k: int = 5) -> pd.DataFrame:
    """Every retriever of ``rankings`` scored by :func:`method_scores` with the judgments of a pool of ``pooled``
    at each depth of ``depths``, and with the complete gold (``depth`` = 0), in long rows: ``depth``, the pool's
    size (``pool_mean`` per question, ``pool_total``) and :func:`gold_coverage`, ``retriever``, ``pooled``, the
    measures and ``questions``; then ``recall@k complete kept`` and ``ndcg@k complete kept``: the complete gold's
    scores on the questions the pool keeps (so a pool's effect splits into the questions it drops and the chunks
    it leaves unjudged; NaN for the complete gold's own rows)."""
    runs = {name: Run.of(ranking) for name, ranking in rankings.items()}   # validated once
    gold = Qrels.of(gold)
    complete = complete_judgments_of(gold, chunk_ids)
    complete_scores = question_scores(runs, complete, k)   # per question: a pool's kept questions are a subset
    kept_columns = {f"recall@{k}": f"recall@{k} complete kept", f"ndcg@{k}": f"ndcg@{k} complete kept"}
    parts = []
    for depth in [0, *depths]:
        if depth:
            names = pooled_names(rankings, int(depth), pooled)
            pool = pd.concat([top_pairs(rankings[name], int(depth)) for name in names], ignore_index=True)
            judgments = pool_judgments(pool, gold)
            size = pool_size(judgments, gold)
            kept = kept_questions(judgments)["question_id"].unique()
            same = _means(complete_scores, runs, k, kept)
            scores = method_scores(runs, judgments, k).join(same[list(kept_columns)].rename(columns=kept_columns))
        else:
            size, scores = complete_pool_size(gold, chunk_ids), _means(complete_scores, runs, k)
        scores = scores.reset_index()
        parts.append(scores.assign(depth=int(depth), **size, pooled=scores["retriever"].isin(list(pooled))))
    table = pd.concat(parts, ignore_index=True)
    return table[[*POOL_SIZE, "retriever", "pooled", *measure_columns(k), *kept_columns.values()]]


def _complete(scores: pd.DataFrame) -> pd.DataFrame:
    return scores[scores["depth"] == 0].set_index("retriever")


def pool_depth_table(scores: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per depth and retriever (``scores`` from :func:`depth_scores`): the pool's size and gold coverage, Recall@k
    and nDCG@k with the pool's judgments (unjudged = 0) beside the complete gold's on the questions the pool keeps
    (``complete kept``) and on every question (``complete``), and Kendall's τ between the pool's and the complete
    gold's rankings of all the methods."""
    complete = _complete(scores)
    parts = []
    for _, pool in scores[scores["depth"] > 0].groupby("depth", sort=True):
        pool = pool.set_index("retriever")
        columns = {}
        for measure in (f"recall@{k}", f"ndcg@{k}"):
            columns[f"{measure} pool"] = pool[measure]
            columns[f"{measure} complete kept"] = pool[f"{measure} complete kept"]
            columns[f"{measure} complete"] = complete[measure].reindex(pool.index)
        taus = {f"tau {m}": kendall_tau(pool[m], complete[m]) for m in (f"recall@{k}", f"ndcg@{k}")}
        parts.append(pool[[*POOL_SIZE, "pooled"]].assign(**columns, **taus).reset_index())
    table = pd.concat(parts, ignore_index=True)
    return table[[*POOL_SIZE, "retriever", "pooled", *(f"recall@{k} {c}" for c in ("pool", "complete kept", "complete")),
                  *(f"ndcg@{k} {c}" for c in ("pool", "complete kept", "complete")), f"tau recall@{k}", f"tau ndcg@{k}"]]


def judged_table(scores: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per depth and retriever: judged@k, the paper's Recall@k / nDCG@k (unjudged = 0), their condensed-list
    forms and bpref with the pool's judgments, and the complete gold's Recall@k, nDCG@k and bpref."""
    complete = _complete(scores)
    pools = scores[scores["depth"] > 0]
    truth = complete[[f"recall@{k}", f"ndcg@{k}", "bpref"]].add_suffix(" complete")
    table = pools.merge(truth, left_on="retriever", right_index=True, how="left")
    return table[["depth", "questions", "retriever", "pooled", *measure_columns(k), *truth.columns]].reset_index(drop=True)


def measure_agreement(scores: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Per depth and measure: Kendall's τ between the methods' ranking by the measure with the pool's judgments
    and by the same measure with the complete gold (a condensed measure against its complete-gold original:
    with every chunk judged, condensing changes nothing), over all methods and over the pooled ones."""
    complete = _complete(scores)
    truth = {f"recall@{k}": f"recall@{k}", f"condensed_recall@{k}": f"recall@{k}", f"ndcg@{k}": f"ndcg@{k}",
             f"condensed_ndcg@{k}": f"ndcg@{k}", "bpref": "bpref"}
    rows = []
    for depth, pool in scores[scores["depth"] > 0].groupby("depth", sort=True):
        pool = pool.set_index("retriever")
        theirs = pool.index[pool["pooled"]]
        for measure, original in truth.items():
            rows.append({"depth": int(depth), "measure": measure, "against": f"{original} complete",
                         "tau all": kendall_tau(pool[measure], complete[original]),
                         "tau pooled": kendall_tau(pool.loc[theirs, measure], complete[original])})
    return pd.DataFrame(rows)


def leave_one_out_table(rankings: Mapping[str, pd.DataFrame], gold: Qrels | pd.DataFrame, chunk_ids: Sequence[str],
                        pooled: Sequence[str], depth: int = 10, k: int = 5) -> pd.DataFrame:
    """The pool-bias test (Zobel 1998): for each retriever r of ``rankings``, a pool of ``pooled`` without r at
    ``depth`` scores every retriever; r's Recall@k and nDCG@k there (``left out``) beside the complete gold's and
    a pool with r (``pooled`` plus r), r's rank among all the methods by Recall@k (1 = best, ties share the best
    rank) with the complete gold and with the pool without it, and the differences (left out − complete).
    ``questions`` / ``questions with it``: the questions each pool keeps (a pooled relevance-2 chunk); a pool with r
    can keep more of them, harder ones, so r's Recall@k there can be lower than left out."""
    recall_k, ndcg_k = f"recall@{k}", f"ndcg@{k}"
    runs = {name: Run.of(ranking) for name, ranking in rankings.items()}   # validated once
    gold = Qrels.of(gold)
    complete = method_scores(runs, complete_judgments_of(gold, chunk_ids), k)

    pooled_names(rankings, depth, pooled)   # checked before any work, as pool_chunks checks them
    tops = {name: top_pairs(ranking, depth) for name, ranking in rankings.items()}

    def scored(pool_of: Sequence[str], who: Mapping[str, Run]) -> pd.DataFrame:
        pool = pd.concat([tops[name] for name in pooled_names(rankings, depth, pool_of)], ignore_index=True)
        return method_scores(who, pool_judgments(pool, gold), k)

    cache: dict[tuple[str, ...], pd.DataFrame] = {}
    rows = []
    for name in rankings:
        others = tuple(r for r in pooled if r != name)
        if others not in cache:
            cache[others] = scored(others, runs)
        left_out = cache[others]
        with_it = cache.get(tuple(pooled)) if name in pooled else None
        if with_it is None:
            with_it = scored([*others, name], {name: runs[name]})
        rows.append({"retriever": name, "pooled": name in pooled, "pool": len(others),
                     "questions": int(left_out["questions"].iloc[0]),
                     "questions with it": int(with_it["questions"].iloc[0]),
                     f"{recall_k} complete": complete.at[name, recall_k], f"{recall_k} with it": with_it.at[name, recall_k],
                     f"{recall_k} left out": left_out.at[name, recall_k],
                     f"{ndcg_k} complete": complete.at[name, ndcg_k], f"{ndcg_k} left out": left_out.at[name, ndcg_k],
                     "rank complete": _rank(complete[recall_k], name), "rank left out": _rank(left_out[recall_k], name)})
    table = pd.DataFrame(rows).astype({"rank complete": "Int64", "rank left out": "Int64"})
    table[f"Δ {recall_k}"] = table[f"{recall_k} left out"] - table[f"{recall_k} complete"]
    table[f"Δ {ndcg_k}"] = table[f"{ndcg_k} left out"] - table[f"{ndcg_k} complete"]
    table["rank change"] = table["rank left out"] - table["rank complete"]
    return table


def _rank(values: pd.Series, name: str):
    """``name``'s rank among ``values`` (1 = best, ties share the best rank; pd.NA when it scored NaN)."""
    rank = values.rank(ascending=False, method="min")[name]
    return pd.NA if np.isnan(rank) else int(rank)
