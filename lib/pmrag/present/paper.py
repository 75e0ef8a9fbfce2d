"""Numbers the paper publishes for its private LINE history, shown beside ours for reference only."""

from __future__ import annotations

import pandas as pd

# Table 3: single retriever performance, "mean [95% CI]" (B = 5,000, seed 12,345).
TABLE3 = {
    "raw_text_bm25": {"Recall@5": (0.427, 0.335, 0.520), "MRR@5": (0.354, 0.270, 0.439), "nDCG@5": (0.348, 0.270, 0.426)},
    "summary_bm25": {"Recall@5": (0.463, 0.374, 0.555), "MRR@5": (0.419, 0.329, 0.506), "nDCG@5": (0.395, 0.313, 0.475)},
    "summary_vector": {"Recall@5": (0.541, 0.451, 0.631), "MRR@5": (0.445, 0.360, 0.532), "nDCG@5": (0.436, 0.359, 0.514)},
    "embedding_text_vector": {"Recall@5": (0.549, 0.458, 0.640), "MRR@5": (0.459, 0.375, 0.546), "nDCG@5": (0.455, 0.375, 0.536)},
    "embedding_text_bm25": {"Recall@5": (0.584, 0.491, 0.673), "MRR@5": (0.491, 0.403, 0.575), "nDCG@5": (0.478, 0.399, 0.555)},
}


def format_ci(mean: float, low: float, high: float) -> str:
    """``0.427 [0.335, 0.520]``, the paper's table format."""
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def table3() -> pd.DataFrame:
    """The paper's Table 3 as formatted strings, one row per retriever."""
    return pd.DataFrame(
        {metric: {m: format_ci(*values[metric]) for m, values in TABLE3.items()} for metric in ("Recall@5", "MRR@5", "nDCG@5")}
    ).rename_axis("Method")

# Table 4: exploratory hybrid comparison selected on the same 100 questions.
TABLE4 = [
    ("embedding_text_bm25", "embedding_text_vector", 0.45, (0.697, 0.610, 0.775), (0.595, 0.510, 0.678), (0.575, 0.496, 0.648)),
    ("embedding_text_bm25", "summary_vector", 0.55, (0.677, 0.590, 0.758), (0.590, 0.506, 0.673), (0.566, 0.487, 0.642)),
    ("raw_text_bm25", "embedding_text_vector", 0.45, (0.657, 0.567, 0.740), (0.528, 0.442, 0.609), (0.526, 0.448, 0.600)),
    ("summary_bm25", "summary_vector", 0.50, (0.647, 0.555, 0.735), (0.548, 0.460, 0.633), (0.534, 0.453, 0.613)),
    ("summary_bm25", "embedding_text_vector", 0.40, (0.641, 0.549, 0.727), (0.556, 0.469, 0.641), (0.542, 0.460, 0.622)),
    ("raw_text_bm25", "summary_vector", 0.35, (0.639, 0.550, 0.725), (0.522, 0.437, 0.606), (0.508, 0.432, 0.583)),
]


def table4() -> pd.DataFrame:
    """The paper's Table 4 as formatted strings, one row per pairing."""
    return pd.DataFrame([
        {"BM25": b, "Vector": v, "β": f"{beta:.2f}", "Recall@5": format_ci(*r), "MRR@5": format_ci(*m), "nDCG@5": format_ci(*n)}
        for b, v, beta, r, m, n in TABLE4
    ])


# Tables 5–9 (§6.3, §6.4, §7): bootstrap differences, per-type results and the failure analysis.
TABLE5 = [
    ("Best − E-BM25", 0.113, 0.048, 0.184, "Positive conditional difference; selection uncertainty excluded"),
    ("Best − S-hybrid (β=0.50)", 0.050, -0.013, 0.115, "CI includes 0; inconclusive"),
]
TABLE6 = [("named_entity", 0.789, 0.647, 0.912), ("contextual", 0.755, 0.643, 0.857), ("aggregate", 0.345, 0.159, 0.551)]
TABLE7 = [("named_entity", 34, 6), ("contextual", 49, 8), ("aggregate", 17, 8), ("Overall", 100, 22)]
TABLE8 = [("other_rule_based_failure", 18), ("aggregate_failure", 9), ("multiple_primary_gold_nonaggregate", 3)]
TABLE9 = [("BM25 only", 20), ("Vector only", 16), ("Both", 45), ("Neither", 19)]
AGGREGATE_DETAIL = [
    ("aggregate questions", 17), ("mean primary-gold chunks per aggregate question", 2.35),
    ("aggregate questions whose primary gold spans several dates", 9),
    ("aggregate questions whose primary gold spans several sources", 5),
    ("aggregate Top-5 failures", 9), ("... of them recovered at Top-10", 2), ("... of them recovered at Top-20", 4),
]


def format_delta_ci(delta: float, low: float, high: float) -> tuple[str, str]:
    """``("+0.113", "[0.048, 0.184]")``: a signed difference and its interval, the paper's Table 5 format."""
    return f"{delta:+.3f}", f"[{low:.3f}, {high:.3f}]"


def table5() -> pd.DataFrame:
    return pd.DataFrame([(c, *format_delta_ci(d, lo, hi), i) for c, d, lo, hi, i in TABLE5],
                        columns=["Comparison", "ΔRecall@5", "95% CI", "Interpretation"])


def table6() -> pd.DataFrame:
    return pd.DataFrame([(t, f"{m:.3f}", f"[{lo:.3f}, {hi:.3f}]") for t, m, lo, hi in TABLE6],
                        columns=["Question type", "Recall@5", "95% CI"])


def table7() -> pd.DataFrame:
    return pd.DataFrame([(t, n, f, f"{100 * f / n:.1f}%") for t, n, f in TABLE7],
                        columns=["Question type", "Questions", "Top-5 failures", "Failure rate"])


def table8() -> pd.DataFrame:
    return pd.DataFrame([(label, n, f"{100 * n / 30:.1f}%") for label, n in TABLE8], columns=["Failure type", "Count", "Percentage"])


def table9() -> pd.DataFrame:
    return pd.DataFrame(TABLE9, columns=["Success pattern", "Questions"])


def aggregate_detail() -> pd.DataFrame:
    return pd.DataFrame(AGGREGATE_DETAIL, columns=["Quantity", "Value"], dtype=object)


def table1() -> pd.DataFrame:
    """The paper's Table 1 (its private LINE history), for display beside ours."""
    return pd.DataFrame({
        "Item": ["Messages", "Chunks", "Evaluation questions", "Primary-gold chunks (relevance 2)",
                 "Secondary-gold chunks (relevance 1)"],
        "Paper (private data)": pd.array([358_896, 22_329, 100, 144, 45], dtype=object),
    })


def raw_text_lengths() -> pd.Series:
    """§3.3: raw_text mean 635, p95 1,571, max 10,031; 22 chunks over 4,000 and 15 over 7,000 (None: not reported)."""
    return pd.Series({"mean": 635, "p95": 1571, "max": 10031, "> 4,000": 22, "> 5,000": None, "> 7,000": 15})


def representation_lengths() -> pd.DataFrame:
    """§3.3's lengths per representation (None: not reported)."""
    return pd.DataFrame({"mean": [635, 273, None], "p95": [1571, 446, None], "max": [10031, None, None],
                         "> 4,000": [22, None, None], "> 7,000": [15, None, None]},
                        index=pd.Index(["raw_text", "summary", "embedding_text"], name="representation"))


# Paper 002 (TOBUGraph), Table 2: set precision, recall and F1 in %, on 20 memory-retrieval requests of five TOBU
# app users (§3.2), each retrieved set judged against the memories relevant to the request.
TOBU_TABLE2 = {
    "TOBUGraph": (92.86, 93.33, 93.09),
    "RAGv1": (71.42, 76.92, 74.07),
    "RAGv2": (78.57, 84.61, 81.48),
    "RAGv3": (78.57, 80.00, 79.28),
}


def tobu_table2() -> pd.DataFrame:
    """Paper 002's Table 2 as published (rows Precision, Recall, F1; columns TOBUGraph and RAGv1–3; "92.86%").

    The paper's abstract reads the best baseline differently from its own table: "93.33% recall (vs. 80% best
    baseline)" while Table 2 gives RAGv2 84.61% recall (80% is RAGv3's), and "92.86% precision (vs. 78.58%
    best baseline)" where the table prints 78.57%.  The table's values are the ones given here.
    """
    return pd.DataFrame([{"Metric": name, **{m: f"{values[i]:.2f}%" for m, values in TOBU_TABLE2.items()}}
                         for i, name in enumerate(("Precision", "Recall", "F1"))])
