"""Notebook 04's look beyond the paper's six pairings: the paper's selection, a broader sweep's
(``hybrid.pairings: auto`` or ``all``) and each fusion of three or more retrievers (``hybrid.multi``), side by side
out of fold with the configurations each chose among, and the plain reading of what ran and what did not.

Inputs: the statistics stage's :class:`~pmrag.evaluate.statistics.SelectionStatistics` and the multifusion stage's
:class:`~pmrag.evaluate.multisweep.MultiFusion` results."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pmrag.evaluate.metric_names import RECALL5

PAPER_ROW = "the paper's selection: pairing and β"
BROADER_ROW = "every swept pairing: pairing and β"
COLUMNS = ("procedure", "fused", "configurations", "weights", "recall@5 in sample", "recall@5 out of fold",
           "winner's curse")


def fusion_overview(statistics, multi: Sequence, paper_pairings: int) -> pd.DataFrame:
    """One row per selection: the paper's (among its ``paper_pairings`` pairings), the broader sweep's (when there
    is one) and each ``hybrid.multi`` result, with what it fused, how many configurations it chose among, the
    weights chosen on all questions (multi only), Recall@5 in sample and out of fold and their gap (the winner's
    curse)."""
    rows = []
    papers, broader = statistics.configurations
    for label, held_out, fused, count in ((PAPER_ROW, statistics.held_out, f"{paper_pairings} pairings", papers),
                                          (BROADER_ROW, getattr(statistics, "held_out_broader", None),
                                           f"{getattr(statistics, 'broader_pairings', 0)} pairings", broader)):
        if held_out is None:
            continue
        row = held_out.summary.set_index("metric").loc[str(RECALL5)]
        rows.append((label, fused, count, "", row["in_sample"], row["out_of_fold"], row["gap"]))
    for result in multi:
        row = result.summary.set_index("metric").loc[str(RECALL5)]
        rows.append((f"{result.fusion} fusion, weights: {result.search}", " + ".join(result.retrievers),
                     result.configurations, "/".join(f"{w:.3g}" for w in result.weights), row["in_sample"],
                     row["out_of_fold"], row["gap"]))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def beyond_reading(overview: pd.DataFrame, swept_pairings: int, auto_pairings: int, n_betas: int,
                   multi_lists: int) -> str:
    """What ran beyond the paper's pairings and what it found, in sentences computed from :func:`fusion_overview`:
    ``swept_pairings`` the pairings swept, ``auto_pairings`` how many ``hybrid.pairings: auto`` would sweep,
    ``n_betas`` the β grid's size, ``multi_lists`` the lists of ``hybrid.multi``."""
    rows = overview.set_index("procedure")
    paper = rows.loc[PAPER_ROW] if PAPER_ROW in rows.index else None
    sentences = []
    if BROADER_ROW in rows.index:
        broader = rows.loc[BROADER_ROW]
        more = broader["winner's curse"] - paper["winner's curse"]
        sentences.append(
            f"The sweep holds {swept_pairings} pairings; the paper's selection still chooses among its own "
            f"({paper['configurations']} configurations, {paper['recall@5 out of fold']:.3f} out of fold), and the "
            f"selection among all {broader['configurations']} reaches {broader['recall@5 out of fold']:.3f} out of "
            f"fold ({broader['recall@5 out of fold'] - paper['recall@5 out of fold']:+.3f}) against "
            f"{broader['recall@5 in sample']:.3f} in sample: its winner's curse is "
            f"{'larger' if more > 0 else 'smaller' if more < 0 else 'no larger'} by {abs(more):.3f}.")
    elif auto_pairings:
        sentences.append(
            f"hybrid.pairings lists {swept_pairings} pairings and the paper's selection chooses among all of them: "
            f"no broader sweep ran. hybrid.pairings: auto would sweep every lexical × dense pair of "
            f"retrieval.retrievers, {auto_pairings} pairings ({auto_pairings * n_betas} configurations per fusion), "
            "and report their selection out of fold beside the paper's.")
    else:
        sentences.append(
            f"hybrid.pairings lists {swept_pairings} pairings and the paper's selection chooses among all of them: "
            "no broader sweep ran, and retrieval.retrievers holds no lexical × dense pair for hybrid.pairings: auto "
            "to add.")
    multi = overview[overview["fused"].str.contains(" + ", regex=False)]
    if multi.empty:
        sentences.append(
            "hybrid.multi lists no fusion of three or more retrievers, so none ran; a list of three or more names "
            "(e.g. hybrid.multi: [[a_bm25, b_bm25, c_vector]]) weights each retriever's list by min-max fusion and "
            "by RRF, the weights chosen on the training folds only and scored on the held-out ones.")
    else:
        best = multi.loc[multi["recall@5 out of fold"].idxmax()]
        against = (f", {best['recall@5 out of fold'] - paper['recall@5 out of fold']:+.3f} beside the paper's "
                   f"selection" if paper is not None else "")
        sentences.append(
            f"Of {len(multi)} fusions of {multi_lists} list(s) of three or more retrievers, the best out of fold is "
            f"{best['procedure']} of {best['fused']} at {best['recall@5 out of fold']:.3f}{against} "
            f"(weights chosen on the training folds among {best['configurations']} configurations; on all "
            f"questions {best['weights']}, {best['recall@5 in sample']:.3f} in sample).")
    return " ".join(sentences)
