"""``outputs/<run>/README.md``: one page listing what a study run produced, with its headline numbers.

Written by ``pmrag study`` after the last notebook, from the tables the notebooks saved (their full-precision
files, so a number here is rounded once), so every number on the page is one a notebook computed and a file
holds.  A table that a run did not produce is skipped.
"""

from __future__ import annotations

from pathlib import Path

import re

import pandas as pd

from pmrag.core.names import RetrieverId, parse_method
from pmrag.evaluate.metric_names import RECALL5
from pmrag.present.artifacts import CSV_DECIMALS, CSV_P_DIGITS, FIGURES, FULL_DIR, TABLES, T, TableSpec
from pmrag.present.labels import blind_by_design
from pmrag.present.paper import format_ci
from pmrag.present.stage_graph import GRAPH_FILE


def _read(run_dir: Path, spec: TableSpec, text: bool = False) -> pd.DataFrame | None:
    """A saved table at full precision (its ``tables/full/`` file; the rounded CSV where a table was written
    without one), so that every number on the page is rounded once; ``text`` keeps every cell as written
    (formatted tables: ``0.510`` stays ``0.510``)."""
    path = next((p for p in (run_dir / spec.full_file, run_dir / spec.file) if p.is_file()), None)
    if path is None:
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
        cells, blind = [], []
        for r in seen.itertuples(index=False):
            if not (r.hidden or r.partly):
                continue
            if blind_by_design(r.retriever):
                blind.append(f"`{r.retriever}`")
                continue
            cell = f"`{r.retriever}` {r.share_hidden:.0%} hidden, {r.share_partly:.0%} partly shown"
            other = recall.get(r.retriever)
            if other is not None and other.questions_not_all_shown:
                rest = ("no other question" if pd.isna(other.recall_all_shown)
                        else f"{other.recall_all_shown:.3f} on the rest")
                cell += (f" (Recall@5 {other.recall_not_all_shown:.3f} on the {int(other.questions_not_all_shown):,} "
                         f"questions it does not see in full, {rest})")
            cells.append(cell)
        by_design = (f"ablations that see no evidence by design ({', '.join(blind)}: embedding_text's fixed prefix "
                     "sentence alone)")
        if cells:
            text = "; ".join(cells) + (f"; apart from {by_design}" if blind else "")
        else:
            text = f"none, apart from {by_design}" if blind else "none: every retriever sees all of it"
        lines.append("- Primary evidence a retriever never sees: " + text)
    return lines


def _recall(run_dir: Path) -> pd.DataFrame | None:
    cis = _read(run_dir, T.bootstrap_cis)
    return None if cis is None else cis[cis["metric"] == str(RECALL5)].reset_index(drop=True)


def _best_single(recall: pd.DataFrame) -> pd.Series | None:
    single = recall[[isinstance(parse_method(r), RetrieverId) for r in recall["retriever"]]]
    return None if single.empty else single.loc[single["mean"].idxmax()]


def hybrid_against_single(run_dir: Path) -> dict | None:
    """The selected hybrid (Table 5's first method) against the best single retriever by Recall@5: their rows of
    ``bootstrap_cis`` and, from notebook 09's ``comparisons_adjusted``, the paired difference hybrid − single with
    its interval (None where that table or row is missing).  None without the two tables it needs."""
    recall, differences = _recall(run_dir), _read(run_dir, T.table5_differences)
    if recall is None or differences is None or differences.empty:
        return None
    hybrid = str(differences["method_a"].iloc[0])
    single, rows = _best_single(recall), recall[recall["retriever"] == hybrid]
    if single is None or rows.empty:
        return None
    paired = None
    comparisons = _read(run_dir, T.comparisons_adjusted)
    if comparisons is not None:
        for row in comparisons[comparisons["metric"] == str(RECALL5)].itertuples(index=False):
            if {str(row.method), str(row.reference)} == {hybrid, str(single["retriever"])}:
                sign = 1 if str(row.method) == hybrid else -1     # hybrid − single, whichever way it was tested
                low, high = sorted((sign * row.ci_low, sign * row.ci_high))
                paired = (sign * row.delta, low, high)
    return {"hybrid": rows.iloc[0], "single": single, "paired": paired}


def _verdict(match: dict) -> str:
    """Whether the selected hybrid beats the best single retriever, in the words its paired interval allows."""
    hybrid, single, paired = match["hybrid"], match["single"], match["paired"]
    if paired is None:
        return "beats" if hybrid["mean"] > single["mean"] else "does not beat"
    delta, low, high = paired
    if low > 0:
        return "beats"
    return "does not beat" if delta <= 0 else "scores above, without a paired interval excluding 0,"


def finding_title(run_dir) -> str | None:
    """A title that says what the run found: the best single retriever by Recall@5 and whether the selected hybrid
    beats it (:func:`hybrid_against_single`); None when the tables are not there."""
    match = hybrid_against_single(Path(run_dir))
    if match is None:
        return None
    single, hybrid = match["single"], match["hybrid"]
    return (f"The selected hybrid `{hybrid['retriever']}` ({hybrid['mean']:.3f}) {_verdict(match)} the best single "
            f"retriever `{single['retriever']}` ({single['mean']:.3f}) in Recall@5")


def findings(run_dir) -> list[str]:
    """The run's findings in plain words, first in its README: the best method by Recall@5, whether the selected
    hybrid beats the best single retriever (with their paired interval), and the hybrid's Recall@5 once its
    selection on the same questions is accounted for (notebook 09)."""
    run_dir = Path(run_dir)
    recall = _recall(run_dir)
    if recall is None or recall.empty:
        return []
    top = recall.loc[recall["mean"].idxmax()]
    lines = [f"- Best method by Recall@5: `{top['retriever']}`, "
             f"{format_ci(top['mean'], top['ci_low'], top['ci_high'])} "
             "(percentile bootstrap interval at the params' bootstrap.confidence)"]
    match = hybrid_against_single(run_dir)
    if match is not None:
        single, hybrid = match["single"], match["hybrid"]
        line = (f"- The selected hybrid `{hybrid['retriever']}` "
                f"({format_ci(hybrid['mean'], hybrid['ci_low'], hybrid['ci_high'])}) {_verdict(match)} the best "
                f"single retriever `{single['retriever']}` ({format_ci(single['mean'], single['ci_low'], single['ci_high'])})")
        if match["paired"] is not None:
            delta, low, high = match["paired"]
            line += f": paired difference {delta:+.3f} [{low:.3f}, {high:.3f}] (notebook 09)"
        lines.append(line)
    selection = _read(run_dir, T.selection_summary)
    if selection is not None:
        paper = selection[selection["procedure"].str.startswith("pairing and β (the paper")
                          & (selection["metric"] == str(RECALL5))]
        if len(paper):
            row = paper.iloc[0]
            lines.append(
                f"- Chosen on the same questions it is scored on, the hybrid's Recall@5 of {row['in_sample']:.3f} is "
                f"optimistic by about {row['optimism']:.3f}: with that removed it is "
                f"{format_ci(row['bias_corrected'], row['bias_corrected_low'], row['bias_corrected_high'])}; made on other "
                f"questions than those it is scored on, the same choice scores {row['out_of_fold']:.3f} (out of fold)")
    return lines


# a name with ``@`` and a dotted number (``summary_vector@0.50``) that Markdown viewers turn into a mailto: link
_AUTOLINKED = re.compile(r"[\w:+\-.]*[\w]@\d+\.\d+")


def code_names(line: str) -> str:
    """``line`` with every name a Markdown viewer would autolink (:data:`_AUTOLINKED`) in backticks; text already in
    backticks is left alone."""
    parts = line.split("`")
    for i in range(0, len(parts), 2):          # the even parts are outside code spans
        parts[i] = _AUTOLINKED.sub(lambda m: f"`{m.group(0)}`", parts[i])
    return "`".join(parts)


CSV_NOTE = (f"Floats rounded to {CSV_DECIMALS} decimals, p-values to {CSV_P_DIGITS} significant digits; "
            f"`tables/{FULL_DIR}/` and `public/{FULL_DIR}/` hold the same files at full precision.")

PRIVACY_NOTE = ("Everything in this folder except `public/` holds private chat data (messages, names, questions, "
                "the store, the executed notebooks); share only `public/`.")


def write_run_readme(run_dir, title: str, notebooks: list[Path] | None = None,
                     environment: list[str] | None = None) -> Path:
    """Write ``run_dir/README.md``: a title saying what was found (:func:`finding_title`; ``title``, the run's,
    below it), the findings (:func:`findings`), headline numbers, provenance, then every notebook, declared table
    and figure (with its title), public file and TREC run.  Names that Markdown viewers would autolink are in
    backticks (:func:`code_names`)."""
    run_dir = Path(run_dir)
    found = finding_title(run_dir)
    heading = [f"# {found}", "", f"*{title}*"] if found else [f"# {title}"]
    sections = [*heading, "", "Produced by `pmrag study`. Every number below comes from a table in `tables/`.", "",
                PRIVACY_NOTE, ""]
    first = findings(run_dir)
    if first:
        sections += ["## Findings", "", *map(code_names, first), ""]
    numbers = headline(run_dir)
    if numbers:
        sections += ["## Headline numbers", "", *map(code_names, numbers), ""]
    if environment:
        sections += ["## Provenance", "", *environment, ""]
    notebooks = sorted((run_dir / "notebooks").glob("*.ipynb")) if notebooks is None else notebooks
    listing = [
        ("Executed notebooks", [(p.relative_to(run_dir).as_posix(), "") for p in notebooks]),
        ("Tables (CSV)", [(t.file, t.title) for t in TABLES.values() if (run_dir / t.file).is_file()]),
        ("Figures (PNG)", [(f.file, f.title) for f in FIGURES.values() if (run_dir / f.file).is_file()]),
        ("Public export (aggregates only, §9.2)", [(p.relative_to(run_dir).as_posix(), "")
                                                   for p in sorted((run_dir / "public").glob("*")) if p.is_file()]),
        ("TREC runs and qrels", [(p.relative_to(run_dir).as_posix(), "")
                                 for p in sorted((run_dir / "runs").glob("*.trec")) + sorted(run_dir.glob("*.trec"))]),
        ("Stage graph", [(f"{GRAPH_FILE}{suffix}", "every computation stage and what it reads (`pmrag graph`)")
                         for suffix in (".svg", ".png") if (run_dir / f"{GRAPH_FILE}{suffix}").is_file()]),
    ]
    for heading, entries in listing:
        if entries:
            sections += [f"## {heading}", ""]
            if heading == "Tables (CSV)":
                sections += [CSV_NOTE, ""]
            sections += [f"- [`{path}`]({path})" + (f": {title}" if title else "") for path, title in entries]
            sections.append("")
    target = run_dir / "README.md"
    target.write_text("\n".join(sections), encoding="utf-8")
    return target
