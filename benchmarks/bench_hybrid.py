"""The paper's hybrid grid (§6.2): 6 BM25 × vector pairings × 21 β = 126 configurations over 100 questions.

Random top-200 lists over ~22k SHA-1-like chunk IDs (three BM25 and two vector retrievers, as in §5.3) and
random graded qrels (1–4 primary-gold chunks per question, some of them drawn from the lists).  Timed:
``pmrag.evaluate.sweep.sweep`` for every pairing, ``sweep_macro`` and ``select_best``.  Target: ≤ 5 s in total.

``--pairings auto`` times the broader sweep instead: every lexical × dense pair of a params file's retrievers
(``hybrid.pairings: auto`` expanded by the study's loader; default params/demo.yaml, whose list names the
workbench's retrievers), each with its own random top-200 lists, through ``sweep_pairings`` (min-max), each
pairing's β (``best_per_pairing``) and the selection among them (``select_overall``).  Target: ≤ 10 s.

    .venv/bin/python benchmarks/bench_hybrid.py [--questions 100] [--chunks 22329] [--seed 0]
    .venv/bin/python benchmarks/bench_hybrid.py --pairings auto [--params params/demo.yaml]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

from pmrag.core.params import HybridSection
from pmrag.evaluate.sweep import (best_per_pairing, macro_by_configuration, select_best, select_overall, sweep,
                                  sweep_macro, sweep_pairings)

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
    parser.add_argument("--pairings", choices=("paper", "auto"), default="paper")
    parser.add_argument("--params", default="params/demo.yaml", help="--pairings auto: whose retrievers are paired")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    chunk_ids = np.array([f"{x:040x}" for x in rng.integers(0, 2**63, args.chunks)], dtype=object)
    question_ids = [f"q{i:03d}" for i in range(args.questions)]
    if args.pairings == "auto":
        every_pair(rng, chunk_ids, question_ids, args.params)
        return
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


def every_pair(rng: np.random.Generator, chunk_ids: np.ndarray, question_ids: list[str], params_file: str) -> None:
    """The broader sweep: every lexical × dense pair of ``params_file``'s retrievers, timed against ≤ 10 s."""
    from pmrag.study.params import load_params

    pairs = [(str(a), str(b)) for a, b in
             load_params(params_file, overrides={"hybrid.pairings": "auto"}).hybrid.pairing_ids()]
    lexical = list(dict.fromkeys(a for a, _ in pairs))
    dense = list(dict.fromkeys(b for _, b in pairs))
    rankings = {name: random_ranking(rng, chunk_ids, question_ids, 20.0) for name in lexical}
    rankings |= {name: random_ranking(rng, chunk_ids, question_ids, 1.0) for name in dense}
    qrels = random_qrels(rng, chunk_ids, question_ids, list(rankings.values())[:5])

    start, cpu = time.perf_counter(), time.process_time()
    swept = sweep_pairings(rankings, qrels, pairs, BETAS, k=5)
    best = best_per_pairing(macro_by_configuration(swept))
    selected = select_overall(best, pairs)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu

    print(f"configurations: {len(pairs) * len(BETAS)} ({len(pairs)} pairings: {len(lexical)} lexical × "
          f"{len(dense)} dense retrievers of {params_file}; {len(BETAS)} β) × {len(question_ids)} questions, "
          f"{len(chunk_ids)} chunks, top {DEPTH}")
    print(f"best: {selected['bm25']} + {selected['vector']} β={selected['beta']:.2f} "
          f"recall@5={selected['recall@5']:.3f}")
    verdict = "meets" if elapsed <= 10 else "misses"
    print(f"sweep + select, every pair: {elapsed:.2f} s ({verdict} the target ≤ 10 s; CPU {cpu:.2f} s, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
