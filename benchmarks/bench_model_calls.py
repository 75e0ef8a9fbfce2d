"""Model calls in flight at once: chunk summaries against the local fake Responses server (tests/responses_server.py)
answering each request after a fixed latency, at ``summarizer.concurrency`` 1 (the paper's one at a time) and 8.

The pause between calls (``interval_s``) is 0 here, so the figure is the speed-up of the calls alone; with the paper's
0.2 s pause every worker pauses between its calls too, and the speed-up is the same ratio.  Each run writes a fresh
store; the stored summaries must be identical at both concurrencies (checked).

    .venv/bin/python benchmarks/bench_model_calls.py [--chunks 200] [--latency 0.05] [--concurrency 1 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from responses_server import ResponsesServer  # noqa: E402

from pmrag.core.params import SummarizerSection  # noqa: E402
from pmrag.core.store import open_store, read_table  # noqa: E402
from pmrag.represent.summarize import make_summarizer, summarize_chunks  # noqa: E402


def run(n_chunks: int, latency: float, concurrency: int) -> tuple[float, list]:
    """Seconds to summarize ``n_chunks`` chunks, and the stored (chunk, status, summary) rows."""
    chunks = [(f"c{i:05d}", f"2024-05-01 10:00 Aki: chunk {i} " + "text " * (i % 50)) for i in range(n_chunks)]
    with tempfile.TemporaryDirectory() as folder, ResponsesServer(latency_s=(latency, latency)) as server:
        engine = open_store(Path(folder) / "store.sqlite")
        params = SummarizerSection(backend="openai", base_url=server.base_url, interval_s=0, timeout_s=30,
                                   failure_policy="retry", concurrency=concurrency)
        summarizer = make_summarizer(params, "en")
        summarize_chunks(engine, chunks[:1], summarizer, params, progress=False)   # warm: the client's first call
        started = time.perf_counter()
        report = summarize_chunks(engine, chunks, summarizer, params, progress=False)
        seconds = time.perf_counter() - started
        assert report.ok == n_chunks - 1 and report.error == 0, report.line()
        rows = read_table(engine, "summaries", ("chunk_id",))[["chunk_id", "status", "summary"]].values.tolist()
        engine.dispose()
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per answer")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    os.environ.pop("OPENAI_BASE_URL", None)
    results = {c: run(args.chunks, args.latency, c) for c in args.concurrency}
    base_seconds, base_rows = results[args.concurrency[0]]
    for concurrency, (seconds, rows) in results.items():
        assert rows == base_rows, f"concurrency {concurrency} stored other summaries"
        print(f"model calls: {args.chunks} chunks, {args.latency * 1000:.0f} ms latency, concurrency {concurrency}: "
              f"{seconds:.2f} s ({args.chunks / seconds:.1f} calls/s), speed-up ×{base_seconds / seconds:.1f}")


if __name__ == "__main__":
    main()
