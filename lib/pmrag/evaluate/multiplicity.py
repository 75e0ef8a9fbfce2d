"""Many comparisons (§6.3: many paired differences): Holm and Benjamini–Hochberg adjustments, and a paired sign-flip test.

Adjusted p-values of a family of m comparisons with p-values p_1 … p_m, sorted p_(1) ≤ … ≤ p_(m) (ties in
a stable order; the adjusted values do not depend on it):

* Holm (family-wise error rate, any dependence) (:func:`holm`):
  p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)).
* Benjamini–Hochberg (false-discovery rate, independent or positively dependent tests)
  (:func:`benjamini_hochberg`): p̃_(i) = min_{j ≥ i} min(1, m · p_(j) / j); equal to
  ``scipy.stats.false_discovery_control(p, method="bh")``.

A comparison is rejected (a "decision") when its adjusted p-value is ≤ α.

Paired permutation (randomisation) test (:func:`sign_flip_test`), as in IR practice (Smucker, Allan &
Carterette 2007).  For per-question differences d_q = x_q^(a) − x_q^(ref), q = 1 … n, the statistic is the
mean difference T = (1/n) Σ_q d_q; under H0 (the two methods are exchangeable on each question) each d_q is
equally likely to have either sign, so T*_s = (1/n) Σ_q s_q d_q with s ∈ {−1, +1}^n.  Two-sided:

* exact, when 2^n ≤ B (or ``exact=True``, n ≤ 20): every sign vector once, the identity included:
  p = #{s : |T*_s| ≥ |T_obs|} / 2^n — scipy's ``permutation_test(..., permutation_type="samples")`` of
  mean(x − y), which doubles the smaller tail, gives the same number because this null is symmetric.
* Monte Carlo otherwise: B sign vectors drawn uniformly, p = (1 + #{b : |T*_b| ≥ |T_obs|}) / (1 + B)
  (the observed labelling counted once, so p is never 0 and the test keeps its level; Phipson & Smyth 2010).

"≥" is taken with a tolerance of 1e-10 · max_q |d_q|, so that mathematically equal sums added in another order
count as ties.  The ``(B, n)`` sign matrix is one draw shared by every comparison (all methods against one
reference are one ``(B, n) @ (n, m)`` product).  It comes from ``numpy.random.default_rng((seed,
SIGN_STREAM))``: seeded by ``seed`` but a stream apart from the bootstrap's ``default_rng(seed)``, whose
bounded integers would otherwise be read from the same raw words (a sign would be "index ≥ n/2").

:func:`comparisons_table` puts it together for every method against a reference: Δ̂, the paper's unadjusted
percentile interval (eq. 7, :func:`pmrag.evaluate.reliability.paired_differences`, confidence 1 − α), the
permutation p-value, and the Holm and BH adjusted p-values and decisions of the family (all methods but the
reference).

:func:`family_table` splits the comparisons into two families and adjusts within each (Holm and BH with m = the
family's size):

* **declared**: the pairs a study names before it runs (``statistics.declared_comparisons``; by default the paper's
  Table 5: the selected hybrid against the reference retriever and against the diagnostic hybrid), each oriented
  as declared (Δ = first − second);
* **exploratory**: every other method against the reference (Δ = method − reference), one row per alias group
  (:mod:`pmrag.evaluate.aliases`: a method ranking exactly like an earlier one is the same method and is tested once,
  by its representative; the reference's own aliases are not compared with it at all).

"Declared" is not "confirmatory".  Naming a family in the params fixes how many tests its adjustment counts, but
a comparison with a method chosen on these same questions (the selected hybrid, each pairing's selected β) is
conditional on that choice and remains exploratory evidence whatever its family (§6.3: Table 5's intervals "do not
reflect the search over 126 configurations … and [are] therefore not confirmatory evidence"); such rows are marked
``selected_in_sample``.  A declared family can only be confirmatory for methods fixed before seeing these questions,
or when it is tested on questions the selection never saw.

Beside the decisions, each row carries its power at the study's n (:mod:`pmrag.evaluate.power`): the true
difference detected with the set power (``detectable_difference``, computed on the row's differences oriented so
that the observed Δ̂ ≥ 0: a true difference in the observed direction) and the smallest observed |Δ̂| a paired t-test
at α calls significant with the row's spread (``significance_threshold``); and ``same_differences_as``: an earlier
row whose per-question differences are exactly the same up to sign (different methods that tie on the metric on
every question, as ``excerpt_bm25`` and ``raw_text_bm25`` do in the demo): the same numbers tested twice, so their two
decisions are one piece of evidence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.metric_names import RECALL5, Metric
from pmrag.evaluate.reliability import paired_differences

FAMILIES = ("declared", "exploratory")
SIGN_STREAM = 1
MAX_EXACT = 20   # 2^20 sign vectors: the largest enumeration allowed


def _p_values(p_values) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p_values must be a non-empty 1-D array, got shape {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p_values must lie in [0, 1] (no NaN)")
    return p


def _alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def holm(p_values, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``(adjusted, reject)``: Holm's step-down adjusted p-values and the decisions ``adjusted ≤ alpha``.

    Parameters
    ----------
    p_values : (m,) unadjusted p-values of one family, in any order (results come back in that order).
    alpha : family-wise error rate.
    """
    p, alpha = _p_values(p_values), _alpha(alpha)
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted, adjusted <= alpha


def benjamini_hochberg(p_values, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``(adjusted, reject)``: Benjamini–Hochberg step-up adjusted p-values and the decisions
    ``adjusted ≤ alpha`` (false-discovery rate ``alpha``)."""
    p, alpha = _p_values(p_values), _alpha(alpha)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    stepped = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted, adjusted <= alpha


def uses_exact(n_questions: int, n_resamples: int, exact: bool | None = None) -> bool:
    """Whether :func:`sign_flip_test` enumerates: ``exact`` if given, else 2^n ≤ B."""
    if exact is None:
        return n_questions <= MAX_EXACT and 2 ** n_questions <= n_resamples
    return bool(exact)


def sign_flips(n_questions: int, n_resamples: int = 5000, seed: int = 12345, exact: bool | None = None) -> np.ndarray:
    """The ``(S, n)`` float64 ±1 sign matrix of :func:`sign_flip_test`: all 2^n vectors when exact (row 0 the
    identity), else B rows from ``default_rng((seed, SIGN_STREAM))``."""
    for name, value, low in (("n_questions", n_questions, 1), ("n_resamples", n_resamples, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
    if uses_exact(n_questions, n_resamples, exact):
        if n_questions > MAX_EXACT:
            raise ValueError(f"exact enumeration needs n_questions ≤ {MAX_EXACT} (2^n sign vectors), "
                             f"got {n_questions}")
        bits = (np.arange(2 ** n_questions)[:, None] >> np.arange(n_questions)) & 1
        return 1.0 - 2.0 * bits
    rng = np.random.default_rng((seed, SIGN_STREAM))
    return 1.0 - 2.0 * rng.integers(0, 2, size=(n_resamples, n_questions), dtype=np.int8)


def sign_flip_test(differences, n_resamples: int = 5000, seed: int = 12345, exact: bool | None = None):
    """Two-sided paired permutation p-value(s) of the mean difference (module docstring).

    Parameters
    ----------
    differences : (n,) per-question differences d_q, or (m, n): one row per comparison, all tested on the
        same sign vectors.
    n_resamples : B, the Monte Carlo sign vectors (and the exactness threshold 2^n ≤ B).
    seed : seeds the sign matrix (:func:`sign_flips`).
    exact : None (enumerate when 2^n ≤ B), True (enumerate; n ≤ 20) or False (Monte Carlo).

    Returns
    -------
    A float for (n,) input, an (m,) array for (m, n).
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim not in (1, 2) or d.shape[-1] == 0:
        raise ValueError(f"differences must be (n_questions,) or (n_comparisons, n_questions), got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("differences must be finite")
    rows = np.atleast_2d(d)
    n = rows.shape[1]
    signs = sign_flips(n, n_resamples, seed, exact)
    observed = np.abs(rows.mean(axis=1))
    tolerance = 1e-10 * np.abs(rows).max(axis=1)
    null = np.abs(signs @ rows.T) / n                      # (S, m)
    extreme = (null >= observed - tolerance).sum(axis=0)
    if uses_exact(n, n_resamples, exact):
        p = extreme / signs.shape[0]
    else:
        p = (1.0 + extreme) / (1.0 + signs.shape[0])
    return float(p[0]) if d.ndim == 1 else p


def comparisons_table(per_question: pd.DataFrame, reference: str, metric: Metric | str = RECALL5, B: int = 5000,
                      seed: int = 12345, alpha: float = 0.05) -> pd.DataFrame:
    """Every method against ``reference`` on ``metric``, with unadjusted and family-adjusted decisions.

    Parameters
    ----------
    per_question : long rows ``retriever, question_id, <metric>`` (as :func:`pmrag.evaluate.metrics.per_question_rows`);
        every retriever must score the same questions.
    reference : the retriever every other one is compared with (Δ = method − reference).
    metric : the metric column.
    B, seed : resamples and seed of both the percentile bootstrap (the paper's ``default_rng(seed)``) and the
        sign-flip test (its own stream of the same seed).
    alpha : level of every decision; the percentile interval has confidence 1 − α.

    Returns
    -------
    One row per method (first-appearance order): method, reference, metric, delta, ci_low, ci_high,
    ci_excludes_zero, p_permutation, p_holm, reject_holm, p_bh, reject_bh.
    """
    metric = str(metric)
    require_columns(per_question, ["retriever", "question_id", metric], "per_question")
    alpha = _alpha(alpha)
    methods = list(dict.fromkeys(per_question["retriever"]))
    if reference not in methods:
        raise ValueError(f"reference {reference!r} is not a retriever of per_question ({len(methods)} retrievers)")
    others = [m for m in methods if m != reference]
    if not others:
        raise ValueError("per_question holds only the reference: nothing to compare")
    table, _ = _tested(per_question, [(m, reference) for m in others], metric, B, seed, alpha)
    p_holm, reject_holm = holm(table["p_permutation"].to_numpy(), alpha)
    p_bh, reject_bh = benjamini_hochberg(table["p_permutation"].to_numpy(), alpha)
    return table.assign(p_holm=p_holm, reject_holm=reject_holm, p_bh=p_bh, reject_bh=reject_bh)


def family_table(per_question: pd.DataFrame, reference: str, declared=(), aliases: pd.DataFrame | None = None,
                 selected_in_sample=(), metric: Metric | str = RECALL5, B: int = 5000, seed: int = 12345,
                 alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """The comparisons in a declared and an exploratory family, adjusted within each (module docstring).

    Parameters
    ----------
    per_question : long rows ``retriever, question_id, <metric>``; every retriever scores the same questions.
    reference : the method every exploratory comparison is made with (the selected hybrid).
    declared : ``[(first, second), ...]`` methods of ``per_question``: the declared family, Δ = first − second.
    aliases : ``method, representative`` (:func:`pmrag.evaluate.aliases.alias_groups`); a method not listed is its
        own group.
    selected_in_sample : methods chosen on these same questions (rows involving one are ``selected_in_sample``).
    metric, B, seed, alpha : as :func:`comparisons_table`.
    power : the power of ``detectable_difference`` (resampled with ``B`` replicates and ``seed``).

    Returns
    -------
    Declared rows in their order, then exploratory rows in method order: family, method, reference, aliases (the
    method's, ``", "``-joined), metric, delta, ci_low, ci_high, ci_excludes_zero, p_permutation, p_holm,
    reject_holm, p_bh, reject_bh (within the family), selected_in_sample, same_differences_as (``"a − b"`` of the
    first earlier row with the same differences up to sign, else ``""``), detectable_difference,
    significance_threshold, alpha, power.
    """
    from pmrag.evaluate.power import detectable_differences, significance_threshold

    metric = str(metric)
    require_columns(per_question, ["retriever", "question_id", metric], "per_question")
    alpha = _alpha(alpha)
    methods = list(dict.fromkeys(per_question["retriever"]))
    declared = [tuple(pair) for pair in declared]
    for pair in declared:
        unknown = [m for m in pair if m not in methods]
        if len(pair) != 2 or unknown:
            raise ValueError(f"declared comparison {list(pair)!r} must be two methods of per_question"
                             + (f"; unknown: {unknown[0]!r}" if unknown else ""))
    if reference not in methods:
        raise ValueError(f"reference {reference!r} is not a retriever of per_question ({len(methods)} retrievers)")
    group = dict(zip(aliases["method"], aliases["representative"])) if aliases is not None else {}
    group_of = [group.get(m, m) for m in methods]
    covered = {frozenset((group.get(a, a), group.get(b, b))) for a, b in declared}
    home = group.get(reference, reference)
    exploratory = [m for i, (m, g) in enumerate(zip(methods, group_of))      # each group's first method
                   if group_of.index(g) == i and g != home and frozenset((g, home)) not in covered]
    pairs = declared + [(m, reference) for m in exploratory]
    if not pairs:
        raise ValueError("nothing to compare: no declared pair, and every method is the reference or its alias")
    family = np.array(["declared"] * len(declared) + ["exploratory"] * len(exploratory), dtype=object)
    table, differences = _tested(per_question, pairs, metric, B, seed, alpha)
    members = {g: [m for m, h in zip(methods, group_of) if h == g] for g in set(group_of)}
    table.insert(0, "family", family)
    table.insert(3, "aliases", [", ".join(m for m in members[group.get(a, a)] if m != a) for a, _ in pairs])
    adjusted = {column: np.zeros(len(pairs)) for column in ("p_holm", "p_bh")}
    decided = {column: np.zeros(len(pairs), dtype=bool) for column in ("reject_holm", "reject_bh")}
    for name in FAMILIES:
        inside = family == name
        if inside.any():
            adjusted["p_holm"][inside], decided["reject_holm"][inside] = holm(table["p_permutation"][inside], alpha)
            adjusted["p_bh"][inside], decided["reject_bh"][inside] = benjamini_hochberg(table["p_permutation"][inside],
                                                                                          alpha)
    chosen = set(selected_in_sample)
    oriented = differences * np.where(table["delta"].to_numpy() < 0, -1.0, 1.0)[:, None]
    n = differences.shape[1]
    return table.assign(
        p_holm=adjusted["p_holm"], reject_holm=decided["reject_holm"], p_bh=adjusted["p_bh"],
        reject_bh=decided["reject_bh"], selected_in_sample=[a in chosen or b in chosen for a, b in pairs],
        same_differences_as=_same_differences(differences, [f"{a} − {b}" for a, b in pairs]),
        detectable_difference=(detectable_differences(oriented, n, power, alpha, B, seed) if n >= 2
                               else np.full(len(pairs), np.nan)),
        significance_threshold=significance_threshold(differences, alpha) if n >= 2 else np.full(len(pairs), np.nan),
        alpha=alpha, power=power)


def _tested(per_question: pd.DataFrame, pairs: list[tuple[str, str]], metric: str, B: int, seed: int,
            alpha: float) -> tuple[pd.DataFrame, np.ndarray]:
    """``(table, differences)``: for each pair (a, b), Δ̂ = a − b with its percentile interval (confidence 1 − α) and
    sign-flip p-value (``method, reference, metric, delta, ci_low, ci_high, ci_excludes_zero, p_permutation``), and
    the ``(pairs, questions)`` per-question differences."""
    params = BootstrapSection(n_resamples=B, seed=seed, confidence=1.0 - alpha)
    intervals = paired_differences(per_question, [(a, a, b) for a, b in pairs], metric=metric, params=params)
    wide = per_question.pivot(index="question_id", columns="retriever", values=metric)
    differences = (wide[[a for a, _ in pairs]].to_numpy(dtype=np.float64).T
                   - wide[[b for _, b in pairs]].to_numpy(dtype=np.float64).T)
    table = pd.DataFrame({
        "method": [a for a, _ in pairs], "reference": [b for _, b in pairs], "metric": metric,
        "delta": intervals["delta"].to_numpy(), "ci_low": intervals["ci_low"].to_numpy(),
        "ci_high": intervals["ci_high"].to_numpy(), "ci_excludes_zero": intervals["excludes_zero"].to_numpy(),
        "p_permutation": sign_flip_test(differences, n_resamples=B, seed=seed),
    })
    return table, differences


def _same_differences(differences: np.ndarray, labels: list[str]) -> list[str]:
    """For each row, the label of the first earlier row with the same differences up to sign, else ``""``."""
    nonzero = differences != 0
    lead = differences[np.arange(len(differences)), np.argmax(nonzero, axis=1)]
    canonical = differences * np.where(lead < 0, -1.0, 1.0)[:, None]
    _, first, inverse = np.unique(canonical, axis=0, return_index=True, return_inverse=True)
    earliest = first[inverse.reshape(-1)]
    return [labels[e] if e != i else "" for i, e in enumerate(earliest)]
