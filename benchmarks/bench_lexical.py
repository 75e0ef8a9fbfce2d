"""The lexical retrievers beyond the paper's regex BM25 at the paper's scale: Sudachi tokenization (uncached, then cached), and
index and query times of bm25 over sudachi, char2, char3 and word tokens and of rm3, beside the paper's regex bm25.

Texts come from ``benchmarks/bench_retrieval.py`` (``--corpus synthetic``, the default here: ~22k word-pool chunks
in three representations and 100 questions, quick to build; ``demo``: the demo corpus at the paper's 358,896
messages through ingest, chunking and the extractive summarizer, which takes a while the first time).  Timed:

* Sudachi (``SudachiTokenizer``, the ``bm25`` section's defaults: split C, normalized form, content words):
  every chunk × 3 representations into an empty token cache, then again from the cache (target ≤ 2 min).
* Per retriever and representation: index (tokenize or read the cache + fit), then the 100 questions
  (tokenize + score + the tie-broken top 200; rm3: first pass, feedback, second pass); target ≤ 2 s for the
  100 questions of a retriever.  Ratios are to the paper's regex bm25 on the same representation.

    .venv/bin/python benchmarks/bench_lexical.py [--corpus synthetic|demo] [--n-docs 22329]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

import pmrag.retrieve.registry  # noqa: F401  (registers every component)
from bench_retrieval import demo_paper_scale, questions, synthetic_chunks
from pmrag.core.params import BM25Section
from pmrag.retrieve.bm25 import BM25Index, query_matrix
from pmrag.retrieve.lexical import SudachiTokenizer, char_ngram_counts, index_texts, make_tokenizer
from pmrag.retrieve.prf import rm3_queries
from pmrag.retrieve.ranking import Ranker, rankings_from_scores
from pmrag.retrieve.registry import TOKENIZERS

RETRIEVERS = (("bm25", "regex"), ("bm25", "sudachi"), ("bm25", "char2"), ("bm25", "char3"), ("bm25", "word"),
              ("rm3", "regex"), ("rm3", "sudachi"))


def texts_at_scale(args) -> tuple[dict[str, list[str]], list[str], np.ndarray, np.ndarray, str]:
    if args.corpus == "demo":
        reps, query_texts, times, ids = demo_paper_scale(args.n_messages)
        return reps, query_texts, times, ids, f"the demo corpus at {args.n_messages:,} messages"
    reps, pools = synthetic_chunks(args.n_docs, args.seed)
    rng = np.random.default_rng(args.seed)
    times = np.sort(rng.integers(1_680_000_000, 1_740_000_000, size=args.n_docs)).astype("datetime64[s]")
    ids = np.array([f"chunk_{i:06d}" for i in range(args.n_docs)])
    return reps, questions(args.n_queries, pools, args.seed), times, ids, "synthetic word-pool texts"


def sudachi_times(reps: dict[str, list[str]], cache_dir: str) -> dict[str, float]:
    times = {}
    for label in ("uncached", "cached"):
        tokenizer = SudachiTokenizer(cache_dir=cache_dir)
        started = time.perf_counter()
        for texts in reps.values():
            tokenizer.tokenize_many(texts)
        times[label] = time.perf_counter() - started
        times[f"{label}_pieces"] = tokenizer.tokenized_pieces
    return times


def index_and_queries(method: str, tokenizer_name: str, docs: list[str], query_texts: list[str], section: BM25Section,
                      cache_dir: str, ranker: Ranker, times, ids, top: int) -> tuple[float, float]:
    """Seconds to index the documents, and to answer the questions (tokenize, score, rank to ``top``)."""
    tokenizer = make_tokenizer(TOKENIZERS.get(tokenizer_name), section, cache_dir)
    counted = hasattr(tokenizer, "count_many")
    started = time.perf_counter()
    if counted:
        doc_counts, vocabulary = char_ngram_counts(docs, tokenizer.n)
        index = BM25Index.fit_counts(doc_counts, vocabulary, section)
    else:   # as a study's ranking stage builds it (the paper's regex: documents encoded a block at a time)
        index, _ = index_texts(tokenizer, docs, [], section, workers=0)
    index_s = time.perf_counter() - started
    started = time.perf_counter()
    if counted:
        query_counts = char_ngram_counts(query_texts, tokenizer.n, index.vocabulary)[0]
    else:
        query_counts = query_matrix(tokenizer.tokenize_many(query_texts), index.vocabulary)
    scores = index.scores_matrix(query_counts)
    if method == "rm3":
        scores = index.scores_matrix(rm3_queries(index, query_counts, scores, ranker, section))
    rankings_from_scores(scores, [f"q{i}" for i in range(len(query_texts))], ids, times, top)
    return index_s, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=["synthetic", "demo"], default="synthetic")
    parser.add_argument("--n-docs", type=int, default=22_329)
    parser.add_argument("--n-queries", type=int, default=100)
    parser.add_argument("--n-messages", type=int, default=358_896)
    parser.add_argument("--top", type=int, default=200)
    parser.add_argument("--seed", type=int, default=12_345)
    args = parser.parse_args()

    started = time.perf_counter()
    reps, query_texts, times, ids, origin = texts_at_scale(args)
    chars = sum(len(t) for texts in reps.values() for t in texts)
    print(f"{len(ids)} chunks × {len(reps)} representations ({chars / 1e6:.1f} M characters) from {origin}, "
          f"{len(query_texts)} questions ({time.perf_counter() - started:.1f} s to prepare)")

    section = BM25Section()
    with tempfile.TemporaryDirectory(prefix="bench_lexical_") as cache_dir:
        sudachi = sudachi_times(reps, cache_dir)
        print(f"sudachi tokenization, all chunks × {len(reps)} representations: uncached {sudachi['uncached']:6.1f} s "
              f"({sudachi['uncached_pieces']:,} distinct lines analysed), cached {sudachi['cached']:5.1f} s "
              f"({sudachi['cached_pieces']} analysed)   (target ≤ 120 s)")
        ranker = Ranker(times, ids)
        results = {}
        for method, tokenizer_name in RETRIEVERS:
            for rep, docs in reps.items():
                results[method, tokenizer_name, rep] = index_and_queries(
                    method, tokenizer_name, docs, query_texts, section, cache_dir, ranker, times, ids, args.top)

    print(f"\n{'retriever':24s}{'representation':16s}{'index s':>9s}{'×regex':>8s}{'queries s':>11s}{'×regex':>8s}")
    totals = {}
    for (method, tokenizer_name, rep), (index_s, query_s) in results.items():
        base_index, base_query = results["bm25", "regex", rep]
        name = method if tokenizer_name == "regex" else f"{method}_{tokenizer_name}"
        print(f"{name:24s}{rep:16s}{index_s:9.2f}{index_s / base_index:8.1f}{query_s:11.3f}{query_s / base_query:8.1f}")
        total = totals.setdefault(name, [0.0, 0.0])
        total[0] += index_s
        total[1] += query_s
    print(f"\n{'retriever':24s}{'index s (3 reps)':>18s}{'worst 100 questions s':>24s}   (target ≤ 2 s per retriever)")
    for name, (index_s, _) in totals.items():
        worst = max(q for (m, t, _), (_, q) in results.items() if (m if t == "regex" else f"{m}_{t}") == name)
        print(f"{name:24s}{index_s:18.2f}{worst:24.3f}")


if __name__ == "__main__":
    main()
