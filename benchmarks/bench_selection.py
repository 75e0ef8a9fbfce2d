"""Selection-aware evaluation at scale (§8.1, §9.1): the held-out folds and the selection bootstrap.

7 pairings × 21 β (0, 0.05, …, 1) = 147 min-max configurations × 100 questions (34 / 49 / 17 of three types),
synthetic metric-shaped values (recall in {0, ½, 1}, reciprocal ranks, nDCG in [0, 1]).  One cold run is:
``held_out_selection`` over all pairings (5 folds × 10 repeats × 10 partition seeds) and for the β of one
fixed pairing, ``selection_bootstrap`` with B = 5,000 for ``oob`` and ``.632`` over all pairings and for the fixed
pairing (the resample cache cleared first, so drawing the (B, n) indices is included), and the coverage check
``selection_coverage`` over all pairings (D = 400 simulated studies × 500 resamples, the study's defaults).  Target, together with the
other selection-aware statistics: ≤ 30 s.

    .venv/bin/python benchmarks/bench_selection.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.evaluate.bootstrap import clear_resample_cache
from pmrag.evaluate.selection import held_out_selection, selection_bootstrap
from pmrag.evaluate.selection_coverage import selection_coverage

BETAS = np.round(np.linspace(0.0, 1.0, 21), 2)
PAIRINGS = tuple((f"{text}_bm25", f"{text}_dense") for text in
                 ("raw_text", "summary", "embedding_text", "prefix", "excerpt", "summary_excerpt", "keywords"))


def sweep_table(n_questions: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    questions = [f"q{i:03d}" for i in range(n_questions)]
    frames = [pd.DataFrame({
        "fusion": "minmax", "bm25": first, "vector": second, "beta": beta, "question_id": questions,
        "recall@5": rng.choice([0.0, 0.5, 1.0], size=n_questions),
        "mrr@5": rng.choice([0.0, 0.2, 0.25, 1 / 3, 0.5, 1.0], size=n_questions),
        "ndcg@5": rng.random(n_questions),
    }) for first, second in PAIRINGS for beta in BETAS]
    types = (["named_entity"] * 34 + ["contextual"] * 49 + ["aggregate"] * 17) * (n_questions // 100 + 1)
    return pd.concat(frames, ignore_index=True), pd.Series(types[:n_questions], index=questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--datasets", type=int, default=400)
    parser.add_argument("--inner", type=int, default=500)
    args = parser.parse_args()

    sweep, types = sweep_table(args.questions, seed=1)
    n_configs = len(PAIRINGS) * len(BETAS)
    parts = {"held-out folds": [], "selection bootstrap": [], "coverage check": []}
    for _ in range(args.repeat):
        clear_resample_cache()
        start = time.perf_counter()
        for pairings in (None, PAIRINGS[0]):
            held_out_selection(sweep, types, n_splits=5, n_repeats=10, seed=0, pairings=pairings, n_seeds=args.seeds)
        middle = time.perf_counter()
        for pairings in (None, PAIRINGS[0]):
            for kind in ("oob", ".632"):
                result = selection_bootstrap(sweep, n_resamples=args.resamples, kind=kind, pairings=pairings)
        resampled = time.perf_counter()
        selection_coverage(sweep, n_datasets=args.datasets, n_resamples=args.inner)
        parts["held-out folds"].append(middle - start)
        parts["selection bootstrap"].append(resampled - middle)
        parts["coverage check"].append(time.perf_counter() - resampled)
    total = np.sum(list(parts.values()), axis=0)
    for name, timings in parts.items():
        print(f"{name}: best {min(timings):.3f} s, median {np.median(timings):.3f} s")
    print(f"{n_configs} configurations × {args.questions} questions, 5 × 10 folds × {args.seeds} seeds and "
          f"B = {result.n_resamples} (oob and .632), all pairings and one fixed pairing, coverage "
          f"D = {args.datasets} × {args.inner}: best {total.min():.3f} s, median "
          f"{np.median(total):.3f} s over {args.repeat} cold runs (target with the other selection-aware statistics ≤ 30 s)")


if __name__ == "__main__":
    main()
