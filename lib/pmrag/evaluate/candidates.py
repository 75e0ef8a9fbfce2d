"""What a ranked list is made of: how many chunks score above 0 per question, and how often a list's min-max
minimum is a zero score.

Under the paper's reading BM25 ranks every chunk, so chunks sharing no token with the question (score 0)
pad its top ``depth`` in tie-break order (``bm25.zero_scores: pad``); each list's minimum is then 0, which is
the m_r(q) of the min-max fusion (eq. 12).  With few matching chunks the padding decides most of the list.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pmrag.evaluate.metric_names import RECALL5


def matching_table(matches: Mapping[str, pd.Series], depth: int) -> pd.DataFrame:
    """Per retriever: chunks scoring above 0 per question (min, 10th percentile, median, 90th, max) and the
    questions with fewer such chunks than ``depth`` (whose list is padded or, with ``drop``, shorter)."""
    rows = []
    for name, counts in matches.items():
        values = np.asarray(counts, dtype=np.int64)
        rows.append({"retriever": name, "questions": len(values), "min": int(values.min()),
                     "p10": float(np.percentile(values, 10)), "median": float(np.median(values)),
                     "p90": float(np.percentile(values, 90)), "max": int(values.max()),
                     "questions under depth": int((values < depth).sum())})
    return pd.DataFrame(rows, columns=["retriever", "questions", "min", "p10", "median", "p90", "max",
                                       "questions under depth"])


def with_recall(matching: pd.DataFrame, per_question: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """:func:`matching_table` with each retriever's mean Recall@k beside it (the lexical overlap a retriever had
    to work with, next to what it made of it); ``per_question`` holds ``retriever`` and ``recall@k`` columns."""
    metric = RECALL5.at(k)
    recall = per_question.groupby("retriever", sort=False)[str(metric)].mean().rename(metric.label)
    return matching.merge(recall, left_on="retriever", right_index=True, how="left", validate="one_to_one")


def zero_minimum_table(rankings: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per ranking: questions whose list's lowest score is exactly 0 (the min-max m_r(q) of eq. 12)."""
    rows = []
    for name, ranking in rankings.items():
        lowest = ranking.groupby("question_id", sort=False)["score"].min()
        zero = int((lowest == 0).sum())
        rows.append({"retriever": name, "questions": len(lowest), "lists with a zero minimum": zero,
                     "share": zero / len(lowest) if len(lowest) else np.nan})
    return pd.DataFrame(rows, columns=["retriever", "questions", "lists with a zero minimum", "share"])
