"""TOBUGraph's memory graph with the offline extractor at the paper's scale (358,896 messages, ~22k chunks).

Builds once, and caches, a store of the synthetic corpus (the demo generator, ingested and chunked with the
paper's chunking: outputs/bench/graph_<n>.sqlite), then times, in this process: reading the chunks and their
speakers (:func:`pmrag.represent.graph.chunk_memories`), extracting every memory's terms (SudachiPy, one
tokenizer), counting and merging the interests (phrase vectors from the model-free character n-gram TF-IDF,
or e5 with ``--embedder e5``), assembling and checking the graph, and storing it.  One line per figure.
Target on the 2-core reference machine: the whole build ≤ 5 min.

    .venv/bin/python benchmarks/bench_graph.py [--n-messages 358896] [--embedder char|e5] [--split-mode C]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from pmrag.chunking import store as chunk_store
from pmrag.core import store
from pmrag.core.params import ChunkingSection, GraphSection
from pmrag.ingest import store as ingest_store
from pmrag.ingest.pipeline import read_all
from pmrag.represent.extract import char_ngram_vectors, make_extractor
from pmrag.represent.graph import assemble_graph, chunk_memories, write_graph

REPO = Path(__file__).resolve().parents[1]


def ensure_store(n_messages: int) -> Path:
    """The chunked store of the demo corpus of ``n_messages`` (generated, ingested and chunked once)."""
    folder = REPO / "outputs" / "bench"
    db = folder / f"graph_{n_messages}.sqlite"
    if db.is_file():
        return db
    corpus = folder / f"corpus_{n_messages}"
    if not (corpus / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "pmrag", "demo", str(corpus), "--n-messages", str(n_messages)], check=True)
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    partial = db.with_suffix(".partial")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    engine = store.open_store(partial)
    for batch, rows in read_all([(corpus / name, "line-json") for name in manifest["files"]]):
        ingest_store.store_batch(engine, batch, store.file_sha256(batch.path), rows)
    chunk_store.rebuild_chunks(engine, ChunkingSection())
    engine.dispose()
    partial.rename(db)
    return db


def e5_embedder():
    from pmrag.represent.embed import E5LocalEmbedder

    embedder = E5LocalEmbedder()
    return lambda texts: embedder.embed(list(texts), "passage")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-messages", type=int, default=358_896)
    parser.add_argument("--embedder", choices=("char", "e5"), default="char")
    parser.add_argument("--split-mode", choices=("A", "B", "C"), default="C")
    args = parser.parse_args()
    db = ensure_store(args.n_messages)
    params = GraphSection(split_mode=args.split_mode)
    embedder = char_ngram_vectors if args.embedder == "char" else e5_embedder()
    engine = store.open_store(db)

    started = time.perf_counter()
    tables = {name: store.read_table(engine, name) for name in ("chunks", "chunk_messages", "messages")}
    memories = chunk_memories(tables["chunks"], tables["chunk_messages"], tables["messages"])
    read = time.perf_counter()
    extractor = make_extractor(params, embedder=embedder)
    loaded = time.perf_counter()
    semantics = extractor.extract(memories)
    extracted = time.perf_counter()
    interests = extractor.interests(semantics)
    merged = time.perf_counter()
    graph = assemble_graph(semantics, interests)
    assembled = time.perf_counter()
    write_graph(engine, graph, f"bench-{args.split_mode}")
    written = time.perf_counter()
    stats = graph.statistics()
    engine.dispose()

    n_lines = sum(m.text.count("\n") + 1 for m in memories)
    print(f"memories (chunks)        {len(memories):,}  ({n_lines:,} transcript lines, {len(tables['messages']):,} messages)")
    print(f"read chunks + speakers   {read - started:.1f} s")
    print(f"load SudachiPy           {loaded - read:.1f} s")
    print(f"extract terms            {extracted - loaded:.1f} s   ({len(memories) / (extracted - loaded):,.0f} memories/s)")
    print(f"interests (count+merge)  {merged - extracted:.1f} s   ({args.embedder} embedder, {len(interests):,} interests)")
    print(f"assemble + check graph   {assembled - merged:.1f} s")
    print(f"store graph              {written - assembled:.1f} s")
    print(f"graph build total        {written - started:.1f} s   (target ≤ 300 s)")
    print(f"graph                    {stats.line()}")
    top = stats.memories_per_interest.head(30)
    print("most shared interests    " + ", ".join(f"{r.label} ({r.memories})" for r in top.itertuples()))


if __name__ == "__main__":
    main()
