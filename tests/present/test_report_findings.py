"""The run README leads with findings: its title, the findings lines, names kept from autolinking, ablations apart."""

import pandas as pd

from pmrag.present import report
from pmrag.present.artifacts import T

HYBRID = "hybrid:raw_text_bm25+summary_vector@0.60"


def write(run_dir, spec, frame):
    path = run_dir / spec.file
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def run_dir(tmp_path, comparisons: bool = True, hybrid_mean: float = 0.653):
    write(tmp_path, T.bootstrap_cis, pd.DataFrame({
        "retriever": ["raw_text_multivec_softmax", HYBRID, "summary_bm25"], "metric": ["recall@5"] * 3,
        "mean": [0.662, hybrid_mean, 0.4], "ci_low": [0.573, 0.567, 0.3], "ci_high": [0.745, 0.743, 0.5]}))
    write(tmp_path, T.table5_differences, pd.DataFrame({
        "comparison": ["Best − E-BM25"], "method_a": [HYBRID], "method_b": ["embedding_text_bm25"], "metric": ["recall@5"],
        "delta": [0.233], "ci_low": [0.147], "ci_high": [0.323], "excludes_zero": [True], "interpretation": ["x"]}))
    if comparisons:   # tested the other way round: single − hybrid
        write(tmp_path, T.comparisons_adjusted, pd.DataFrame({
            "family": ["exploratory"], "method": ["raw_text_multivec_softmax"], "reference": [HYBRID],
            "metric": ["recall@5"], "delta": [0.009], "ci_low": [-0.072], "ci_high": [0.089]}))
    return tmp_path


def test_the_title_says_whether_the_selected_hybrid_beats_the_best_single_retriever(tmp_path):
    assert report.finding_title(run_dir(tmp_path)) == (
        f"The selected hybrid `{HYBRID}` (0.653) does not beat the best single retriever `raw_text_multivec_softmax` "
        "(0.662) in Recall@5")
    assert report.finding_title(tmp_path / "empty") is None


def test_the_findings_give_the_best_method_and_the_paired_interval_oriented_hybrid_minus_single(tmp_path):
    lines = report.findings(run_dir(tmp_path))
    assert lines[0] == ("- Best method by Recall@5: `raw_text_multivec_softmax`, 0.662 [0.573, 0.745] "
                        "(percentile bootstrap interval at the params' bootstrap.confidence)")
    assert lines[1].endswith(": paired difference -0.009 [-0.089, 0.072] (notebook 09)")
    assert "does not beat the best single retriever" in lines[1]


def test_a_hybrid_above_the_single_retriever_beats_it_only_when_its_paired_interval_excludes_zero(tmp_path):
    folder = run_dir(tmp_path, hybrid_mean=0.7)
    frame = pd.read_csv(folder / T.comparisons_adjusted.file).assign(delta=-0.038, ci_low=-0.05, ci_high=0.02)
    write(folder, T.comparisons_adjusted, frame)
    assert "scores above, without a paired interval excluding 0, the best" in report.findings(folder)[1]
    write(folder, T.comparisons_adjusted, frame.assign(ci_low=-0.06, ci_high=-0.01))
    assert f"`{HYBRID}` (0.700 [0.567, 0.743]) beats the best" in report.findings(folder)[1]


def test_without_notebook_09s_comparisons_the_verdict_has_no_interval(tmp_path):
    [_, line] = report.findings(run_dir(tmp_path, comparisons=False))
    assert "does not beat" in line and "paired" not in line


def test_names_that_markdown_would_autolink_go_in_backticks_and_code_spans_are_left_alone():
    line = "- Best − diagnostic hybrid (summary_bm25+summary_vector@0.50): `hybrid:a+b@0.60` at Recall@5 0.653."
    assert report.code_names(line) == ("- Best − diagnostic hybrid (`summary_bm25+summary_vector@0.50`): "
                                       "`hybrid:a+b@0.60` at Recall@5 0.653.")


def test_the_readme_leads_with_findings_under_the_finding_title(tmp_path):
    text = report.write_run_readme(run_dir(tmp_path, comparisons=False), "Study run `x`").read_text(encoding="utf-8")
    assert text.startswith(f"# The selected hybrid `{HYBRID}`") and "*Study run `x`*" in text
    assert text.index("## Findings") < text.index("## Headline numbers")


def test_ablations_blind_by_design_are_not_counted_as_losses(tmp_path):
    write(tmp_path, T.evidence_visibility, pd.DataFrame({
        "retriever": ["prefix_bm25", "raw_text_vector"], "hidden": [5, 0], "partly": [0, 0],
        "share_hidden": [1.0, 0.0], "share_partly": [0.0, 0.0]}))
    [line] = report.losses(tmp_path)
    assert line == ("- Primary evidence a retriever never sees: none, apart from ablations that see no evidence by "
                    "design (`prefix_bm25`: embedding_text's fixed prefix sentence alone)")


def test_the_readme_rounds_the_full_precision_numbers_once(tmp_path):
    """0.57349 is 0.5735 in the rounded CSV, which a second rounding would print 0.574; the README reads the
    full-precision file and prints 0.573."""
    from pmrag.present.artifacts import write_csv

    full = {"mean": [0.66249, 0.65312, 0.4], "ci_low": [0.57251, 0.57349, 0.3], "ci_high": [0.74501, 0.74549, 0.5]}
    write_csv(tmp_path / T.bootstrap_cis.file, pd.DataFrame({
        "retriever": ["raw_text_multivec_softmax", HYBRID, "summary_bm25"], "metric": ["recall@5"] * 3, **full}))
    write_csv(tmp_path / T.table5_differences.file, pd.DataFrame({
        "comparison": ["Best − E-BM25"], "method_a": [HYBRID], "method_b": ["embedding_text_bm25"], "metric": ["recall@5"],
        "delta": [0.23349], "ci_low": [0.14651], "ci_high": [0.32349], "excludes_zero": [True], "interpretation": ["x"]}))
    rounded = pd.read_csv(tmp_path / T.bootstrap_cis.file)
    assert [f"{v:.3f}" for v in rounded.loc[1, ["ci_low", "ci_high"]]] == ["0.574", "0.746"]   # rounded twice: shifted
    text = "\n".join(report.findings(tmp_path) + report.headline(tmp_path))
    assert f"`{HYBRID}` (0.653 [0.573, 0.745])" in text and "0.662 [0.573, 0.745]" in text
    assert "ΔRecall@5 +0.233 [0.147, 0.323]" in text
    assert not any(shifted in text for shifted in ("0.574", "0.746", "0.234", "0.146", "0.324"))
    readme = report.write_run_readme(tmp_path, "demo").read_text(encoding="utf-8")
    assert "(0.653)" in readme and report.CSV_NOTE in readme and "](tables/bootstrap_cis.csv)" in readme


def test_the_run_readme_reads_the_statistics_without_drawing_anything():
    """The README's readings come from pmrag.present.statistics, whose figure functions import matplotlib and the
    figure style only when called: writing the README imports neither seaborn nor scipy.stats (1.9 s)."""
    import subprocess
    import sys

    code = ("import sys\nimport pmrag.present.report\nfrom pmrag.present.statistics import comparisons_reading\n"
            "print(*(name in sys.modules for name in ('matplotlib', 'seaborn', 'scipy.stats')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["False", "False", "False"], run.stderr
