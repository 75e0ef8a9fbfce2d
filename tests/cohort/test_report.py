"""What the pooled-analysis notebook shows, on tables made from known scores: the tables read back with the line
saying what each rests on, the display views (intervals found by the notebook display), and the forest plot, whose
text reads (no overlap, nothing off the canvas) for a small and a large cohort."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from pmrag.cohort import report  # noqa: E402
from pmrag.cohort.tables import cohort_tables  # noqa: E402
from pmrag.core.params import BootstrapSection  # noqa: E402
from pmrag.present.display import interval_triples, show  # noqa: E402
from pmrag.present.figure_style import COLUMN_IN, text_problems  # noqa: E402
from tests.cohort.test_pooled import scores_frame  # noqa: E402

BASE = "run: base\noutputs_dir: out\ncache_dir: cache\ndataset: {synthetic: {enabled: true, n_messages: 1100, n_questions: 6}}\n"


def written_cohort(folder, scores: pd.DataFrame, tables=True):
    """A cohort file whose run folder holds the pooled tables of ``scores`` (as pmrag cohort writes them)."""
    from pmrag.cohort.run import TABLE_PREFIX
    from pmrag.present.artifacts import write_csv
    from pmrag.cohort.selection import leave_one_participant_out

    (folder / "base.yaml").write_text(BASE, encoding="utf-8")
    ids = list(dict.fromkeys(scores["participant"]))
    path = folder / "cohort.yaml"
    path.write_text("run: c\nstudy: base.yaml\nparticipants: [" + ", ".join(f"{{id: {p}}}" for p in ids) + "]\n",
                    encoding="utf-8")
    if tables:
        found = cohort_tables(scores, BootstrapSection(n_resamples=200))
        found["participants"] = pd.DataFrame({
            "participant": ids, "status": "finished", "error": "",
            "n_questions": [scores.loc[scores["participant"] == p, "question_id"].nunique() for p in ids],
            "selected_hybrid": [scores.loc[(scores["participant"] == p) & scores["selected"], "method"].iloc[0] for p in ids],
            "n_participants": 1, "summarizer": "extractive (offline stand-in, not an LLM)"})
        found["selection"] = leave_one_participant_out(sweeps_of(scores), dict(zip(ids, found["participants"]["selected_hybrid"])),
                                                       [("summary_bm25", "summary_vector")])
        target = folder / "out" / "c" / "tables"
        target.mkdir(parents=True)
        for name, frame in found.items():
            write_csv(target / f"{TABLE_PREFIX}{name}.csv", frame)
    return path


def sweeps_of(scores: pd.DataFrame) -> pd.DataFrame:
    """A two-β sweep per participant whose β = 0.50 rows are the selected hybrid's scores."""
    rows = scores[scores["selected"]]
    frames = [rows.assign(beta=beta, **{m: rows[m] * factor for m in ("recall@5", "mrr@5", "ndcg@5")})
              for beta, factor in ((0.5, 1.0), (0.25, 0.5))]
    sweep = pd.concat(frames, ignore_index=True).assign(fusion="minmax", bm25="summary_bm25", vector="summary_vector")
    return sweep[["participant", "fusion", "bm25", "vector", "beta", "question_id", "recall@5", "mrr@5", "ndcg@5"]]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return report.read_tables(written_cohort(tmp_path_factory.mktemp("cohort"), scores_frame()))


def test_a_cohort_not_run_is_one_line_naming_the_folder_and_the_command(tmp_path):
    path = written_cohort(tmp_path, scores_frame(), tables=False)
    with pytest.raises(report.CohortNotRun) as info:
        report.read_tables(path)
    message = str(info.value)
    assert "\n" not in message and "no cohort_participants.csv in" in message and "pmrag cohort cohort.yaml" in message


def test_the_report_computes_from_the_full_precision_tables(tables):
    rounded = pd.read_csv(tables.csv("pooled"))
    assert tables["pooled"]["macro_ci_low"].tolist() != rounded["macro_ci_low"].tolist()   # not the 4-decimal file
    assert np.allclose(tables["pooled"]["macro_ci_low"], rounded["macro_ci_low"], atol=5e-5)


def test_every_table_says_what_it_rests_on(tables):
    assert tables.rests_on("pooled") == "rests on 3 participants and 15 questions"
    assert tables.rests_on("wins") == "rests on 3 participants and 15 questions"
    assert tables.rests_on("per_participant") == "rests on 3 participants and 15 questions (n questions: each participant's)"
    assert tables.rests_on("by_type").startswith("rests on 3 participants and 15 questions")
    assert "made on the other 2 participants" in tables.rests_on("selection")
    assert tables.summarizer() == "extractive (offline stand-in, not an LLM)"
    assert tables.csv("pooled") == tables.cohort.run_dir / "tables" / "cohort_pooled.csv"


def test_a_failed_participant_is_not_counted(tables):
    participants = tables["participants"].copy()
    participants.loc[2, ["status", "n_questions"]] = ["failed", 0]
    per = tables["per_participant"]
    line = report.rests_on(per[per["participant"] != "c"], participants[participants["status"] == "finished"])
    assert line.startswith("rests on 2 participants and 10 questions")


def test_the_views_keep_the_numbers_and_show_intervals_as_intervals(tables):
    per = tables["per_participant"]
    roles = report.roles_view(per)
    assert roles.groupby("participant")["role"].apply(list).to_dict() == {
        p: ["best single", "selected hybrid"] for p in "abc"}
    methods = report.methods_view(per)
    assert list(methods.columns) == ["a", "b", "c"] and methods.index[-1] == "selected hybrid"
    hybrid = per[per["role"] == "selected_hybrid"].set_index("participant")["recall@5"]
    assert methods.loc["selected hybrid"].to_dict() == pytest.approx(hybrid.to_dict(), abs=1e-12)
    assert set(interval_triples(report.pooled_view(tables["pooled"]))) == {"macro", "micro"}
    assert set(interval_triples(report.differences_view(tables["differences"]))) == {"macro", "micro", "random_effects"}
    shown = show(report.pooled_view(tables["pooled"]), fit=False).frame
    assert shown["macro"].str.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]").all()


def test_by_type_cells_carry_the_questions_they_average(tables):
    view = report.by_type_view(tables["by_type"])
    assert list(view.columns) == ["contextual"]
    assert view.loc[("a", "best single"), "contextual"].endswith(" (4)")


def test_the_selection_summary_is_the_mean_own_and_held_out_values(tables):
    selection = tables["selection"]
    summary = report.selection_summary(selection).set_index("metric")
    own, held_out = selection["own_recall@5"], selection["lopo_recall@5"]
    assert summary.loc["recall@5", "own (in-sample)"] == pytest.approx(own.mean(), abs=1e-12)
    assert summary.loc["recall@5", "own − held out"] == pytest.approx((own - held_out).mean(), abs=1e-12)
    assert list(report.selection_view(selection).columns) == ["participant", "own_hybrid", "own_recall@5",
                                                              "lopo_hybrid", "lopo_recall@5", "n_questions"]


def forest_tables(n: int, spread=True):
    rng = np.random.default_rng(n)
    delta = rng.normal(0.1, 0.2 if spread else 0.0, n)
    se = np.full(n, 0.05)
    rows = pd.DataFrame({"participant": [f"conv-{10 + 3 * i}" for i in range(n)], "metric": "recall@5",
                         "delta": delta, "se": se, "ci_low": delta - 1.96 * se, "ci_high": delta + 1.96 * se,
                         "n_questions": rng.integers(5, 200, n)})
    summary = pd.DataFrame([{"metric": "recall@5", "re_mean": 0.1, "re_ci_low": 0.0, "re_ci_high": 0.2,
                             "i2": 0.64 if spread else np.nan, "tau2": 0.03 if spread else np.nan,
                             "n_participants": n, "n_questions": int(rows["n_questions"].sum())}])
    return rows, summary


@pytest.mark.parametrize("n", [1, 3, 12])
def test_the_forest_plot_reads_in_a_notebook_column(n):
    fig = report.forest_figure(*forest_tables(n))
    try:
        assert fig.get_size_inches()[0] <= COLUMN_IN + 1e-9
        assert text_problems(fig) == []
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels[-1] == "random effects" and len(labels) == n + 1 and labels[0].endswith(")")
        assert "I² = 64%" in ax.get_title() and f"{n} participants" in ax.get_title()
    finally:
        plt.close(fig)


def test_the_forest_plot_says_when_heterogeneity_is_undefined():
    rows, summary = forest_tables(3, spread=False)
    summary.loc[0, ["re_ci_low", "re_ci_high"]] = np.nan
    fig = report.forest_figure(rows, summary)
    try:
        assert "I² undefined" in fig.axes[0].get_title() and not fig.axes[0].patches
    finally:
        plt.close(fig)


def test_a_saved_figure_lands_in_the_cohort_run_folder(tmp_path):
    fig = report.forest_figure(*forest_tables(3))
    saved = report.save_figure(tmp_path, report.forest_spec("recall@5"), fig)
    plt.close(fig)
    assert saved == "figures/cohort_forest_recall5.png" and (tmp_path / saved).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.integration
def test_the_demo_cohorts_forest_plots_read_in_a_notebook_column(built_cohort):
    """The declared figures as the notebook draws them from the demo cohort this session built."""
    from tests.cohort.test_cohort_cluster import REPO

    tables = report.read_tables(REPO / "params" / "cohort_demo.yaml")
    for metric in report.METRICS:
        fig = report.forest_figure(tables["participant_differences"], tables["differences"], metric)
        try:
            assert fig.get_size_inches()[0] <= COLUMN_IN + 1e-9 and text_problems(fig) == [], metric
        finally:
            plt.close(fig)
