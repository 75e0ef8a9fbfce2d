"""Bootstrap cost at paper scale (§4.4): every interval the paper reports, from scratch.

11 methods (5 single retrievers + 6 hybrids) × 3 metrics (Recall@5, MRR@5, nDCG@5) on 100 questions, plus
10 paired differences × 3 metrics, plus Recall@5 of every method overall and within each of the paper's three
question types (34 / 49 / 17 questions: Table 6 and Figure 5), with B = 5,000 resamples and seed 12,345.  The timing starts cold: the
resample cache is cleared first, so drawing the (B, n) indices is included.  Per-question values are synthetic
(metric-shaped: recall in {0, ½, 1}, reciprocal ranks, nDCG in [0, 1]).  Target: ≤ 5 s.

    .venv/bin/python benchmarks/bench_bootstrap.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.core.params import BootstrapSection
from pmrag.evaluate.bootstrap import ci_table, clear_resample_cache, difference_table
from pmrag.evaluate.reliability import by_type_cis

SINGLE = ("raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_dense", "embedding_text_dense")
HYBRID = tuple(f"hybrid_{i}" for i in range(1, 7))
METRICS = ("recall@5", "mrr@5", "ndcg@5")


def per_question(n_questions: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for method in SINGLE + HYBRID:
        frames.append(pd.DataFrame({
            "method": method,
            "question_id": [f"q{i:03d}" for i in range(n_questions)],
            "recall@5": rng.choice([0.0, 0.5, 1.0], size=n_questions),
            "mrr@5": rng.choice([0.0, 0.2, 0.25, 1 / 3, 0.5, 1.0], size=n_questions),
            "ndcg@5": rng.random(n_questions),
            "question_type": (["named_entity"] * 34 + ["contextual"] * 49 + ["aggregate"] * 17 + ["other"] * n_questions)[:n_questions],
        }))
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    table = per_question(args.questions, seed=1)
    params = BootstrapSection()
    pairs = [(h, s) for h in HYBRID[:2] for s in SINGLE]
    timings = []
    for _ in range(args.repeat):
        clear_resample_cache()
        start = time.perf_counter()
        intervals = ci_table(table.drop(columns="question_type"), METRICS, params)
        differences = difference_table(table.drop(columns="question_type"), pairs, METRICS, params)
        by_type = by_type_cis(table.rename(columns={"method": "retriever"}), "recall@5", params)
        timings.append(time.perf_counter() - start)
    print(f"{len(intervals)} intervals + {len(differences)} paired differences + {len(by_type)} per-type intervals, "
          f"n = {args.questions}, "
          f"B = {params.n_resamples}: best {min(timings):.3f} s, median {np.median(timings):.3f} s "
          f"over {args.repeat} cold runs (target ≤ 5 s)")


if __name__ == "__main__":
    main()
