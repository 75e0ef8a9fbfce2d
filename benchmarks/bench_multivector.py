"""Multi-vector dense retrieval (§9.1: what the embedding cut hides) at the paper's scale: sub-windows per chunk and 100-query time.

Windows: the raw_text line counts of the paper-scale chunk store (the demo corpus generated at 358,896
messages, chunked with the paper's chunking: outputs/bench/graph_358896.sqlite, which
benchmarks/bench_graph.py builds; read only here).  Without that file every one of ``--n-docs`` chunks gets
``--lines`` lines (42, the paper's window size: an upper bound).  raw_text is the representation with the most
lines, so its time bounds the other two.  The windows follow :func:`pmrag.represent.subwindows.window_starts`
at ``--window`` / ``--stride`` (default 4 / 4, the params' defaults).

Vectors: seeded random float32 (``default_rng(--seed)``, ``--dim`` 384 as e5's) for every window, every chunk
and ``--n-queries`` questions, as benchmarks/bench_retrieval.py and bench_graph.py do for dense retrieval:
embedding ~10⁵ windows would take hours here, and the query cost does not depend on the vectors' values.

Timed, per retriever over one representation, the component's own ``rank`` (what the ``runs:<rid>`` stage
does after loading its inputs): ``vector`` (cosine over every chunk + the tie-broken top ``--depth``),
``multivec_max`` and ``multivec_softmax`` (cosine over every window, the per-chunk segment reduction, the same
ranking); best of ``--repeat`` runs, wall clock and CPU time of all threads (on a shared machine the CPU time
is the fairer figure), and the ratios to ``vector``.  Target on the 2-core reference machine: each ≤ 2 s.

``--demo RUN_DIR`` instead counts, for a built study (e.g. outputs/demo) and its embedding cache, the distinct
sub-window texts of each representation at 4/4 and 6/6 and how many of them the cache lacks (what embedding
them would add to it).

    .venv/bin/python benchmarks/bench_multivector.py [--window 4 --stride 4] [--dim 384] [--demo outputs/demo]
"""

from __future__ import annotations

import argparse
import pickle
import sqlite3
import time
from pathlib import Path

import numpy as np

from pmrag.core.names import RetrieverId
from pmrag.core.params import StudyParams
from pmrag.represent.subwindows import SubVectors, subwindow_texts, window_starts
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import Corpus, Queries

REPO = Path(__file__).resolve().parents[1]
PAPER_STORE = REPO / "outputs" / "bench" / "graph_358896.sqlite"
REPRESENTATIONS = ("raw_text", "summary", "embedding_text")


def raw_text_line_counts(n_docs: int, lines: int) -> tuple[np.ndarray, str]:
    """Lines per raw_text of the paper-scale store (read only), else ``n_docs`` chunks of ``lines`` lines."""
    if PAPER_STORE.is_file():
        db = sqlite3.connect(f"file:{PAPER_STORE}?mode=ro", uri=True)
        try:
            counts = [text.count("\n") + 1 for (text,) in db.execute("SELECT raw_text FROM chunks ORDER BY chunk_id")]
        finally:
            db.close()
        return np.array(counts), f"raw_text line counts of {PAPER_STORE.relative_to(REPO)}"
    return np.full(n_docs, lines), f"{n_docs} chunks × {lines} lines (no {PAPER_STORE.relative_to(REPO)})"


def best_of(repeat: int, work) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds (all threads) of ``repeat`` runs: on a shared machine the CPU time
    is the fairer figure (the wall clock counts the time other processes held the cores)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def time_queries(line_counts: np.ndarray, args) -> None:
    """The components' own ``rank`` (what the ``runs:<rid>`` stage runs once its inputs are loaded)."""
    n_docs = len(line_counts)
    windows_per_chunk = np.array([len(window_starts(int(n), args.window, args.stride)) for n in line_counts])
    n_windows = int(windows_per_chunk.sum())
    rng = np.random.default_rng(args.seed)
    chunk_vectors = rng.normal(size=(n_docs, args.dim)).astype(np.float32)
    ids = np.array([f"{i:016x}" for i in range(n_docs)])
    sub = SubVectors("raw_text", "random", ids, np.repeat(np.arange(n_docs), windows_per_chunk),
                     rng.normal(size=(n_windows, args.dim)).astype(np.float32))
    query_vectors = rng.normal(size=(args.n_queries, args.dim)).astype(np.float32)
    times = np.arange(n_docs, dtype=np.int64) * 60_000_000_000
    corpus = Corpus(ids, times, texts=lambda rep: [], vectors=lambda rep: chunk_vectors,
                    upstream={"subvectors:raw_text": sub}.__getitem__)
    queries = Queries([f"q{i:03d}" for i in range(args.n_queries)], [""] * args.n_queries, lambda: query_vectors)
    params = StudyParams(run="bench", dataset={"synthetic": {"enabled": True}},
                         multivector={"window_lines": args.window, "stride_lines": args.stride})
    print(f"chunks {n_docs}, lines per chunk mean {line_counts.mean():.1f} (max {line_counts.max()}); "
          f"window {args.window} / stride {args.stride}: {n_windows} sub-windows "
          f"({n_windows / n_docs:.2f} per chunk), {n_windows * args.dim * 4 / 2**20:.0f} MiB of float32 at {args.dim}-d")
    print(f"{args.n_queries} queries, ranked to depth {args.depth}; best of {args.repeat}:")
    base = None
    for rid in ("raw_text_vector", "raw_text_multivec_max", "raw_text_multivec_softmax"):
        component = RETRIEVERS.get(RetrieverId.parse(rid).method)(RetrieverId.parse(rid), params)
        wall, cpu = best_of(args.repeat, lambda: component.rank(corpus, queries, args.depth))
        base = base or (wall, cpu)
        verdict = "met" if wall <= 2 else "MISSED"
        print(f"  {rid:28s} wall {wall:6.3f} s  cpu {cpu:6.3f} s   ({wall / base[0]:.1f} × / {cpu / base[1]:.1f} × "
              f"vector; target ≤ 2 s wall: {verdict})")


def demo_counts(run_dir: Path, cache_path: Path | None) -> None:
    """Distinct sub-window texts per representation of a built study, and how many its cache lacks."""
    from pmrag.represent.embed import cache_key

    with open(run_dir / "stages" / "representations.pkl", "rb") as fh:
        _, reps = pickle.load(fh)
    model_id = "e5-local/multilingual-e5-small-q4"
    cache = sqlite3.connect(f"file:{cache_path}?mode=ro", uri=True) if cache_path and cache_path.is_file() else None
    print(f"{run_dir}: {len(reps)} chunks; cache {cache_path if cache else '(none)'}; model {model_id}")
    for window, stride in ((4, 4), (6, 6)):
        for name in REPRESENTATIONS:
            owner, windows = subwindow_texts(reps[name].tolist(), window, stride)
            distinct = sorted(set(windows))
            line = (f"  {window}/{stride} {name:15s} windows {len(windows):6d}  distinct {len(distinct):6d}  "
                    f"over 2000 chars {sum(len(w) > 2000 for w in distinct):3d}")
            if cache is not None:
                keys = [cache_key(model_id, "passage", w) for w in distinct]
                have = sum(cache.execute(f"SELECT count(*) FROM embeddings WHERE key IN ({','.join('?' * len(part))})",
                                         part).fetchone()[0] for part in (keys[i:i + 500] for i in range(0, len(keys), 500)))
                new = len(distinct) - have
                line += f"  new to the cache {new:6d} (~{new * 1.6 / 1024:.1f} MiB at 1.6 KB each)"
            print(line)
    if cache is not None:
        cache.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--n-queries", type=int, default=100)
    parser.add_argument("--n-docs", type=int, default=18544)
    parser.add_argument("--lines", type=int, default=42)
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--demo", type=Path, default=None, help="a built study's run folder (e.g. outputs/demo)")
    parser.add_argument("--cache", type=Path, default=REPO / "params" / "demo_cache" / "embeddings.sqlite")
    args = parser.parse_args()
    if args.demo is not None:
        demo_counts(args.demo, args.cache)
        return
    counts, origin = raw_text_line_counts(args.n_docs, args.lines)
    print(origin)
    time_queries(counts, args)


if __name__ == "__main__":
    main()
