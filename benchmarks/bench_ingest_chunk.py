"""Ingest + chunking at the paper's scale (358,896 messages).

Generates the synthetic corpus once (cached under outputs/bench/corpus_<n>/, in a separate process so its
memory does not count), then times: reading every source file (two worker processes parse ahead,
:mod:`pmrag.ingest.pipeline`) while this process stores it in a fresh SQLite database, then chunking every
source (two workers read and chunk sources while this process inserts, :func:`pmrag.chunk_store.rebuild_chunks`)
and deriving chunk-level gold.  Peak memory is the largest sum, over this process and its workers, of the
proportional set size (PSS: pages shared after fork are split between the processes, not counted twice),
sampled every 20 ms or as often as a tenth of one CPU allows, whichever is rarer (:class:`TreeMemory`).
Shared virtual machines vary by ±40 % between passes, so it runs several passes and prints the best and the
median, one line per figure.
Target on the 2-core reference machine: ≤ 15 s and ≤ 1.5 GB peak memory.

    .venv/bin/python benchmarks/bench_ingest_chunk.py [--n-messages 358896]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from proctree import TreeMemory

from pmrag.core import store
from pmrag.ingest import store as ingest_store
from pmrag.chunking import store as chunk_store
from pmrag.core.params import ChunkingSection
from pmrag.ingest.pipeline import read_all

REPO = Path(__file__).resolve().parents[1]


def ensure_corpus(n_messages: int) -> tuple[list[Path], Path]:
    corpus = REPO / "outputs" / "bench" / f"corpus_{n_messages}"
    if not (corpus / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "pmrag", "demo", str(corpus), "--n-messages", str(n_messages)], check=True)
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    return [corpus / name for name in manifest["files"]], corpus / manifest["questions_file"]


def run_once(files: list[Path], questions: Path, db: Path) -> tuple[float, float, int, int]:
    """One timed pass into a fresh database: (ingest seconds, chunking seconds, messages, chunks)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    engine = store.open_store(db)
    n_messages = 0
    jobs = [(path, "line-json") for path in files] + [(questions, "questions-json")]
    for batch, rows in read_all(jobs):
        n_messages += ingest_store.store_batch(engine, batch, store.file_sha256(batch.path), rows).stored
    ingested = time.perf_counter()
    n_chunks = chunk_store.rebuild_chunks(engine, ChunkingSection())
    chunk_store.derive_qrels(engine)
    finished = time.perf_counter()
    engine.dispose()
    return ingested - started, finished - ingested, n_messages, n_chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-messages", type=int, default=358_896)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best and the median are printed")
    args = parser.parse_args()
    files, questions = ensure_corpus(args.n_messages)
    db = REPO / "outputs" / "bench" / "bench.sqlite"
    with TreeMemory() as memory:
        runs = [run_once(files, questions, db) for _ in range(args.repeat)]
    peak_mb = memory.peak_pss_kb / 1024
    ingest, chunking = [r[0] for r in runs], [r[1] for r in runs]
    total = [a + b for a, b in zip(ingest, chunking)]

    print(f"messages                 {runs[0][2]:,}")
    print(f"chunks                   {runs[0][3]:,}")
    print(f"ingest (read+store)      best {min(ingest):.2f} s, median {statistics.median(ingest):.2f} s")
    print(f"chunking + gold          best {min(chunking):.2f} s, median {statistics.median(chunking):.2f} s")
    print(f"ingest + chunking total  best {min(total):.2f} s, median {statistics.median(total):.2f} s   "
          f"({args.repeat} passes; target ≤ 15 s)")
    print(f"peak memory (PSS, all processes) {peak_mb:,.0f} MB   (target ≤ 1,536 MB)")


if __name__ == "__main__":
    main()
