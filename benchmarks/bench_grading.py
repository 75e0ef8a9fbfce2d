"""The grading widget's speed (000 §4.3): opening the next question with 900 pooled candidates, no browser.

A store at the paper's grading scale: one chat of ``--messages`` messages chunked with the paper's windows
(42 messages, stride 36), a pool of ``--questions`` questions of 9 candidates each (the paper graded 910 rows
over 108 questions) plus one question of ``--candidates`` (900) candidates, and a few thousand grades by other
annotators.  The annotator has graded half of the big question.  Timed, from the widget's own code path: the
whole step from "open this question" to both views' HTML rendered (pool rows, the annotator's grades,
progress over the whole pool, the current chunk's messages and hint matches, the strip of 900 cells), and
grading one candidate (store write, move on, re-render).  Target: opening the next question ≤ 200 ms.

    .venv/bin/python benchmarks/bench_grading.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from pmrag.annotate.judgments import record_grade
from pmrag.chunking.store import rebuild_chunks
from pmrag.core import store
from pmrag.core.records import MessageRecord, SourceBatch
from pmrag.ingest.store import store_batch
from pmrag.present.grading import GradingWidget

POOL = "bench"
BIG = "q_big"
TARGET_MS = 200.0


def build_store(path: Path, n_messages: int, n_questions: int, n_candidates: int, seed: int = 7):
    """The store described in the module docstring; returns the engine."""
    import numpy as np

    rng = np.random.default_rng(seed)
    engine = store.open_store(path)
    start = datetime(2023, 1, 1, 8, 0)
    gaps = rng.integers(1, 30, size=n_messages).cumsum()
    words = ["tennis", "court", "station", "dinner", "tomorrow", "サッカー", "駅", "ok", "see you", "late"]
    batch = SourceBatch(path="chat.json", format="line-json", records_read=n_messages)
    batch.messages = [MessageRecord(source="chat", source_order=i, occurred_at=start + timedelta(minutes=int(g)),
                                    sender=("Aki", "Ben", "Chie")[i % 3], type="text",
                                    text=" ".join(rng.choice(words, size=int(rng.integers(2, 12)))))
                      for i, g in enumerate(gaps)]
    store_batch(engine, batch, "sha-bench")
    rebuild_chunks(engine)
    chunk_ids = store.read_table(engine, "chunks")["chunk_id"].to_numpy()
    links = store.read_table(engine, "chunk_messages")
    if len(chunk_ids) < n_candidates:
        raise SystemExit(f"{len(chunk_ids)} chunks, fewer than {n_candidates} candidates: raise --messages")
    rows, questions = [], [{"question_id": BIG, "text": "What did we plan for the weekend?", "type": "contextual"}]
    big = rng.choice(chunk_ids, size=n_candidates, replace=False)
    rows += [(POOL, BIG, c, p, json.dumps([{"retriever": "raw_text_bm25", "rank": p + 1}])) for p, c in enumerate(big)]
    for q in range(n_questions):
        qid = f"q{q:03d}"
        questions.append({"question_id": qid, "text": f"question {q}", "type": "named_entity"})
        rows += [(POOL, qid, c, p, "[]") for p, c in enumerate(rng.choice(chunk_ids, size=9, replace=False))]
    hinted = links.loc[links["chunk_id"].isin(big[:50]), "message_id"].unique()[:20]
    with engine.begin() as conn:
        conn.execute(store.questions.insert(), questions)
        store.bulk_insert(conn, store.pool, rows)
        conn.execute(store.hint_matches.insert(), [{"candidate_id": BIG, "hint": 0, "message_id": m, "how": "text"}
                                                   for m in hinted])
    for annotator in ("other1", "other2", "other3"):
        for _, question, chunk, _, _ in rows[::3]:
            record_grade(engine, question, chunk, annotator, int(rng.integers(0, 3)), pool=POOL, judged_at="t")
    for question in [f"q{q:03d}" for q in range(n_questions)]:   # the annotator finished every small question
        for _, q, chunk, _, _ in (r for r in rows if r[1] == question):
            record_grade(engine, q, chunk, "bench", 0, pool=POOL, judged_at="t")
    for chunk in big[: n_candidates // 2]:
        record_grade(engine, BIG, chunk, "bench", 1, pool=POOL, judged_at="t")
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=900)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        engine = build_store(Path(folder) / "store.sqlite", args.messages, args.questions, args.candidates)
        print(f"store: {args.messages:,} messages, pool of {args.questions + 1} questions "
              f"({args.candidates} candidates in {BIG}) built in {time.perf_counter() - began:.1f} s")
        widget = GradingWidget(engine, POOL, "bench")
        other = "q000"
        opening, grading = [], []
        for _ in range(args.repeat):
            widget.open(other)
            start = time.perf_counter()
            widget.open(BIG)
            opening.append(time.perf_counter() - start)
            assert f"of {args.candidates}" in widget.candidate.value
        for _ in range(args.repeat):
            start = time.perf_counter()
            widget.grade(2)
            grading.append(time.perf_counter() - start)
        engine.dispose()
    open_ms, grade_ms = 1000 * statistics.median(opening), 1000 * statistics.median(grading)
    print(f"open the next question ({args.candidates} candidates): median {open_ms:.1f} ms, "
          f"max {1000 * max(opening):.1f} ms over {args.repeat} (target ≤ {TARGET_MS:.0f} ms: "
          f"{'met' if open_ms <= TARGET_MS else 'MISSED'})")
    print(f"grade one candidate and show the next: median {grade_ms:.1f} ms, max {1000 * max(grading):.1f} ms")


if __name__ == "__main__":
    main()
