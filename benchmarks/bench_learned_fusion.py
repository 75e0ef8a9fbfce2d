"""Learned fusion at the paper's scale (beyond the paper): training and out-of-fold scoring of both models.

100 questions over 10 sources of 200 chunks each (2,000 chunks); the paper's six retrievers each rank every
question's own source (depth 200), the gold chunks (1–3 per question) near the top of some lists, so the union
holds 200 candidates per question (20,000 rows × 23 features).  One cold run is
:func:`pmrag.evaluate.learned.learned_fusion` with the params' defaults: features, GroupKFold over the 10 sources
(5 folds), the logistic regression and the gradient-boosted trees fit on 4 folds and scored on the 5th, their
importance (the trees' held-out permutation importance included) and the per-question metrics.  Target: ≤ 30 s.

    .venv/bin/python benchmarks/bench_learned_fusion.py [--repeat 3] [--questions 100] [--depth 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.evaluate.learned import learned_fusion

RETRIEVERS = ("raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_vector", "summary_vector",
              "embedding_text_vector")
TARGET_S = 30.0


def synthetic_study(n_questions: int, depth: int, n_sources: int, seed: int):
    """``(rankings, qrels, types, chunks)``: each question asks about one source; every retriever ranks that
    source's ``depth`` chunks, a retriever placing each gold chunk in its top 10 with probability 0.6."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-01-01")
    chunk_rows = [(f"s{s:02d}c{c:04d}", f"s{s:02d}", c, c // 6, c % 6, start + pd.Timedelta(hours=3 * c),
                   start + pd.Timedelta(hours=3 * c + 1), 42, "m" * int(rng.integers(200, 3000)))
                  for s in range(n_sources) for c in range(depth)]
    chunks = pd.DataFrame(chunk_rows, columns=["chunk_id", "source", "chunk_index", "session_index", "window_index",
                                               "start_at", "end_at", "n_messages", "raw_text"])
    questions = [f"q{i:03d}" for i in range(n_questions)]
    types = pd.Series(np.array(["named_entity", "contextual", "aggregate"])[np.arange(n_questions) % 3],
                      index=pd.Index(questions, name="question_id"), name="type")
    qrels, lists = [], {name: [] for name in RETRIEVERS}
    for i, q in enumerate(questions):
        source = i % n_sources
        gold = rng.choice(depth, size=int(rng.integers(1, 4)), replace=False)
        qrels += [(q, f"s{source:02d}c{g:04d}", 2) for g in gold]
        for name in RETRIEVERS:
            order = list(rng.permutation(depth))
            for g in gold:
                if rng.random() < 0.6:
                    order.remove(g)
                    order.insert(int(rng.integers(10)), g)
            scores = np.sort(rng.random(depth))[::-1] * 10
            lists[name] += [(q, f"s{source:02d}c{c:04d}", r + 1, scores[r]) for r, c in enumerate(order)]
    rankings = {name: pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])
                for name, rows in lists.items()}
    return rankings, pd.DataFrame(qrels, columns=["question_id", "chunk_id", "relevance"]), types, chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--sources", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rankings, qrels, types, chunks = synthetic_study(args.questions, args.depth, args.sources, seed=1)
    times, result = [], None
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = learned_fusion(rankings, qrels, types, chunks, depth=args.depth, ks=(5,))
        times.append(time.perf_counter() - start)
    best = min(times)
    means = result.per_question.groupby("retriever")["recall@5"].mean()
    print(f"{args.questions} questions × {len(RETRIEVERS)} retrievers × depth {args.depth}: "
          f"{result.candidates:,} candidates; {result.scheme}")
    print("out-of-fold Recall@5: " + ", ".join(f"{name} {value:.3f}" for name, value in means.items()))
    print(f"learned fusion (both models, importance included): best of {args.repeat} {best:.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in times)}); target ≤ {TARGET_S:.0f} s: "
          f"{'met' if best <= TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
