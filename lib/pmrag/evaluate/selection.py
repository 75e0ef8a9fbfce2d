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
random_state=s)`` over the questions, stratified by question type, for each partition seed s = seed, seed + 1, …,
seed + n_seeds − 1.  A type with fewer than ``n_splits`` questions cannot be spread over the folds, so such types
are pooled into one stratum; if that pool still has fewer than ``n_splits`` questions it joins the largest type
(ties: first in sorted order); the strata used are returned.  On each training part the procedure chooses c*,
which is scored on the held-out fold.  Each question is held out once per repeat; its out-of-fold value is the
mean of its ``n_repeats`` held-out values (per seed; then the mean over the seeds), and the out-of-fold macro is
the mean of those (= the mean of the seeds' macros, each the mean of its repeats' macros).  One partition seed is
one draw of the folds: the spread of the seeds' macros (min, max, sd) says how much a single seed's number owes
to its partition.  The in-sample best is the procedure on all questions, scored on them (what the paper
reports); the gap in-sample − out-of-fold is the winner's curse.

Selection bootstrap (:func:`selection_bootstrap`): the paper's resamples (:func:`pmrag.evaluate.bootstrap.
resample_counts`: ``default_rng(seed).integers(0, n, (B, n))`` counted into c_bq).  In resample b the
procedure runs on the drawn questions with multiplicity (means weighted by c_bq) and chooses c_b; with
O_b = {q : c_bq = 0} the out-of-bag questions,

    apparent  A_b = Σ_q c_bq X_q,c_b / n                       (the winner's score where it was chosen)
    sample    S_b = Σ_q X_q,c_b / n                             (the same choice scored on all n questions)
    OOB       E_b = Σ_{q ∈ O_b} X_q,c_b / |O_b|                 (kind = "oob")
    .632      T_b = 0.368 · A_b + 0.632 · E_b                   (kind = ".632")

(:func:`resampled_selection` computes them for any ``(3, n, C)`` values and counts.)

*Bias-corrected estimate and interval* (the study's headline selection-aware numbers): the bootstrap estimate
of the optimism of the in-sample best (Efron 1983, JASA 78:316–331; Efron & Tibshirani 1993, ch. 17;
Harrell, Lee & Mark 1996, Stat. Med. 15:361–387, the "optimism" bootstrap):

    optimism  ô = (1/B) Σ_b (A_b − S_b),     corrected = apparent − ô,
    interval  [L − ô, H − ô]

with apparent the in-sample best's score on all n questions and [L, H] its conditional interval (below).  In
the bootstrap world the n questions are the population: A_b − S_b is how much the winner chosen on resample b
flatters itself where it was chosen, beside its value on the population it was drawn from, so ô estimates
E[apparent − true value of the selected configuration].  The interval keeps the conditional interval's width
(the spread of a fixed configuration's mean over n questions) and moves its centre by the optimism: it is
about the true value of the configuration the selection picked, with the selection's upward bias removed
but its choice held as made.  Chosen over Tibshirani & Tibshirani (2009, "A bias correction for the minimum
error rate in cross-validation", Ann. Appl. Stat. 3:822–829), which corrects the minimum *cross-validated*
error of a CV-tuned choice: the paper reports the in-sample (apparent) score of a choice made on all the
questions, which is exactly the quantity Efron's optimism corrects, and ô comes from the resamples the
selection bootstrap draws anyway.  Its coverage on a study's own questions is measured by
:func:`pmrag.evaluate.selection_coverage.selection_coverage`: on the demo, in 2,000 simulated studies, 93.7 %
± 0.5 % for Recall@5 at a nominal 95 % (the conditional interval 92.3 %; a percentile interval of one
configuration fixed in advance, nothing selected, 94.5 %: most of the shortfall is the percentile bootstrap's
own at 100 questions), and the corrected estimate's bias +0.007 against the in-sample best's +0.020.

*Out-of-bag and .632 intervals*: the percentiles of the B values E_b (or T_b) by ``numpy.percentile``'s
linear method, as in :func:`pmrag.evaluate.bootstrap.ci`.  The out-of-bag interval is a *conservative bound*,
not a calibrated interval: an out-of-bag mean rests on about 0.368·n questions, and that, not the selection,
is what makes it wide (on the demo, the in-sample best scored out of bag with no re-selection gives nearly
the same width, 0.237 against 0.240; the selection moves the centre down by 0.03 and adds little spread); it
covers the selected configuration's true value more often than its nominal level.  The .632 values T_b are narrower than
either part, because the in-bag A_b and out-of-bag E_b of one resample are anti-correlated (together they are
close to the fixed full-sample mean): their percentiles understate sampling uncertainty (on the demo they
cover 81.5 % for a nominal 95 %, the out-of-bag ones 99.1 %), so ``".632"`` is offered for its point estimate.
Resamples without out-of-bag questions (possible for tiny n) are dropped and counted.  The point estimate is Efron's (Efron 1983; Efron & Tibshirani 1997): the leave-one-out bootstrap

    Err⁽¹⁾ = (1/n) Σ_q ē_q,   ē_q = Σ_b I_bq X_q,c_b / Σ_b I_bq,   I_bq = [c_bq = 0]

(the per-question out-of-bag means, returned as rows; a question never out of bag is left out of the mean)
for ``"oob"``, and ``0.368 · apparent + 0.632 · Err⁽¹⁾`` for ``".632"``, where apparent is the in-sample best's
score on all n questions.  Beside it: the in-sample best and its conditional interval [L, H],
:func:`pmrag.evaluate.bootstrap.ci` of its per-question rows on the same resamples (the paper's interval,
which treats the configuration as fixed in advance and ignores the selection).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    ``per_fold``: ``seed, repeat, fold, n_train, n_test``, the chosen ``fusion, bm25, vector, beta`` and its
    macro metrics on the held-out fold; ``chosen``: ``fusion, bm25, vector, beta, times, share`` over the folds
    of every seed, most often chosen first; ``n_splits, n_repeats, seed``: the folds' parameters (``seed``: the
    first partition seed); ``per_seed``: ``seed`` and each metric's out-of-fold macro with that partition seed
    alone; ``n_seeds``: how many partition seeds (seed, seed + 1, …) the out-of-fold numbers average.  With
    several seeds ``summary`` adds ``out_of_fold_min, out_of_fold_max, out_of_fold_sd`` (sd with ddof 1, NaN
    for one seed) over the seeds' macros.
    """

    summary: pd.DataFrame
    in_sample: pd.Series
    per_question: pd.DataFrame
    per_fold: pd.DataFrame
    chosen: pd.DataFrame
    n_splits: int
    n_repeats: int
    seed: int
    per_seed: pd.DataFrame
    n_seeds: int


@dataclass(frozen=True)
class SelectionBootstrap:
    """Result of :func:`selection_bootstrap`.

    ``summary``: per metric ``metric, in_sample, conditional_low, conditional_high`` (the in-sample best and
    the paper's interval of its rows, the configuration held fixed), ``estimate, ci_low, ci_high`` (Efron's
    point estimate of ``kind`` and the percentile interval of the E_b or T_b: for ``"oob"`` a conservative
    bound, for ``".632"`` too narrow), ``gap`` = in_sample − estimate, and ``optimism, corrected,
    corrected_low, corrected_high`` (the bootstrap optimism ô, the bias-corrected estimate in_sample − ô and
    the conditional interval shifted by −ô: the selection-aware headline); ``in_sample``: the procedure's
    choice on all questions; ``per_question``: ``question_id, out_of_bag`` (resamples in which it is out of
    bag) and its out-of-bag means ē_q; ``per_resample``: ``resample, n_out_of_bag``, the chosen configuration,
    and per metric the apparent ``A_b`` (``apparent <metric>``), the value of ``kind`` (E_b or T_b; NaN where
    no question is out of bag) and S_b, the choice's score on all n questions (``sample <metric>``);
    ``chosen``: how often each configuration was chosen; ``kind, n_resamples, seed, confidence``;
    ``dropped``: resamples without out-of-bag questions.
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


@dataclass(frozen=True)
class ResampledSelection:
    """Result of :func:`resampled_selection`, per resample b of B (module docstring): ``choice`` ``(B,)`` c_b;
    ``apparent`` A_b, ``sample`` S_b and ``oob`` E_b ``(3, B)`` (E_b NaN where no question is out of bag);
    ``n_out`` ``(B,)`` |O_b|; ``per_question`` ``(3, n)`` ē_q (NaN for a question never out of bag);
    ``optimism`` ``(3,)`` ô = mean_b (A_b − S_b)."""

    choice: np.ndarray
    apparent: np.ndarray
    sample: np.ndarray
    oob: np.ndarray
    n_out: np.ndarray
    per_question: np.ndarray
    optimism: np.ndarray


def held_out_selection(sweep: pd.DataFrame, types: pd.Series, n_splits: int = 5, n_repeats: int = 10,
                       seed: int = 0, pairings=None, fusion: str = PAPER_FUSION, n_seeds: int = 1) -> HeldOutSelection:
    """Out-of-fold Recall/MRR/nDCG@5 of the paper's selection procedure beside its in-sample best.

    Parameters: ``sweep`` — long rows ``fusion, bm25, vector, beta, question_id, recall@5, mrr@5, ndcg@5``
    (:func:`~pmrag.evaluate.sweep.sweep_pairings`); ``types`` — question type indexed by question_id (covering
    every question); ``n_splits, n_repeats, seed`` — ``RepeatedStratifiedKFold``'s; ``pairings`` — the pairings
    selected among, in tie-break order (default all; one ``(first, second)`` pair: the β of that pairing);
    ``fusion`` — the sweep's fusion selected within; ``n_seeds`` — partition seeds seed, seed + 1, … whose
    out-of-fold numbers are averaged.
    Returns: :class:`HeldOutSelection`.
    """
    n_splits = _integer(n_splits, "n_splits", 2)
    n_repeats = _integer(n_repeats, "n_repeats", 1)
    seed = _integer(seed, "seed", 0)
    n_seeds = _integer(n_seeds, "n_seeds", 1)
    configs = Configurations.of(sweep, pairings, fusion)
    question_types = _aligned_types(types, configs.question_ids)
    n = len(configs.question_ids)
    if n < n_splits:
        raise ValueError(f"n_splits={n_splits} needs at least as many questions, the sweep has {n}")
    held_out, strata = fold_masks(question_types, n_splits, n_repeats, seed, n_seeds)
    seeds = np.arange(seed, seed + n_seeds)
    choice = configs.select(~held_out)
    scored = configs.values[:, np.arange(n)[None, :], choice[:, None]]           # (3, F, n)
    kept = scored * held_out
    fold_means = kept.sum(axis=2) / held_out.sum(axis=1)
    per_repeat = kept.reshape(len(METRICS), n_seeds, n_repeats, n_splits, n).sum(axis=3)    # one fold holds q out
    per_seed = per_repeat.mean(axis=2)                                             # (3, seeds, n)
    oof = per_seed.mean(axis=1)                                                    # (3, n)
    seed_macros = per_seed.mean(axis=2)                                            # (3, seeds)

    _, best, in_sample = _in_sample(configs)
    summary = pd.DataFrame({"metric": METRICS, "in_sample": in_sample, "out_of_fold": oof.mean(axis=1)})
    summary["gap"] = summary["in_sample"] - summary["out_of_fold"]
    summary["out_of_fold_min"] = seed_macros.min(axis=1)
    summary["out_of_fold_max"] = seed_macros.max(axis=1)
    summary["out_of_fold_sd"] = seed_macros.std(axis=1, ddof=1) if n_seeds > 1 else np.nan
    per_question = pd.DataFrame({"question_id": configs.question_ids.to_numpy(dtype=object),
                                 "question_type": question_types.to_numpy(dtype=object),
                                 "stratum": strata.to_numpy(dtype=object),
                                 **dict(zip(METRICS, oof))})
    per_fold = pd.concat([
        pd.DataFrame({"seed": np.repeat(seeds, n_repeats * n_splits),
                      "repeat": np.tile(np.repeat(np.arange(n_repeats), n_splits), n_seeds),
                      "fold": np.tile(np.arange(n_splits), n_seeds * n_repeats),
                      "n_train": n - held_out.sum(axis=1), "n_test": held_out.sum(axis=1)}),
        configs.chosen(choice), pd.DataFrame(dict(zip(METRICS, fold_means)))], axis=1)
    by_seed = pd.DataFrame({"seed": seeds, **dict(zip(METRICS, seed_macros))})
    return HeldOutSelection(summary, best, per_question, per_fold, _frequencies(configs, choice), n_splits, n_repeats,
                            seed, by_seed, n_seeds)


def selection_bootstrap(sweep: pd.DataFrame, n_resamples: int = 5000, seed: int = 12345, confidence: float = 0.95,
                        kind: str = "oob", pairings=None, fusion: str = PAPER_FUSION) -> SelectionBootstrap:
    """A bootstrap that repeats the paper's selection inside every resample: the in-sample best's bias-corrected
    estimate and interval, and the choice scored out of bag.

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
    drawn = resampled_selection(configs.values, counts)
    values = drawn.oob if kind == "oob" else 0.368 * drawn.apparent + 0.632 * drawn.oob
    kept = drawn.n_out > 0
    if not kept.any():
        raise ValueError("no resample leaves a question out of bag: the sweep needs more questions")
    low, high = np.percentile(values[:, kept], percentiles(params), axis=1)

    c, best, in_sample = _in_sample(configs)
    _, conditional_low, conditional_high = ci(configs.values[:, :, c], params)
    loo = np.nanmean(drawn.per_question, axis=1)
    estimate = loo if kind == "oob" else 0.368 * in_sample + 0.632 * loo
    summary = pd.DataFrame({"metric": METRICS, "in_sample": in_sample, "conditional_low": conditional_low,
                            "conditional_high": conditional_high, "estimate": estimate, "ci_low": low,
                            "ci_high": high})
    summary["gap"] = summary["in_sample"] - summary["estimate"]
    summary["optimism"] = drawn.optimism
    summary["corrected"] = in_sample - drawn.optimism
    summary["corrected_low"] = conditional_low - drawn.optimism
    summary["corrected_high"] = conditional_high - drawn.optimism
    rows = pd.DataFrame({"question_id": configs.question_ids.to_numpy(dtype=object),
                         "out_of_bag": (counts == 0).sum(axis=0), **dict(zip(METRICS, drawn.per_question))})
    per_resample = pd.concat([
        pd.DataFrame({"resample": np.arange(len(drawn.choice)), "n_out_of_bag": drawn.n_out}),
        configs.chosen(drawn.choice),
        pd.DataFrame({**{f"apparent {m}": a for m, a in zip(METRICS, drawn.apparent)}, **dict(zip(METRICS, values)),
                      **{f"sample {m}": v for m, v in zip(METRICS, drawn.sample)}})],
        axis=1)
    return SelectionBootstrap(summary, best, rows, per_resample, _frequencies(configs, drawn.choice), kind,
                              params.n_resamples, params.seed, params.confidence, int((~kept).sum()))


def resampled_selection(values: np.ndarray, counts: np.ndarray) -> ResampledSelection:
    """The procedure repeated on every row of ``counts`` and scored where it was chosen, on all n questions and
    out of bag.

    Parameters: ``values`` — ``(3, n, C)`` per-question metrics in :data:`METRICS` order, configurations in
    tie-break order (:attr:`Configurations.values`); ``counts`` — ``(B, n)`` draw counts c_bq, each row summing
    to n (:func:`pmrag.evaluate.bootstrap.resample_counts`).
    Returns: :class:`ResampledSelection` (A_b, S_b, E_b, ē_q and ô of the module docstring).
    """
    n = values.shape[1]
    means = np.empty((len(METRICS), counts.shape[0], values.shape[2]))
    for m in range(len(METRICS)):
        np.matmul(counts, values[m], out=means[m])
    means /= n                                                                     # (3, B, C)
    choice = select_columns(means[_RECALL], means[_NDCG], means[_MRR])
    apparent = np.take_along_axis(means, choice[None, :, None], axis=2)[..., 0]   # (3, B)
    sample = values.mean(axis=1)[:, choice]                                        # (3, B)
    scored = np.ascontiguousarray(values.transpose(0, 2, 1))[:, choice, :]         # (3, B, n): X_q,c_b
    out = counts == 0
    n_out = out.sum(axis=1)
    kept = scored * out
    with np.errstate(invalid="ignore", divide="ignore"):
        oob = kept.sum(axis=2) / n_out                                             # (3, B), NaN where n_out = 0
        per_question = kept.sum(axis=1) / out.sum(axis=0)                          # (3, n), NaN where never out
    return ResampledSelection(choice, apparent, sample, oob, n_out, per_question, (apparent - sample).mean(axis=1))


def fold_masks(types: pd.Series, n_splits: int, n_repeats: int, seed: int,
               n_seeds: int = 1) -> tuple[np.ndarray, pd.Series]:
    """The held-out folds of :func:`held_out_selection`: ``(F, n)`` bool, row f marking fold f's held-out
    questions (F = n_seeds · n_repeats · n_splits, seed-major, then repeat, then fold), from repeated stratified
    k-fold partitions (:func:`repeated_stratified_folds`, scikit-learn's ``RepeatedStratifiedKFold``) of the
    questions of ``types`` (in its order) stratified by :func:`stratify`, once per partition seed seed, seed + 1, …;
    and the strata."""
    strata = stratify(types, n_splits)
    held_out = np.concatenate([repeated_stratified_folds(strata.to_numpy(), n_splits, n_repeats, s)
                               for s in range(seed, seed + n_seeds)])
    return held_out, strata


def repeated_stratified_folds(strata: np.ndarray, n_splits: int, n_repeats: int, seed: int) -> np.ndarray:
    """``(n_repeats · n_splits, n)`` bool: the test folds of scikit-learn's ``RepeatedStratifiedKFold(n_splits,
    n_repeats, random_state=seed)`` on ``strata``, in its order, the same partitions by the same steps.

    Strata are numbered in order of first appearance; stratum k's members are dealt to the folds as the
    round-robin over the sorted strata allots them (fold i gets the members at positions i, i + n_splits, … of
    that order), its fold labels shuffled by one ``numpy.random.RandomState(seed)`` drawn in stratum order, repeat
    after repeat.  Written out rather than imported: importing scikit-learn costs a statistics rerun ~1.5 s, and
    the partitions (and every out-of-fold number) then no longer change with a scikit-learn release.  Tests
    compare it with scikit-learn's."""
    strata = np.asarray(strata)
    _, first, inverse = np.unique(strata, return_index=True, return_inverse=True)
    encoded = np.unique(first, return_inverse=True)[1][inverse.ravel()]
    counts = np.bincount(encoded)
    if np.all(n_splits > counts):
        raise ValueError(f"n_splits={n_splits} cannot be greater than the number of members in each class.")
    if n_splits > counts.min():
        warnings.warn(f"The least populated class in y has only {counts.min()} members, which is less than "
                      f"n_splits={n_splits}.", UserWarning, stacklevel=2)
    dealt = np.sort(encoded)
    allocation = np.asarray([np.bincount(dealt[i::n_splits], minlength=len(first)) for i in range(n_splits)])
    rng = np.random.RandomState(seed)
    masks = np.empty((n_repeats * n_splits, len(strata)), dtype=bool)
    for repeat in range(n_repeats):
        folds = np.empty(len(strata), dtype=np.int64)
        for k in range(len(first)):
            labels = np.arange(n_splits).repeat(allocation[:, k])
            rng.shuffle(labels)
            folds[encoded == k] = labels
        masks[repeat * n_splits:(repeat + 1) * n_splits] = folds == np.arange(n_splits)[:, None]
    return masks


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


