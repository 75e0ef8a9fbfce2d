"""Pooling at the paper's scale (000 §4.3): 6 retrievers × depth 20 × 100 questions over 22,329 chunks.

Random top-200 rankings over ~22k SHA-1-like chunk IDs for the six single retrievers of §5, partly overlapping
(each retriever's list mixes a question's shared "likely" chunks with random ones, as real retrievers agree on
some chunks), plus 1–3 hint-recovered chunks per question.  Timed: ``build_pool`` (the union, origins, the
seeded blind order) and ``write_pool`` into a fresh SQLite store.  Target: ≤ 5 s in total.

    .venv/bin/python benchmarks/bench_pool.py [--questions 100] [--chunks 22329] [--depth 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.annotate.pooling import POOL_RETRIEVERS, build_pool, pool_sizes, write_pool
from pmrag.core import store

DEPTH = 200


def random_ranking(rng: np.random.Generator, chunk_ids: np.ndarray, likely: np.ndarray) -> pd.DataFrame:
    """Per question: a top ``DEPTH`` drawn from its likely chunks (half) and the whole corpus (half)."""
    rows = []
    for q, shared in enumerate(likely):
        picks = pd.unique(np.concatenate([rng.permutation(shared)[: DEPTH // 2],
                                          rng.choice(len(chunk_ids), DEPTH, replace=False)]))[:DEPTH]
        rows.append(pd.DataFrame({"question_id": f"q{q:03d}", "rank": np.arange(1, DEPTH + 1),
                                  "chunk_id": chunk_ids[picks]}))
    return pd.concat(rows, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=22329)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    chunk_ids = np.array([f"{x:040x}" for x in rng.integers(0, 2**63, args.chunks)], dtype=object)
    likely = [rng.choice(args.chunks, 150, replace=False) for _ in range(args.questions)]
    rankings = {name: random_ranking(rng, chunk_ids, likely) for name in POOL_RETRIEVERS}
    recovered = pd.DataFrame([(f"q{q:03d}", h, chunk_ids[rng.integers(args.chunks)])
                              for q in range(args.questions) for h in range(rng.integers(1, 4))],
                             columns=["candidate_id", "hint", "chunk_id"])

    start = time.perf_counter()
    pooled = build_pool(rankings, args.depth, POOL_RETRIEVERS, recovered, seed=args.seed)
    built = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        engine = store.open_store(Path(folder) / "bench.sqlite")
        start = time.perf_counter()
        write_pool(engine, "bench", pooled)
        written = time.perf_counter() - start
        engine.dispose()

    sizes = pool_sizes(pooled)
    print(f"pool: {len(POOL_RETRIEVERS)} retrievers × depth {args.depth} × {args.questions} questions over "
          f"{args.chunks:,} chunks")
    print(f"pooled chunks: {len(pooled):,} (per question: median {sizes['chunks'].median():.0f}, "
          f"min {sizes['chunks'].min()}, max {sizes['chunks'].max()}; "
          f"{len(POOL_RETRIEVERS) * args.depth} if no retriever agreed)")
    print(f"build_pool: {built:.2f} s")
    print(f"write_pool: {written:.2f} s")
    print(f"total: {built + written:.2f} s (target ≤ 5 s)")


if __name__ == "__main__":
    main()
