"""Agreement between annotators who graded the same pooled chunks (000 §8: "no second annotator").

For the rows (question, chunk) that two or more annotators graded 0 / 1 / 2:

* **Cohen's weighted κ** for each pair of annotators, quadratic weights ``w_ij = (i − j)²``:
  ``κ = 1 − Σ w_ij O_ij / Σ w_ij E_ij`` with O the pair's confusion counts and ``E_ij = r_i c_j / N`` the counts
  expected from its margins (scikit-learn's ``cohen_kappa_score(weights="quadratic")``, here on stacks of
  confusion matrices so that every bootstrap resample is a few array operations: :func:`quadratic_kappa`);
* **Krippendorff's α**, ordinal, over all annotators at once (every row graded by at least two):
  ``α = 1 − (n − 1) Σ o_ck δ_ck / Σ n_c n_k δ_ck`` from the coincidence matrix o (each row of m grades adds
  ``1 / (m − 1)`` per ordered pair of its grades), ``n_c`` its margins, and the ordinal distance
  ``δ_ck = (Σ_{g=c}^{k} n_g − (n_c + n_k) / 2)²`` (the ``krippendorff`` package's, here on stacks:
  :func:`ordinal_alpha`);
* **raw agreement** of each pair (the share of rows graded alike) and the pair's confusion table.

Each is given overall and by question type, with a percentile bootstrap interval over *questions*, the paper's
convention (§4.4, :mod:`pmrag.evaluate.bootstrap`: B resamples of the question set drawn once from the seed;
the rows of a question move together).  A question's confusion and coincidence counts are summed once; a
resample's counts are ``c_bq``-weighted sums of them (:func:`~pmrag.evaluate.bootstrap.resample_counts`), so
the B values of a statistic come from one matrix product.  A resample in which a statistic is undefined (κ when
both annotators of the pair gave one and the same grade throughout; α when one grade alone occurs) is left out
of its percentiles, and the point value is then ``NaN``, as scikit-learn's is.

Rows graded by one annotator only compare with nothing: they are left out of every statistic and counted
(:attr:`Agreement.single`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from pmrag.annotate.export import gradable_questions
from pmrag.annotate.judgments import RELEVANCE_GRADES
from pmrag.core.params import BootstrapSection
from pmrag.core.store import judgments
from pmrag.evaluate.bootstrap import percentiles, resample_counts

ALL = "all"
NO_TYPE = "(no type)"
MEASURES = ("kappa", "alpha", "raw")
TABLE_COLUMNS = ("measure", "annotators", "type", "n_questions", "n_rows", "value", "ci_low", "ci_high")
_K = len(RELEVANCE_GRADES)


# -- the statistics, on stacks of count matrices ------------------------------------------------------------
def quadratic_kappa(confusion) -> np.ndarray:
    """Cohen's quadratic-weighted κ of each ``(k, k)`` confusion matrix of a stack ``(..., k, k)`` (rows: the
    first annotator's grade, columns: the second's); ``NaN`` where it is undefined (no expected disagreement:
    both annotators gave one and the same grade throughout, or no row)."""
    counts = np.asarray(confusion, dtype=np.float64)
    k = counts.shape[-1]
    grades = np.arange(k, dtype=np.float64)
    weights = (grades[:, None] - grades[None, :]) ** 2
    total = counts.sum(axis=(-2, -1))
    expected = counts.sum(axis=-1)[..., :, None] * counts.sum(axis=-2)[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = expected / total[..., None, None]
        observed_d = (weights * counts).sum(axis=(-2, -1))
        expected_d = (weights * expected).sum(axis=(-2, -1))
        kappa = 1.0 - observed_d / expected_d
    return np.where(expected_d > 0, kappa, np.nan)


def raw_agreement(confusion) -> np.ndarray:
    """The share of rows on the diagonal of each confusion matrix of a stack (``NaN`` for an empty one)."""
    counts = np.asarray(confusion, dtype=np.float64)
    total = counts.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, np.trace(counts, axis1=-2, axis2=-1) / total, np.nan)


def coincidences(grades) -> np.ndarray:
    """The coincidence matrices ``(rows, k, k)`` of rows of grades ``(rows, annotators)`` (``NaN``: not graded;
    grades are 0 … k−1): ``o_ck = (v_c v_k − [c = k] v_c) / (m − 1)`` with ``v`` the row's grade counts and
    ``m`` their sum; a row of fewer than two grades adds nothing."""
    values = np.asarray(grades, dtype=np.float64)
    per_grade = np.stack([(values == g).sum(axis=-1) for g in range(_K)], axis=-1).astype(np.float64)
    m = per_grade.sum(axis=-1)
    pairs = per_grade[:, :, None] * per_grade[:, None, :] - per_grade[:, :, None] * np.eye(_K)
    scale = np.divide(1.0, m - 1.0, out=np.zeros_like(m), where=m >= 2)
    return pairs * scale[:, None, None]


def ordinal_alpha(coincidence) -> np.ndarray:
    """Krippendorff's ordinal α of each ``(k, k)`` coincidence matrix of a stack ``(..., k, k)``; ``NaN`` where it
    is undefined (no expected disagreement: one grade alone, or fewer than two pairable values)."""
    o = np.asarray(coincidence, dtype=np.float64)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    k = o.shape[-1]
    low = np.minimum(np.arange(k)[:, None], np.arange(k)[None, :])
    high = np.maximum(np.arange(k)[:, None], np.arange(k)[None, :])
    cumulative = np.cumsum(n_c, axis=-1)
    between = cumulative[..., high] - cumulative[..., low] + n_c[..., low]
    delta = (between - (n_c[..., low] + n_c[..., high]) / 2.0) ** 2
    observed = (o * delta).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


# -- the rows ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Agreement:
    """Agreement of the annotators of a store (or a pool of it).

    ``table``: one row per measure (``kappa`` per pair, ``alpha`` over all, ``raw`` per pair) × question type
    (``all`` first), columns :data:`TABLE_COLUMNS` (``annotators``: ``a|b`` for a pair, ``all`` for α).
    ``confusion``: per pair, the counts of (first's grade, second's grade).  ``single``: rows graded by one
    annotator only (left out); ``disagreements``: rows whose grades differ."""

    annotators: tuple[str, ...]
    table: pd.DataFrame
    confusion: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)
    rows: int = 0
    single: int = 0
    disagreements: int = 0

    def lines(self, confidence: float = 0.95) -> list[str]:
        """The report ``pmrag judgments agreement`` prints."""
        text = [f"annotators: {', '.join(self.annotators)}; {self.rows} row(s) graded by two or more, "
                f"{self.single} graded by one only (left out), {self.disagreements} disagreement(s)"]
        if self.table.empty:
            return text + ["no row graded by two annotators: nothing to compare"]
        names = {"kappa": "weighted κ (quadratic)", "alpha": "Krippendorff's α (ordinal)", "raw": "raw agreement"}
        for row in self.table.itertuples(index=False):
            value = "undefined" if np.isnan(row.value) else f"{row.value:.3f}"
            interval = ("" if np.isnan(row.ci_low) else
                        f" [{row.ci_low:.3f}, {row.ci_high:.3f}]")
            text.append(f"  {names[row.measure]:<27} {row.annotators:<20} {row.type:<14} {value}{interval}  "
                        f"({row.n_questions} question(s), {row.n_rows} row(s))")
        for (first, second), counts in self.confusion.items():
            cells = "; ".join(f"{grade}: {' '.join(map(str, row))}"
                              for grade, row in zip(counts.index, counts.to_numpy()))
            text.append(f"  confusion {first} (rows 0/1/2) × {second} (columns 0/1/2): {cells}")
        text.append(f"  (intervals: {100 * confidence:g}% percentile bootstrap over questions)")
        return text


def grade_matrix(grades: pd.DataFrame) -> pd.DataFrame:
    """Long grades (``question_id, chunk_id, annotator, relevance``) as one row per (question, chunk) and one
    column per annotator (sorted), ``NaN`` where that annotator did not grade the row."""
    wide = grades.pivot(index=["question_id", "chunk_id"], columns="annotator", values="relevance")
    return wide.reindex(columns=sorted(wide.columns)).astype(np.float64).sort_index()


def store_grades(engine: Engine, pool: str | None = None) -> pd.DataFrame:
    """Every annotator's grades (``question_id, chunk_id, annotator, relevance``), only those graded from
    ``pool`` when given."""
    query = select(judgments.c.question_id, judgments.c.chunk_id, judgments.c.annotator, judgments.c.relevance)
    if pool is not None:
        query = query.where(judgments.c.pool == pool)
    with engine.connect() as conn:
        return pd.read_sql(query, conn)


def question_types(engine: Engine) -> pd.Series:
    """The type of every question the store knows (its questions, its accepted or edited candidates)."""
    with engine.connect() as conn:
        return gradable_questions(conn)["type"]


def _interval(samples: np.ndarray, params: BootstrapSection) -> tuple[float, float]:
    kept = samples[~np.isnan(samples)]
    if kept.size == 0:
        return np.nan, np.nan
    low, high = np.percentile(kept, percentiles(params))
    return float(low), float(high)


def _by_question(values: np.ndarray, question_index: np.ndarray, n_questions: int) -> np.ndarray:
    """Row-level count matrices ``(rows, …)`` summed per question ``(n_questions, …)``."""
    out = np.zeros((n_questions, *values.shape[1:]), dtype=np.float64)
    np.add.at(out, question_index, values)
    return out


def _pair_confusions(matrix: np.ndarray, pairs: list[tuple[int, int]]) -> np.ndarray:
    """``(rows, pairs, k, k)`` one-hot confusion of each row for each pair (zero where either did not grade)."""
    out = np.zeros((matrix.shape[0], len(pairs), _K, _K))
    for p, (i, j) in enumerate(pairs):
        both = ~np.isnan(matrix[:, i]) & ~np.isnan(matrix[:, j])
        rows = np.flatnonzero(both)
        out[rows, p, matrix[rows, i].astype(int), matrix[rows, j].astype(int)] = 1.0
    return out


def agreement_of(grades: pd.DataFrame, types: pd.Series | None = None,
                 params: BootstrapSection | None = None) -> Agreement:
    """Agreement of long grades (``question_id, chunk_id, annotator, relevance``; see the module docstring).

    ``types`` maps question ids to their type (missing: :data:`NO_TYPE`); ``params``: the bootstrap's B, seed and
    confidence (default the paper's)."""
    params = params or BootstrapSection()
    if grades.empty:
        return Agreement(annotators=(), table=pd.DataFrame(columns=list(TABLE_COLUMNS)))
    wide = grade_matrix(grades)
    names = tuple(str(a) for a in wide.columns)
    n_graded = wide.notna().sum(axis=1)
    single = int((n_graded == 1).sum())
    shared = wide[n_graded >= 2]
    spread = shared.max(axis=1) - shared.min(axis=1)
    pairs = list(combinations(range(len(names)), 2))
    pair_names = [f"{names[i]}|{names[j]}" for i, j in pairs]
    matrix = shared.to_numpy()
    question_ids = list(dict.fromkeys(shared.index.get_level_values("question_id")))
    question_index = pd.Index(question_ids).get_indexer(shared.index.get_level_values("question_id"))
    confusion_q = _by_question(_pair_confusions(matrix, pairs), question_index, len(question_ids))
    coincidence_q = _by_question(coincidences(matrix), question_index, len(question_ids))
    pair_rows_q = confusion_q.sum(axis=(-2, -1))                       # (questions, pairs)

    known = {str(q): str(t) for q, t in (types.items() if types is not None else ()) if isinstance(t, str) and t}
    type_of = pd.Series([known.get(q, NO_TYPE) for q in question_ids], dtype=object)
    groups = [(ALL, np.arange(len(question_ids)))]
    groups += [(t, np.flatnonzero(type_of.to_numpy() == t)) for t in sorted(set(type_of))]
    records = []
    for type_name, members in groups:
        if members.size == 0:
            continue
        counts = resample_counts(int(members.size), params)               # (B, n)
        confusion = confusion_q[members]
        coincidence = coincidence_q[members]
        resampled_confusion = np.einsum("bq,qpxy->bpxy", counts, confusion)
        resampled_coincidence = np.einsum("bq,qxy->bxy", counts, coincidence)
        point_confusion = confusion.sum(axis=0)
        for measure, point, samples in (
                ("kappa", quadratic_kappa(point_confusion), quadratic_kappa(resampled_confusion)),
                ("raw", raw_agreement(point_confusion), raw_agreement(resampled_confusion))):
            for p, label in enumerate(pair_names):
                with_pair = int((pair_rows_q[members, p] > 0).sum())
                if with_pair == 0:
                    continue
                records.append((measure, label, type_name, with_pair, int(point_confusion[p].sum()),
                                float(point[p]), *_interval(samples[:, p], params)))
        n_rows = int(np.isin(question_index, members).sum())
        records.append(("alpha", ALL, type_name, int(members.size), n_rows,
                        float(ordinal_alpha(coincidence.sum(axis=0))),
                        *_interval(ordinal_alpha(resampled_coincidence), params)))
    order = {m: i for i, m in enumerate(MEASURES)}
    table = pd.DataFrame(records, columns=list(TABLE_COLUMNS))
    if len(table):
        table = (table.assign(_m=table["measure"].map(order), _t=table["type"] != ALL)
                 .sort_values(["_m", "annotators", "_t", "type"], kind="stable").drop(columns=["_m", "_t"])
                 .reset_index(drop=True))
    labels = list(RELEVANCE_GRADES)
    confusion_tables = {
        (names[i], names[j]): pd.DataFrame(confusion_q[:, p].sum(axis=0).astype(np.int64),
                                           index=pd.Index(labels, name=names[i]),
                                           columns=pd.Index(labels, name=names[j]))
        for p, (i, j) in enumerate(pairs)}
    return Agreement(annotators=names, table=table, confusion=confusion_tables, rows=len(shared), single=single,
                     disagreements=int((spread > 0).sum()))


def agreement(engine: Engine, *, pool: str | None = None, params: BootstrapSection | None = None) -> Agreement:
    """:func:`agreement_of` the store's grades (graded from ``pool`` when given), typed by the store's questions."""
    return agreement_of(store_grades(engine, pool), question_types(engine), params)
