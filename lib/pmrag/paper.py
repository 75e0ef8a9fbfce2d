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
