"""The cohort's pooled tables, from every participant's per-question scores (:mod:`pmrag.cohort.pooled`'s kernels).

``scores`` is long: ``participant, method, selected, question_id, question_type`` and the paper's three metrics
(Recall@5, MRR@5, nDCG@5), one row per participant × method × evaluated question; ``selected`` marks the rows of
the participant's own selected hybrid (its own sweep and selection, §6.2), the other methods are its single
retrievers, in the study's order.  Two roles are read off per participant: ``best_single`` (its single retriever
with the best macro metrics by the paper's rule) and ``selected_hybrid``.

Every table has ``n_participants`` and ``n_questions``: how many participants and evaluated questions it rests
on (per row); tables with a row per participant have a ``participant`` column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pmrag.cohort.pooled import (heterogeneity, macro_micro, percentile_interval, two_level_means, winners,
                                 within_variances)
from pmrag.core.params import BootstrapSection
from pmrag.evaluate.metric_names import PAPER_METRICS, TABLE_METRICS

BEST_SINGLE, SELECTED_HYBRID, SINGLE = "best_single", "selected_hybrid", "single"
COMPARISON = f"{SELECTED_HYBRID} - {BEST_SINGLE}"
METRICS = tuple(map(str, TABLE_METRICS))
SCORE_COLUMNS = ("participant", "method", "selected", "question_id", "question_type", *METRICS)


def cohort_tables(scores: pd.DataFrame, bootstrap: BootstrapSection) -> dict[str, pd.DataFrame]:
    """Every pooled table by name: ``per_participant``, ``by_type``, ``pooled``, ``differences``,
    ``participant_differences``, ``wins`` (see each builder).  ``bootstrap`` gives B, the seed and the confidence
    (the base study's)."""
    roles = role_scores(scores)
    return {"per_participant": per_participant(scores, roles), "by_type": by_type(roles),
            "pooled": pooled(roles, bootstrap),
            "differences": differences(roles, bootstrap), "participant_differences": participant_differences(
                roles, bootstrap.confidence), "wins": wins(scores)}


def participants_of(scores: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(scores["participant"]))


def best_singles(scores: pd.DataFrame) -> dict[str, str]:
    """Each participant's best single retriever: the paper's rule on its macro metrics, ties to the listed order."""
    from pmrag.evaluate.select import listed, select

    found = {}
    for participant, rows in scores[~scores["selected"]].groupby("participant", sort=False):
        means = rows.groupby("method", sort=False)[list(map(str, PAPER_METRICS))].mean()
        found[participant] = str(means.index[select(means, listed(np.arange(len(means))))])
    return found


def role_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` narrowed to the two roles, with a ``role`` column (best_single, selected_hybrid) beside the method."""
    best = best_singles(scores)
    is_best = ~scores["selected"] & (scores["method"] == scores["participant"].map(best))
    frame = pd.concat([scores[is_best].assign(role=BEST_SINGLE), scores[scores["selected"]].assign(role=SELECTED_HYBRID)])
    return frame.reset_index(drop=True)


def per_participant(scores: pd.DataFrame, roles: pd.DataFrame) -> pd.DataFrame:
    """Per participant and method: the macro metrics over its questions and the method's role (best_single,
    selected_hybrid or single)."""
    macro = scores.groupby(["participant", "method"], sort=False).agg(
        **{m: (m, "mean") for m in METRICS}, n_questions=("question_id", "size")).reset_index()
    role = roles.drop_duplicates(["participant", "method"]).set_index(["participant", "method"])["role"]
    macro.insert(1, "role", [role.get((p, m), SINGLE) for p, m in zip(macro["participant"], macro["method"])])
    return macro.assign(n_participants=1)


def by_type(roles: pd.DataFrame) -> pd.DataFrame:
    """Per participant, role (best_single, selected_hybrid) and question type: the method and its macro metrics
    over that type's questions (the paper's results by type, §6.4, for each participant); types in the order the
    cohort's questions first show them."""
    frame = roles.groupby(["participant", "role", "method", "question_type"], sort=False).agg(
        **{m: (m, "mean") for m in METRICS}, n_questions=("question_id", "size")).reset_index()
    roles_order = {role: position for position, role in enumerate((BEST_SINGLE, SELECTED_HYBRID))}
    participants = {p: position for position, p in enumerate(participants_of(roles))}
    types = {t: position for position, t in enumerate(dict.fromkeys(roles["question_type"]))}
    order = np.lexsort((frame["question_type"].map(types), frame["role"].map(roles_order),
                        frame["participant"].map(participants)))
    return frame.iloc[order].reset_index(drop=True).assign(n_participants=1)


def _matrices(roles: pd.DataFrame, methods: Sequence[str], metric: str) -> list[np.ndarray]:
    """Per participant, the ``(len(methods), n_p)`` values of ``metric`` of each role, questions aligned."""
    wide = roles.pivot_table(index=["participant", "question_id"], columns="role", values=metric, sort=False)
    return [wide.loc[p, list(methods)].to_numpy(dtype=np.float64).T for p in participants_of(roles)]


def _sizes(roles: pd.DataFrame) -> tuple[int, int]:
    return roles["participant"].nunique(), len(roles.drop_duplicates(["participant", "question_id"]))


def pooled(roles: pd.DataFrame, bootstrap: BootstrapSection) -> pd.DataFrame:
    """Per role and metric: the macro (over participants) and micro (over all questions) means with their
    two-level bootstrap intervals."""
    methods = (BEST_SINGLE, SELECTED_HYBRID)
    n_participants, n_questions = _sizes(roles)
    rows = []
    for metric in METRICS:
        values = _matrices(roles, methods, metric)
        rows += _summary_rows(values, bootstrap, {"method": list(methods), "metric": metric})
    return pd.DataFrame(rows).assign(n_participants=n_participants, n_questions=n_questions)


def _summary_rows(values: list[np.ndarray], bootstrap: BootstrapSection, labels: dict) -> list[dict]:
    macro, micro = macro_micro(values)
    macro_b, micro_b = two_level_means(values, bootstrap.n_resamples, bootstrap.seed)
    (macro_low, macro_high), (micro_low, micro_high) = (percentile_interval(macro_b, bootstrap.confidence),
                                                        percentile_interval(micro_b, bootstrap.confidence))
    return [{name: (value[i] if isinstance(value, list) else value) for name, value in labels.items()}
            | {"macro": macro[i], "macro_ci_low": macro_low[i], "macro_ci_high": macro_high[i], "micro": micro[i],
               "micro_ci_low": micro_low[i], "micro_ci_high": micro_high[i]} for i in range(len(macro))]


def differences(roles: pd.DataFrame, bootstrap: BootstrapSection) -> pd.DataFrame:
    """Per metric, selected_hybrid − best_single: the macro and micro paired differences with two-level bootstrap
    intervals, and their between-participant heterogeneity (Q, I², DerSimonian–Laird τ², random-effects summary)."""
    n_participants, n_questions = _sizes(roles)
    rows = []
    for metric in METRICS:
        pairs = _matrices(roles, (SELECTED_HYBRID, BEST_SINGLE), metric)
        delta = [pair[0:1] - pair[1:2] for pair in pairs]
        [row] = _summary_rows(delta, bootstrap, {"comparison": COMPARISON, "metric": metric})
        spread = heterogeneity(*within_variances(delta), bootstrap.confidence)
        rows.append(row | {"q": spread.q, "df": spread.df, "i2": spread.i2, "tau2": spread.tau2,
                           "re_mean": spread.re_mean, "re_ci_low": spread.re_low, "re_ci_high": spread.re_high})
    return pd.DataFrame(rows).assign(n_participants=n_participants, n_questions=n_questions)


def participant_differences(roles: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per participant and metric, selected_hybrid − best_single: the mean difference, the standard error of that
    mean (as the heterogeneity uses it) and its normal interval (a forest plot's rows)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 * (1.0 + confidence)))
    frames = []
    for metric in METRICS:
        pairs = _matrices(roles, (SELECTED_HYBRID, BEST_SINGLE), metric)
        means, variances = within_variances([pair[0] - pair[1] for pair in pairs])
        se = np.sqrt(variances)
        frames.append(pd.DataFrame({"participant": participants_of(roles), "comparison": COMPARISON, "metric": metric,
                                    "delta": means, "se": se, "ci_low": means - z * se, "ci_high": means + z * se,
                                    "n_questions": [pair.shape[1] for pair in pairs]}))
    return pd.concat(frames, ignore_index=True).assign(n_participants=1)


def wins(scores: pd.DataFrame) -> pd.DataFrame:
    """How often each method wins a participant (its best macro metrics, the paper's rule): every single retriever
    and the participant's selected hybrid (as one method, ``selected_hybrid``), in the listed order."""
    frame = scores.assign(method=scores["method"].where(~scores["selected"], SELECTED_HYBRID))
    methods = list(dict.fromkeys(frame["method"]))
    macro = frame.groupby(["participant", "method"], sort=False)[list(map(str, PAPER_METRICS))].mean()
    participants = participants_of(scores)
    cube = np.stack([macro.loc[p].reindex(methods).to_numpy(dtype=np.float64) for p in participants])
    counts = np.bincount(winners(cube), minlength=len(methods))
    n_questions = len(scores.drop_duplicates(["participant", "question_id"]))
    return pd.DataFrame({"method": methods, "wins": counts, "share": counts / len(participants),
                         "n_participants": len(participants), "n_questions": n_questions})
