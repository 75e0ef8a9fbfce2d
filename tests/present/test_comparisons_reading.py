"""Notebook 09's words on the comparisons (pmrag.present.statistics) and the run README's lines (pmrag.present.report):
the counts they state are counted again here from the table, and "noise" is never said."""

import re

import numpy as np
import pandas as pd

from pmrag.evaluate.multiplicity import family_table
from pmrag.present import report
from pmrag.present.artifacts import T
from pmrag.present.statistics import aliases_table, comparisons_reading


def per_question(n=80, seed=2):
    rng = np.random.default_rng(seed)
    base = rng.choice([0.0, 0.5, 1.0], size=n)
    frames = []
    for i, name in enumerate(["best", "ref", "diag", "m3", "m4", "m5", "twin", "alias"]):
        values = np.where(rng.random(n) < 0.12 * i, rng.choice([0.0, 1.0], size=n), base)
        frames.append(pd.DataFrame({"retriever": name, "question_id": [f"q{j:02d}" for j in range(n)],
                                    "recall@5": values}))
    rows = pd.concat(frames, ignore_index=True)
    for copy, of in (("twin", "m3"), ("alias", "m4")):
        rows.loc[rows["retriever"] == copy, "recall@5"] = rows.loc[rows["retriever"] == of, "recall@5"].to_numpy()
    return rows


def table():
    aliases = pd.DataFrame({"method": ["m4", "alias"], "representative": ["m4", "m4"]})
    return family_table(per_question(), "best", declared=[("best", "ref"), ("best", "diag")], aliases=aliases,
                        selected_in_sample={"best"}, B=1000, seed=3)


def test_the_reading_states_the_tables_counts():
    comparisons = table()
    words = comparisons_reading(comparisons)
    assert words.startswith(f"{len(comparisons)} comparisons in Recall@5, after merging 1 alias")
    for family in ("declared", "exploratory"):
        rows = comparisons[comparisons["family"] == family]
        stated = re.search(rf"{family.capitalize()} family \((\d+), [^)]*\): (\d+) of \d+ unadjusted intervals exclude 0; "
                           r"Holm rejects (\d+), BH (\d+)", words)
        assert stated, words
        assert [int(g) for g in stated.groups()] == [len(rows), int(rows["ci_excludes_zero"].sum()),
                                                     int(rows["reject_holm"].sum()), int(rows["reject_bh"].sum())]
    exploratory = comparisons[comparisons["family"] == "exploratory"]
    twin = exploratory[exploratory["same_differences_as"] != ""]
    assert list(twin["method"]) == ["twin"]
    distinct = int((exploratory["reject_holm"] & (exploratory["same_differences_as"] == "")).sum())
    assert ("1 row repeats an earlier row's per-question differences exactly" in words
            and f"so {distinct} of the {int(exploratory['reject_holm'].sum())} Holm rejections" in words)
    assert f"{len(comparisons)} of {len(comparisons)} involve a method chosen on these questions" in words
    assert "not confirmatory" in words and "noise floor" in words and "are noise" not in words
    low, high = comparisons["detectable_difference"].min(), comparisons["detectable_difference"].max()
    assert f"ranges {low:.3f}–{high:.3f}" in words


def test_aliases_table():
    aliases = pd.DataFrame({"method": ["a", "b", "c", "d"], "representative": ["a", "a", "c", "a"]})
    assert aliases_table(aliases, 20).to_dict("records") == [{"representative": "a", "aliases": "b, d", "depth": 20}]


def test_run_readme_lines_read_the_saved_table(tmp_path):
    (tmp_path / "tables").mkdir()
    comparisons = table()
    comparisons.to_csv(tmp_path / T.comparisons_adjusted.file, index=False)
    differences = pd.DataFrame({"comparison": ["Best − E-BM25", "Best − S-hybrid"], "method_a": ["best", "best"],
                                "method_b": ["ref", "diag"]})
    lines = report.comparison_lines(tmp_path, differences)
    assert lines[0] == f"- Comparisons (notebook 09): {comparisons_reading(pd.read_csv(tmp_path / T.comparisons_adjusted.file))}"
    assert lines[0] == f"- Comparisons (notebook 09): {comparisons_reading(comparisons)}"   # the CSV reads back the same
    row = comparisons.iloc[0]
    assert lines[1] == (f"- Power of Best − E-BM25 with this study's questions and this pair's spread: a true ΔRecall@5 "
                        f"of {row['detectable_difference']:.3f} is detected with 80 % power at α = 0.05; an observed "
                        f"|Δ| above {row['significance_threshold']:.3f} is significant (paired t-test)")
    assert len(lines) == 3 and lines[2].startswith("- Power of Best − S-hybrid")
    assert report.comparison_lines(tmp_path / "elsewhere", differences) == []
