"""``outputs/<run>/README.md``: one page listing what a study run produced, with its headline numbers.

Written by ``pmrag study`` after the last notebook, from the CSV tables the notebooks saved, so every number
on the page is one a notebook computed and a file holds.  A table that a run did not produce is skipped.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pmrag.core.names import RetrieverId, parse_method
from pmrag.evaluate.metric_names import RECALL5
from pmrag.present.artifacts import FIGURES, TABLES, T, TableSpec
from pmrag.present.paper import format_ci
from pmrag.present.stage_graph import GRAPH_FILE


def _read(run_dir: Path, spec: TableSpec, text: bool = False) -> pd.DataFrame | None:
    """A saved table; ``text`` keeps every cell as written (formatted tables: ``0.510`` stays ``0.510``)."""
    path = run_dir / spec.file
    if not path.is_file():
        return None
    return pd.read_csv(path, dtype=str, keep_default_na=False) if text else pd.read_csv(path)


def headline(run_dir) -> list[str]:
    """Markdown bullet lines with the run's headline numbers (dataset, best retrievers, Table 5, failures)."""
    run_dir = Path(run_dir)
    lines = []
    dataset = _read(run_dir, T.table1_dataset, text=True)
    if dataset is not None:
        values = {item.strip(): (f"{int(v):,}" if v.isdigit() else v) for item, v in zip(dataset["Item"], dataset["Value"])}
        parts = [f"{values[k]} {k.lower()}" for k in ("Messages", "Sources", "Chunks", "Evaluation questions") if k in values]
        lines.append("- Dataset: " + ", ".join(parts))
    lines += losses(run_dir)
    cis = _read(run_dir, T.bootstrap_cis)
    if cis is not None:
        recall = cis[cis["metric"] == str(RECALL5)]
        single = recall[[isinstance(parse_method(r), RetrieverId) for r in recall["retriever"]]]
        if len(single):
            top = single.loc[single["mean"].idxmax()]
            lines.append(f"- Best single retriever by Recall@5: `{top['retriever']}` {format_ci(top['mean'], top['ci_low'], top['ci_high'])}")
    differences = _read(run_dir, T.table5_differences)
    if differences is not None and cis is not None:
        best = differences["method_a"].iloc[0]
        row = cis[(cis["retriever"] == best) & (cis["metric"] == str(RECALL5))]
        if len(row):
            row = row.iloc[0]
            lines.append(f"- Selected best hybrid: `{best}`, Recall@5 {format_ci(row['mean'], row['ci_low'], row['ci_high'])} "
                         "(selected on the same questions; the interval is conditional on that selection)")
        lines += selection_aware(run_dir)
        lines += comparison_lines(run_dir, differences)
        for r in differences.itertuples(index=False):
            lines.append(f"- {r.comparison}: ΔRecall@5 {r.delta:+.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]: {r.interpretation}")
    by_type = _read(run_dir, T.table6_best_hybrid_by_type, text=True)
    if by_type is not None:
        cells = [f"{t} {m} {c}" for t, m, c in zip(by_type["Question type"], by_type["Recall@5"], by_type["95% CI"])]
        lines.append("- Best hybrid Recall@5 by question type: " + "; ".join(cells))
    failures = _read(run_dir, T.table7_top5_failures, text=True)
    if failures is not None:
        overall = failures[failures["Question type"] == "Overall"].iloc[0]
        failed = [c for c in failures.columns if c.startswith("Top-")][0]
        worst = failures[failures["Question type"] != "Overall"]
        lines.append(f"- {failed} of the best hybrid: {overall[failed]} of {overall['Questions']} ({overall['Failure rate']}); by type: "
                     + ", ".join(f"{t} {f}/{n}" for t, f, n in zip(worst["Question type"], worst[failed], worst["Questions"])))
    lines += evidence_levels(run_dir)
    return lines


def evidence_levels(run_dir: Path) -> list[str]:
    """The evidence-counting headline line: the selected hybrid's Recall@5 by chunk, by evidence group and by message,
    each with what it counts (notebook 09's ``evidence_groups`` table; the hybrid is Table 5's first method)."""
    from pmrag.present.statistics import evidence_reading

    table, differences = _read(run_dir, T.evidence_groups), _read(run_dir, T.table5_differences)
    if table is None or differences is None or differences.empty:
        return []
    selected = differences["method_a"].iloc[0]
    if selected not in set(table["retriever"]):
        return []
    return [f"- Evidence counted three ways (notebook 09): {evidence_reading(table, selected)}"]


def selection_aware(run_dir: Path) -> list[str]:
    """The selection-aware headline line (notebook 09's ``selection_summary``, and ``selection_coverage`` when
    saved): the in-sample best less the selection's bootstrap optimism with its interval and, when measured, how
    often such intervals cover in studies drawn from this one; the same selection scored out of fold (mean and
    range over the partition seeds); the out-of-bag bootstrap as a conservative bound."""
    selection = _read(run_dir, T.selection_summary)
    if selection is None:
        return []
    paper = selection[selection["procedure"].str.startswith("pairing and β (the paper") & (selection["metric"] == str(RECALL5))]
    if paper.empty:
        return []
    row = paper.iloc[0]
    coverage = _read(run_dir, T.selection_coverage)
    corrected = pd.DataFrame() if coverage is None else coverage[(coverage["metric"] == str(RECALL5))
                                                               & (coverage["interval"] == "bias_corrected")]
    covered = ("" if corrected.empty else
               f", covering the selected configuration's true value in {corrected['coverage'].iloc[0]:.0%} of "
               f"{int(corrected['datasets'].iloc[0])} studies drawn from this one")
    seeds = ("" if row["out_of_fold_min"] == row["out_of_fold_max"] else
             f", {row['out_of_fold_min']:.3f}–{row['out_of_fold_max']:.3f} over partition seeds")
    bootstrap = format_ci(row["bootstrap_estimate"], row["bootstrap_low"], row["bootstrap_high"])
    bound = (f"; out-of-bag bootstrap {bootstrap} (a conservative bound)"
             if str(row["bootstrap_kind"]).startswith("out-of-bag") else "")
    return [f"- Selection-aware: the in-sample best less the selection's optimism "
            f"{format_ci(row['bias_corrected'], row['bias_corrected_low'], row['bias_corrected_high'])} "
            f"(the conditional interval shifted by the bootstrap optimism {row['optimism']:+.3f}{covered}); the same "
            f"selection scored out of fold {row['out_of_fold']:.3f}{seeds} (winner's curse {row['winners_curse']:+.3f})"
            f"{bound}; notebook 09"]


def comparison_lines(run_dir: Path, differences: pd.DataFrame) -> list[str]:
    """Notebook 09's comparisons (its ``comparisons_adjusted`` table): the families' decisions in the words of
    :func:`pmrag.present.statistics.comparisons_reading`, then the power of each Table 5 comparison (``differences``)
    it holds: the true difference detected with the set power and the smallest significant observed difference."""
    from pmrag.present.statistics import comparisons_reading

    table = _read(run_dir, T.comparisons_adjusted)
    if table is None or table.empty:
        return []
    lines = [f"- Comparisons (notebook 09): {comparisons_reading(table)}"]
    pairs = {frozenset((str(m), str(r))): row for m, r, row in zip(table["method"], table["reference"],
                                                                   table.itertuples(index=False))}
    for comparison, a, b in zip(differences["comparison"], differences["method_a"], differences["method_b"]):
        row = pairs.get(frozenset((str(a), str(b))))
        if row is None or pd.isna(row.detectable_difference):
            continue
        lines.append(f"- Power of {comparison} with this study's questions and this pair's spread: a true ΔRecall@5 of "
                     f"{row.detectable_difference:.3f} is detected with {row.power * 100:g} % power at α = {row.alpha:g}; "
                     f"an observed |Δ| above {row.significance_threshold:.3f} is significant (paired t-test)")
    return lines


def losses(run_dir: Path) -> list[str]:
    """Headline lines on what the study loses: messages in no chunk, questions not evaluated (by reason), and
    the share of primary evidence each retriever never sees, with its Recall@5 on those questions."""
    lines = []
    coverage = _read(run_dir, T.messages_in_no_chunk)
    if coverage is not None:
        left, total = int(coverage["in_no_chunk"].sum()), int(coverage["messages"].sum())
        lines.append(f"- Messages in no chunk: {left:,} of {total:,}" + (" (no retriever can find them)" if left else ""))
    dropped = _read(run_dir, T.questions_dropped)
    if dropped is not None:
        lost = dropped[dropped["stage"] != "evaluated"]
        read = int(dropped["questions"].sum())
        lines.append(f"- Questions not evaluated: {int(lost['questions'].sum()):,} of {read:,}"
                     + ("".join(f"; {int(r.questions):,} {r.stage}: {r.reason}" for r in lost.itertuples(index=False))))
    seen = _read(run_dir, T.evidence_visibility)
    split = _read(run_dir, T.recall_by_evidence_visibility)
    if seen is not None:
        recall = {} if split is None else {r.retriever: r for r in split.itertuples(index=False)}
        cells = []
        for r in seen.itertuples(index=False):
            if not (r.hidden or r.partly):
                continue
            cell = f"`{r.retriever}` {r.share_hidden:.0%} hidden, {r.share_partly:.0%} partly shown"
            other = recall.get(r.retriever)
            if other is not None and other.questions_not_all_shown:
                rest = ("no other question" if pd.isna(other.recall_all_shown)
                        else f"{other.recall_all_shown:.3f} on the rest")
                cell += (f" (Recall@5 {other.recall_not_all_shown:.3f} on the {int(other.questions_not_all_shown):,} "
                         f"questions it does not see in full, {rest})")
            cells.append(cell)
        lines.append("- Primary evidence a retriever never sees: " + ("; ".join(cells) if cells else
                                                                       "none: every retriever sees all of it"))
    return lines


PRIVACY_NOTE = ("Everything in this folder except `public/` holds private chat data (messages, names, questions, "
                "the store, the executed notebooks); share only `public/`.")


def write_run_readme(run_dir, title: str, notebooks: list[Path] | None = None,
                     environment: list[str] | None = None) -> Path:
    """Write ``run_dir/README.md``: headline numbers, provenance, then every notebook, declared table and figure
    (with its title), public file and TREC run."""
    run_dir = Path(run_dir)
    sections = [f"# {title}", "", "Produced by `pmrag study`. Every number below comes from a table in `tables/`.", "",
                PRIVACY_NOTE, ""]
    numbers = headline(run_dir)
    if numbers:
        sections += ["## Headline numbers", "", *numbers, ""]
    if environment:
        sections += ["## Provenance", "", *environment, ""]
    notebooks = sorted((run_dir / "notebooks").glob("*.ipynb")) if notebooks is None else notebooks
    listing = [
        ("Executed notebooks", [(p.relative_to(run_dir).as_posix(), "") for p in notebooks]),
        ("Tables (CSV)", [(t.file, t.title) for t in TABLES.values() if (run_dir / t.file).is_file()]),
        ("Figures (PNG)", [(f.file, f.title) for f in FIGURES.values() if (run_dir / f.file).is_file()]),
        ("Public export (aggregates only, §9.2)", [(p.relative_to(run_dir).as_posix(), "")
                                                   for p in sorted((run_dir / "public").glob("*"))]),
        ("TREC runs and qrels", [(p.relative_to(run_dir).as_posix(), "")
                                 for p in sorted((run_dir / "runs").glob("*.trec")) + sorted(run_dir.glob("*.trec"))]),
        ("Stage graph", [(f"{GRAPH_FILE}{suffix}", "every computation stage and what it reads (`pmrag graph`)")
                         for suffix in (".svg", ".png") if (run_dir / f"{GRAPH_FILE}{suffix}").is_file()]),
    ]
    for heading, entries in listing:
        if entries:
            sections += [f"## {heading}", ""]
            sections += [f"- [`{path}`]({path})" + (f": {title}" if title else "") for path, title in entries]
            sections.append("")
    target = run_dir / "README.md"
    target.write_text("\n".join(sections), encoding="utf-8")
    return target
