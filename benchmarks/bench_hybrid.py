"""The paper's hybrid grid (§6.2): 6 BM25 × vector pairings × 21 β = 126 configurations over 100 questions.

Random top-200 lists over ~22k SHA-1-like chunk IDs (three BM25 and two vector retrievers, as in §5.3) and
random graded qrels (1–4 primary-gold chunks per question, some of them drawn from the lists).  Timed:
``pmrag.evaluate.sweep.sweep`` for every pairing, ``sweep_macro`` and ``select_best``.  Target: ≤ 5 s in total.

    .venv/bin/python benchmarks/bench_hybrid.py [--questions 100] [--chunks 22329] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.core.params import HybridSection
from pmrag.evaluate.sweep import select_best, sweep, sweep_macro

BETAS = HybridSection().betas()

BM25 = ("summary_bm25", "raw_text_bm25", "embedding_text_bm25")
VECTOR = ("summary_vector", "embedding_text_vector")
DEPTH = 200


def random_ranking(rng: np.random.Generator, chunk_ids: np.ndarray, question_ids: list[str], scale: float):
    """Top ``DEPTH`` of random scores per question, as a ranking table."""
    picks = np.stack([rng.choice(len(chunk_ids), DEPTH, replace=False) for _ in question_ids])
    scores = -np.sort(-rng.random((len(question_ids), DEPTH)) * scale, axis=1)
    return pd.DataFrame({
        "question_id": np.repeat(np.array(question_ids, dtype=object), DEPTH),
        "chunk_id": chunk_ids[picks.ravel()],
        "rank": np.tile(np.arange(1, DEPTH + 1), len(question_ids)),
        "score": scores.ravel(),
    })


def random_qrels(rng: np.random.Generator, chunk_ids: np.ndarray, question_ids: list[str],
                 rankings: list[pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for q in question_ids:
        listed = np.concatenate([r.loc[r["question_id"] == q, "chunk_id"].to_numpy()[:20] for r in rankings])
        judged = pd.unique(np.concatenate([rng.choice(listed, 4), rng.choice(chunk_ids, 4)]))
        grades = rng.integers(0, 3, len(judged))
        grades[0] = 2
        rows += [(q, c, int(g)) for c, g in zip(judged, grades)]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=22329)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    chunk_ids = np.array([f"{x:040x}" for x in rng.integers(0, 2**63, args.chunks)], dtype=object)
    question_ids = [f"q{i:03d}" for i in range(args.questions)]
    rankings = {name: random_ranking(rng, chunk_ids, question_ids, 20.0) for name in BM25}
    rankings |= {name: random_ranking(rng, chunk_ids, question_ids, 1.0) for name in VECTOR}
    qrels = random_qrels(rng, chunk_ids, question_ids, list(rankings.values()))

    start = time.perf_counter()
    tables = [sweep_macro(sweep(rankings[b], rankings[v], qrels, BETAS, k=5), bm25=b, vector=v)
              for b in BM25 for v in VECTOR]
    grid = pd.concat(tables, ignore_index=True)
    best = select_best(grid)
    elapsed = time.perf_counter() - start

    print(f"configurations: {len(grid)} ({len(tables)} pairings × {len(BETAS)} β) × {args.questions} questions")
    print(f"best: {best['bm25']} + {best['vector']} β={best['beta']:.2f} recall@5={best['recall@5']:.3f}")
    print(f"sweep + select: {elapsed:.2f} s (target ≤ 5 s)")


if __name__ == "__main__":
    main()
