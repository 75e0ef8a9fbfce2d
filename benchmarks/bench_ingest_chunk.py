"""Ingest + chunking at the paper's scale (358,896 messages).

Generates the synthetic corpus once (cached under outputs/bench/corpus_<n>/, in a separate process so its
memory does not count), then times, in this process: reading every source file, storing it in a fresh
SQLite database, chunking every source and deriving chunk-level gold.  Prints one line per figure.
Target on the 2-core reference machine: ≤ 15 s and ≤ 1.5 GB peak memory.

    .venv/bin/python benchmarks/bench_ingest_chunk.py [--n-messages 358896]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from pmrag import store
from pmrag.chunking import ChunkingParams, chunk_source
from pmrag.ingest import read_source

REPO = Path(__file__).resolve().parents[1]


def ensure_corpus(n_messages: int) -> tuple[list[Path], Path]:
    corpus = REPO / "outputs" / "bench" / f"corpus_{n_messages}"
    if not (corpus / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "pmrag", "demo", str(corpus), "--n-messages", str(n_messages)], check=True)
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    return [corpus / name for name in manifest["files"]], corpus / manifest["questions_file"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-messages", type=int, default=358_896)
    args = parser.parse_args()
    files, questions = ensure_corpus(args.n_messages)
    db = REPO / "outputs" / "bench" / "bench.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    started = time.perf_counter()
    engine = store.open_store(db)
    n_messages = 0
    for path in files + [questions]:
        batch = read_source(path, "questions-json" if path == questions else "line-json")
        n_messages += store.store_batch(engine, batch, store.file_sha256(path)).stored
    ingested = time.perf_counter()
    chunks = [c for src, msgs in store.load_chunk_messages(engine).items() for c in chunk_source(src, msgs, ChunkingParams())]
    store.replace_chunks(engine, chunks)
    store.derive_qrels(engine)
    finished = time.perf_counter()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"messages                 {n_messages:,}")
    print(f"chunks                   {len(chunks):,}")
    print(f"ingest (read+store)      {ingested - started:.2f} s")
    print(f"chunking + gold          {finished - ingested:.2f} s")
    print(f"ingest + chunking total  {finished - started:.2f} s   (target ≤ 15 s)")
    print(f"peak memory (RSS)        {peak_mb:,.0f} MB   (target ≤ 1,536 MB)")


if __name__ == "__main__":
    main()
