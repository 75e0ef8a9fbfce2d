"""What the pooled-analysis notebook shows (``notebooks/cohort/01_pooled.ipynb``): the cohort's tables read back
from its run folder, narrowed and reshaped for a notebook column, each with the line saying what it rests on, and
the forest plot of the participants' paired differences.

The numbers are computed by ``pmrag cohort`` (:mod:`pmrag.cohort.tables`, :mod:`pmrag.cohort.selection`) and only
read here: the notebook computes nothing a test cannot reach.  Its tables are in
``outputs/<cohort run>/tables/cohort_<name>.csv``; its figures, declared by :func:`forest_spec`, go to
``outputs/<cohort run>/figures/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.cohort.params import TABLES_DIR, Cohort, load_cohort
from pmrag.cohort.run import TABLE_PREFIX
from pmrag.cohort.tables import BEST_SINGLE, COMPARISON, METRICS, SELECTED_HYBRID
from pmrag.core.errors import PmragError
from pmrag.evaluate.metric_names import parse_metric
from pmrag.present.artifacts import FigureSpec, full_precision_path, write_figure
from pmrag.study.facade import STAND_IN_COLUMN

TABLES = ("participants", "per_participant", "by_type", "pooled", "differences", "participant_differences", "wins",
          "selection")
FOREST_NAME = "cohort_forest"
save_figure = write_figure   # a cohort figure is written as a study's: <cohort run>/figures/<name>.png


def forest_spec(metric: str) -> FigureSpec:
    """The declared forest plot of ``metric`` (``figures/cohort_forest_recall5.png`` for ``recall@5``)."""
    return FigureSpec(f"{FOREST_NAME}_{metric.replace('@', '')}", "cohort/01_pooled",
                      f"Selected hybrid − best single per participant in {parse_metric(metric).label}, with the "
                      "random-effects summary")
ROLE_LABELS = {BEST_SINGLE: "best single", SELECTED_HYBRID: "selected hybrid"}


class CohortNotRun(PmragError):
    """The cohort's pooled tables are not in its run folder: ``pmrag cohort`` has not run it (or not to the end)."""


@dataclass(frozen=True)
class CohortTables:
    """A cohort's pooled tables as ``pmrag cohort`` wrote them (``selection`` is absent with one participant)."""

    cohort: Cohort
    tables: dict[str, pd.DataFrame]

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables[name]

    def csv(self, name: str) -> Path:
        """Where table ``name`` is in the cohort's run folder."""
        return self.cohort.run_dir / TABLES_DIR / f"{TABLE_PREFIX}{name}.csv"

    def finished(self) -> pd.DataFrame:
        """The participants whose study finished (the rows of the participants table)."""
        table = self.tables["participants"]
        return table[table["status"] == "finished"]

    def summarizer(self) -> str:
        """What the tables say of the participants' summaries: the offline stand-in's label (their ``summarizer``
        column), or that an LLM wrote them."""
        column = self.tables["participants"].get(STAND_IN_COLUMN)
        if column is None:
            return "written by the studies' LLM summarizer"
        return "; ".join(dict.fromkeys(column.dropna().astype(str)))

    def rests_on(self, name: str) -> str:
        """The line under table ``name`` saying how many participants and questions it rests on."""
        return rests_on(self.tables[name], self.finished())


def read_tables(params_path) -> CohortTables:
    """The pooled tables of the cohort that ``params_path`` (a cohort file) describes, read from its run folder.

    Parameters
    ----------
    params_path : the cohort YAML file.

    Returns
    -------
    :class:`CohortTables`; :class:`CohortNotRun` (one line naming the folder and the command) when a table is
    missing.
    """
    cohort = load_cohort(params_path)
    found = {}
    for name in TABLES:
        path = cohort.run_dir / TABLES_DIR / f"{TABLE_PREFIX}{name}.csv"
        full = full_precision_path(path)   # what the report computes from: numbers rounded once, when shown
        if path.is_file():
            found[name] = pd.read_csv(full if full.is_file() else path)
        elif name != "selection":
            raise CohortNotRun(f"{cohort.path}: no {path.name} in {cohort.run_dir / TABLES_DIR}: run `pmrag cohort "
                               f"{cohort.path.name}` first")
    return CohortTables(cohort, found)


def rests_on(table: pd.DataFrame, finished: pd.DataFrame) -> str:
    """``rests on P participants and N questions``: a pooled table's own ``n_participants`` and ``n_questions``;
    a table with a row per participant, the participants it has and their evaluated questions (``finished``: the
    participants table's finished rows); the leave-one-participant-out table says what each choice is made on."""
    if "participant" not in table.columns:
        [(participants, questions)] = table[["n_participants", "n_questions"]].drop_duplicates().itertuples(index=False)
        return f"rests on {participants} participants and {questions} questions"
    rows = finished[finished["participant"].isin(table["participant"])]
    line = f"rests on {len(rows)} participants and {int(rows['n_questions'].sum())} questions"
    if "lopo_hybrid" in table.columns:   # the selection table: each held-out choice is made on the others
        line += (f"; each held-out choice made on the other {int(table['n_participants'].iloc[0])} participants, "
                 "scored on the held-out participant's questions")
    return line + " (n questions: each participant's)"


def roles_view(per_participant: pd.DataFrame) -> pd.DataFrame:
    """Each participant's best single retriever and selected hybrid: its role, method, the three metrics and its
    questions (the paper's Table 3 rows that matter, per participant)."""
    rows = per_participant[per_participant["role"].isin(list(ROLE_LABELS))]
    view = rows.assign(role=rows["role"].map(ROLE_LABELS))
    return view[["participant", "role", "method", *METRICS, "n_questions"]].reset_index(drop=True)


def methods_view(per_participant: pd.DataFrame, metric: str = "recall@5") -> pd.DataFrame:
    """``metric`` of every method (rows; the selected hybrid as one row, whichever it is) for each participant
    (columns): how the methods rank within each history."""
    frame = per_participant.assign(method=per_participant["method"].where(
        per_participant["role"] != SELECTED_HYBRID, ROLE_LABELS[SELECTED_HYBRID]))
    view = frame.pivot(index="method", columns="participant", values=metric)
    view = view.reindex(index=list(dict.fromkeys(frame["method"])), columns=list(dict.fromkeys(frame["participant"])))
    view.columns.name = None
    return view


def by_type_view(by_type: pd.DataFrame, metric: str = "recall@5") -> pd.DataFrame:
    """``metric`` of each participant's best single and selected hybrid by question type, each cell with the
    questions it averages (``0.667 (3)``); an empty cell: the participant has no question of that type."""
    cells = by_type.assign(cell=[f"{value:.3f} ({n})" for value, n in zip(by_type[metric], by_type["n_questions"])],
                           role=by_type["role"].map(ROLE_LABELS))
    view = cells.pivot(index=["participant", "role"], columns="question_type", values="cell")
    view = view.reindex(index=list(dict.fromkeys(zip(cells["participant"], cells["role"]))),
                        columns=list(dict.fromkeys(cells["question_type"]))).fillna("")
    view.columns.name = None
    return view


def pooled_view(pooled: pd.DataFrame) -> pd.DataFrame:
    """Best single and selected hybrid per metric: the macro (over participants) and micro (over all questions)
    means with their two-level bootstrap intervals."""
    view = pooled.assign(method=pooled["method"].map(ROLE_LABELS))
    return _intervals(view[["method", "metric", "macro", "macro_ci_low", "macro_ci_high", "micro", "micro_ci_low",
                            "micro_ci_high"]])


def differences_view(differences: pd.DataFrame) -> pd.DataFrame:
    """Selected hybrid − best single per metric: macro and micro paired differences with their two-level
    intervals, the random-effects summary with its interval, I² and τ² (between-participant heterogeneity)."""
    view = differences.rename(columns={"re_mean": "random_effects", "re_ci_low": "random_effects_ci_low",
                                       "re_ci_high": "random_effects_ci_high", "i2": "I²", "tau2": "τ²"})
    return _intervals(view[["metric", "macro", "macro_ci_low", "macro_ci_high", "micro", "micro_ci_low",
                            "micro_ci_high", "random_effects", "random_effects_ci_low", "random_effects_ci_high",
                            "I²", "τ²"]])


def selection_view(selection: pd.DataFrame, metric: str = "recall@5") -> pd.DataFrame:
    """Per participant: its own selected hybrid and its ``metric`` on its own questions (in-sample), the hybrid
    chosen on the other participants and its ``metric`` on this participant's questions (held out)."""
    return selection[["participant", "own_hybrid", f"own_{metric}", "lopo_hybrid", f"lopo_{metric}",
                      "n_questions"]].reset_index(drop=True)


def selection_summary(selection: pd.DataFrame) -> pd.DataFrame:
    """Per metric, the mean over participants of the own (in-sample) and the held-out (leave-one-participant-out)
    selection's values and their difference: how much the per-participant choice's numbers owe to choosing on the
    questions they are scored on."""
    rows = [{"metric": metric, "own (in-sample)": selection[f"own_{metric}"].mean(),
             "held out": selection[f"lopo_{metric}"].mean(),
             "own − held out": (selection[f"own_{metric}"] - selection[f"lopo_{metric}"]).mean()} for metric in METRICS]
    return pd.DataFrame(rows)


def _intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """``x_ci_low``/``x_ci_high`` renamed ``x_low``/``x_high``: the display's interval columns of estimate ``x``."""
    return frame.rename(columns=lambda c: c.replace("_ci_low", "_low").replace("_ci_high", "_high"))


# ------------------------------------------------------------------------------------------- the forest plot

def forest_figure(participant_differences: pd.DataFrame, differences: pd.DataFrame, metric: str = "recall@5",
                  confidence: float = 0.95):
    """Each participant's mean paired difference (selected hybrid − best single) in ``metric`` with its normal
    interval (a participant's own questions), and below them the random-effects summary (a diamond spanning its
    interval), the zero line, I² and τ² in the title, and how many participants and questions it rests on.

    Parameters
    ----------
    participant_differences, differences : the cohort's tables of those names.
    metric : one of the paper's metrics at 5.
    confidence : the intervals' level (the cohort's bootstrap confidence), for the axis label.
    """
    from matplotlib.patches import Polygon

    from pmrag.present.figure_style import column_figure

    rows = participant_differences[participant_differences["metric"] == metric].reset_index(drop=True)
    [summary] = differences[differences["metric"] == metric].itertuples(index=False)
    n = len(rows)
    fig, ax = column_figure(1.9 + 0.32 * (n + 2))
    y = np.arange(n)
    ax.errorbar(rows["delta"], y, xerr=[rows["delta"] - rows["ci_low"], rows["ci_high"] - rows["delta"]], fmt="s",
                color="#4C72B0", ecolor="black", capsize=3, markersize=5)
    middle = n + 0.5
    if np.isfinite(summary.re_ci_low):
        ax.add_patch(Polygon([(summary.re_ci_low, middle), (summary.re_mean, middle - 0.3),
                              (summary.re_ci_high, middle), (summary.re_mean, middle + 0.3)], color="#C44E52"))
    ax.plot([summary.re_mean], [middle], marker="D", color="#C44E52", markersize=5)
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    labels = [f"{p} (n={q})" for p, q in zip(rows["participant"], rows["n_questions"])]
    ax.set_yticks([*y, middle], [*labels, "random effects"])
    ax.set_ylim(middle + 0.8, -0.8)
    label = parse_metric(metric).label
    spread = "I² undefined" if not np.isfinite(summary.i2) else f"I² = {summary.i2:.0%}, τ² = {summary.tau2:.4f}"
    ax.set(xlabel=f"Δ{label}, {COMPARISON.replace('_', ' ')} ({confidence:.0%} interval)",
           title=f"{label}: selected hybrid − best single, per participant\n{spread}; "
                 f"{summary.n_participants} participants, {summary.n_questions} questions")
    ax.title.set_fontsize(10)
    fig.tight_layout()
    return fig
