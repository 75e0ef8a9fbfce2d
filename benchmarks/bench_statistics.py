"""Statistics beyond the paper at scale: 131 methods × 100 questions.

* Many comparisons: :func:`pmrag.evaluate.multiplicity.comparisons_table` of 130 methods against one reference on
  Recall@5 — the paper's percentile intervals and a sign-flip permutation test, both with B = 5,000, and the
  Holm and BH adjustments of the family.
* Evidence groups: :func:`pmrag.evaluate.groups.evidence_groups` and :func:`~pmrag.evaluate.groups.group_judgments`
  once, then the group Recall/MRR/nDCG@5, 10, 20 of 131 rankings (depth 50) with
  :func:`~pmrag.evaluate.groups.per_question_group_rows`.
* How many questions: :func:`pmrag.evaluate.power.power_curve` (n = 25 … 400, R = 5,000) and
  :func:`~pmrag.evaluate.power.questions_needed` for the MDE at 100.

Synthetic inputs: 4,000 messages in windows of 8 sliding by 4 (each message in two windows), 1–4 primary and
0–3 supporting evidence messages per question; rankings draw the gold chunks near the top with a method-dependent
chance.  The timing starts cold (the bootstrap's resample cache cleared).  The issue's target for all of §1–4,
together with the selection bootstrap, is ≤ 30 s.

    .venv/bin/python benchmarks/bench_statistics.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.evaluate.bootstrap import clear_resample_cache
from pmrag.evaluate.groups import evidence_groups, group_judgments, per_question_group_rows
from pmrag.evaluate.metrics import per_question_rows
from pmrag.evaluate.multiplicity import comparisons_table
from pmrag.evaluate.power import pilot_differences, power_curve, questions_needed

N_METHODS, N_QUESTIONS, B, DEPTH, KS = 131, 100, 5000, 50, (5, 10, 20)


def store_tables(seed: int):
    rng = np.random.default_rng(seed)
    n_messages, width, stride = 4000, 8, 4
    starts = np.arange(0, n_messages - width + 1, stride)
    chunk_messages = pd.DataFrame({
        "chunk_id": np.repeat([f"c{s:05d}" for s in starts], width),
        "position": np.tile(np.arange(width), len(starts)),
        "message_id": [f"m{s + p:05d}" for s in starts for p in range(width)],
    })
    rows = []
    for q in range(N_QUESTIONS):
        anchor = rng.integers(0, n_messages - 40)
        for m in anchor + rng.choice(40, size=rng.integers(1, 5), replace=False):
            rows.append((f"q{q:03d}", f"m{m:05d}", 2))
        for m in rng.choice(n_messages, size=rng.integers(0, 4), replace=False):
            rows.append((f"q{q:03d}", f"m{m:05d}", 1))
    evidence = pd.DataFrame(rows, columns=["question_id", "message_id", "relevance"])
    evidence = evidence.sort_values("relevance").drop_duplicates(["question_id", "message_id"], keep="last")
    qrels = (evidence.merge(chunk_messages, on="message_id")
             .groupby(["question_id", "chunk_id"], as_index=False)["relevance"].max())
    return qrels, evidence, chunk_messages


def rankings(qrels: pd.DataFrame, chunk_ids: np.ndarray, seed: int) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    gold = qrels.groupby("question_id")["chunk_id"].agg(list)
    runs = []
    for method in range(N_METHODS):
        skill = 0.2 + 0.6 * method / N_METHODS
        frames = []
        for question, chunks in gold.items():
            found = [c for c in chunks if rng.random() < skill]
            others = rng.choice(chunk_ids, size=DEPTH + len(chunks), replace=False)
            ranked = list(dict.fromkeys(found + [c for c in others if c not in chunks]))[:DEPTH]
            order = rng.permutation(min(len(ranked), 2 * len(found) + 3))
            ranked[:len(order)] = [ranked[i] for i in order]
            frames.append(pd.DataFrame({"question_id": question, "chunk_id": ranked, "rank": np.arange(1, DEPTH + 1)}))
        runs.append(pd.concat(frames, ignore_index=True))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    qrels, evidence, chunk_messages = store_tables(seed=1)
    runs = rankings(qrels, chunk_messages["chunk_id"].unique(), seed=2)
    types = pd.Series("contextual", index=sorted(qrels["question_id"].unique()))
    names = [f"method_{i:03d}" for i in range(N_METHODS)]
    per_question = pd.concat([per_question_rows(run, name, qrels, types, ks=[5]) for run, name in zip(runs, names)],
                             ignore_index=True)

    timings = {"comparisons": [], "groups": [], "power": []}
    for _ in range(args.repeat):
        clear_resample_cache()
        start = time.perf_counter()
        table = comparisons_table(per_question, names[0], "recall@5", B=B, seed=12345, alpha=0.05)
        timings["comparisons"].append(time.perf_counter() - start)

        start = time.perf_counter()
        groups = evidence_groups(qrels, evidence, chunk_messages)
        judgments = group_judgments(qrels, groups)
        group_rows = pd.concat([per_question_group_rows(run, name, judgments, None, types, ks=KS)
                                for run, name in zip(runs, names)], ignore_index=True)
        timings["groups"].append(time.perf_counter() - start)

        start = time.perf_counter()
        pilot = pilot_differences(per_question, names[-1], names[0])
        curve = power_curve(pilot, n_resamples=B, seed=12345)
        needed = questions_needed(pilot, float(curve["detectable_difference"][2]) + 1e-9, n_resamples=B, seed=12345)
        timings["power"].append(time.perf_counter() - start)

    best = {part: min(values) for part, values in timings.items()}
    print(f"comparisons table: {len(table)} methods vs a reference, B = {B} (percentile CIs + sign-flip test + "
          f"Holm/BH; {int(table['reject_holm'].sum())} Holm / {int(table['reject_bh'].sum())} BH rejections): "
          f"{best['comparisons']:.3f} s")
    print(f"evidence groups: {groups[['question_id', 'group']].drop_duplicates().shape[0]} groups of "
          f"{len(groups)} primary-gold chunks; group metrics @{'/'.join(map(str, KS))} of {N_METHODS} rankings "
          f"({len(group_rows)} rows): {best['groups']:.3f} s")
    print(f"power curve n = {', '.join(map(str, curve['n_questions']))}, R = {B} (+ questions needed, {needed}): "
          f"{best['power']:.3f} s")
    print(f"total {sum(best.values()):.3f} s, best of {args.repeat} cold runs "
          "(issue target for §1–4 together: ≤ 30 s)")


if __name__ == "__main__":
    main()
