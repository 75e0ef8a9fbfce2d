"""MMR diversification and session / cluster expansion (for evidence spread over chunks, §7.2) at the paper's scale, beside plain dense.

A corpus of ``--n-chunks`` chunks (default 18,500) in ``--n-sources`` conversation sources of Zipf-like sizes
(the largest holds about a fifth), sessions of 1–6 consecutive chunks, start times increasing within a
source; 384-dimensional chunk vectors drawn from ``default_rng(0)`` around ``--n-topics`` topic centres (so
the clustering merges something; embedding the corpus with e5 would take hours here and the cost does not
depend on the values), and 100 question vectors.  Timed, each ranking every question to depth 200 through the
components' own ``rank``:

* dense:            ``raw_text_vector`` (the reference);
* mmr:              ``raw_text_mmr_vector`` with ``diversify.pool`` = ``--pool`` (default 50, the params default)
                    and 200;
* session:          ``raw_text_session`` (units = the store's sessions);
* session_cluster:  the clustering alone (:func:`pmrag.retrieve.expansion.cluster_units`, per source in blocks
                    of ≤ 2,000), then the queries given the clusters (the component's ``rank`` does both).

Printed: seconds per step and the ratio to dense.  Target on the 2-core reference machine: the queries of
every retriever ≤ 2 s for 100 questions (clustering is an indexing cost, reported apart).

    .venv/bin/python benchmarks/bench_distributed.py [--n-chunks 18500] [--n-sources 60] [--pool 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from pmrag.core.names import RetrieverId
from pmrag.core.params import StudyParams
from pmrag.retrieve import expansion as ex
from pmrag.retrieve.dense import cosine_scores
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import Corpus, Queries, ranked_from_scores

DEPTH = 200
DIM = 384


def synthetic_corpus(n_chunks: int, n_sources: int, n_topics: int, n_queries: int, seed: int = 0):
    """The chunks frame, chunk vectors and question vectors described in the module docstring."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_sources + 1)
    sources = np.sort(rng.choice(n_sources, size=n_chunks, p=weights / weights.sum()))
    session_index = np.zeros(n_chunks, dtype=np.int64)
    start = np.zeros(n_chunks, dtype="datetime64[ns]")
    for source in np.unique(sources):
        rows = np.flatnonzero(sources == source)
        lengths = rng.integers(1, 7, size=len(rows))
        session_index[rows] = np.repeat(np.arange(len(lengths)), lengths)[: len(rows)]
        hours = np.cumsum(rng.exponential(30, size=len(rows)))
        start[rows] = np.datetime64("2020-01-01") + (hours * 3600e9).astype("timedelta64[ns]")
    chunks = pd.DataFrame({"chunk_id": [f"{i:016x}" for i in range(n_chunks)], "source": [f"s{s:03d}" for s in sources],
                           "session_index": session_index, "start_at": start})
    centres = rng.normal(size=(n_topics, DIM))
    vectors = (centres[rng.integers(0, n_topics, size=n_chunks)] + 0.4 * rng.normal(size=(n_chunks, DIM)))
    queries = centres[rng.integers(0, n_topics, size=n_queries)] + 0.8 * rng.normal(size=(n_queries, DIM))
    return chunks, vectors.astype(np.float32), queries.astype(np.float32)


def timed(function):
    began = time.perf_counter()
    value = function()
    return value, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-chunks", type=int, default=18_500)
    parser.add_argument("--n-sources", type=int, default=60)
    parser.add_argument("--n-topics", type=int, default=300)
    parser.add_argument("--n-queries", type=int, default=100)
    parser.add_argument("--pool", type=int, default=50)
    args = parser.parse_args()

    chunks, vectors, query_vectors = synthetic_corpus(args.n_chunks, args.n_sources, args.n_topics, args.n_queries)
    corpus = Corpus(chunks["chunk_id"].to_numpy(), chunks["start_at"].to_numpy(), lambda rep: [""] * len(chunks),
                    lambda rep: vectors, lambda name: {"chunks": chunks}[name])
    queries = Queries([f"q{i:03d}" for i in range(args.n_queries)], [""] * args.n_queries, lambda: query_vectors)
    largest = chunks["source"].value_counts().iloc[0]
    print(f"corpus: {len(chunks)} chunks, {chunks['source'].nunique()} sources (largest {largest}), "
          f"{chunks[['source', 'session_index']].drop_duplicates().shape[0]} sessions, {args.n_queries} questions")

    def component(name: str, **sections):
        params = StudyParams(run="bench", dataset={"synthetic": {"enabled": True}}, **sections)
        rid = RetrieverId.parse(name)
        return RETRIEVERS.get(rid.method)(rid, params)

    _, dense = timed(lambda: component("raw_text_vector").rank(corpus, queries, DEPTH))
    print(f"dense raw_text_vector:               {dense:7.3f} s")
    for pool in dict.fromkeys((args.pool, 200)):
        _, seconds = timed(lambda: component("raw_text_mmr_vector", diversify={"pool": pool}).rank(corpus, queries,
                                                                                                   DEPTH))
        print(f"mmr raw_text_mmr_vector (pool {pool:3d}):   {seconds:7.3f} s   ×{seconds / dense:.2f} dense")
    _, seconds = timed(lambda: component("raw_text_session").rank(corpus, queries, DEPTH))
    print(f"session raw_text_session:            {seconds:7.3f} s   ×{seconds / dense:.2f} dense")

    section = StudyParams(run="bench", dataset={"synthetic": {"enabled": True}}).expansion
    units, clustering = timed(lambda: ex.cluster_units(vectors, chunks["source"].to_numpy(), section.cluster_distance))
    print(f"clustering (per source, blocks ≤ {ex.MAX_CLUSTER_BLOCK}): {clustering:7.3f} s   "
          f"{units.max() + 1} clusters of {len(units)} chunks")

    def cluster_queries():
        similarity = cosine_scores(vectors, query_vectors)
        return ranked_from_scores(ex.expansion_scores(similarity, units, section.session_weight), corpus, queries,
                                  DEPTH)

    _, seconds = timed(cluster_queries)
    print(f"session_cluster queries (clusters given): {seconds:7.3f} s   ×{seconds / dense:.2f} dense")


if __name__ == "__main__":
    main()
