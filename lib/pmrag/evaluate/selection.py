"""Selection-aware evaluation of the hybrid (§8.1, §9.1): what the paper's selection procedure scores on
questions it was not chosen on, beside the in-sample best it reports (§8.1, §9.1).

The *procedure* is the paper's selection (:mod:`pmrag.evaluate.sweep`): on a set of questions, each pairing's
β by :func:`~pmrag.evaluate.sweep.select_best` on the macro means (max Recall@5; ties: nDCG@5, MRR@5, β closest
to 0.5, the smaller β, the first row), then the pairing by :func:`~pmrag.evaluate.sweep.select_overall` (max
Recall@5, nDCG@5, MRR@5 of each pairing's selected β; a full tie goes to the pairing order).  Both stages
together are one lexicographic choice over all configurations c = (pairing, β) of one fusion:

    c* = argmin_c ( −R̄(c), −N̄(c), −M̄(c), pairing position, |β − 0.5|, β, row )

with R̄, N̄, M̄ the macro Recall/nDCG/MRR@5 and every metric compared after rounding to 12 decimals
(``select_best``'s default), so a tie in value that summation order alone breaks stays a tie at both stages
(``select_overall`` compares its inputs unrounded; the two agree wherever the means are exact, and
``tests/test_selection.py`` checks them against each other on tables with ties).  :func:`select_columns`
applies the rule (:func:`pmrag.evaluate.select.best_columns`) to any number of rows of means at once:
configurations are laid out in the static tie-break order (pairing position, |β − 0.5|, β, row), the rows of
means narrowed metric by metric to their maxima, and the first surviving column taken.  Restricting ``pairings`` to one pairing gives the same for the
β of that fixed pairing; ``fusion`` selects within another fusion's sweep by the same rule (the paper's
selection is ``minmax``'s).

A sweep of one fusion is laid out once (:class:`Configurations`) as a ``(3, n, C)`` array X of per-question
metrics (``recall@5, mrr@5, ndcg@5`` × questions × configurations).  Macro means on any weighting of the
questions are one product: for weights w_q (0/1 for a training part, draw counts c_bq for a bootstrap
resample) the mean of configuration c is Σ_q w_q X_qc / Σ_q w_q, all rows of weights at once.

Held-out selection (:func:`held_out_selection`): scikit-learn's ``RepeatedStratifiedKFold(n_splits, n_repeats,
random_state=seed)`` over the questions, stratified by question type.  A type with fewer than ``n_splits``
questions cannot be spread over the folds, so such types are pooled into one stratum; if that pool still has
fewer than ``n_splits`` questions it joins the largest type (ties: first in sorted order); the strata used are
returned.  On each training part the procedure chooses c*, which is scored on the held-out fold.  Each
question is held out once per repeat; its out-of-fold value is the mean of its ``n_repeats`` held-out values,
and the out-of-fold macro is the mean of those (= the mean of the repeats' macros).  The in-sample best is the
procedure on all questions, scored on them (what the paper reports); the gap in-sample − out-of-fold is the
winner's curse.

Selection bootstrap (:func:`selection_bootstrap`): the paper's resamples (:func:`pmrag.evaluate.bootstrap.
resample_counts`: ``default_rng(seed).integers(0, n, (B, n))`` counted into c_bq).  In resample b the
procedure runs on the drawn questions with multiplicity (means weighted by c_bq) and chooses c_b; with
O_b = {q : c_bq = 0} the out-of-bag questions,

    apparent  A_b = Σ_q c_bq X_q,c_b / n                       (the winner's score where it was chosen)
    OOB       E_b = Σ_{q ∈ O_b} X_q,c_b / |O_b|                 (kind = "oob")
    .632      T_b = 0.368 · A_b + 0.632 · E_b                   (kind = ".632")

The interval is the percentiles of the B values E_b (or T_b) by ``numpy.percentile``'s linear method, as in
:func:`pmrag.evaluate.bootstrap.ci`; it includes the uncertainty of the selection and of the questions it is
scored on (an out-of-bag mean rests on about 0.368·n questions, so it is wider, not narrower, than an interval
on n: conservative).  The .632 values T_b are narrower than either part, because the in-bag A_b and out-of-bag
E_b of one resample are anti-correlated (together they are close to the fixed full-sample mean): their
percentiles understate sampling uncertainty, so ``"oob"`` is the study's default interval and ``".632"`` is
offered for its point estimate.  Resamples without out-of-bag questions (possible for tiny n) are dropped and counted.  The point
estimate is Efron's (Efron 1983; Efron & Tibshirani 1997): the leave-one-out bootstrap

    Err⁽¹⁾ = (1/n) Σ_q ē_q,   ē_q = Σ_b I_bq X_q,c_b / Σ_b I_bq,   I_bq = [c_bq = 0]

(the per-question out-of-bag means, returned as rows; a question never out of bag is left out of the mean)
for ``"oob"``, and ``0.368 · apparent + 0.632 · Err⁽¹⁾`` for ``".632"``, where apparent is the in-sample best's
score on all n questions.  Beside it: the in-sample best and its conditional interval,
:func:`pmrag.evaluate.bootstrap.ci` of its per-question rows on the same resamples (the paper's interval,
which ignores the selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import RepeatedStratifiedKFold

from pmrag.core.frames import require_columns
from pmrag.core.names import PAPER_FUSION
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci, percentiles, resample_counts
from pmrag.evaluate.metric_names import PAPER_COLUMNS
from pmrag.evaluate.select import DECIMALS, best_columns, beta_near_half

METRICS = PAPER_COLUMNS                     # layout order of Configurations.values: recall@5, mrr@5, ndcg@5
KINDS = ("oob", ".632")
POOLED_STRATUM = "(pooled rare types)"
_CONFIGURATION = ("fusion", "bm25", "vector", "beta")
_RECALL, _MRR, _NDCG = range(3)


@dataclass(frozen=True)
class Configurations:
    """One fusion's sweep as arrays, configurations in the static tie-break order.

    ``table``: ``fusion, bm25, vector, beta`` per configuration (C rows, tie-break order: pairing position,
    |β − 0.5|, β, sweep row); ``question_ids``: the n questions in order of first appearance;
    ``values``: ``(3, n, C)`` float64 per-question metrics in :data:`METRICS` order; ``pairings``: the pairing
    order of the final tie-break.
    """

    table: pd.DataFrame
    question_ids: pd.Index
    values: np.ndarray
    pairings: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, sweep: pd.DataFrame, pairings=None, fusion: str = PAPER_FUSION) -> Configurations:
        """Lay out the ``fusion`` rows of a :func:`~pmrag.evaluate.sweep.sweep_pairings` table (a table
        without ``fusion`` is all ``minmax``), restricted to and ordered by ``pairings`` (default: every
        pairing, in order of first appearance; one ``(first, second)`` pair fixes the pairing)."""
        rows = _fusion_rows(sweep, fusion)
        available = list(dict.fromkeys(zip(rows["bm25"].astype(str), rows["vector"].astype(str))))
        order = _pairing_order(pairings, available)
        position = {p: i for i, p in enumerate(order)}
        pairing = np.array([position.get(p, -1) for p in zip(rows["bm25"].astype(str), rows["vector"].astype(str))])
        rows = rows[pairing >= 0]
        pairing = pairing[pairing >= 0]
        beta = _finite(rows["beta"], "beta")
        keys = pd.DataFrame({"pairing": pairing, "beta": beta})
        codes = keys.groupby(["pairing", "beta"], sort=False).ngroup().to_numpy()
        uniques = keys.drop_duplicates().to_numpy()
        qcodes, questions = pd.factorize(rows["question_id"], sort=False)
        questions = pd.Index(questions, name="question_id")
        n, c = len(questions), len(uniques)
        seen = np.bincount(codes * n + qcodes, minlength=c * n)
        if (seen > 1).any():
            cfg, q = divmod(int(np.argmax(seen > 1)), n)
            raise ValueError(f"sweep has configuration {_label(order, uniques[cfg])} twice on question "
                             f"{questions[q]!r}")
        if (seen == 0).any():
            cfg, q = divmod(int(np.argmax(seen == 0)), n)
            raise ValueError(f"sweep lacks configuration {_label(order, uniques[cfg])} on question "
                             f"{questions[q]!r}: every configuration needs every question")
        values = np.empty((len(METRICS), n, c), dtype=np.float64)
        for m, metric in enumerate(METRICS):
            values[m, qcodes, codes] = _finite(rows[metric], metric)
        first = uniques[:, 0].astype(np.int64)
        betas = uniques[:, 1]
        distance, rounded = beta_near_half(betas)
        rank = np.lexsort((np.arange(c), rounded, distance, first))
        table = pd.DataFrame({
            "fusion": fusion,
            "bm25": [order[p][0] for p in first[rank]],
            "vector": [order[p][1] for p in first[rank]],
            "beta": betas[rank],
        })
        values = np.ascontiguousarray(values[:, :, rank])
        values.flags.writeable = False
        return cls(table, questions, values, tuple(order))

    def means(self, weights: np.ndarray) -> np.ndarray:
        """``(3, R, C)`` macro means Σ_q w_rq X_qc / Σ_q w_rq for ``(R, n)`` non-negative weights."""
        weights = np.asarray(weights, dtype=np.float64)
        totals = weights.sum(axis=1)[:, None]
        return np.stack([weights @ self.values[m] for m in range(len(METRICS))]) / totals

    def select(self, weights: np.ndarray) -> np.ndarray:
        """``(R,)`` index of the procedure's choice on each row of ``(R, n)`` question weights."""
        means = self.means(weights)
        return select_columns(means[_RECALL], means[_NDCG], means[_MRR])

    def chosen(self, index: np.ndarray) -> pd.DataFrame:
        """``fusion, bm25, vector, beta`` of the configurations at ``index``."""
        return self.table.iloc[np.asarray(index)].reset_index(drop=True)


def select_columns(recall, ndcg, mrr, decimals: int = DECIMALS) -> np.ndarray:
    """The paper's choice in each row of ``(..., C)`` macro means whose columns are in tie-break order.

    :func:`pmrag.evaluate.select.best_columns` of the rounded Recall@5, nDCG@5, MRR@5 with no tie-break key:
    a full tie goes to the first column (the static tie-break: :class:`Configurations` orders columns by pairing
    position, |β − 0.5|, β, row).  Returns ``(...)`` int64 column indices.
    """
    return best_columns((recall, ndcg, mrr), decimals=decimals)


@dataclass(frozen=True)
class HeldOutSelection:
    """Result of :func:`held_out_selection`.

    ``summary``: per metric ``metric, in_sample, out_of_fold, gap`` (gap = in_sample − out_of_fold);
    ``in_sample``: the procedure's choice on all questions with its macro metrics; ``per_question``:
    ``question_id, question_type, stratum`` and each question's out-of-fold metrics (mean over repeats);
    ``per_fold``: ``repeat, fold, n_train, n_test``, the chosen ``fusion, bm25, vector, beta`` and its macro
    metrics on the held-out fold; ``chosen``: ``fusion, bm25, vector, beta, times, share`` over the folds, most
    often chosen first; ``n_splits, n_repeats, seed``: the folds' parameters.
    """

    summary: pd.DataFrame
    in_sample: pd.Series
    per_question: pd.DataFrame
    per_fold: pd.DataFrame
    chosen: pd.DataFrame
    n_splits: int
    n_repeats: int
    seed: int


@dataclass(frozen=True)
class SelectionBootstrap:
    """Result of :func:`selection_bootstrap`.

    ``summary``: per metric ``metric, in_sample, conditional_low, conditional_high`` (the in-sample best and
    the paper's interval of its rows), ``estimate, ci_low, ci_high`` (Efron's point estimate of ``kind`` and
    the percentile interval including selection) and ``gap`` = in_sample − estimate; ``in_sample``: the
    procedure's choice on all questions; ``per_question``: ``question_id, out_of_bag`` (resamples in which it
    is out of bag) and its out-of-bag means ē_q; ``per_resample``: ``resample, n_out_of_bag``, the chosen
    configuration, and per metric the apparent ``A_b`` (``apparent <metric>``) and the value of ``kind``
    (E_b or T_b; NaN where no question is out of bag); ``chosen``: how often each configuration was chosen;
    ``kind, n_resamples, seed, confidence``; ``dropped``: resamples without out-of-bag questions.
    """

    summary: pd.DataFrame
    in_sample: pd.Series
    per_question: pd.DataFrame
    per_resample: pd.DataFrame
    chosen: pd.DataFrame
    kind: str
    n_resamples: int
    seed: int
    confidence: float
    dropped: int


def held_out_selection(sweep: pd.DataFrame, types: pd.Series, n_splits: int = 5, n_repeats: int = 10,
                       seed: int = 0, pairings=None, fusion: str = PAPER_FUSION) -> HeldOutSelection:
    """Out-of-fold Recall/MRR/nDCG@5 of the paper's selection procedure beside its in-sample best.

    Parameters: ``sweep`` — long rows ``fusion, bm25, vector, beta, question_id, recall@5, mrr@5, ndcg@5``
    (:func:`~pmrag.evaluate.sweep.sweep_pairings`); ``types`` — question type indexed by question_id (covering
    every question); ``n_splits, n_repeats, seed`` — ``RepeatedStratifiedKFold``'s; ``pairings`` — the pairings
    selected among, in tie-break order (default all; one ``(first, second)`` pair: the β of that pairing);
    ``fusion`` — the sweep's fusion selected within.
    Returns: :class:`HeldOutSelection`.
    """
    n_splits = _integer(n_splits, "n_splits", 2)
    n_repeats = _integer(n_repeats, "n_repeats", 1)
    seed = _integer(seed, "seed", 0)
    configs = Configurations.of(sweep, pairings, fusion)
    question_types = _aligned_types(types, configs.question_ids)
    n = len(configs.question_ids)
    if n < n_splits:
        raise ValueError(f"n_splits={n_splits} needs at least as many questions, the sweep has {n}")
    strata = stratify(question_types, n_splits)
    splitter = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=seed)
    tests = [test for _, test in splitter.split(np.zeros((n, 1)), strata.to_numpy())]
    held_out = np.zeros((len(tests), n), dtype=bool)
    for f, test in enumerate(tests):
        held_out[f, test] = True
    choice = configs.select(~held_out)
    scored = configs.values[:, np.arange(n)[None, :], choice[:, None]]           # (3, F, n)
    kept = scored * held_out
    fold_means = kept.sum(axis=2) / held_out.sum(axis=1)
    per_repeat = kept.reshape(len(METRICS), n_repeats, n_splits, n).sum(axis=2)             # one fold holds q out
    oof = per_repeat.mean(axis=1)                                                  # (3, n)

    _, best, in_sample = _in_sample(configs)
    summary = pd.DataFrame({"metric": METRICS, "in_sample": in_sample, "out_of_fold": oof.mean(axis=1)})
    summary["gap"] = summary["in_sample"] - summary["out_of_fold"]
    per_question = pd.DataFrame({"question_id": configs.question_ids.to_numpy(dtype=object),
                                 "question_type": question_types.to_numpy(dtype=object),
                                 "stratum": strata.to_numpy(dtype=object),
                                 **dict(zip(METRICS, oof))})
    per_fold = pd.concat([
        pd.DataFrame({"repeat": np.repeat(np.arange(n_repeats), n_splits),
                      "fold": np.tile(np.arange(n_splits), n_repeats),
                      "n_train": n - held_out.sum(axis=1), "n_test": held_out.sum(axis=1)}),
        configs.chosen(choice), pd.DataFrame(dict(zip(METRICS, fold_means)))], axis=1)
    return HeldOutSelection(summary, best, per_question, per_fold, _frequencies(configs, choice), n_splits, n_repeats,
                            seed)


def selection_bootstrap(sweep: pd.DataFrame, n_resamples: int = 5000, seed: int = 12345, confidence: float = 0.95,
                        kind: str = "oob", pairings=None, fusion: str = PAPER_FUSION) -> SelectionBootstrap:
    """A bootstrap that repeats the paper's selection inside every resample and scores it out of bag.

    Parameters: ``sweep``, ``pairings``, ``fusion`` as in :func:`held_out_selection`; ``n_resamples``,
    ``seed``, ``confidence`` — the paper's bootstrap's (B = 5,000, 12,345, 0.95; the same resamples as
    :func:`pmrag.evaluate.bootstrap.resample_counts`); ``kind`` — ``"oob"`` (E_b) or ``".632"`` (T_b).
    Returns: :class:`SelectionBootstrap` (estimators in the module docstring).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    params = BootstrapSection(n_resamples=_integer(n_resamples, "n_resamples", 1), seed=_integer(seed, "seed", 0),
                              confidence=_confidence(confidence))
    configs = Configurations.of(sweep, pairings, fusion)
    n = len(configs.question_ids)
    counts = resample_counts(n, params)
    means = configs.means(counts)                                                  # (3, B, C)
    choice = select_columns(means[_RECALL], means[_NDCG], means[_MRR])
    apparent = np.take_along_axis(means, choice[None, :, None], axis=2)[..., 0]   # (3, B)
    scored = configs.values[:, np.arange(n)[None, :], choice[:, None]]           # (3, B, n)
    out = counts == 0
    n_out = out.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        oob = (scored * out).sum(axis=2) / n_out                                   # (3, B), NaN where n_out = 0
        per_question = (scored * out).sum(axis=1) / out.sum(axis=0)                # (3, n), NaN where never out
    values = oob if kind == "oob" else 0.368 * apparent + 0.632 * oob
    kept = n_out > 0
    if not kept.any():
        raise ValueError("no resample leaves a question out of bag: the sweep needs more questions")
    low, high = np.percentile(values[:, kept], percentiles(params), axis=1)

    c, best, in_sample = _in_sample(configs)
    _, conditional_low, conditional_high = ci(configs.values[:, :, c], params)
    loo = np.nanmean(per_question, axis=1)
    estimate = loo if kind == "oob" else 0.368 * in_sample + 0.632 * loo
    summary = pd.DataFrame({"metric": METRICS, "in_sample": in_sample, "conditional_low": conditional_low,
                            "conditional_high": conditional_high, "estimate": estimate, "ci_low": low,
                            "ci_high": high})
    summary["gap"] = summary["in_sample"] - summary["estimate"]
    rows = pd.DataFrame({"question_id": configs.question_ids.to_numpy(dtype=object), "out_of_bag": out.sum(axis=0),
                         **dict(zip(METRICS, per_question))})
    per_resample = pd.concat([
        pd.DataFrame({"resample": np.arange(len(choice)), "n_out_of_bag": n_out}), configs.chosen(choice),
        pd.DataFrame({**{f"apparent {m}": a for m, a in zip(METRICS, apparent)}, **dict(zip(METRICS, values))})],
        axis=1)
    return SelectionBootstrap(summary, best, rows, per_resample, _frequencies(configs, choice), kind,
                              params.n_resamples, params.seed, params.confidence, int((~kept).sum()))


def stratify(types: pd.Series, n_splits: int) -> pd.Series:
    """Strata for ``n_splits`` folds: each question's type, types with fewer than ``n_splits`` questions pooled
    into :data:`POOLED_STRATUM`, and a pool still smaller than ``n_splits`` merged into the largest type
    (ties: the first in sorted order).  Same index as ``types``."""
    n_splits = _integer(n_splits, "n_splits", 2)
    labels = types.astype(str)
    sizes = labels.value_counts()
    rare = sizes.index[sizes < n_splits]
    strata = labels.where(~labels.isin(rare), POOLED_STRATUM)
    pooled = int((strata == POOLED_STRATUM).sum())
    if 0 < pooled < n_splits and len(rare) < len(sizes):
        common = sizes.drop(rare)
        largest = sorted(common.index[common == common.max()])[0]
        strata = strata.where(strata != POOLED_STRATUM, largest)
    return strata


def _in_sample(configs: Configurations) -> tuple[int, pd.Series, np.ndarray]:
    """The procedure on all questions: its column, its configuration with macro metrics, those metrics ``(3,)``."""
    c = int(configs.select(np.ones((1, len(configs.question_ids))))[0])
    macro = configs.values[:, :, c].mean(axis=1)
    return c, pd.concat([configs.table.iloc[c], pd.Series(dict(zip(METRICS, macro)))]), macro


def _frequencies(configs: Configurations, choice: np.ndarray) -> pd.DataFrame:
    """How often each configuration was chosen: most often first, then tie-break order."""
    times = np.bincount(choice, minlength=len(configs.table))
    order = np.lexsort((np.arange(len(times)), -times))
    order = order[times[order] > 0]
    return configs.chosen(order).assign(times=times[order], share=times[order] / len(choice))


def _fusion_rows(sweep: pd.DataFrame, fusion: str) -> pd.DataFrame:
    require_columns(sweep, ("bm25", "vector", "beta", "question_id", *METRICS), "sweep")
    if "fusion" in sweep.columns:
        rows = sweep[sweep["fusion"] == fusion]
    else:                                   # the paper's sweep: all minmax
        rows = sweep if fusion == PAPER_FUSION else sweep.iloc[:0]
    if rows.empty:
        raise ValueError(f"sweep has no rows of fusion {fusion!r}")
    return rows


def _pairing_order(pairings, available: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if pairings is None:
        return available
    pairings = list(pairings)
    if len(pairings) == 2 and all(isinstance(p, str) for p in pairings):
        pairings = [tuple(pairings)]
    if not pairings or any(isinstance(p, str) or len(p) != 2 for p in pairings):
        raise ValueError(f"pairings must be (first, second) pairs or one such pair, got {pairings!r}")
    order = [(str(a), str(b)) for a, b in pairings]
    if len(set(order)) != len(order):
        raise ValueError(f"pairings must name each pairing once, got {order!r}")
    unknown = [p for p in order if p not in set(available)]
    if unknown:
        raise ValueError(f"pairings not in the sweep: {unknown!r}")
    return order


def _aligned_types(types: pd.Series, question_ids: pd.Index) -> pd.Series:
    if not isinstance(types, pd.Series):
        raise TypeError(f"types must be a Series of question types indexed by question_id, got {type(types).__name__}")
    if not types.index.is_unique:
        raise ValueError(f"types has question {types.index[types.index.duplicated()][0]!r} twice")
    missing = question_ids.difference(types.index)
    if len(missing):
        raise ValueError(f"types lacks {len(missing)} question(s) of the sweep, e.g. {missing[0]!r}")
    aligned = types.reindex(question_ids)
    if aligned.isna().any():
        raise ValueError(f"types has no type for question {aligned.index[aligned.isna()][0]!r}")
    return aligned


def _finite(column: pd.Series, name: str) -> np.ndarray:
    try:
        values = column.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"sweep column {name} must hold numbers") from None
    if not np.isfinite(values).all():
        raise ValueError(f"sweep column {name} has missing or non-finite values")
    return values


def _label(order, key) -> str:
    first, second = order[int(key[0])]
    return f"({first}, {second}, β={key[1]})"


def _integer(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


def _confidence(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 < value < 1:
        raise ValueError(f"confidence must be a number in (0, 1), got {value!r}")
    return float(value)


